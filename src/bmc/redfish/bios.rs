//! The system's Bios resource: its current `Attributes`, and staging new values (Ironic's
//! `bios.apply_configuration`). New values go to the resource the BMC names in
//! `@Redfish.Settings.SettingsObject` (applied at the next boot), else to `<Bios>/Settings`
//! when that exists (vendors that do not publish the link), else to the Bios resource itself.
//! Every name is checked against the current attributes first, so a typo changes nothing.

use serde_json::{Map, Value, json};

use super::super::BmcError;
use super::Conn;

impl Conn {
    /// The Bios resource's path.
    fn bios_path(&mut self) -> Result<String, BmcError> {
        self.system_link("Bios")?.ok_or_else(|| {
            self.client
                .unsupported("read or change BIOS settings (the system links no Bios resource)")
        })
    }

    fn attributes(&self, doc: &Value, path: &str) -> Result<Map<String, Value>, BmcError> {
        doc["Attributes"]
            .as_object()
            .cloned()
            .ok_or_else(|| self.client.protocol(format!("{path} has no Attributes")))
    }

    pub(super) fn bios(&mut self) -> Result<Map<String, Value>, BmcError> {
        let path = self.bios_path()?;
        let doc = self.client.get(&path)?;
        self.attributes(&doc, &path)
    }

    pub(super) fn apply_bios(&mut self, settings: &Map<String, Value>) -> Result<(), BmcError> {
        let path = self.bios_path()?;
        let answer = self.client.get_answer(&path)?;
        let current = self.attributes(&answer.body, &path)?;
        let unknown: Vec<&str> = settings
            .keys()
            .filter(|k| !current.contains_key(*k))
            .map(String::as_str)
            .collect();
        if let Some((first, others)) = unknown.split_first() {
            let nor = if others.is_empty() {
                String::new()
            } else {
                format!(" (nor {})", others.join(", "))
            };
            return Err(BmcError::Invalid {
                field: format!("settings.{first}"),
                message: format!(
                    "BMC {} has no BIOS attribute {first:?}{nor}; nothing was changed",
                    self.client.address()
                ),
            });
        }
        if settings.is_empty() {
            return Ok(());
        }
        let (target, etag) = self.settings_target(&answer.body, &path, answer.etag())?;
        self.patch(&target, &json!({ "Attributes": settings }), etag)
    }

    /// Where new values go, and its ETag.
    fn settings_target(
        &mut self,
        bios: &Value,
        path: &str,
        bios_etag: Option<String>,
    ) -> Result<(String, Option<String>), BmcError> {
        let linked = bios["@Redfish.Settings"]["SettingsObject"]["@odata.id"].as_str();
        let (target, guessed) = match linked {
            Some(l) => (self.client.path(l)?, false),
            None => (format!("{}/Settings", path.trim_end_matches('/')), true),
        };
        match self.client.get_answer(&target) {
            Ok(a) => Ok((target, a.etag())),
            // A guessed Settings that is not there: the Bios resource takes the values.
            Err(BmcError::Refused { .. } | BmcError::Protocol { .. }) if guessed => {
                Ok((path.to_string(), bios_etag))
            }
            // A linked one that cannot be read may still take a PATCH.
            Err(BmcError::Refused { .. } | BmcError::Protocol { .. }) => Ok((target, None)),
            Err(e) => Err(e),
        }
    }
}
