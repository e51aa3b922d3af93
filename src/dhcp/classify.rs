//! What kind of network-boot client sent a DHCP request, from options 60 (vendor class), 77
//! (user class), 93 (client system architecture, RFC 4578) and 175 (iPXE's encapsulated
//! options). Pure.

use dhcproto::v4::{DhcpOption, Message, OptionCode};

/// The firmware that is asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Firmware {
    /// A PXE ROM in legacy BIOS mode (arch 0).
    Bios,
    /// UEFI on x86-64 (arch 7, EFI BC, what OVMF sends; or 9, EFI x86-64).
    UefiX64,
    /// UEFI on 32-bit x86 (arch 6).
    UefiIa32,
    /// UEFI on ARM64 (arch 11).
    UefiArm64,
    /// Another architecture number.
    Other(u16),
}

/// How the client boots over the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// Not a network-boot client (an OS's DHCP client, such as the bootstrap's udhcpc).
    Plain,
    /// Firmware PXE: it needs iPXE over TFTP first.
    Pxe(Firmware),
    /// UEFI HTTP boot (`HTTPClient`): it fetches an EFI binary by URL.
    HttpBoot(Firmware),
    /// iPXE itself: it gets its script's URL, which breaks the chainload loop.
    Ipxe(Firmware),
}

fn bytes(msg: &Message, code: OptionCode) -> Option<&[u8]> {
    match msg.opts().get(code)? {
        DhcpOption::ClassIdentifier(b) | DhcpOption::UserClass(b) => Some(b),
        DhcpOption::Unknown(u) => Some(u.data()),
        _ => None,
    }
}

fn firmware(msg: &Message, vendor: Option<&[u8]>) -> Firmware {
    let arch = match msg.opts().get(OptionCode::ClientSystemArchitecture) {
        Some(DhcpOption::ClientSystemArchitecture(a)) => Some(u16::from(*a)),
        _ => None,
    }
    // Option 60 repeats it: "PXEClient:Arch:00007:UNDI:003000".
    .or_else(|| {
        let text = std::str::from_utf8(vendor?).ok()?;
        let rest = text.split("Arch:").nth(1)?;
        rest.get(..5)?.parse().ok()
    });
    match arch {
        None | Some(0) => Firmware::Bios,
        Some(6) => Firmware::UefiIa32,
        Some(7 | 9) => Firmware::UefiX64,
        Some(11) => Firmware::UefiArm64,
        Some(16) => Firmware::UefiX64,
        Some(n) => Firmware::Other(n),
    }
}

/// User class option 77 is a list of length-prefixed strings (RFC 3004); iPXE sends "iPXE"
/// either bare or length-prefixed.
fn user_class_says_ipxe(data: &[u8]) -> bool {
    if data == b"iPXE" {
        return true;
    }
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let len = usize::from(len);
        if tail.len() < len {
            return false;
        }
        if &tail[..len] == b"iPXE" {
            return true;
        }
        rest = &tail[len..];
    }
    false
}

/// Classify a request.
pub fn classify(msg: &Message) -> ClientKind {
    let vendor = bytes(msg, OptionCode::ClassIdentifier);
    let fw = firmware(msg, vendor);
    let ipxe = bytes(msg, OptionCode::UserClass).is_some_and(user_class_says_ipxe)
        || msg.opts().get(OptionCode::Unknown(175)).is_some();
    if ipxe {
        return ClientKind::Ipxe(fw);
    }
    match vendor {
        Some(v) if v.starts_with(b"HTTPClient") => ClientKind::HttpBoot(fw),
        Some(v) if v.starts_with(b"PXEClient") => ClientKind::Pxe(fw),
        _ if msg
            .opts()
            .get(OptionCode::ClientSystemArchitecture)
            .is_some() =>
        {
            ClientKind::Pxe(fw)
        }
        _ => ClientKind::Plain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dhcproto::v4::{Architecture, UnknownOption};

    fn msg(opts: Vec<DhcpOption>) -> Message {
        let mut m = Message::default();
        for o in opts {
            m.opts_mut().insert(o);
        }
        m
    }

    #[test]
    fn clients_seen_in_the_lab() {
        // iPXE BIOS ROM.
        let ipxe_bios = msg(vec![
            DhcpOption::ClassIdentifier(b"PXEClient:Arch:00000:UNDI:002001".to_vec()),
            DhcpOption::UserClass(b"iPXE".to_vec()),
            DhcpOption::ClientSystemArchitecture(Architecture::from(0)),
            DhcpOption::Unknown(UnknownOption::new(
                OptionCode::Unknown(175),
                vec![0xb1, 1, 1],
            )),
        ]);
        assert_eq!(classify(&ipxe_bios), ClientKind::Ipxe(Firmware::Bios));
        // OVMF's own PXE client.
        let ovmf = msg(vec![
            DhcpOption::ClassIdentifier(b"PXEClient:Arch:00007:UNDI:003000".to_vec()),
            DhcpOption::ClientSystemArchitecture(Architecture::from(7)),
        ]);
        assert_eq!(classify(&ovmf), ClientKind::Pxe(Firmware::UefiX64));
        // iPXE EFI, user class length-prefixed.
        let ipxe_efi = msg(vec![
            DhcpOption::ClassIdentifier(b"PXEClient:Arch:00007:UNDI:003010".to_vec()),
            DhcpOption::UserClass(b"\x04iPXE".to_vec()),
        ]);
        assert_eq!(classify(&ipxe_efi), ClientKind::Ipxe(Firmware::UefiX64));
        // The bootstrap's own udhcpc.
        let udhcpc = msg(vec![DhcpOption::ClassIdentifier(b"udhcp 1.35.0".to_vec())]);
        assert_eq!(classify(&udhcpc), ClientKind::Plain);
        assert_eq!(classify(&Message::default()), ClientKind::Plain);
    }

    #[test]
    fn architectures_and_http_boot() {
        let arm = msg(vec![DhcpOption::ClassIdentifier(
            b"PXEClient:Arch:00011:UNDI:003000".to_vec(),
        )]);
        assert_eq!(classify(&arm), ClientKind::Pxe(Firmware::UefiArm64));
        let http = msg(vec![
            DhcpOption::ClassIdentifier(b"HTTPClient:Arch:00016:UNDI:003001".to_vec()),
            DhcpOption::ClientSystemArchitecture(Architecture::from(16)),
        ]);
        assert_eq!(classify(&http), ClientKind::HttpBoot(Firmware::UefiX64));
        let ia32 = msg(vec![DhcpOption::ClientSystemArchitecture(
            Architecture::from(6),
        )]);
        assert_eq!(classify(&ia32), ClientKind::Pxe(Firmware::UefiIa32));
        let odd = msg(vec![DhcpOption::ClassIdentifier(
            b"PXEClient:Arch:zzz".to_vec(),
        )]);
        assert_eq!(classify(&odd), ClientKind::Pxe(Firmware::Bios));
        assert!(!user_class_says_ipxe(b"\x09iPXE"));
    }
}
