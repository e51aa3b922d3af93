//! The `stoker` binary: parses the command line and hands it to [`stoker::cli::run`].
//! It owns nothing else; every subcommand lives in `src/cli`.

fn main() -> std::process::ExitCode {
    stoker::cli::run()
}
