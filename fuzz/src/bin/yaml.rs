//! AFL++ target `yaml`: see [`stoker_fuzz::yaml`] for what it drives. `run.sh yaml` fuzzes it.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = stoker_fuzz::yaml(data);
    });
}
