//! What nodes call: before they have a credential (the iPXE script, kernel and initramfs under
//! `/boot/`, the discovery hello, Fuel's nailgun-agent endpoints; all rate-limited and bounded),
//! with the service credential their installed OS was given (the service agent's hello, the
//! agent binary), and with their agent token (the deploy steps: next, output, result, sync,
//! file).

pub mod agent;
pub mod boot;
pub mod fuel_agent;
pub mod service;
pub mod steps;
