//! The `stoker` binary: parses the command line and hands it to [`stoker::cli::run`].
//! It owns nothing else; every subcommand lives in `src/cli`.

/// mimalloc rather than glibc's malloc: the daemon's big transient allocations (planning a
/// deployment of thousands of nodes, on whichever pool thread runs it) left glibc's per-thread
/// arenas holding the freed memory, so the process kept about twice the heap it used at its peak
/// (`benches/agents.rs`, README "Benchmarks"); mimalloc gives freed pages back, within 10 ms
/// for `stoker serve` (`cli::memory`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    stoker::cli::run()
}
