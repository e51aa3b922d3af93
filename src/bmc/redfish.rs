//! Placeholder: the Redfish driver, written in its own change.

use std::time::Duration;

use serde_json::{Map, Value};

use super::{
    Bmc, BmcError, BootDevice, Capabilities, Drive, Endpoint, PowerAction, PowerState, Progress,
    Volume,
};
use crate::engine::raid::RaidPlan;

pub struct Redfish {
    endpoint: Endpoint,
}

impl Redfish {
    pub fn new(endpoint: Endpoint) -> Redfish {
        Redfish { endpoint }
    }

    fn unsupported(&self, what: &str) -> BmcError {
        BmcError::Unsupported {
            address: self.endpoint.address.clone(),
            what: what.to_string(),
        }
    }
}

impl Bmc for Redfish {
    fn power_state(&mut self) -> Result<PowerState, BmcError> {
        Err(self.unsupported("read power"))
    }
    fn power(&mut self, _action: PowerAction) -> Result<(), BmcError> {
        Err(self.unsupported("power"))
    }
    fn boot_once(&mut self, _device: BootDevice) -> Result<(), BmcError> {
        Err(self.unsupported("boot"))
    }
    fn capabilities(&mut self) -> Result<Capabilities, BmcError> {
        Ok(Capabilities::default())
    }
    fn bios(&mut self) -> Result<Map<String, Value>, BmcError> {
        Err(self.unsupported("bios"))
    }
    fn apply_bios(&mut self, _settings: &Map<String, Value>) -> Result<(), BmcError> {
        Err(self.unsupported("bios"))
    }
    fn drives(&mut self) -> Result<Vec<Drive>, BmcError> {
        Err(self.unsupported("raid"))
    }
    fn volumes(&mut self) -> Result<Vec<Volume>, BmcError> {
        Err(self.unsupported("raid"))
    }
    fn create_volumes(&mut self, _plan: &RaidPlan) -> Result<Vec<Volume>, BmcError> {
        Err(self.unsupported("raid"))
    }
    fn delete_volumes(&mut self) -> Result<usize, BmcError> {
        Err(self.unsupported("raid"))
    }
    fn update_firmware(
        &mut self,
        _image_url: &str,
        _wait: Duration,
        _progress: Progress<'_>,
    ) -> Result<String, BmcError> {
        Err(self.unsupported("firmware"))
    }
}
