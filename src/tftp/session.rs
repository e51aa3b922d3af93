//! TFTP as pure data: packet parsing and encoding (RFC 1350), option negotiation (RFC 2347
//! OACK, 2348 blksize, 2349 timeout and tsize, 7440 windowsize), netascii, path safety, and the
//! sending side's state machine with windows, block-number rollover and retransmission backoff.
//! It never touches a socket, a file or the clock: the server feeds it ACKs and timeouts and it
//! answers with what to send (block ranges the server reads from the file) and how long to wait.

use std::time::Duration;

/// TFTP error codes (RFC 1350 §5, RFC 2347).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    NotDefined = 0,
    FileNotFound = 1,
    AccessViolation = 2,
    IllegalOperation = 4,
    UnknownTransferId = 5,
}

/// A parsed packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    Read(Request),
    Write { filename: String },
    Data { block: u16, len: usize },
    Ack { block: u16 },
    Error { code: u16, message: String },
    OptionAck,
}

/// A read request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub filename: String,
    pub mode: Mode,
    /// Options in the order given, names lower-cased.
    pub options: Vec<(String, String)>,
}

/// Transfer mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Octet,
    Netascii,
}

/// Why a packet could not be parsed; the text goes into the ERROR packet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("packet too short")]
    TooShort,
    #[error("unknown opcode {0}")]
    Opcode(u16),
    #[error("malformed request: {0}")]
    Request(&'static str),
    #[error("unsupported transfer mode {0:?}")]
    Mode(String),
}

fn strings(mut rest: &[u8]) -> Result<Vec<String>, ParseError> {
    let mut out = Vec::new();
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|b| *b == 0)
            .ok_or(ParseError::Request("field not NUL-terminated"))?;
        let text = std::str::from_utf8(&rest[..end])
            .map_err(|_| ParseError::Request("field is not text"))?;
        out.push(text.to_string());
        rest = &rest[end + 1..];
    }
    Ok(out)
}

impl Packet {
    pub fn parse(bytes: &[u8]) -> Result<Packet, ParseError> {
        if bytes.len() < 4 {
            return Err(ParseError::TooShort);
        }
        let opcode = u16::from_be_bytes([bytes[0], bytes[1]]);
        let body = &bytes[2..];
        let word = u16::from_be_bytes([body[0], body[1]]);
        match opcode {
            1 | 2 => {
                let fields = strings(body)?;
                let [filename, mode, options @ ..] = fields.as_slice() else {
                    return Err(ParseError::Request("missing filename or mode"));
                };
                if filename.is_empty() {
                    return Err(ParseError::Request("empty filename"));
                }
                if opcode == 2 {
                    return Ok(Packet::Write {
                        filename: filename.clone(),
                    });
                }
                let mode = match mode.to_ascii_lowercase().as_str() {
                    "octet" => Mode::Octet,
                    "netascii" => Mode::Netascii,
                    _ => return Err(ParseError::Mode(mode.clone())),
                };
                if options.len() % 2 != 0 {
                    return Err(ParseError::Request("option without a value"));
                }
                let options = options
                    .chunks(2)
                    .map(|kv| (kv[0].to_ascii_lowercase(), kv[1].clone()))
                    .collect();
                Ok(Packet::Read(Request {
                    filename: filename.clone(),
                    mode,
                    options,
                }))
            }
            3 => Ok(Packet::Data {
                block: word,
                len: body.len() - 2,
            }),
            4 => Ok(Packet::Ack { block: word }),
            5 => {
                let message = strings(&body[2..])
                    .ok()
                    .and_then(|s| s.into_iter().next())
                    .unwrap_or_default();
                Ok(Packet::Error {
                    code: word,
                    message,
                })
            }
            6 => Ok(Packet::OptionAck),
            other => Err(ParseError::Opcode(other)),
        }
    }
}

/// An ERROR packet.
pub fn error_packet(code: ErrorCode, message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + message.len());
    out.extend_from_slice(&5u16.to_be_bytes());
    out.extend_from_slice(&(code as u16).to_be_bytes());
    out.extend_from_slice(message.as_bytes());
    out.push(0);
    out
}

