//! Background work yields the cores: the power sweep and the making of plans (seconds of CPU
//! at thousands of nodes) run on threads whose scheduling priority is lowered, so that when
//! the cores are busy the agents' calls and the operators' requests go first and the
//! background takes what is left; on an idle machine it runs as fast as before. On Linux a
//! thread's nice value is its own and the threads it starts inherit it; lowering it back
//! needs privileges a daemon may not have, so work to run niced gets a thread of its own
//! ([`niced`]) that ends with it, and never changes a pool's thread for good.

/// How much background work's nice value is raised: nice 10 has a tenth of the CPU weight of
/// nice 0, so under contention the agents' calls and the operators' requests are served first;
/// idle cores are still the background's in full.
pub const BACKGROUND: i32 = 10;

/// Raise the calling thread's nice value by `by`. A failure is logged once, and the work is
/// done anyway at the priority it had.
pub fn lower_priority(by: i32) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    let tid = rustix::thread::gettid();
    let set = rustix::process::getpriority_process(Some(tid))
        .and_then(|now| rustix::process::setpriority_process(Some(tid), now.saturating_add(by)));
    if let Err(e) = set {
        WARNED.call_once(|| tracing::warn!(error = %e, "cannot lower a worker's priority"));
    }
}

/// `f`'s result, computed on a thread of its own whose nice value is raised by `by` (and so
/// are those of any threads `f` starts); a panic in `f` is the caller's.
pub fn niced<R: Send>(by: i32, f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            lower_priority(by);
            f()
        });
        match worker.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nice_of_this_thread() -> i32 {
        rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap()
    }

    /// The work and the threads it starts run niced; the caller's thread is left as it was.
    #[test]
    fn niced_work_and_its_threads_run_lower_and_the_caller_is_unchanged() {
        let before = nice_of_this_thread();
        let (inside, started) = niced(BACKGROUND, || {
            let inside = nice_of_this_thread();
            let started = std::thread::spawn(nice_of_this_thread).join().unwrap();
            (inside, started)
        });
        let expected = (before + BACKGROUND).min(19);
        assert_eq!((inside, started), (expected, expected));
        assert_eq!(nice_of_this_thread(), before);
    }

    #[test]
    fn a_panic_in_niced_work_is_the_callers() {
        let caught = std::panic::catch_unwind(|| niced(1, || panic!("boom")));
        assert!(caught.is_err());
    }
}
