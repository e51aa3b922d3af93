//! AFL++ target `dhcp`: see [`stoker_fuzz::dhcp`] for what it drives. `run.sh dhcp` fuzzes it.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = stoker_fuzz::dhcp(data);
    });
}
