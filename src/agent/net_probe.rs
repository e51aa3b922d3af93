//! Network verification's probe on a node, Nailgun's net_probe idea over AF_PACKET raw
//! sockets: on each interface it is given, the node broadcasts Ethernet frames on each VLAN
//! (0: untagged; else 802.1Q-tagged) carrying its node id, and listens on the same interfaces
//! for the other nodes' frames, noting on which (interface, VLAN) it heard which node. The
//! VLAN a frame came in on is the tag the kernel took off (`PACKET_AUXDATA`) or the one still
//! in the frame, and it must match the VLAN the sender wrote in the payload: a frame a switch
//! passed untagged does not count for a tagged network. The report is what the master compares
//! with what it expected (`engine::network::verify`). Raw sockets need CAP_NET_RAW (root on
//! the bootstrap and the installed OS).

use std::collections::{BTreeMap, BTreeSet};
use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::sys::socket::{
    AddressFamily, ControlMessageOwned, LinkAddr, MsgFlags, SockFlag, SockProtocol, SockType,
    SockaddrLike, bind, recvmsg, send, setsockopt, socket,
};
use serde::{Deserialize, Serialize};

/// The frames' EtherType: IEEE 802 local experimental 1.
pub const ETHERTYPE: u16 = 0x88b5;
/// The payload's first bytes.
const MAGIC: &[u8; 8] = b"STKRNETP";
const TPID_8021Q: u16 = 0x8100;
/// `tpacket_auxdata.tp_status`: the VLAN tag fields are valid.
const TP_STATUS_VLAN_VALID: u32 = 0x10;
/// `sll_pkttype` of a frame this host sent.
const PACKET_OUTGOING: u8 = 4;

use nix::{libc, setsockopt_impl, sockopt_impl};

sockopt_impl!(
    /// `SOL_PACKET`/`PACKET_AUXDATA`: each frame comes with its VLAN tag, which the kernel
    /// takes off the frame on receive.
    PacketAuxData,
    SetOnly,
    nix::libc::SOL_PACKET,
    nix::libc::PACKET_AUXDATA,
    bool
);

/// What the master asks of one node's probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeSpec {
    /// This node's id, written in every frame.
    pub node: i64,
    /// The interfaces and their VLANs (0: untagged).
    pub interfaces: Vec<IfaceVlans>,
    /// How long to listen, in milliseconds.
    #[serde(default = "default_listen_ms")]
    pub listen_ms: u64,
    /// When to start sending, after the listening started: every node must be listening
    /// before the first frames go out.
    #[serde(default = "default_send_after_ms")]
    pub send_after_ms: u64,
    /// How many times each frame is sent, spread over the rest of the window.
    #[serde(default = "default_rounds")]
    pub rounds: u32,
}

fn default_listen_ms() -> u64 {
    10_000
}
fn default_send_after_ms() -> u64 {
    2_000
}
fn default_rounds() -> u32 {
    5
}

/// One interface and the VLANs to probe on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IfaceVlans {
    pub iface: String,
    pub vlans: Vec<u16>,
}

/// What one node heard: per interface, per VLAN, the nodes whose frames came in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeReport {
    pub node: i64,
    pub networks: Vec<Heard>,
}

/// The peers heard on one interface, by VLAN.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heard {
    pub iface: String,
    pub vlans: BTreeMap<u16, BTreeSet<i64>>,
}

/// Why the probe could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("interface {iface}: no such interface on this node")]
    NoInterface { iface: String },
    #[error("interface {iface}: VLAN {vlan} is outside 0-4094")]
    BadVlan { iface: String, vlan: u16 },
    #[error("interface {iface}: {what}: {source}")]
    Socket {
        iface: String,
        what: &'static str,
        source: nix::Error,
    },
    #[error("listing the interfaces: {0}")]
    Interfaces(nix::Error),
}

/// One frame: broadcast from `src`, tagged with `vlan` unless it is 0, carrying `node`.
pub fn frame(src: [u8; 6], vlan: u16, node: i64) -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&src);
    if vlan != 0 {
        f.extend_from_slice(&TPID_8021Q.to_be_bytes());
        f.extend_from_slice(&(vlan & 0x0fff).to_be_bytes());
    }
    f.extend_from_slice(&ETHERTYPE.to_be_bytes());
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(&node.to_be_bytes());
    f.extend_from_slice(&vlan.to_be_bytes());
    f.resize(f.len().max(60), 0);
    f
}

