//! The `stoker` binary: parses the command line and hands it to [`stoker::cli::run`].
//! It owns nothing else but two process-wide choices about memory; every subcommand lives in
//! `src/cli`.

/// mimalloc rather than glibc's malloc: the daemon's big transient allocations (planning a
/// deployment of thousands of nodes, on whichever pool thread runs it) left glibc's per-thread
/// arenas holding the freed memory, so the process kept about twice the heap it used at its peak
/// (`benches/agents.rs`, README "Benchmarks"); mimalloc gives freed pages back.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// No transparent huge pages for this process (`PR_SET_THP_DISABLE`, inherited by the commands
/// it starts), set first thing. mimalloc asks for huge pages on its arenas (`MADV_HUGEPAGE`) and
/// gives freed memory back a 4 KiB page at a time: the kernel then splits the huge pages and, at
/// the next touch, zeroes a fresh 2 MiB for a few kilobytes. At 10,000 nodes that zeroing was a
/// fifth of the daemon's CPU while it planned a deployment, and a tenth of a `stoker yaql` run
/// (README, "Benchmarks"). Only the allocator's first arena, reserved before `main`, may still
/// get them. Best effort: a kernel without the call keeps its default.
fn main() -> std::process::ExitCode {
    let _ = nix::sys::prctl::set_thp_disable(true);
    stoker::cli::run()
}