/// The header of a DATA packet; the payload follows it.
pub fn data_header(block: u16) -> [u8; 4] {
    let b = block.to_be_bytes();
    [0, 3, b[0], b[1]]
}

/// An OACK packet.
pub fn oack_packet(options: &[(String, String)]) -> Vec<u8> {
    let mut out = vec![0, 6];
    for (k, v) in options {
        out.extend_from_slice(k.as_bytes());
        out.push(0);
        out.extend_from_slice(v.as_bytes());
        out.push(0);
    }
    out
}

/// Convert to netascii: LF → CR LF, CR → CR NUL (RFC 1350 via RFC 764).
pub fn to_netascii(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + data.len() / 16);
    for &b in data {
        match b {
            b'\n' => out.extend_from_slice(b"\r\n"),
            b'\r' => out.extend_from_slice(b"\r\0"),
            other => out.push(other),
        }
    }
    out
}

/// Why a requested path is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("absolute paths are not served")]
    Absolute,
    #[error("`..` is not allowed in paths")]
    Parent,
    #[error("invalid character in path")]
    Invalid,
}

/// The components of a requested file name relative to the root. `\` is treated as a separator
/// too (some firmware sends Windows paths), so `..\x` is caught as well.
pub fn safe_components(name: &str) -> Result<Vec<&str>, PathError> {
    if name.starts_with(['/', '\\']) || name.as_bytes().get(1) == Some(&b':') {
        return Err(PathError::Absolute);
    }
    if name.contains(['\0', '\n', '\r']) {
        return Err(PathError::Invalid);
    }
    let mut out = Vec::new();
    for part in name.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => return Err(PathError::Parent),
            p => out.push(p),
        }
    }
    if out.is_empty() {
        return Err(PathError::Invalid);
    }
    Ok(out)
}

/// What the server allows.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest block size granted (derived from the network's MTU: 1468 for 1500).
    pub max_blksize: u16,
    /// Largest window granted.
    pub max_windowsize: u16,
    /// Retransmission timeout when the client does not ask for one.
    pub default_timeout: Duration,
    /// Retransmissions of one window before giving up.
    pub max_retries: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_blksize: 1468,
            max_windowsize: 64,
            default_timeout: Duration::from_secs(1),
            max_retries: 6,
        }
    }
}

/// What was agreed for one transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    pub blksize: usize,
    pub windowsize: u16,
    pub timeout: Duration,
    /// The options to acknowledge; empty means no OACK (start with block 1).
    pub oack: Vec<(String, String)>,
}

/// Negotiate options for a file of `size` bytes (as sent, after netascii conversion).
/// Unknown or invalid options are ignored, as RFC 2347 says.
pub fn negotiate(options: &[(String, String)], size: u64, limits: &Limits) -> Negotiated {
    let mut n = Negotiated {
        blksize: 512,
        windowsize: 1,
        timeout: limits.default_timeout,
        oack: Vec::new(),
    };
    for (name, value) in options {
        match name.as_str() {
            "blksize" => {
                if let Ok(v) = value.parse::<u32>()
                    && (8..=65464).contains(&v)
                {
                    let granted = v.min(u32::from(limits.max_blksize));
                    n.blksize = granted as usize;
                    n.oack.push((name.clone(), granted.to_string()));
                }
            }
            "windowsize" => {
                if let Ok(v) = value.parse::<u32>()
                    && (1..=65535).contains(&v)
                {
                    let granted = v.min(u32::from(limits.max_windowsize)).max(1);
                    n.windowsize = u16::try_from(granted).unwrap_or(1);
                    n.oack.push((name.clone(), granted.to_string()));
                }
            }
            "timeout" => {
                if let Ok(v) = value.parse::<u64>()
                    && (1..=255).contains(&v)
                {
                    n.timeout = Duration::from_secs(v);
                    n.oack.push((name.clone(), v.to_string()));
                }
            }
            // tsize is optional for the server; an empty file leaves it out because clients
            // such as curl reject `tsize 0` in an OACK.
            "tsize" if size > 0 => {
                n.oack.push((name.clone(), size.to_string()));
            }
            _ => {}
        }
    }
    n
}

