//! The process's own figures for `/metrics`, under the names Prometheus's clients share
//! (`process_*`): resident and virtual memory from `/proc/self/status`, CPU time and start
//! time from `/proc/self/stat` (and the boot time in `/proc/stat`), open descriptors from
//! `/proc/self/fd` and their limit from `/proc/self/limits`. Read at scrape time; a figure
//! that cannot be read (not Linux, a format surprise) is left out, never an error.

/// The unit of `/proc/*/stat`'s times: `USER_HZ`, which Linux fixes at 100 on every
/// architecture it exports to user space (Prometheus's own `procfs` hard-codes it too).
const USER_HZ: f64 = 100.0;

/// One reading of the process's figures; `None` where it could not be read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub cpu_seconds: Option<f64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub start_time_seconds: Option<f64>,
}

/// Read this process's figures now (blocking file reads: call it off the event loop).
pub fn sample() -> Sample {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let mut s = Sample::default();
    if let Some(status) = read("/proc/self/status") {
        s.resident_bytes = status_kib(&status, "VmRSS:").map(|k| k * 1024);
        s.virtual_bytes = status_kib(&status, "VmSize:").map(|k| k * 1024);
    }
    if let Some(stat) = read("/proc/self/stat")
        && let Some((cpu_ticks, start_ticks)) = stat_times(&stat)
    {
        s.cpu_seconds = Some(cpu_ticks as f64 / USER_HZ);
        s.start_time_seconds = read("/proc/stat")
            .as_deref()
            .and_then(boot_time)
            .map(|boot| boot as f64 + start_ticks as f64 / USER_HZ);
    }
    s.open_fds = std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|dir| dir.count() as u64);
    s.max_fds = read("/proc/self/limits")
        .as_deref()
        .and_then(max_open_files);
    s
}

/// A `Key:   1234 kB` line of `/proc/self/status`, in KiB.
fn status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// `/proc/self/stat`'s user + system CPU time and start time, in ticks. The command name
/// (field 2) is in parentheses and may hold spaces and parentheses itself, so fields are
/// counted from the last `)`: after it come field 3 (state) onwards, utime being field 14,
/// stime 15 and starttime 22.
fn stat_times(stat: &str) -> Option<(u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
    Some((field(14)? + field(15)?, field(22)?))
}

/// The boot time (`btime`) in `/proc/stat`, in seconds since the epoch.
fn boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// The soft limit of `Max open files` in `/proc/self/limits` (`None` when unlimited).
fn max_open_files(limits: &str) -> Option<u64> {
    limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_read_by_field() {
        let status = "Name:\tstoker\nVmSize:\t  123456 kB\nVmRSS:\t    2048 kB\nThreads:\t9\n";
        assert_eq!(status_kib(status, "VmRSS:"), Some(2048));
        assert_eq!(status_kib(status, "VmSize:"), Some(123_456));
        assert_eq!(status_kib(status, "VmSwap:"), None);
        let stat = "4242 (stoker (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    150 50 0 0 20 0 9 0 777 123456 512 18446744073709551615";
        assert_eq!(stat_times(stat), Some((200, 777)));
        assert_eq!(stat_times("garbage"), None);
        assert_eq!(
            boot_time("cpu 1 2 3\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
    }

    #[test]
    fn this_process_has_memory_and_descriptors() {
        let s = sample();
        assert!(s.resident_bytes.is_some_and(|b| b > 0), "{s:?}");
        assert!(s.open_fds.is_some_and(|n| n > 0), "{s:?}");
        assert!(s.cpu_seconds.is_some(), "{s:?}");
    }
}
