//! An expected checksum of a download (an OS image the agent writes, a firmware image the
//! master hands a BMC): `sha256:<hex>`, `md5:<hex>`, or bare hex (64 digits: sha256, 32:
//! md5), case-insensitive, kept as lower-case hex. Parsing only; hashing is the caller's.

/// An expected checksum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checksum {
    Sha256(String),
    Md5(String),
}

impl Checksum {
    /// Parse a checksum spec; `Err` with the spec when it is none of the forms.
    pub fn parse(spec: &str) -> Result<Checksum, String> {
        let bad = || spec.to_string();
        let (kind, hex) = match spec.split_once(':') {
            Some((k, h)) => (k.to_ascii_lowercase(), h),
            None if spec.len() == 64 => ("sha256".to_string(), spec),
            None if spec.len() == 32 => ("md5".to_string(), spec),
            None => return Err(bad()),
        };
        if !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let hex = hex.to_ascii_lowercase();
        match (kind.as_str(), hex.len()) {
            ("sha256", 64) => Ok(Checksum::Sha256(hex)),
            ("md5", 32) => Ok(Checksum::Md5(hex)),
            _ => Err(bad()),
        }
    }

    /// `sha256` or `md5`.
    pub fn label(&self) -> &'static str {
        match self {
            Checksum::Sha256(_) => "sha256",
            Checksum::Md5(_) => "md5",
        }
    }

    /// The expected digest, lower-case hex.
    pub fn hex(&self) -> &str {
        match self {
            Checksum::Sha256(h) | Checksum::Md5(h) => h,
        }
    }
}

impl std::fmt::Display for Checksum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.label(), self.hex())
    }
}
