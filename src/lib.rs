//! stoker: a lightweight Fuel master in one binary.
//!
//! ARCHITECTURE.md is the map. The pure core (`model`, `yaql`, `engine`) takes data
//! and returns data; it never touches the network, the file system, the database or the clock.
//! The edges (`store`, `http`, `daemon`, `cli`) do the I/O and call the core.

pub mod agent;
pub mod auth;
pub mod backup;
pub mod bmc;
pub mod chains;
pub mod cli;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod demo;
pub mod deployer;
pub mod dhcp;
pub mod engine;
pub mod events;
pub mod facts;
pub mod graphs;
pub mod http;
pub mod lock;
pub mod metrics;
pub mod model;
pub mod network_check;
pub mod networks;
pub mod node_attributes;
pub mod openstack_config;
pub mod package;
pub mod planner;
pub mod priority;
pub mod release_repos;
pub mod roles;
pub mod sequences;
pub mod snapshot;
pub mod store;
pub mod tftp;
pub mod tls;
pub mod volumes;
pub use stoker_yaql as yaql;
