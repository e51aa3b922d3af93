//! Who may say hello, and who may have a boot token. Discovery is open but can only create a
//! node; everything after that needs a credential: the one-time boot token from the node's
//! kernel command line, or the node's own agent token, issued once (at creation or with a boot
//! token) and stored hashed by the caller. A MAC never moves from one node to another through
//! these calls, and a node past `discover` keeps its MACs whatever its agent reports. With
//! `discovery.approval = manual` a new node waits for an operator before it gets any token.
//! Fuel's nailgun-agent calls follow the same MAC rules without ever getting a token.
//!
//! A boot token is handed only to the address the node is known by ([`boot_token`]).
//!
//! Pure: the caller looks up what was presented and who owns which MAC, then applies the
//! decision. Addresses are canonical IP text, as the caller formats them.

use crate::model::{Mac, NodeId, NodeStatus};

/// Whether new nodes need an operator's approval (`discovery.approval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// New nodes are approved by discovery and get their agent token at once.
    Auto,
    /// New nodes wait, without a token, until an operator approves them.
    Manual,
}

/// The node a credential names, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    pub id: NodeId,
    pub status: NodeStatus,
    pub approved: bool,
}

/// What the request carried, as the caller verified it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// No `Authorization` header.
    None,
    /// A fresh, unused boot token issued to one of the inventory's MACs, owned by this node
    /// (`None`: a MAC no node has yet).
    BootToken(Option<Known>),
    /// This node's agent token (current or pending).
    AgentToken(Known),
    /// A token that is neither.
    Invalid,
}

/// Why a hello (or a Fuel call) is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A bad token: 401.
    Unauthorized,
    /// An unauthenticated hello for a node the master already knows by `mac`: 409. Without
    /// this anyone on the provisioning network could rewrite a node's inventory.
    AlreadyRegistered { mac: Mac, node: NodeId },
    /// The inventory lists `mac`, which belongs to another node: 409. MACs never move.
    MacTaken { mac: Mac, node: NodeId },
    /// The node waits for an operator's approval: no token yet (403).
    AwaitingApproval { node: NodeId },
    /// `discovery.max_nodes` nodes exist: no new one (403).
    Full,
    /// Fuel's update for MACs no node has: 404.
    Unknown,
    /// Fuel's update for a node an environment took further: 409.
    PastDiscovery { node: NodeId, status: NodeStatus },
}

/// What happens to a known node's MACs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Macs {
    /// They become exactly those the inventory lists (a node in `discover`).
    Replace,
    /// They stay as they are (a node past `discover`: its identity is the operator's).
    Keep,
}

/// What to do with a hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Create the node in `discover`, approved or waiting; `issue` gives it an agent token.
    Create {
        approved: bool,
        issue: bool,
    },
    /// Refresh a known node's inventory; `rotate` issues it a new agent token.
    Refresh {
        node: NodeId,
        rotate: bool,
        macs: Macs,
    },
    Refuse(Refusal),
}

/// The facts a hello is decided on.
#[derive(Debug, Clone, Copy)]
pub struct Hello<'a> {
    pub credential: Credential,
    /// Every MAC of the inventory that a node already owns, with its owner.
    pub owners: &'a [(Mac, NodeId)],
    /// The node that owns the first of them.
    pub owner: Option<Known>,
    /// Whether one more node may be created (`discovery.max_nodes`).
    pub room: bool,
    pub approval: Approval,
}

fn macs_of(known: &Known) -> Macs {
    if known.status == NodeStatus::Discover {
        Macs::Replace
    } else {
        Macs::Keep
    }
}

/// The first MAC of the inventory owned by a node other than `node` (any node: `None`).
fn taken_by_other(owners: &[(Mac, NodeId)], node: Option<NodeId>) -> Option<Refusal> {
    owners
        .iter()
        .find(|(_, owner)| Some(*owner) != node)
        .map(|(mac, owner)| Refusal::MacTaken {
            mac: mac.clone(),
            node: *owner,
        })
}

fn create(h: &Hello<'_>, tokens: bool) -> Decision {
    if !h.room {
        return Decision::Refuse(Refusal::Full);
    }
    let approved = h.approval == Approval::Auto;
    Decision::Create {
        approved,
        issue: tokens && approved,
    }
}

