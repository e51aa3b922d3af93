//! The DHCP server of the PXE chain, on dhcproto. `classify` (what kind of boot client asks),
//! `lease` (the lease table) and `reply` (what to answer) are pure; `server` owns the socket,
//! the rate limit, the counters and the durable copy of the leases.

pub mod classify;
pub mod lease;
pub mod reply;
pub mod server;
pub mod spec;
