//! The one integration-test binary: a module per area. Do not add top-level files to `tests/`;
//! add a module here instead, so the crate links once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod access;
mod agent;
mod agent_steps;
mod api;
mod bmc_api;
mod bmc_ipmi;
mod bmc_redfish;
mod boot;
mod catalog;
mod chains;
mod cli;
mod config;
mod deploy;
mod deployment_data;
mod deployment_graphs;
mod dhcp;
mod environments;
mod facts;
mod flow;
mod fuel_agent;
mod graph;
mod hostile;
mod identity;
mod nailgun;
mod nailgun_nodes;
mod net_probe;
mod networks;
mod node_attributes;
mod openstack_config;
mod pages;
mod plugin;
mod sequences;
mod snapshot;
mod store;
mod systemd;
mod tftp;
mod tidy;
mod tls;
mod validation;
mod verify;
mod yaql;
