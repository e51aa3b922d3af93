//! AFL++ target `package`: see [`stoker_fuzz::package`] for what it drives. `run.sh package` fuzzes it.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = stoker_fuzz::package(data);
    });
}
