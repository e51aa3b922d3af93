//! Networks as Nailgun's network manager knows them, pure: the model of an environment's
//! network groups and Neutron parameters ([`model`]), addresses and ranges ([`ip`]), the
//! checks of a network configuration ([`validate`]), address allocation ([`alloc`]), a node's
//! interfaces and their networks ([`nic`]), and the deployment data's network keys
//! ([`scheme`]), and network verification's verdict over the nodes' probes ([`verify`]). The
//! store keeps what these decide; the HTTP edge shows it in Nailgun's shapes.

pub mod alloc;
pub mod ip;
pub mod model;
pub mod nic;
pub mod scheme;
pub mod validate;
pub mod verify;

pub use model::{ADMIN, NetworkGroup};
