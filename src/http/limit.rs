//! Rate limits for unauthenticated endpoints (the discovery hello and Fuel's discovery calls,
//! which share one limiter; the installed OS's service hello and the boot scripts, which have
//! one each): a token bucket per client
//! address and one for everybody, so a boot storm is absorbed and a misbehaving client cannot
//! starve the rest. Refusals are logged at most once every [`LOG_EVERY`], with their count.
//! Time is passed in, so the limiter is tested without sleeping.
//!
//! The bootstrap kernel, initramfs and iPXE loaders (`/boot/images/*`, `/boot/ipxe/*`) are not
//! limited: they are static files that create no state, and some firmware fetches them in many
//! Range requests.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Bucket sizes and refill rates.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub per_client_burst: f64,
    pub per_client_rate: f64,
    pub global_burst: f64,
    pub global_rate: f64,
}

impl Default for Limits {
    /// A node says hello once per boot and once a minute after that: 10 at once and one a second
    /// per address is far above that; 500 at once and 200 a second overall absorbs a rack booting.
    fn default() -> Limits {
        Limits {
            per_client_burst: 10.0,
            per_client_rate: 1.0,
            global_burst: 500.0,
            global_rate: 200.0,
        }
    }
}

impl Limits {
    /// Password sign-ins: 10 at once and one every 6 s per address, 30 at once and 5 a second
    /// overall (argon2 costs about 20 ms of CPU per try, so this also bounds that work).
    pub fn login() -> Limits {
        Limits {
            per_client_burst: 10.0,
            per_client_rate: 1.0 / 6.0,
            global_burst: 30.0,
            global_rate: 5.0,
        }
    }

    /// The installed OS's agent says hello once per boot with the node's credential, checked
    /// by one indexed read: after a deployment's `reboot_to_disk` every node of the
    /// environment says it within a minute. 2,000 at once and 1,000 a second overall lets
    /// 10,000 nodes through in ten seconds, well inside a step's timeout (at the discovery
    /// hello's 200 a second, the last of them waited past it and their first task on the
    /// installed OS failed as not taken); per address as the discovery hello.
    pub fn service_hello() -> Limits {
        Limits {
            global_burst: 2_000.0,
            global_rate: 1_000.0,
            ..Limits::default()
        }
    }

    /// A node asks for its boot script once per boot (and again every 10 s while its kernel
    /// does not load): 20 at once and two a second per address leaves room for a few nodes
    /// behind one address; the global bucket is the hello's.
    pub fn boot_scripts() -> Limits {
        Limits {
            per_client_burst: 20.0,
            per_client_rate: 2.0,
            ..Limits::default()
        }
    }
}

/// A token-bucket limiter keyed by client address.
#[derive(Debug)]
pub struct RateLimiter {
    limits: Limits,
    state: Mutex<(Bucket, HashMap<IpAddr, Bucket>)>,
    /// When a refusal was last logged, and how many were refused since.
    refusals: Mutex<(Option<Instant>, u64)>,
}

/// Refusals are logged at most this often: a flood must not become a flood of log lines.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// Remembered clients beyond which idle (full) buckets are forgotten.
const MAX_CLIENTS: usize = 65_536;

fn take(bucket: &mut Bucket, burst: f64, rate: f64, now: Instant) -> Option<Duration> {
    let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
    bucket.tokens = (bucket.tokens + elapsed * rate).min(burst);
    bucket.at = now;
    if bucket.tokens >= 1.0 {
        bucket.tokens -= 1.0;
        None
    } else {
        Some(Duration::from_secs_f64((1.0 - bucket.tokens) / rate))
    }
}

impl RateLimiter {
    pub fn new(limits: Limits, now: Instant) -> RateLimiter {
        let global = Bucket {
            tokens: limits.global_burst,
            at: now,
        };
        RateLimiter {
            limits,
            state: Mutex::new((global, HashMap::new())),
            refusals: Mutex::new((None, 0)),
        }
    }

    /// Like [`check`](Self::check), but takes nothing: whether `client` would be refused now.
    pub fn peek(&self, client: IpAddr, now: Instant) -> Option<Duration> {
        let l = self.limits;
        let guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (global, clients) = &*guard;
        let level = |b: &Bucket, burst: f64, rate: f64| {
            (b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate).min(burst)
        };
        let wait = |tokens: f64, rate: f64| {
            (tokens < 1.0).then(|| Duration::from_secs_f64((1.0 - tokens) / rate))
        };
        if let Some(b) = clients.get(&client)
            && let Some(w) = wait(
                level(b, l.per_client_burst, l.per_client_rate),
                l.per_client_rate,
            )
        {
            return Some(w);
        }
        wait(level(global, l.global_burst, l.global_rate), l.global_rate)
    }

