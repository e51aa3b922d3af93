//! Versions and version constraints: which plugin records apply to which release.
//!
//! A release version is Fuel's `<openstack>-<fuel>` (`newton-10.0`, `2014.2.1-6.0.2`). OpenStack
//! code names map to their year-based numbers (`juno` = 2014.2, `newton` = 2016.2), so
//! `mitaka` and `2016.1` compare equal and code names order correctly.
//!
//! A constraint is a comma-separated list of clauses `OP VERSION` with OP one of `==`, `!=`,
//! `>=`, `<=`, `>`, `<` (a bare version means `==`). Every range clause must hold; if there are
//! `==` clauses, one of them must hold, so `">=7,<=8"` is a range and `"==2014.2,==2015.1"` is
//! a set. Each clause compares at its own precision: `<=8` admits `8.0.1`, `==10` admits
//! `10.0.0`, `>7` refuses every `7.x`. Pure.

use std::cmp::Ordering;
use std::fmt;

/// OpenStack code names and the year-based versions they correspond to.
const CODE_NAMES: &[(&str, &str)] = &[
    ("austin", "2010.1"),
    ("bexar", "2011.1"),
    ("cactus", "2011.2"),
    ("diablo", "2011.3"),
    ("essex", "2012.1"),
    ("folsom", "2012.2"),
    ("grizzly", "2013.1"),
    ("havana", "2013.2"),
    ("icehouse", "2014.1"),
    ("juno", "2014.2"),
    ("kilo", "2015.1"),
    ("liberty", "2015.2"),
    ("mitaka", "2016.1"),
    ("newton", "2016.2"),
    ("ocata", "2017.1"),
    ("pike", "2017.2"),
    ("queens", "2018.1"),
    ("rocky", "2018.2"),
    ("stein", "2019.1"),
    ("train", "2019.2"),
    ("ussuri", "2020.1"),
    ("victoria", "2020.2"),
    ("wallaby", "2021.1"),
    ("xena", "2021.2"),
    ("yoga", "2022.1"),
    ("zed", "2022.2"),
];

/// A dotted numeric version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version(pub Vec<u64>);

impl Version {
    /// Parse `10.0.0`, `9.0`, `7`, or an OpenStack code name.
    pub fn parse(text: &str) -> Option<Version> {
        let text = text.trim();
        let lower = text.to_ascii_lowercase();
        let text = CODE_NAMES
            .iter()
            .find(|(name, _)| *name == lower)
            .map_or(text, |(_, v)| v);
        if text.is_empty() {
            return None;
        }
        text.split('.')
            .map(|p| {
                if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                    None
                } else {
                    p.parse().ok()
                }
            })
            .collect::<Option<Vec<u64>>>()
            .map(Version)
    }

    /// Compare at the precision of `other` (the clause's version): extra parts of `self` are
    /// ignored, missing parts are 0.
    fn cmp_at(&self, other: &Version) -> Ordering {
        for (i, b) in other.0.iter().enumerate() {
            let a = self.0.get(i).copied().unwrap_or(0);
            match a.cmp(b) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        Ordering::Equal
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u64::to_string).collect();
        f.write_str(&parts.join("."))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Ge,
    Le,
    Gt,
    Lt,
}

/// One clause of a constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    pub op: Op,
    pub version: Version,
}

/// A parsed constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    pub clauses: Vec<Clause>,
}

/// Why a constraint is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid version constraint {text:?}: {reason}; write clauses like \">=7,<=8\" or \"==2014.2,==2015.1\""
)]
pub struct ConstraintError {
    pub text: String,
    pub reason: String,
}