/// A received frame read: the sender's node id and the VLAN it came in on, when it is a probe
/// frame whose VLAN matches the one its sender wrote. `tag` is the VLAN the kernel took off.
pub fn parse(frame: &[u8], tag: Option<u16>) -> Option<(i64, u16)> {
    let mut at = 12;
    let mut vlan = tag.unwrap_or(0);
    let ethertype = |at: usize| {
        frame
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    if ethertype(at)? == TPID_8021Q {
        if tag.is_some() {
            return None; // double-tagged: not ours
        }
        vlan = ethertype(at + 2)? & 0x0fff;
        at += 4;
    }
    if ethertype(at)? != ETHERTYPE {
        return None;
    }
    let payload = frame.get(at + 2..)?;
    if payload.get(..8)? != MAGIC {
        return None;
    }
    let node = i64::from_be_bytes(payload.get(8..16)?.try_into().ok()?);
    let sent_on = u16::from_be_bytes(payload.get(16..18)?.try_into().ok()?);
    (sent_on == vlan).then_some((node, vlan))
}

/// The VLAN in a `tpacket_auxdata` control message, when the kernel says it is valid.
fn aux_vlan(data: &[u8]) -> Option<u16> {
    let status = u32::from_ne_bytes(data.get(0..4)?.try_into().ok()?);
    let tci = u16::from_ne_bytes(data.get(16..18)?.try_into().ok()?);
    (status & TP_STATUS_VLAN_VALID != 0).then_some(tci & 0x0fff)
}

struct Port {
    iface: String,
    vlans: Vec<u16>,
    mac: [u8; 6],
    fd: OwnedFd,
}

/// The link-layer address of each interface by name (its index, its MAC).
fn links() -> Result<BTreeMap<String, LinkAddr>, ProbeError> {
    let mut out = BTreeMap::new();
    for a in nix::ifaddrs::getifaddrs().map_err(ProbeError::Interfaces)? {
        if let Some(link) = a.address.as_ref().and_then(|s| s.as_link_addr()) {
            out.insert(a.interface_name.clone(), *link);
        }
    }
    Ok(out)
}

fn open(spec: &IfaceVlans, link: &LinkAddr) -> Result<Port, ProbeError> {
    let err = |what| {
        let iface = spec.iface.clone();
        move |source| ProbeError::Socket {
            iface,
            what,
            source,
        }
    };
    let fd = socket(
        AddressFamily::Packet,
        SockType::Raw,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        SockProtocol::EthAll,
    )
    .map_err(err("opening a raw socket"))?;
    setsockopt(&fd, PacketAuxData, &true).map_err(err("asking for VLAN tags"))?;
    bind(fd.as_raw_fd(), link).map_err(err("binding"))?;
    Ok(Port {
        iface: spec.iface.clone(),
        vlans: spec.vlans.clone(),
        mac: link.addr().unwrap_or([0x02, 0, 0, 0, 0, 1]),
        fd,
    })
}

/// Run the probe: listen on every interface for `listen_ms`, sending each (interface, VLAN)
/// frame `rounds` times from `send_after_ms` on. Errors only when an interface cannot be
/// opened; frames that do not come are the report's business.
pub fn run(spec: &ProbeSpec) -> Result<ProbeReport, ProbeError> {
    let links = links()?;
    let mut ports = Vec::new();
    for i in &spec.interfaces {
        if let Some(&vlan) = i.vlans.iter().find(|v| **v > 4094) {
            return Err(ProbeError::BadVlan {
                iface: i.iface.clone(),
                vlan,
            });
        }
        let link = links.get(&i.iface).ok_or_else(|| ProbeError::NoInterface {
            iface: i.iface.clone(),
        })?;
        ports.push(open(i, link)?);
    }
    let mut heard: Vec<BTreeMap<u16, BTreeSet<i64>>> = vec![BTreeMap::new(); ports.len()];
    let start = Instant::now();
    let window = Duration::from_millis(spec.listen_ms);
    let send_from = Duration::from_millis(spec.send_after_ms.min(spec.listen_ms));
    let rounds = spec.rounds.max(1);
    // The rounds spread over the first half of what is left, so the last frames have time to
    // arrive before the window closes.
    let gap = (window.saturating_sub(send_from) / 2) / rounds;
    let mut sent = 0;
    let mut buf = [0u8; 2048];
    let mut cmsg = vec![0u8; 256];
    while start.elapsed() < window {
        if sent < rounds && start.elapsed() >= send_from + gap * sent {
            for p in &ports {
                for &vlan in &p.vlans {
                    // A frame the device refuses now is sent again next round; one that
                    // never goes shows as absent on the peers.
                    let _ = send(
                        p.fd.as_raw_fd(),
                        &frame(p.mac, vlan, spec.node),
                        MsgFlags::empty(),
                    );
                }
            }
            sent += 1;
        }
        for (p, got) in ports.iter().zip(heard.iter_mut()) {
            loop {
                let (len, outgoing, tag) = {
                    let mut iov = [IoSliceMut::new(&mut buf)];
                    let Ok(msg) = recvmsg::<LinkAddr>(
                        p.fd.as_raw_fd(),
                        &mut iov,
                        Some(&mut cmsg),
                        MsgFlags::MSG_DONTWAIT,
                    ) else {
                        break;
                    };
                    let outgoing = msg
                        .address
                        .as_ref()
                        .is_some_and(|a| a.len() > 0 && a.pkttype() == PACKET_OUTGOING);
                    let tag = msg.cmsgs().ok().and_then(|mut c| {
                        c.find_map(|m| match m {
                            ControlMessageOwned::Unknown(u)
                                if u.cmsg_header.cmsg_level == nix::libc::SOL_PACKET =>
                            {
                                aux_vlan(&u.data_bytes)
                            }
                            _ => None,
                        })
                    });
                    (msg.bytes, outgoing, tag)
                };
                if outgoing {
                    continue;
                }
                if let Some((node, vlan)) = buf.get(..len).and_then(|f| parse(f, tag))
                    && node != spec.node
                    && p.vlans.contains(&vlan)
                {
                    got.entry(vlan).or_default().insert(node);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(ProbeReport {
        node: spec.node,
        networks: ports
            .iter()
            .zip(heard)
            .map(|(p, mut vlans)| {
                for v in &p.vlans {
                    vlans.entry(*v).or_default();
                }
                Heard {
                    iface: p.iface.clone(),
                    vlans,
                }
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 7];

    #[test]
    fn a_frame_reads_back_with_its_node_and_vlan() {
        assert_eq!(parse(&frame(MAC, 0, 7), None), Some((7, 0)));
        // Tagged, the tag still in the frame.
        let tagged = frame(MAC, 101, -3);
        assert_eq!(&tagged[12..16], &[0x81, 0x00, 0x00, 101]);
        assert_eq!(parse(&tagged, None), Some((-3, 101)));
        // Tagged, the tag taken off by the kernel and given beside the frame.
        let mut stripped = tagged.clone();
        stripped.drain(12..16);
        assert_eq!(parse(&stripped, Some(101)), Some((-3, 101)));
    }

    #[test]
    fn a_frame_on_another_vlan_than_its_sender_wrote_does_not_count() {
        // Sent tagged 200, arrived untagged (an access port): not heard on VLAN 200 nor 0.
        let mut stripped = frame(MAC, 200, 1);
        stripped.drain(12..16);
        assert_eq!(parse(&stripped, None), None);
        assert_eq!(parse(&stripped, Some(300)), None);
        // Sent untagged, arrived tagged.
        assert_eq!(parse(&frame(MAC, 0, 1), Some(5)), None);
    }

    #[test]
    fn other_frames_are_not_probes() {
        assert_eq!(parse(&[], None), None);
        assert_eq!(parse(&[0u8; 13], None), None);
        let mut other = frame(MAC, 0, 1);
        other[12] = 0x08; // IPv4
        other[13] = 0x00;
        assert_eq!(parse(&other, None), None);
        let mut bad_magic = frame(MAC, 0, 1);
        bad_magic[14] = b'X';
        assert_eq!(parse(&bad_magic, None), None);
        // Cut short inside the payload.
        assert_eq!(parse(&frame(MAC, 0, 1)[..20], None), None);
    }

    #[test]
    fn the_auxdata_tag_counts_only_when_valid() {
        let mut aux = [0u8; 20];
        aux[16..18].copy_from_slice(&200u16.to_ne_bytes());
        assert_eq!(aux_vlan(&aux), None);
        aux[0..4].copy_from_slice(&(TP_STATUS_VLAN_VALID | 1).to_ne_bytes());
        assert_eq!(aux_vlan(&aux), Some(200));
        assert_eq!(aux_vlan(&aux[..10]), None);
    }
}