    /// Count one refusal; `Some(n)` when it should be logged, with the `n` refusals since the
    /// last one logged (this one included).
    pub fn note_refusal(&self, now: Instant) -> Option<u64> {
        let mut guard = self.refusals.lock().unwrap_or_else(|p| p.into_inner());
        let (logged_at, since) = &mut *guard;
        *since += 1;
        if logged_at.is_none_or(|at| now.saturating_duration_since(at) >= LOG_EVERY) {
            *logged_at = Some(now);
            return Some(std::mem::take(since));
        }
        None
    }

    /// `None` if `client` may go ahead now, or how long it should wait.
    pub fn check(&self, client: IpAddr, now: Instant) -> Option<Duration> {
        let l = self.limits;
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (global, clients) = &mut *guard;
        if clients.len() >= MAX_CLIENTS {
            clients.retain(|_, b| {
                b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * l.per_client_rate
                    < l.per_client_burst
            });
        }
        let bucket = clients.entry(client).or_insert(Bucket {
            tokens: l.per_client_burst,
            at: now,
        });
        if let Some(wait) = take(bucket, l.per_client_burst, l.per_client_rate, now) {
            return Some(wait);
        }
        take(global, l.global_burst, l.global_rate, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_then_refills_per_client_and_globally() {
        let t0 = Instant::now();
        let limits = Limits {
            per_client_burst: 3.0,
            per_client_rate: 1.0,
            global_burst: 4.0,
            global_rate: 1.0,
        };
        let rl = RateLimiter::new(limits, t0);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..3 {
            assert_eq!(rl.check(a, t0), None);
        }
        let wait = rl.check(a, t0).unwrap();
        assert!(wait > Duration::from_millis(900) && wait <= Duration::from_secs(1));
        assert_eq!(rl.check(a, t0 + Duration::from_secs(1)), None, "refilled");
        // b has its own bucket, but the global one (4, refilling 1/s) is now spent.
        assert_eq!(rl.check(b, t0 + Duration::from_secs(1)), None);
        assert!(
            rl.check(b, t0 + Duration::from_secs(1)).is_some(),
            "global limit"
        );
        assert_eq!(rl.check(b, t0 + Duration::from_secs(2)), None);
    }

    #[test]
    fn peek_takes_nothing() {
        let t0 = Instant::now();
        let limits = Limits {
            per_client_burst: 2.0,
            per_client_rate: 1.0,
            global_burst: 10.0,
            global_rate: 1.0,
        };
        let rl = RateLimiter::new(limits, t0);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..5 {
            assert_eq!(rl.peek(a, t0), None);
        }
        assert_eq!(rl.check(a, t0), None);
        assert_eq!(rl.check(a, t0), None);
        assert!(rl.peek(a, t0).is_some(), "spent by checks");
    }

    #[test]
    fn refusals_are_logged_once_per_interval() {
        let t0 = Instant::now();
        let rl = RateLimiter::new(Limits::default(), t0);
        assert_eq!(rl.note_refusal(t0), Some(1));
        for ms in 1..1000 {
            assert_eq!(rl.note_refusal(t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(rl.note_refusal(t0 + LOG_EVERY), Some(1000));
    }

    /// 10,000 nodes that rebooted to disk together each say one service hello, spread over
    /// their boot: all are let through within 10 s (the discovery hello's limit took 50 s).
    #[test]
    fn ten_thousand_service_hellos_pass_within_ten_seconds() {
        let t0 = Instant::now();
        let rl = RateLimiter::new(Limits::service_hello(), t0);
        let discovery = RateLimiter::new(Limits::default(), t0);
        let (mut passed, mut passed_discovery) = (0, 0);
        for n in 0u32..10_000 {
            // one a millisecond from a node's own address
            let at = t0 + Duration::from_millis(u64::from(n));
            let ip = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + n));
            let mut tries = 0;
            while rl
                .check(ip, at + Duration::from_millis(100 * tries))
                .is_some()
            {
                tries += 1;
            }
            passed += 1;
            assert!(tries <= 90, "node {n} waited {} ms", tries * 100);
            if discovery.check(ip, at).is_none() {
                passed_discovery += 1;
            }
        }
        assert_eq!(passed, 10_000);
        assert!(passed_discovery < 3_000, "{passed_discovery}");
    }
}