/// A run of blocks to send: absolute block `first` (1-based) and on, `count` of them. Block `k`
/// carries bytes `(k-1)*blksize ..` and goes on the wire as `k mod 65536` (rollover to 0, as
/// iPXE, tftp-hpa and curl expect).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub first: u64,
    pub count: u64,
}

/// What the server should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send the OACK (again) and wait.
    SendOack,
    /// Send these blocks and wait.
    Send(Window),
    /// Nothing to send; keep waiting (a duplicate or stale ACK).
    Wait,
    /// The last block is acknowledged.
    Done,
    /// Too many retransmissions: send an error and stop.
    GiveUp,
}

/// The sending side of one read transfer.
#[derive(Debug, Clone)]
pub struct Sender {
    blksize: u64,
    windowsize: u64,
    total_blocks: u64,
    /// Highest block acknowledged (0 before any; the OACK is acknowledged as block 0).
    acked: u64,
    oack_pending: bool,
    base_timeout: Duration,
    retries: u32,
    max_retries: u32,
}

impl Sender {
    /// A transfer of `size` bytes under `n`. The first action is [`Sender::start`].
    pub fn new(size: u64, n: &Negotiated, limits: &Limits) -> Sender {
        let blksize = n.blksize.max(1) as u64;
        Sender {
            blksize,
            windowsize: u64::from(n.windowsize.max(1)),
            // The last block is shorter than blksize, possibly empty.
            total_blocks: size / blksize + 1,
            acked: 0,
            oack_pending: !n.oack.is_empty(),
            base_timeout: n.timeout,
            retries: 0,
            max_retries: limits.max_retries,
        }
    }

    pub fn blksize(&self) -> u64 {
        self.blksize
    }

    pub fn total_blocks(&self) -> u64 {
        self.total_blocks
    }

    /// Byte range of absolute block `k` within a file of `size` bytes.
    pub fn range(&self, k: u64, size: u64) -> (u64, u64) {
        let start = (k - 1).saturating_mul(self.blksize).min(size);
        let end = start.saturating_add(self.blksize).min(size);
        (start, end)
    }

    fn window(&self) -> Window {
        let first = self.acked + 1;
        Window {
            first,
            count: self.windowsize.min(self.total_blocks - self.acked),
        }
    }

    pub fn start(&self) -> Action {
        if self.oack_pending {
            Action::SendOack
        } else {
            Action::Send(self.window())
        }
    }

    /// How long to wait for the next ACK: the base timeout doubled per retry, at most 8×.
    pub fn wait(&self) -> Duration {
        self.base_timeout * 2u32.pow(self.retries.min(3))
    }

    /// The client acknowledged wire block `block`.
    pub fn on_ack(&mut self, block: u16) -> Action {
        if self.oack_pending {
            if block == 0 {
                self.oack_pending = false;
                self.retries = 0;
                return Action::Send(self.window());
            }
            return Action::Wait;
        }
        // Which outstanding absolute block has this wire number? Only blocks sent and not yet
        // acknowledged qualify; anything else is a stale duplicate (and answering duplicates
        // would start the Sorcerer's Apprentice syndrome).
        let last_sent = (self.acked + self.windowsize).min(self.total_blocks);
        let found = (self.acked + 1..=last_sent).find(|k| (*k % 65536) as u16 == block);
        let Some(k) = found else {
            return Action::Wait;
        };
        self.acked = k;
        self.retries = 0;
        if self.acked == self.total_blocks {
            Action::Done
        } else {
            // The next window starts after the acknowledged block: after the whole window, or,
            // for an ACK inside it, where the loss began (RFC 7440 §4).
            Action::Send(self.window())
        }
    }

