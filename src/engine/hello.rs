//! Who may say hello. Discovery is open but can only create a node; everything after that needs
//! a credential: the one-time boot token from the node's kernel command line, or the node's own
//! agent token, issued once (at creation or with a boot token) and stored hashed by the caller.
//! Pure: the caller works out what was presented and applies the decision.

/// What the request carried, as the caller verified it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// No `Authorization` header.
    None,
    /// A boot token that was valid and is now used up.
    BootToken,
    /// The agent token of the node the inventory belongs to.
    AgentToken,
    /// A token that is neither.
    Invalid,
}

/// Why a hello is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A bad token: 401.
    Unauthorized,
    /// An unauthenticated hello for a node the master already knows: 409. Without this anyone
    /// on the provisioning network could rewrite a node's inventory.
    AlreadyRegistered,
}

/// What to do with a hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Create the node in `discover` and issue it an agent token.
    Create,
    /// Refresh a known node's inventory; `rotate` issues it a new agent token.
    Refresh {
        rotate: bool,
    },
    Refuse(Refusal),
}

/// The whole policy, one line per case.
pub fn decide(known_node: bool, credential: Credential) -> Decision {
    match (known_node, credential) {
        (false, Credential::None | Credential::BootToken) => Decision::Create,
        (false, Credential::AgentToken | Credential::Invalid) => {
            Decision::Refuse(Refusal::Unauthorized)
        }
        (true, Credential::None) => Decision::Refuse(Refusal::AlreadyRegistered),
        (true, Credential::BootToken) => Decision::Refresh { rotate: true },
        (true, Credential::AgentToken) => Decision::Refresh { rotate: false },
        (true, Credential::Invalid) => Decision::Refuse(Refusal::Unauthorized),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case() {
        use Credential as C;
        let got: Vec<String> = [false, true]
            .into_iter()
            .flat_map(|known| {
                [C::None, C::BootToken, C::AgentToken, C::Invalid]
                    .into_iter()
                    .map(move |c| format!("known={known} {c:?} => {:?}", decide(known, c)))
            })
            .collect();
        assert_eq!(
            got,
            [
                "known=false None => Create",
                "known=false BootToken => Create",
                "known=false AgentToken => Refuse(Unauthorized)",
                "known=false Invalid => Refuse(Unauthorized)",
                "known=true None => Refuse(AlreadyRegistered)",
                "known=true BootToken => Refresh { rotate: true }",
                "known=true AgentToken => Refresh { rotate: false }",
                "known=true Invalid => Refuse(Unauthorized)",
            ]
        );
    }
}
