//! A bounded parallel map: BMC calls block for up to their timeout, so power actions on many
//! nodes and the power sweep run them on at most `workers` scoped threads, each taking the
//! next item when it is free. Results come back in the items' order, with the most calls that
//! were in flight at once (what the sweep reports and its bench checks).
//!
//! Background work (the power sweep) runs its threads at a lower scheduling priority
//! ([`map_niced`], through [`crate::priority`]): when the cores are busy, the agents' and the
//! operators' requests go first, and the sweep takes what is left.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` over `items` with at most `workers` calls at once (at least one); the results in
/// `items`' order and the peak number of calls in flight.
pub fn map<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    f: impl Fn(&T) -> R + Sync,
) -> (Vec<R>, usize) {
    map_niced(items, workers, 0, f)
}

/// [`map`] on threads whose nice value is raised by `nice` (0: left as it is). A failure to
/// change it is logged once and the work done anyway.
pub fn map_niced<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    nice: i32,
    f: impl Fn(&T) -> R + Sync,
) -> (Vec<R>, usize) {
    let next = AtomicUsize::new(0);
    let in_flight = AtomicUsize::new(0);
    let peak = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers.clamp(1, items.len().max(1)) {
            s.spawn(|| {
                if nice != 0 {
                    crate::priority::lower_priority(nice);
                }
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    peak.fetch_max(
                        in_flight.fetch_add(1, Ordering::Relaxed) + 1,
                        Ordering::Relaxed,
                    );
                    let r = f(item);
                    in_flight.fetch_sub(1, Ordering::Relaxed);
                    let mut slots = slots.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(slot) = slots.get_mut(i) {
                        *slot = Some(r);
                    }
                }
            });
        }
    });
    let results = slots
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .flatten()
        .collect();
    (results, peak.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn results_keep_order_and_concurrency_is_bounded() {
        let items: Vec<u64> = (0..40).collect();
        let (out, peak) = map(&items, 4, |i| {
            std::thread::sleep(Duration::from_millis(5 * (i % 3)));
            i * 2
        });
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert!((1..=4).contains(&peak), "{peak}");
        let (out, peak) = map(&[7u8], 0, |i| *i);
        assert_eq!((out, peak), (vec![7], 1));
        let (out, peak) = map(&[] as &[u8], 8, |i| *i);
        assert_eq!((out, peak), (vec![], 0));
    }

    #[test]
    fn niced_workers_run_at_a_lower_priority_and_the_caller_does_not() {
        let me = rustix::process::getpriority_process(None).unwrap();
        let (seen, _) = map_niced(&[0u8; 4], 2, 5, |_| {
            rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap()
        });
        // Nice values top out at 19.
        assert!(seen.iter().all(|&n| n == (me + 5).min(19)), "{seen:?}");
        assert_eq!(rustix::process::getpriority_process(None).unwrap(), me);
    }
}
