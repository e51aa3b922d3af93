//! How the long-running commands ask the allocator (mimalloc, `src/main.rs`) and the kernel to
//! keep their memory: no transparent huge pages, and freed pages given back to the system
//! within [`PURGE_DELAY_MS`] instead of mimalloc's default second. Both are process-wide and
//! set first thing by `serve` (and, for huge pages, `graph plan`).
//!
//! mimalloc reads its options from the environment when the process loads, before `main`,
//! and the crate forbids `unsafe` (so no `mi_option_set`): `stoker serve` started without
//! `MIMALLOC_PURGE_DELAY` replaces itself (`execve`, same PID, same arguments) with the
//! variable set. An operator's own value is kept as it is.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// How long mimalloc keeps a freed page before giving it back (`MADV_DONTNEED`), in ms. Its
/// default (v3) is 1,000 ms: the daemon frees hundreds of megabytes a second while it plans
/// and deploys 10,000 nodes, and a second's worth of freed pages stayed in its RSS at each
/// peak. 10 ms (mimalloc v2's default) took about a quarter off the peaks of
/// `cargo bench --bench agents -- 10000 250 day2` (README, "Benchmarks"); 0 (at once) took
/// 4–6% more in one round, at a madvise per freed page.
pub const PURGE_DELAY_MS: u32 = 10;

/// The environment variable mimalloc reads the delay from, and its older name.
pub const PURGE_DELAY_ENV: &str = "MIMALLOC_PURGE_DELAY";
const PURGE_DELAY_ENV_LEGACY: &str = "MIMALLOC_RESET_DELAY";

/// Set the daemon's memory up: no huge pages, and, unless the environment already chooses a
/// purge delay, the process replaced by itself with [`PURGE_DELAY_MS`] in its environment.
/// Returns only when no replacement was needed, or with why it failed (the daemon then runs
/// on with mimalloc's default, and should say so once it logs).
pub fn for_daemon() -> Option<std::io::Error> {
    no_huge_pages();
    let chosen = |name| std::env::var_os(name).is_some();
    if chosen(PURGE_DELAY_ENV) || chosen(PURGE_DELAY_ENV_LEGACY) {
        return None;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return Some(e),
    };
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| OsString::from("stoker"));
    Some(
        Command::new(exe)
            .arg0(arg0)
            .args(args)
            .env(PURGE_DELAY_ENV, PURGE_DELAY_MS.to_string())
            .exec(),
    )
}

/// No transparent huge pages for this process from now on (`PR_SET_THP_DISABLE`, inherited by
/// the commands it starts and kept across `execve`), for the commands that make and free big
/// transient structures over and over: the daemon, and `graph plan`. mimalloc asks for huge
/// pages on its arenas and gives freed memory back a 4 KiB page at a time; the kernel then
/// splits the huge pages and, at the next touch, zeroes a fresh 2 MiB for a few kilobytes. At
/// 10,000 nodes that zeroing was a fifth of the daemon's CPU while it planned (README,
/// "Benchmarks"). A short command that only grows its heap (`stoker yaql`) keeps them: 4 KiB
/// pages cost it six times the page faults. Best effort: a kernel without the call keeps its
/// default.
pub fn no_huge_pages() {
    let _ = nix::sys::prctl::set_thp_disable(true);
}