    /// No ACK arrived in time.
    pub fn on_timeout(&mut self) -> Action {
        self.retries += 1;
        if self.retries > self.max_retries {
            return Action::GiveUp;
        }
        self.start()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rrq(parts: &[&str]) -> Vec<u8> {
        let mut v = vec![0, 1];
        for p in parts {
            v.extend_from_slice(p.as_bytes());
            v.push(0);
        }
        v
    }

    #[test]
    fn requests_parse_with_options_and_garbage_does_not() {
        let p = Packet::parse(&rrq(&[
            "pxe/undionly.kpxe",
            "OCTET",
            "BlkSize",
            "1468",
            "tsize",
            "0",
        ]))
        .unwrap();
        assert_eq!(
            p,
            Packet::Read(Request {
                filename: "pxe/undionly.kpxe".into(),
                mode: Mode::Octet,
                options: vec![
                    ("blksize".into(), "1468".into()),
                    ("tsize".into(), "0".into())
                ],
            })
        );
        assert_eq!(Packet::parse(&[0, 4, 1, 2]), Ok(Packet::Ack { block: 258 }));
        assert_eq!(Packet::parse(&[0, 1]), Err(ParseError::TooShort));
        assert_eq!(Packet::parse(&[0, 9, 0, 0]), Err(ParseError::Opcode(9)));
        assert!(Packet::parse(&rrq(&["f", "mail"])).is_err());
        assert!(
            Packet::parse(&[0, 1, b'f', 0, b'o']).is_err(),
            "unterminated"
        );
        assert!(Packet::parse(&rrq(&["f", "octet", "blksize"])).is_err());
        assert!(
            Packet::parse(&[0, 1, 0xff, 0xfe, 0, b'o', 0]).is_err(),
            "not UTF-8"
        );
        assert_eq!(
            Packet::parse(
                &rrq(&["up", "octet"])
                    .iter()
                    .enumerate()
                    .map(|(i, b)| if i == 1 { 2 } else { *b })
                    .collect::<Vec<_>>()
            ),
            Ok(Packet::Write {
                filename: "up".into()
            })
        );
    }

    #[test]
    fn paths_stay_inside_the_root() {
        assert_eq!(safe_components("a/./b").unwrap(), vec!["a", "b"]);
        assert_eq!(safe_components("/etc/passwd"), Err(PathError::Absolute));
        assert_eq!(safe_components("\\boot\\x"), Err(PathError::Absolute));
        assert_eq!(safe_components("C:\\x"), Err(PathError::Absolute));
        assert_eq!(safe_components("../x"), Err(PathError::Parent));
        assert_eq!(safe_components("a/../../x"), Err(PathError::Parent));
        assert_eq!(safe_components("a\\..\\..\\x"), Err(PathError::Parent));
        assert_eq!(safe_components("./"), Err(PathError::Invalid));
    }

    #[test]
    fn negotiation_clamps_and_ignores_nonsense() {
        let limits = Limits::default();
        let opts = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect::<Vec<_>>()
        };
        let n = negotiate(
            &opts(&[
                ("blksize", "65464"),
                ("tsize", "0"),
                ("windowsize", "500"),
                ("timeout", "3"),
                ("foo", "1"),
            ]),
            1000,
            &limits,
        );
        assert_eq!(n.blksize, 1468);
        assert_eq!(n.windowsize, 64);
        assert_eq!(n.timeout, Duration::from_secs(3));
        assert_eq!(
            n.oack,
            opts(&[
                ("blksize", "1468"),
                ("tsize", "1000"),
                ("windowsize", "64"),
                ("timeout", "3")
            ])
        );
        let n = negotiate(
            &opts(&[("blksize", "4"), ("timeout", "0"), ("windowsize", "x")]),
            5,
            &limits,
        );
        assert_eq!((n.blksize, n.windowsize), (512, 1));
        assert!(n.oack.is_empty(), "invalid values are ignored, no OACK");
        assert!(
            negotiate(&opts(&[("tsize", "0")]), 0, &limits)
                .oack
                .is_empty()
        );
    }

