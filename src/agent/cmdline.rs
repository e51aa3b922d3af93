//! The kernel command-line contract between the master's boot script and the agent
//! (documented in `images/README.md`): `stoker.master=URL`, `stoker.mac=MAC`,
//! `stoker.token=TOKEN`, `stoker.fingerprint=sha256:HEX` (the master's certificate, under
//! TLS), `stoker.deploy=1|0`, and iPXE's `BOOTIF=01-aa-bb-cc-dd-ee-ff`. Parsing is pure.

use crate::model::Mac;

/// What the boot script told the agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BootParams {
    pub master: Option<String>,
    pub mac: Option<Mac>,
    pub token: Option<String>,
    /// The master's certificate fingerprint (`stoker.fingerprint=`).
    pub fingerprint: Option<String>,
    /// The NIC the node booted from (`BOOTIF`).
    pub boot_if: Option<Mac>,
    /// `stoker.deploy=1` / `=0`: enter the deploy loop after hello, or not.
    pub deploy: Option<bool>,
}

impl BootParams {
    /// Parse `/proc/cmdline`. Unknown arguments are ignored; a malformed MAC is ignored too (the
    /// agent can still discover the node by its inventory).
    pub fn parse(cmdline: &str) -> BootParams {
        let mut params = BootParams::default();
        for arg in cmdline.split_whitespace() {
            let Some((key, value)) = arg.split_once('=') else {
                continue;
            };
            match key {
                "stoker.master" => params.master = Some(value.trim_end_matches('/').to_string()),
                "stoker.mac" => params.mac = value.parse().ok(),
                "stoker.token" => params.token = Some(value.to_string()),
                "stoker.fingerprint" => params.fingerprint = Some(value.to_string()),
                "stoker.deploy" => {
                    params.deploy = match value {
                        "1" | "yes" | "true" => Some(true),
                        "0" | "no" | "false" => Some(false),
                        _ => None,
                    }
                }
                // iPXE's form: "01-" (the ARP hardware type of Ethernet) then the MAC.
                "BOOTIF" => {
                    params.boot_if = value.strip_prefix("01-").unwrap_or(value).parse().ok();
                }
                _ => {}
            }
        }
        params
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_contract() {
        let p = BootParams::parse(
            "BOOT_IMAGE=vmlinuz initrd=initrd.img console=ttyS0,115200n8 \
             stoker.master=http://10.77.0.1:8000/ stoker.mac=52:54:00:77:00:0a \
             stoker.token=abc123 BOOTIF=01-52-54-00-77-00-0a quiet stoker.deploy=0 \
             stoker.fingerprint=sha256:00ff\n",
        );
        assert_eq!(p.fingerprint.as_deref(), Some("sha256:00ff"));
        assert_eq!(p.deploy, Some(false));
        assert_eq!(p.master.as_deref(), Some("http://10.77.0.1:8000"));
        assert_eq!(p.mac.as_ref().map(Mac::as_str), Some("52:54:00:77:00:0a"));
        assert_eq!(p.token.as_deref(), Some("abc123"));
        assert_eq!(p.boot_if, p.mac);
    }

    #[test]
    fn tolerates_absent_and_malformed() {
        assert_eq!(BootParams::parse(""), BootParams::default());
        let p = BootParams::parse("stoker.mac=nope BOOTIF=01-zz stoker.master");
        assert_eq!(p, BootParams::default());
    }
}
