//! AFL++ target `inventory`: see [`stoker_fuzz::inventory`] for what it drives. `run.sh inventory` fuzzes it.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = stoker_fuzz::inventory(data);
    });
}
