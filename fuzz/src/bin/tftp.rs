//! AFL++ target `tftp`: see [`stoker_fuzz::tftp`] for what it drives. `run.sh tftp` fuzzes it.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = stoker_fuzz::tftp(data);
    });
}
