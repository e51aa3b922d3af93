//! Which roles one node may hold together, as Nailgun's `NodeAssignmentValidator` checked an
//! assignment: a role's `conflicts` (a list of roles, or `"*"` for every other role) refuse
//! the node any of them besides it ("Role "controller" in conflict with role compute"). Roles
//! the metadata does not describe have no conflicts (their names are checked elsewhere).
//! Pure.

use serde_json::{Map, Value as J};

/// The conflicts among `roles` given the roles' metadata: for each role, in the order given,
/// the other roles of the list it refuses (Nailgun's message for each).
pub fn conflicts(metadata: &Map<String, J>, roles: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for role in roles {
        let Some(declared) = metadata.get(role).and_then(|m| m.get("conflicts")) else {
            continue;
        };
        let refused: Vec<&str> = roles
            .iter()
            .filter(|other| *other != role)
            .filter(|other| match declared {
                J::String(s) => s == "*",
                J::Array(list) => list.iter().any(|c| c.as_str() == Some(other.as_str())),
                _ => false,
            })
            .map(String::as_str)
            .collect();
        if !refused.is_empty() {
            out.push(format!(
                "Role \"{role}\" in conflict with role {}",
                refused.join(", ")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roles(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn declared_conflicts_and_the_star_refuse() {
        let md = json!({
            "controller": {"conflicts": ["compute"]},
            "compute": {"conflicts": ["controller"]},
            "virt": {"conflicts": "*"},
            "cinder": {"conflicts": []},
        });
        let md = md.as_object().unwrap();
        assert!(conflicts(md, &roles(&["controller", "cinder"])).is_empty());
        assert_eq!(
            conflicts(md, &roles(&["controller", "compute"])),
            [
                "Role \"controller\" in conflict with role compute",
                "Role \"compute\" in conflict with role controller"
            ]
        );
        assert_eq!(
            conflicts(md, &roles(&["virt", "cinder", "mystery"])),
            ["Role \"virt\" in conflict with role cinder, mystery"]
        );
        assert!(conflicts(md, &roles(&["virt"])).is_empty());
    }
}
