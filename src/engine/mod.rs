//! The pure deployment engine: data in, data out. It decides and orders; it never touches the
//! network, the file system, the database or the clock (time arrives as an argument).
//!
//! - [`assignment`]: which roles one node may hold together (their `conflicts`).
//! - [`attributes`]: Nailgun's editable attributes: an environment's settings shown and
//!   written in the Settings tab's shape, with Nailgun's restrictions and regexes.
//! - [`chain`]: several graphs run one after another as one transaction: what comes next,
//!   the parent's progress and why it ended.
//! - [`graph`]: Fuel task graphs into per-node deployment plans (roles, YAQL fields, edges,
//!   cycles, order, incremental redeploys).
//! - [`hello`]: who may say hello (discovery, boot token, agent token).
//! - [`network`]: an environment's networks, their checks, addresses and interfaces.
//! - [`orchestrate`]: a deployment's runs (steps and graph tasks per node, stages) with their
//!   waits and concurrency keys.
//! - [`order`]: legacy plugin tasks ordered by stage postfix (`post_deployment/100`).
//! - [`plugin`]: Fuel plugin packages v1-v5 and releases as plugins: read, validate, release trees.
//! - [`pyregex`]: Python `re` patterns (attribute regexes) on fancy-regex.
//! - [`schedule`]: one deployment's scheduling state kept up to date run by run, so a claim or
//!   a report costs what the node's runs cost.
//! - [`settings`]: an environment's settings checked against the release's and plugins'
//!   attributes (keys and Fuel attribute types).
//! - [`state`]: the node state machine, as a table.
//! - [`steps`]: Ironic-style deploy steps, their order and per-deployment user steps, checked
//!   against each step's `argsinfo` (names, required, types).

pub mod assignment;
pub mod attributes;
pub mod bmc_steps;
pub mod chain;
pub mod graph;
pub mod hello;
pub mod liveness;
pub mod network;
pub mod orchestrate;
pub mod order;
pub mod plugin;
pub mod pyregex;
pub mod raid;
pub mod schedule;
pub mod settings;
pub mod state;
pub mod steps;
pub mod volumes;
