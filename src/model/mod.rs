//! Plain data shared by every layer: nodes, their inventory and status. Types here are serde
//! structs and small validated newtypes; this module does no I/O, holds no state and reads no
//! clock, so the engine, the store and the HTTP layer can all depend on it.

pub mod catalog;
pub mod node;

pub use catalog::{Cluster, PluginSummary, Release};
pub use node::{FieldError, Inventory, Mac, Node, NodeId, NodeStatus, RawInventory};
