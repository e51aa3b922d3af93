//! The node side: `stoker agent`, run by the bootstrap image on every PXE-booted node (or by
//! hand). It reads the kernel command-line contract ([`cmdline`]), gathers the hardware
//! inventory from /proc and /sys ([`inventory`]), with the BMC's address when it can read one
//! ([`bmc_probe`]), and says hello to the master ([`client`]), retrying with backoff until the
//! master answers. Then it asks for deploy steps and runs them ([`deploy`], [`steps`],
//! [`exec`], [`image`]) over the wire types of [`protocol`]. On the installed OS the same binary
//! runs as a service ([`service`]) with the credential its node was given at provisioning. It
//! never sees YAQL, plugins or the database.

pub mod bmc_probe;
pub mod client;
pub mod cmdline;
pub mod configure;
pub mod deploy;
pub mod disk;
pub mod exec;
#[cfg(test)]
mod http_tests;
pub mod image;
pub mod inventory;
pub mod net_probe;
pub mod protocol;
pub mod service;
pub mod steps;

pub use client::{
    AgentError, Backoff, HelloReply, Master, hello_with_credentials, hello_with_retry,
};
pub use cmdline::BootParams;
pub use deploy::{DeployError, LoopEnd, run_loop, simulate};