/// The whole policy of `POST /api/v1/agent/hello`.
pub fn decide(h: &Hello<'_>) -> Decision {
    match h.credential {
        Credential::Invalid => Decision::Refuse(Refusal::Unauthorized),
        Credential::None => match (h.owners.first(), h.owner) {
            (Some(_), Some(owner)) if !owner.approved => {
                Decision::Refuse(Refusal::AwaitingApproval { node: owner.id })
            }
            (Some((mac, node)), _) => Decision::Refuse(Refusal::AlreadyRegistered {
                mac: mac.clone(),
                node: *node,
            }),
            (None, _) => create(h, true),
        },
        Credential::BootToken(None) => match taken_by_other(h.owners, None) {
            Some(why) => Decision::Refuse(why),
            None => create(h, true),
        },
        Credential::BootToken(Some(known)) | Credential::AgentToken(known) => {
            if let Some(why) = taken_by_other(h.owners, Some(known.id)) {
                return Decision::Refuse(why);
            }
            if !known.approved {
                return Decision::Refuse(Refusal::AwaitingApproval { node: known.id });
            }
            Decision::Refresh {
                node: known.id,
                rotate: matches!(h.credential, Credential::BootToken(_)),
                macs: macs_of(&known),
            }
        }
    }
}

/// Fuel's two nailgun-agent calls, unauthenticated as in Fuel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FuelCall {
    /// `POST /api/nodes`: register a new node.
    Register,
    /// `PUT /api/nodes/agent`: refresh a node still in `discover`.
    Update,
}

/// The policy of Fuel's calls. They never issue a token.
pub fn decide_fuel(call: FuelCall, h: &Hello<'_>) -> Decision {
    match (call, h.owner) {
        (FuelCall::Register, _) => match h.owners.first() {
            Some((mac, node)) => Decision::Refuse(Refusal::AlreadyRegistered {
                mac: mac.clone(),
                node: *node,
            }),
            None => create(h, false),
        },
        (FuelCall::Update, None) => Decision::Refuse(Refusal::Unknown),
        (FuelCall::Update, Some(known)) => {
            if let Some(why) = taken_by_other(h.owners, Some(known.id)) {
                Decision::Refuse(why)
            } else if known.status != NodeStatus::Discover {
                Decision::Refuse(Refusal::PastDiscovery {
                    node: known.id,
                    status: known.status,
                })
            } else {
                Decision::Refresh {
                    node: known.id,
                    rotate: false,
                    macs: Macs::Replace,
                }
            }
        }
    }
}

/// How boot tokens are tied to addresses (`boot.token_binding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// Only the address stoker's DHCP leased to the MAC.
    Lease,
    /// The address the node is known by: its lease, else the address its agent last said hello
    /// from, else the address its unused token went to; a MAC never seen gets one anywhere.
    Address,
    /// No address is checked; an unused token is still replaced only from the address it went
    /// to.
    None,
}

/// What is known about a MAC when its boot script is asked for.
#[derive(Debug, Clone, Copy)]
pub struct BootAsk<'a> {
    pub binding: Binding,
    /// The address the request came from.
    pub peer: &'a str,
    /// The address stoker's DHCP leased to the MAC (bound and unexpired).
    pub lease: Option<&'a str>,
    /// The address the MAC's node last said hello from.
    pub node_address: Option<&'a str>,
    /// The address the MAC's unused, unexpired boot token went to (`Some("")` when it was
    /// issued before addresses were recorded).
    pub outstanding: Option<&'a str>,
}

/// Why a boot token is not handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootRefusal {
    /// `lease` binding and stoker's DHCP leased this MAC no address.
    NoLease,
    /// The node is known by another address.
    NotTheNode { expected: String },
    /// An unused token of this MAC went to another address.
    Outstanding { issued_to: String },
}