impl Constraint {
    pub fn parse(text: &str) -> Result<Constraint, ConstraintError> {
        let err = |reason: String| ConstraintError {
            text: text.to_string(),
            reason,
        };
        let mut clauses = Vec::new();
        for raw in text.split(',') {
            let raw = raw.trim();
            if raw.is_empty() {
                return Err(err("an empty clause".to_string()));
            }
            let (op, rest) = [
                ("==", Op::Eq),
                ("!=", Op::Ne),
                (">=", Op::Ge),
                ("<=", Op::Le),
                (">", Op::Gt),
                ("<", Op::Lt),
                ("=", Op::Eq),
            ]
            .iter()
            .find_map(|(s, op)| raw.strip_prefix(s).map(|rest| (*op, rest)))
            .unwrap_or((Op::Eq, raw));
            let version = Version::parse(rest)
                .ok_or_else(|| err(format!("{:?} is not a version", rest.trim())))?;
            clauses.push(Clause { op, version });
        }
        Ok(Constraint { clauses })
    }

    pub fn matches(&self, v: &Version) -> bool {
        let mut any_eq = None;
        for c in &self.clauses {
            let o = v.cmp_at(&c.version);
            let ok = match c.op {
                Op::Eq => {
                    any_eq = Some(any_eq.unwrap_or(false) || o == Ordering::Equal);
                    continue;
                }
                Op::Ne => o != Ordering::Equal,
                Op::Ge => o != Ordering::Less,
                Op::Le => o != Ordering::Greater,
                Op::Gt => o == Ordering::Greater,
                Op::Lt => o == Ordering::Less,
            };
            if !ok {
                return false;
            }
        }
        any_eq.unwrap_or(true)
    }

    /// The highest lower bound the constraint states (for choosing the most specific record).
    pub fn floor(&self) -> Option<&Version> {
        self.clauses
            .iter()
            .filter(|c| matches!(c.op, Op::Eq | Op::Ge | Op::Gt))
            .map(|c| &c.version)
            .max_by(|a, b| a.cmp_at(b).then(a.0.len().cmp(&b.0.len())))
    }
}

/// A release's version split into its OpenStack and Fuel parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseVersion {
    pub openstack: String,
    pub fuel: String,
}

impl ReleaseVersion {
    /// `newton-10.0` → (`newton`, `10.0`). Without a `-`, the whole string is the OpenStack part.
    pub fn parse(text: &str) -> ReleaseVersion {
        match text.split_once('-') {
            Some((os, fuel)) => ReleaseVersion {
                openstack: os.to_string(),
                fuel: fuel.to_string(),
            },
            None => ReleaseVersion {
                openstack: text.to_string(),
                fuel: String::new(),
            },
        }
    }
}

/// Nailgun's compatibility rule for a plugin's `releases[]` entry: each part of the release
/// starts with the entry's part (`2014.2-6.0` matches `2014.2.1-6.0.2`).
pub fn release_compatible(entry_version: &str, release_version: &str) -> bool {
    let e = ReleaseVersion::parse(entry_version);
    let r = ReleaseVersion::parse(release_version);
    r.openstack.starts_with(&e.openstack) && r.fuel.starts_with(&e.fuel)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(c: &str, v: &str) -> bool {
        Constraint::parse(c)
            .unwrap()
            .matches(&Version::parse(v).unwrap())
    }

    #[test]
    fn constraints() {
        assert!(m(">=7,<=8", "7.0") && m(">=7,<=8", "8.0.1") && !m(">=7,<=8", "9.0"));
        assert!(m("==2014.2,==2015.1", "2015.1") && m("==2014.2,==2015.1", "kilo"));
        assert!(!m("==2014.2,==2015.1", "2016.1"));
        assert!(m("==2014.2", "2014.2.1"));
        assert!(m(">=10", "10.0.0") && m("==10.0.0", "10") && !m(">7", "7.1"));
        assert!(m(">=mitaka", "newton") && !m("<mitaka", "2016.1"));
        assert!(m("9.0", "9.0") && m("!=9", "10.0.0"));
        assert!(Constraint::parse(">=seven").is_err());
        assert!(Constraint::parse(">=7,").is_err());
    }

    #[test]
    fn nailgun_compatibility() {
        assert!(release_compatible("2014.2-6.0", "2014.2.1-6.0.2"));
        assert!(release_compatible("liberty-8.0", "liberty-8.0"));
        assert!(!release_compatible("mitaka-9.0", "newton-10.0"));
    }
}
