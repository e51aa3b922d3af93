//! The DHCP server of the PXE chain, on dhcproto. `classify` (what kind of boot client asks),
//! `lease` (the lease table) and `reply` (what to answer) are pure; `server` owns the socket,
//! the rate limit and the counters, and `durable` the group commit that makes the leases
//! survive a power loss before any reply announces them.

pub mod classify;
pub mod durable;
pub mod lease;
pub mod reply;
pub mod server;
pub mod spec;