/// May `ask.peer` have a fresh boot token for this MAC (replacing any unused one)?
pub fn boot_token(ask: &BootAsk<'_>) -> Result<(), BootRefusal> {
    let expected = match ask.binding {
        Binding::Lease => Some(ask.lease.ok_or(BootRefusal::NoLease)?),
        Binding::Address => ask.lease.or(ask.node_address),
        Binding::None => None,
    };
    if let Some(expected) = expected {
        if expected != ask.peer {
            return Err(BootRefusal::NotTheNode {
                expected: expected.to_string(),
            });
        }
        return Ok(());
    }
    match ask.outstanding {
        Some(issued_to) if issued_to != ask.peer => Err(BootRefusal::Outstanding {
            issued_to: issued_to.to_string(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(n: u8) -> Mac {
        format!("52:54:00:00:00:{n:02x}").parse().unwrap()
    }

    fn known(id: NodeId, status: NodeStatus, approved: bool) -> Known {
        Known {
            id,
            status,
            approved,
        }
    }

    fn hello(credential: Credential, owners: &[(Mac, NodeId)]) -> Decision {
        decide(&Hello {
            credential,
            owners,
            owner: owners
                .first()
                .map(|o| known(o.1, NodeStatus::Discover, true)),
            room: true,
            approval: Approval::Auto,
        })
    }

    #[test]
    fn every_credential_for_new_and_known_nodes() {
        use Credential as C;
        let a = known(1, NodeStatus::Discover, true);
        let mine = [(mac(1), 1)];
        let cases: Vec<(&str, Decision)> = vec![
            ("new, none", hello(C::None, &[])),
            ("new, boot token", hello(C::BootToken(None), &[])),
            ("new, invalid", hello(C::Invalid, &[])),
            ("known, none", hello(C::None, &mine)),
            ("known, boot token", hello(C::BootToken(Some(a)), &mine)),
            ("known, agent token", hello(C::AgentToken(a), &mine)),
            ("known, invalid", hello(C::Invalid, &mine)),
        ];
        let got: Vec<String> = cases.iter().map(|(k, d)| format!("{k} => {d:?}")).collect();
        assert_eq!(
            got,
            [
                "new, none => Create { approved: true, issue: true }",
                "new, boot token => Create { approved: true, issue: true }",
                "new, invalid => Refuse(Unauthorized)",
                "known, none => Refuse(AlreadyRegistered { mac: Mac(\"52:54:00:00:00:01\"), node: 1 })",
                "known, boot token => Refresh { node: 1, rotate: true, macs: Replace }",
                "known, agent token => Refresh { node: 1, rotate: false, macs: Replace }",
                "known, invalid => Refuse(Unauthorized)",
            ]
        );
    }

    #[test]
    fn a_mac_of_another_node_is_never_taken() {
        let a = known(1, NodeStatus::Discover, true);
        // The victim's MAC listed as a second interface, with the attacker's own credential,
        // or with a boot token of a MAC nobody has.
        let owners = [(mac(1), 1), (mac(2), 2)];
        let taken = Decision::Refuse(Refusal::MacTaken {
            mac: mac(2),
            node: 2,
        });
        assert_eq!(hello(Credential::AgentToken(a), &owners), taken);
        assert_eq!(hello(Credential::BootToken(Some(a)), &owners), taken);
        assert_eq!(
            hello(Credential::BootToken(None), &[(mac(2), 2)]),
            taken,
            "a fresh MAC's token does not reach node 2"
        );
    }

    #[test]
    fn past_discover_macs_are_kept() {
        let deployed = known(1, NodeStatus::Ready, true);
        assert_eq!(
            hello(Credential::AgentToken(deployed), &[(mac(1), 1)]),
            Decision::Refresh {
                node: 1,
                rotate: false,
                macs: Macs::Keep
            }
        );
    }

    #[test]
    fn manual_approval_creates_waiting_nodes_without_tokens() {
        let manual = |credential, owners: &[(Mac, NodeId)]| {
            decide(&Hello {
                credential,
                owners,
                owner: owners
                    .first()
                    .map(|o| known(o.1, NodeStatus::Discover, false)),
                room: true,
                approval: Approval::Manual,
            })
        };
        let created = Decision::Create {
            approved: false,
            issue: false,
        };
        assert_eq!(manual(Credential::None, &[]), created);
        assert_eq!(manual(Credential::BootToken(None), &[]), created);
        let waiting = known(3, NodeStatus::Discover, false);
        let wait = Decision::Refuse(Refusal::AwaitingApproval { node: 3 });
        assert_eq!(
            manual(Credential::BootToken(Some(waiting)), &[(mac(3), 3)]),
            wait
        );
        assert_eq!(manual(Credential::None, &[(mac(3), 3)]), wait);
        let approved = known(3, NodeStatus::Discover, true);
        assert!(matches!(
            manual(Credential::BootToken(Some(approved)), &[(mac(3), 3)]),
            Decision::Refresh { rotate: true, .. }
        ));
    }

    #[test]
    fn no_room_no_new_node() {
        let full = |credential| {
            decide(&Hello {
                credential,
                owners: &[],
                owner: None,
                room: false,
                approval: Approval::Auto,
            })
        };
        assert_eq!(full(Credential::None), Decision::Refuse(Refusal::Full));
        assert_eq!(
            full(Credential::BootToken(None)),
            Decision::Refuse(Refusal::Full)
        );
        let h = Hello {
            credential: Credential::None,
            owners: &[],
            owner: None,
            room: false,
            approval: Approval::Auto,
        };
        assert_eq!(
            decide_fuel(FuelCall::Register, &h),
            Decision::Refuse(Refusal::Full)
        );
    }

    #[test]
    fn fuel_calls_register_new_and_refresh_discovered_nodes_only() {
        let fuel = |call, owners: &[(Mac, NodeId)], status| {
            decide_fuel(
                call,
                &Hello {
                    credential: Credential::None,
                    owners,
                    owner: owners.first().map(|o| known(o.1, status, true)),
                    room: true,
                    approval: Approval::Auto,
                },
            )
        };
        use FuelCall::{Register, Update};
        use NodeStatus::{Deploying, Discover};
        assert_eq!(
            fuel(Register, &[], Discover),
            Decision::Create {
                approved: true,
                issue: false
            }
        );
        assert!(matches!(
            fuel(Register, &[(mac(1), 1)], Discover),
            Decision::Refuse(Refusal::AlreadyRegistered { node: 1, .. })
        ));
        assert_eq!(
            fuel(Update, &[], Discover),
            Decision::Refuse(Refusal::Unknown)
        );
        assert_eq!(
            fuel(Update, &[(mac(1), 1)], Discover),
            Decision::Refresh {
                node: 1,
                rotate: false,
                macs: Macs::Replace
            }
        );
        // Node B's MAC in node A's document moves nothing.
        assert_eq!(
            fuel(Update, &[(mac(1), 1), (mac(2), 2)], Discover),
            Decision::Refuse(Refusal::MacTaken {
                mac: mac(2),
                node: 2
            })
        );
        assert_eq!(
            fuel(Update, &[(mac(1), 1)], Deploying),
            Decision::Refuse(Refusal::PastDiscovery {
                node: 1,
                status: Deploying
            })
        );
    }

    #[test]
    fn boot_tokens_go_to_the_nodes_address_only() {
        let ask = |binding, peer, lease, node_address, outstanding| {
            boot_token(&BootAsk {
                binding,
                peer,
                lease,
                node_address,
                outstanding,
            })
        };
        let not = |e: &str| {
            Err(BootRefusal::NotTheNode {
                expected: e.to_string(),
            })
        };
        use Binding as B;
        let l = Some("10.0.0.5");
        // lease: the lease's address and nobody else; no lease, nobody.
        assert_eq!(ask(B::Lease, "10.0.0.5", l, None, None), Ok(()));
        assert_eq!(ask(B::Lease, "10.0.0.9", l, None, None), not("10.0.0.5"));
        assert_eq!(
            ask(B::Lease, "10.0.0.5", None, Some("10.0.0.5"), None),
            Err(BootRefusal::NoLease)
        );
        // address: the lease first, then the node's hello address, then the token's.
        assert_eq!(
            ask(B::Address, "10.0.0.7", l, Some("10.0.0.7"), None),
            not("10.0.0.5")
        );
        assert_eq!(
            ask(B::Address, "10.0.0.7", None, Some("10.0.0.7"), None),
            Ok(())
        );
        assert_eq!(
            ask(B::Address, "10.0.0.8", None, Some("10.0.0.7"), None),
            not("10.0.0.7")
        );
        assert_eq!(
            ask(B::Address, "10.0.0.8", None, None, None),
            Ok(()),
            "first use"
        );
        assert_eq!(
            ask(B::Address, "10.0.0.8", None, None, Some("10.0.0.7")),
            Err(BootRefusal::Outstanding {
                issued_to: "10.0.0.7".into()
            })
        );
        assert_eq!(
            ask(B::Address, "10.0.0.7", None, None, Some("10.0.0.7")),
            Ok(())
        );
        // none: anyone, but an unused token is not replaced from elsewhere.
        assert_eq!(ask(B::None, "10.0.0.9", l, Some("10.0.0.7"), None), Ok(()));
        assert!(ask(B::None, "10.0.0.9", None, None, Some("10.0.0.7")).is_err());
        assert!(
            ask(B::None, "10.0.0.9", None, None, Some("")).is_err(),
            "a token of unknown address"
        );
    }
}

/// The installed OS's service agent says hello with the credential its node was given at
/// provisioning. What the caller found for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceHello<'a> {
    /// The node the agent says it is.
    pub claimed: NodeId,
    /// Whether the presented credential is the one bound to `claimed`.
    pub matches: bool,
    /// The node the credential is bound to, when it is not `claimed`'s.
    pub bound_to: Option<NodeId>,
    /// Which nodes own the MACs the agent reported, as `(mac, node)`.
    pub owners: &'a [(Mac, NodeId)],
    /// The agent's version and the one the master needs.
    pub version: &'a str,
    pub required: &'a str,
}

/// Why a service agent is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceRefusal {
    /// No node has this credential.
    Unknown,
    /// The credential is another node's.
    OtherNode { bound_to: NodeId },
    /// The credential is the node's, but the machine presenting it has none of its MACs.
    NotThisMachine,
    /// The agent must update itself from the master first.
    Outdated,
}

/// Whether a service agent's hello is accepted: the credential must be the one bound to the
/// node it names, presented from a machine with one of that node's MACs, by an agent of the
/// master's version.
pub fn service_hello(h: &ServiceHello<'_>) -> Result<(), ServiceRefusal> {
    if !h.matches {
        return Err(match h.bound_to {
            Some(other) => ServiceRefusal::OtherNode { bound_to: other },
            None => ServiceRefusal::Unknown,
        });
    }
    if !h.owners.iter().any(|(_, n)| *n == h.claimed) {
        return Err(ServiceRefusal::NotThisMachine);
    }
    if h.version != h.required {
        return Err(ServiceRefusal::Outdated);
    }
    Ok(())
}

#[cfg(test)]
mod service_tests {
    use super::*;

    fn mac(s: &str) -> Mac {
        s.parse().unwrap()
    }

    #[test]
    fn a_service_agent_needs_its_nodes_credential_one_of_its_macs_and_the_masters_version() {
        let owners = [(mac("52:54:00:00:00:07"), 7)];
        let base = ServiceHello {
            claimed: 7,
            matches: true,
            bound_to: None,
            owners: &owners,
            version: "1.0",
            required: "1.0",
        };
        assert_eq!(service_hello(&base), Ok(()));
        let other = ServiceHello {
            matches: false,
            bound_to: Some(5),
            ..base.clone()
        };
        assert_eq!(
            service_hello(&other),
            Err(ServiceRefusal::OtherNode { bound_to: 5 })
        );
        let unknown = ServiceHello {
            matches: false,
            ..base.clone()
        };
        assert_eq!(service_hello(&unknown), Err(ServiceRefusal::Unknown));
        let elsewhere_owners = [(mac("52:54:00:00:00:05"), 5)];
        let elsewhere = ServiceHello {
            owners: &elsewhere_owners,
            ..base.clone()
        };
        assert_eq!(
            service_hello(&elsewhere),
            Err(ServiceRefusal::NotThisMachine)
        );
        let old = ServiceHello {
            version: "0.9",
            ..base.clone()
        };
        assert_eq!(service_hello(&old), Err(ServiceRefusal::Outdated));
    }
}
