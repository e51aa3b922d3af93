//! AFL++ target `yaql`: see [`stoker_fuzz::yaql`] for what it drives. `run.sh yaql` fuzzes it.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = stoker_fuzz::yaql(data);
    });
}
