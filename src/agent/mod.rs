//! The node side: `stoker agent`, run by the bootstrap image on every PXE-booted node (or by
//! hand). It reads the kernel command-line contract ([`cmdline`]), gathers the hardware
//! inventory from /proc and /sys ([`inventory`]) and says hello to the master ([`client`]),
//! retrying with backoff until the master answers. It never sees YAQL, plugins or the database;
//! the deploy-step loop joins it when the master hands out steps.

pub mod client;
pub mod cmdline;
pub mod exec;
pub mod inventory;

pub use client::{AgentError, HelloReply, hello_with_credentials, hello_with_retry};
pub use cmdline::BootParams;