    #[test]
    fn lockstep_transfer_with_oack() {
        let limits = Limits::default();
        let n = negotiate(&[("tsize".into(), "0".into())], 1024, &limits);
        let mut s = Sender::new(1024, &n, &limits);
        assert_eq!(
            s.total_blocks(),
            3,
            "1024 = 512 + 512 + an empty last block"
        );
        assert_eq!(s.start(), Action::SendOack);
        assert_eq!(s.on_ack(5), Action::Wait);
        assert_eq!(s.on_ack(0), Action::Send(Window { first: 1, count: 1 }));
        assert_eq!(s.on_ack(1), Action::Send(Window { first: 2, count: 1 }));
        assert_eq!(s.on_ack(1), Action::Wait, "a duplicate ACK sends nothing");
        assert_eq!(s.on_ack(2), Action::Send(Window { first: 3, count: 1 }));
        assert_eq!(s.range(3, 1024), (1024, 1024));
        assert_eq!(s.on_ack(3), Action::Done);
    }

    #[test]
    fn windows_resend_from_a_partial_ack_and_timeouts_back_off() {
        let limits = Limits::default();
        let n = negotiate(&[("windowsize".into(), "4".into())], 10 * 512, &limits);
        let mut s = Sender::new(10 * 512, &n, &limits);
        assert_eq!(s.start(), Action::SendOack);
        assert_eq!(s.on_ack(0), Action::Send(Window { first: 1, count: 4 }));
        assert_eq!(
            s.on_ack(2),
            Action::Send(Window { first: 3, count: 4 }),
            "3 and 4 were lost"
        );
        assert_eq!(s.wait(), Duration::from_secs(1));
        assert_eq!(s.on_timeout(), Action::Send(Window { first: 3, count: 4 }));
        assert_eq!(s.wait(), Duration::from_secs(2));
        assert_eq!(s.on_ack(6), Action::Send(Window { first: 7, count: 4 }));
        assert_eq!(
            s.wait(),
            Duration::from_secs(1),
            "progress resets the backoff"
        );
        assert_eq!(
            s.on_ack(10),
            Action::Send(Window {
                first: 11,
                count: 1
            })
        );
        assert_eq!(s.on_ack(11), Action::Done);
        let mut stuck = Sender::new(10, &negotiate(&[], 10, &limits), &limits);
        for _ in 0..limits.max_retries {
            assert_eq!(
                stuck.on_timeout(),
                Action::Send(Window { first: 1, count: 1 })
            );
        }
        assert_eq!(stuck.on_timeout(), Action::GiveUp);
    }

    #[test]
    fn block_numbers_roll_over_to_zero() {
        let limits = Limits::default();
        let size = 70_000 * 8;
        let n = negotiate(
            &[
                ("blksize".into(), "8".into()),
                ("windowsize".into(), "16".into()),
            ],
            size,
            &limits,
        );
        let mut s = Sender::new(size, &n, &limits);
        s.on_ack(0);
        let mut acked = 0u64;
        loop {
            let next = (acked + 16).min(s.total_blocks());
            match s.on_ack((next % 65536) as u16) {
                Action::Done => break,
                Action::Send(w) => {
                    assert_eq!(w.first, next + 1);
                    acked = next;
                }
                other => panic!("{other:?} after {acked}"),
            }
        }
        assert_eq!(s.total_blocks(), 70_001);
    }

    #[test]
    fn netascii_and_packets() {
        assert_eq!(to_netascii(b"a\nb\rc"), b"a\r\nb\r\0c");
        assert_eq!(
            error_packet(ErrorCode::FileNotFound, "no"),
            vec![0, 5, 0, 1, b'n', b'o', 0]
        );
        assert_eq!(data_header(65535), [0, 3, 255, 255]);
        assert_eq!(
            oack_packet(&[("tsize".into(), "7".into())]),
            b"\0\x06tsize\x007\0"
        );
    }
}
