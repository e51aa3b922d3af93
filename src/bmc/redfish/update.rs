//! Firmware: the service's UpdateService and its `SimpleUpdate` action (Ironic's
//! `management.update_firmware` over Redfish). The BMC pulls the image from the URL itself;
//! the driver only names it, with the transfer protocol of its scheme and the system as the
//! target, then follows the task the BMC gives until it ends or the caller's wait passes.
//! Credentials in the image URL are never repeated in a summary or an error.

use std::time::Duration;

use serde_json::{Value, json};

use super::super::{BmcError, Progress};
use super::{Conn, refused_is_no, task};

/// The `TransferProtocol` for an image URL: from its scheme, HTTP or HTTPS only.
pub(super) fn transfer_protocol(url: &str) -> Option<&'static str> {
    let scheme = url.split_once("://")?.0.to_ascii_lowercase();
    match scheme.as_str() {
        "http" => Some("HTTP"),
        "https" => Some("HTTPS"),
        _ => None,
    }
}

/// `url` as it may be shown: without `user:password@`.
pub(super) fn shown_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return super::http::clean(url);
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    super::http::clean(&format!("{scheme}://{host}{tail}"))
}

impl Conn {
    /// The SimpleUpdate action's target and description, when the service has one; read once.
    fn simple_update(&mut self) -> Result<Option<(String, Value)>, BmcError> {
        if let Some(known) = &self.simple_update {
            return Ok(known.clone());
        }
        let found = self.find_simple_update()?;
        self.simple_update = Some(found.clone());
        Ok(found)
    }

    fn find_simple_update(&mut self) -> Result<Option<(String, Value)>, BmcError> {
        let Some(service) = self.root_link(self.root_update_service.clone())? else {
            return Ok(None);
        };
        let doc = self.client.get(&service)?;
        let action = &doc["Actions"]["#UpdateService.SimpleUpdate"];
        match action["target"].as_str() {
            Some(t) => Ok(Some((self.client.path(t)?, action.clone()))),
            None => Ok(None),
        }
    }

    pub(super) fn can_update(&mut self) -> Result<bool, BmcError> {
        refused_is_no(self.simple_update().map(|u| u.is_some()))
    }

    pub(super) fn update_firmware(
        &mut self,
        image_url: &str,
        wait: Duration,
        progress: Progress<'_>,
    ) -> Result<String, BmcError> {
        let shown = shown_url(image_url);
        let Some(protocol) = transfer_protocol(image_url) else {
            return Err(BmcError::Invalid {
                field: "image_url".into(),
                message: format!("{shown:?} is not an http:// or https:// URL"),
            });
        };
        let Some((target, action)) = self.simple_update()? else {
            return Err(self
                .client
                .unsupported("update firmware (no UpdateService with a SimpleUpdate action)"));
        };
        if let Some(allowed) = action["TransferProtocol@Redfish.AllowableValues"].as_array()
            && !allowed.iter().any(|p| p == protocol)
        {
            let allowed: Vec<&str> = allowed.iter().filter_map(Value::as_str).take(16).collect();
            return Err(self.client.unsupported(format!(
                "update firmware over {protocol} (SimpleUpdate takes only: {})",
                allowed.join(", ")
            )));
        }
        let body = json!({
            "ImageURI": image_url,
            "TransferProtocol": protocol,
            "Targets": [self.system],
        });
        let answer = self.client.request("POST", &target, Some(&body), None)?;
        if !answer.success() {
            return Err(self.client.refused("POST", &target, &answer));
        }
        let Some(link) = task::monitor_link(answer.location.as_deref(), &answer.body) else {
            return Ok(format!(
                "the BMC took the firmware update from {shown} (HTTP {}) and gave no task to \
                 follow",
                answer.status
            ));
        };
        let monitor = self.client.path(&link)?;
        progress(&format!(
            "firmware update from {shown}: following {monitor}"
        ));
        let end = self.follow_task(&monitor, wait, progress)?;
        Ok(format!(
            "firmware update from {shown} completed (task {}: {})",
            end.path,
            task::joined(&end.messages)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transfer_protocol_comes_from_the_scheme() {
        assert_eq!(transfer_protocol("http://10.0.0.1/fw.bin"), Some("HTTP"));
        assert_eq!(transfer_protocol("HTTPS://m/fw.bin"), Some("HTTPS"));
        assert_eq!(transfer_protocol("ftp://m/fw.bin"), None);
        assert_eq!(transfer_protocol("/fw.bin"), None);
    }

    #[test]
    fn credentials_in_an_image_url_are_not_shown() {
        assert_eq!(
            shown_url("https://u:secret@mirror:8443/a/fw.bin?x=1"),
            "https://mirror:8443/a/fw.bin?x=1"
        );
        assert_eq!(
            shown_url("http://mirror/fw@2.bin"),
            "http://mirror/fw@2.bin"
        );
        assert_eq!(shown_url("nonsense"), "nonsense");
    }
}
