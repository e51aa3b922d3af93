//! Talking HTTP to one BMC: where it is (the endpoint's address read into an origin and an
//! optional system path), how it is logged into (a Redfish session when the service offers one,
//! else HTTP Basic, as sushy's `SessionOrBasicAuth`), and what an answer means.
//!
//! [`Client`] sends a request to a path of the BMC's origin only (links are `@odata.id` paths;
//! an absolute link to another host is refused, so a hostile BMC cannot send our credentials
//! elsewhere), re-logs in once when a session expires (401), follows same-origin redirects of
//! GETs, and reads at most [`MAX_BODY`] bytes of any answer. It turns failures into
//! [`BmcError`]s naming the BMC: no connection or no answer in time → `Unreachable`, 401/403 →
//! `Credentials`, a 4xx/5xx → `Refused` with the BMC's Redfish message, an answer that is not
//! JSON → `Protocol` naming its content type and path. The password never goes into an error:
//! it is sent only in the session's POST or the Basic header, and scrubbed from any message the
//! BMC sends back. Dropping a client deletes its session (best effort).

use std::time::Duration;

use serde_json::{Value, json};

use super::super::{BmcError, Endpoint};

/// The most of one answer's body read: a hostile BMC must not balloon the daemon.
pub(super) const MAX_BODY: u64 = 4 << 20;

/// How many same-origin redirects one GET follows.
const MAX_REDIRECTS: usize = 3;

/// How long dropping a client waits for the session's DELETE.
const LOGOUT_TIMEOUT: Duration = Duration::from_secs(5);

/// The endpoint's address read: `https://host[:port]` or `http://host:port`, and the path of
/// the system when the address names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Base {
    pub origin: String,
    pub system: Option<String>,
}

/// Read an endpoint's address: `https://host[:port]`, `http://host:port` (emulators), a bare
/// `host[:port]` (HTTPS), each optionally followed by `/redfish/v1/Systems/ID`.
pub(super) fn parse_address(address: &str) -> Result<Base, String> {
    let a = address.trim();
    if a.is_empty() {
        return Err("a BMC address is needed".into());
    }
    if a.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{a:?} has spaces or control characters"));
    }
    let lower = a.to_ascii_lowercase();
    let (scheme, rest) = if lower.starts_with("https://") {
        ("https", &a[8..])
    } else if lower.starts_with("http://") {
        ("http", &a[7..])
    } else if a.contains("://") {
        return Err(format!("{a:?}: a Redfish address is https:// or http://"));
    } else {
        ("https", a)
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if authority.is_empty() {
        return Err(format!("{a:?} has no host"));
    }
    if authority.contains('@') {
        return Err(format!(
            "{a:?}: put the BMC's credentials in its username and password, not in the address"
        ));
    }
    if path.contains('?') || path.contains('#') {
        return Err(format!("{a:?}: a BMC address has no query or fragment"));
    }
    let path = path.trim_end_matches('/');
    let system = match path {
        "" | "/redfish/v1" => None,
        p => match p.strip_prefix("/redfish/v1/Systems/") {
            Some(id) if !id.is_empty() && !id.contains('/') => Some(p.to_string()),
            _ => {
                return Err(format!(
                    "{a:?}: the path, when there is one, is a system's: /redfish/v1/Systems/ID"
                ));
            }
        },
    };
    Ok(Base {
        origin: format!("{scheme}://{authority}"),
        system,
    })
}

/// A link the BMC gave (`@odata.id`, `Location`, a task monitor) as a path of `origin`; `None`
/// when it points elsewhere or is not a path. The fragment (`#/StorageControllers/0`) is dropped.
pub(super) fn link_path(origin: &str, link: &str) -> Option<String> {
    let link = link.split('#').next().unwrap_or_default();
    let path = if link.starts_with('/') {
        link
    } else {
        let head = link.get(..origin.len())?;
        if !head.eq_ignore_ascii_case(origin) {
            return None;
        }
        link.get(origin.len()..)?
    };
    let ok = path.starts_with('/')
        && !path.starts_with("//")
        && path.len() <= 2048
        && !path.chars().any(|c| c.is_whitespace() || c.is_control());
    ok.then(|| path.to_string())
}

/// The Redfish error message of an answer: `error.message` and each
/// `error.@Message.ExtendedInfo[].Message` (or a top-level `@Message.ExtendedInfo`), without
/// repeats, each cut to 300 characters, at most 8.
pub(super) fn redfish_message(body: &Value) -> Option<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |m: Option<&str>| {
        if let Some(m) = m.map(clean).filter(|m| !m.is_empty())
            && !out.contains(&m)
            && out.len() < 8
        {
            out.push(m);
        }
    };
    let error = &body["error"];
    push(error["message"].as_str());
    for info in [
        &error["@Message.ExtendedInfo"],
        &body["@Message.ExtendedInfo"],
    ] {
        for m in info.as_array().into_iter().flatten().take(64) {
            push(m["Message"].as_str());
        }
    }
    (!out.is_empty()).then(|| out.join("; "))
}

/// A BMC's text made fit for a message: one line, no control characters, at most 300 chars.
pub(super) fn clean(text: &str) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let t = one_line.split_whitespace().collect::<Vec<_>>().join(" ");
    match t.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t,
    }
}

/// Standard base64 (RFC 4648, padded), for the Basic header.
pub(super) fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// One answer of the BMC, its body read (bounded) and, when JSON, parsed.
#[derive(Debug)]
pub(super) struct Answer {
    pub status: u16,
    pub location: Option<String>,
    pub etag: Option<String>,
    /// The `Allow` header: which methods the resource takes.
    pub allow: Option<String>,
    /// The `X-Auth-Token` header (a new session's).
    token: Option<String>,
    content_type: String,
    /// The parsed body; `Null` when empty or not JSON.
    pub body: Value,
    /// The body as text when it is not JSON (for messages).
    text: Option<String>,
}

impl Answer {
    pub fn success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The answer's ETag, else the document's `@odata.etag`, for `If-Match`.
    pub fn etag(&self) -> Option<String> {
        self.etag
            .clone()
            .or_else(|| self.body["@odata.etag"].as_str().map(str::to_string))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Auth {
    /// Nothing sent (the service root, logging in).
    Anonymous,
    Basic,
    /// A Redfish session: its token and where to DELETE it.
    Session {
        token: String,
        location: Option<String>,
    },
}

/// HTTP to one BMC, logged in.
pub(super) struct Client {
    /// The endpoint's address as the operator wrote it, for errors.
    address: String,
    origin: String,
    username: String,
    password: String,
    timeout: Duration,
    verify_tls: bool,
    agent: ureq::Agent,
    auth: Auth,
    /// The Sessions collection, when the service has one.
    sessions: Option<String>,
}

impl Drop for Client {
    fn drop(&mut self) {
        self.logout();
    }
}

impl Client {
    /// Connect to the BMC at `base`, read its service root and log in (a session when it
    /// offers one, else Basic). Returns the client and the service root.
    pub fn connect(endpoint: &Endpoint, base: &Base) -> Result<(Client, Value), BmcError> {
        let agent = super::tls::agent(endpoint.verify_tls, endpoint.timeout).map_err(|e| {
            BmcError::Unreachable {
                address: endpoint.address.clone(),
                reason: e,
            }
        })?;
        let mut client = Client {
            address: endpoint.address.clone(),
            origin: base.origin.clone(),
            username: endpoint.username.clone(),
            password: endpoint.password.clone(),
            timeout: endpoint.timeout,
            verify_tls: endpoint.verify_tls,
            agent,
            auth: Auth::Anonymous,
            sessions: None,
        };
        // The service root needs no credentials (Redfish spec); some BMCs ask anyway.
        let mut answer = client.send("GET", "/redfish/v1/", None, None)?;
        if answer.status == 401 {
            client.auth = Auth::Basic;
            answer = client.send("GET", "/redfish/v1/", None, None)?;
        }
        if matches!(answer.status, 401 | 403) {
            return Err(client.credentials());
        }
        let root = client.document(answer, "/redfish/v1/")?;
        client.sessions = client.sessions_path(&root)?;
        client.login()?;
        Ok((client, root))
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    /// Forget the session without deleting it: dropping the client then sends nothing.
    pub fn abandon(&mut self) {
        self.auth = Auth::Anonymous;
    }

    /// Close the kept-alive connections (the agent's pool goes with it), keeping the session:
    /// the next request connects again and sends the same token.
    pub fn close_connections(&mut self) {
        // The TLS configuration is built once per process, so a new agent costs no parsing.
        if let Ok(agent) = super::tls::agent(self.verify_tls, self.timeout) {
            self.agent = agent;
        }
    }

    /// The link `link` of the BMC as a path of its origin, or a `Protocol` error naming it.
    pub fn path(&self, link: &str) -> Result<String, BmcError> {
        link_path(&self.origin, link).ok_or_else(|| {
            self.protocol(format!(
                "the link {:?} is not a path of {}",
                clean(link),
                self.origin
            ))
        })
    }

    pub fn protocol(&self, what: impl Into<String>) -> BmcError {
        BmcError::Protocol {
            address: self.address.clone(),
            what: what.into(),
        }
    }

    pub fn unsupported(&self, what: impl Into<String>) -> BmcError {
        BmcError::Unsupported {
            address: self.address.clone(),
            what: what.into(),
        }
    }

    /// A failed answer as `Refused`, with the BMC's message.
    pub fn refused(&self, method: &str, path: &str, answer: &Answer) -> BmcError {
        let detail = redfish_message(&answer.body)
            .or_else(|| {
                if answer.content_type.contains("html") {
                    Some(format!("an HTML page ({})", answer.content_type))
                } else {
                    answer.text.as_deref().map(clean).filter(|t| !t.is_empty())
                }
            })
            .unwrap_or_else(|| "no message".to_string());
        BmcError::Refused {
            address: self.address.clone(),
            request: format!("{method} {path}"),
            message: self.scrub(&format!("HTTP {}: {detail}", answer.status)),
        }
    }

    /// GET a JSON document; anything but a 2xx JSON object is an error.
    pub fn get(&mut self, path: &str) -> Result<Value, BmcError> {
        let answer = self.request("GET", path, None, None)?;
        if !answer.success() {
            return Err(self.refused("GET", path, &answer));
        }
        self.document(answer, path)
    }

    /// GET a JSON document with its answer (for the ETag and `Allow`).
    pub fn get_answer(&mut self, path: &str) -> Result<Answer, BmcError> {
        let answer = self.request("GET", path, None, None)?;
        if !answer.success() {
            return Err(self.refused("GET", path, &answer));
        }
        if !answer.body.is_object() {
            return Err(self.not_json(&answer, path));
        }
        Ok(answer)
    }

    /// Send a request, logged in; any status but 401/403 is returned.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<Answer, BmcError> {
        let mut path = path.to_string();
        let mut relogged = false;
        let mut redirects = 0;
        loop {
            let answer = self.send(method, &path, body, if_match)?;
            match answer.status {
                401 if !relogged && matches!(self.auth, Auth::Session { .. }) => {
                    // The session expired or the BMC dropped it: log in again, once.
                    relogged = true;
                    self.login()?;
                }
                401 | 403 => return Err(self.credentials()),
                301 | 302 | 303 | 307 | 308 if method == "GET" && redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    path = answer
                        .location
                        .as_deref()
                        .and_then(|l| link_path(&self.origin, l))
                        .ok_or_else(|| {
                            self.protocol(format!(
                                "GET {path} was redirected to {:?}, not a path of {}",
                                answer.location.as_deref().map(clean).unwrap_or_default(),
                                self.origin
                            ))
                        })?;
                }
                300..=399 => {
                    return Err(self.protocol(format!(
                        "{method} {path} was redirected (HTTP {})",
                        answer.status
                    )));
                }
                _ => return Ok(answer),
            }
        }
    }

    fn credentials(&self) -> BmcError {
        BmcError::Credentials {
            address: self.address.clone(),
            username: self.username.clone(),
        }
    }

    fn scrub(&self, text: &str) -> String {
        if self.password.len() >= 3 {
            text.replace(&self.password, "***")
        } else {
            text.to_string()
        }
    }

    fn not_json(&self, answer: &Answer, path: &str) -> BmcError {
        let ct = if answer.content_type.is_empty() {
            "no content type".to_string()
        } else {
            clean(&answer.content_type)
        };
        self.protocol(format!(
            "{path} answered HTTP {} with {ct}, not a JSON object",
            answer.status
        ))
    }

    /// The body of a successful answer as a JSON object.
    fn document(&self, answer: Answer, path: &str) -> Result<Value, BmcError> {
        if !answer.success() {
            return Err(self.refused("GET", path, &answer));
        }
        if answer.body.is_object() {
            Ok(answer.body)
        } else {
            Err(self.not_json(&answer, path))
        }
    }

    /// Where sessions are made: the root's `Links.Sessions`, else the `SessionService`'s
    /// `Sessions` (read with Basic), else the standard `<SessionService>/Sessions`.
    fn sessions_path(&mut self, root: &Value) -> Result<Option<String>, BmcError> {
        if let Some(l) = root["Links"]["Sessions"]["@odata.id"].as_str() {
            return self.path(l).map(Some);
        }
        let Some(service) = root["SessionService"]["@odata.id"].as_str() else {
            return Ok(None);
        };
        let service = self.path(service)?;
        self.auth = Auth::Basic;
        let answer = self.send("GET", &service, None, None)?;
        if let Some(l) = answer.body["Sessions"]["@odata.id"].as_str() {
            return self.path(l).map(Some);
        }
        Ok(Some(format!("{}/Sessions", service.trim_end_matches('/'))))
    }

    /// Log in: create a session when the service has a Sessions collection (401/403 there are
    /// wrong credentials; any other refusal falls back to Basic, as sushy does), else Basic.
    fn login(&mut self) -> Result<(), BmcError> {
        let Some(sessions) = self.sessions.clone() else {
            self.auth = Auth::Basic;
            return Ok(());
        };
        self.logout();
        self.auth = Auth::Anonymous;
        let body = json!({"UserName": self.username, "Password": self.password});
        let answer = self.send("POST", &sessions, Some(&body), None)?;
        match answer.status {
            401 | 403 => return Err(self.credentials()),
            200..=299 => {}
            _ => {
                tracing::debug!(
                    bmc = %self.address,
                    status = answer.status,
                    "the BMC refused a session; using HTTP Basic"
                );
                self.auth = Auth::Basic;
                return Ok(());
            }
        }
        let Some(token) = answer.token.clone().filter(|t| !t.is_empty()) else {
            self.auth = Auth::Basic;
            return Ok(());
        };
        let location = answer
            .location
            .as_deref()
            .or_else(|| answer.body["@odata.id"].as_str())
            .and_then(|l| link_path(&self.origin, l));
        self.auth = Auth::Session { token, location };
        Ok(())
    }

    /// Delete the session, if any (best effort, bounded by [`LOGOUT_TIMEOUT`]).
    fn logout(&mut self) {
        let Auth::Session {
            token,
            location: Some(location),
        } = std::mem::replace(&mut self.auth, Auth::Anonymous)
        else {
            return;
        };
        let url = format!("{}{location}", self.origin);
        let result = self
            .agent
            .delete(&url)
            .header("X-Auth-Token", &token)
            .config()
            .timeout_global(Some(self.timeout.min(LOGOUT_TIMEOUT)))
            .build()
            .call();
        if let Err(e) = result {
            tracing::debug!(bmc = %self.address, error = %e, "cannot delete the Redfish session");
        }
    }

    /// One HTTP exchange with the current credentials; the body read and parsed.
    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<Answer, BmcError> {
        let url = format!("{}{path}", self.origin);
        let mut req = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("Accept", "application/json")
            .header("OData-Version", "4.0");
        req = match &self.auth {
            Auth::Anonymous => req,
            Auth::Basic => {
                let pair = format!("{}:{}", self.username, self.password);
                req.header(
                    "Authorization",
                    format!("Basic {}", base64(pair.as_bytes())),
                )
            }
            Auth::Session { token, .. } => req.header("X-Auth-Token", token),
        };
        if let Some(tag) = if_match {
            req = req.header("If-Match", tag);
        }
        let result = match body {
            Some(b) => {
                let text = serde_json::to_vec(b).map_err(|e| self.protocol(e.to_string()))?;
                let req = req
                    .header("Content-Type", "application/json")
                    .body(text)
                    .map_err(|e| self.protocol(format!("{method} {path}: {e}")))?;
                self.agent.run(req)
            }
            None => {
                let req = req
                    .body(())
                    .map_err(|e| self.protocol(format!("{method} {path}: {e}")))?;
                self.agent.run(req)
            }
        };
        let mut resp = result.map_err(|e| self.transport_error(method, path, e))?;
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let headers = Headers {
            location: header("location"),
            etag: header("etag"),
            allow: header("allow"),
            token: header("x-auth-token"),
            content_type: header("content-type").unwrap_or_default(),
        };
        let status = resp.status().as_u16();
        let bytes = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_vec()
            .map_err(|e| self.transport_error(method, path, e))?;
        Ok(read_body(status, headers, &bytes))
    }

    fn transport_error(&self, method: &str, path: &str, e: ureq::Error) -> BmcError {
        match e {
            ureq::Error::BodyExceedsLimit(_) => self.protocol(format!(
                "the answer to {method} {path} is larger than {} MiB",
                MAX_BODY >> 20
            )),
            ureq::Error::Protocol(p) => {
                self.protocol(format!("{method} {path}: not an HTTP answer ({p})"))
            }
            ureq::Error::Timeout(_) => BmcError::Unreachable {
                address: self.address.clone(),
                reason: format!(
                    "no answer to {method} {path} within {} s",
                    self.timeout.as_secs_f32()
                ),
            },
            e => BmcError::Unreachable {
                address: self.address.clone(),
                reason: format!("{method} {path}: {e}"),
            },
        }
    }
}

/// The headers of an answer the driver reads.
struct Headers {
    location: Option<String>,
    etag: Option<String>,
    allow: Option<String>,
    token: Option<String>,
    content_type: String,
}

fn read_body(status: u16, h: Headers, bytes: &[u8]) -> Answer {
    let html = h.content_type.to_ascii_lowercase().contains("html");
    let (body, text) = if bytes.iter().all(u8::is_ascii_whitespace) {
        (Value::Null, None)
    } else if html {
        (
            Value::Null,
            Some(String::from_utf8_lossy(bytes).into_owned()),
        )
    } else {
        match serde_json::from_slice::<Value>(bytes) {
            Ok(v) => (v, None),
            Err(_) => (
                Value::Null,
                Some(String::from_utf8_lossy(bytes).into_owned()),
            ),
        }
    };
    Answer {
        status,
        location: h.location,
        etag: h.etag,
        allow: h.allow,
        token: h.token,
        content_type: h.content_type,
        body,
        text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(origin: &str, system: Option<&str>) -> Base {
        Base {
            origin: origin.into(),
            system: system.map(str::to_string),
        }
    }

    #[test]
    fn addresses_are_normalised() {
        assert_eq!(
            parse_address("10.0.0.5"),
            Ok(base("https://10.0.0.5", None))
        );
        assert_eq!(
            parse_address(" bmc.example:8443/ "),
            Ok(base("https://bmc.example:8443", None))
        );
        assert_eq!(
            parse_address("http://127.0.0.1:8000/redfish/v1/"),
            Ok(base("http://127.0.0.1:8000", None))
        );
        assert_eq!(
            parse_address("HTTPS://[fd00::5]/redfish/v1/Systems/System.Embedded.1/"),
            Ok(base(
                "https://[fd00::5]",
                Some("/redfish/v1/Systems/System.Embedded.1")
            ))
        );
    }

    #[test]
    fn addresses_stoker_cannot_use_are_refused_saying_why() {
        for (bad, why) in [
            ("", "needed"),
            ("ftp://bmc", "https:// or http://"),
            ("https://", "no host"),
            ("https://root:calvin@bmc", "not in the address"),
            ("https://bmc/redfish/v1/Chassis/1", "/redfish/v1/Systems/ID"),
            ("https://bmc/redfish/v1/Systems/", "/redfish/v1/Systems/ID"),
            (
                "https://bmc/redfish/v1/Systems/1/Bios",
                "/redfish/v1/Systems/ID",
            ),
            ("https://bmc/?x=1", "no query"),
            ("https://bm c", "spaces"),
        ] {
            let e = parse_address(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn links_must_stay_on_the_bmc() {
        let o = "https://10.0.0.5";
        assert_eq!(
            link_path(o, "/redfish/v1/Systems/1").as_deref(),
            Some("/redfish/v1/Systems/1")
        );
        assert_eq!(
            link_path(o, "https://10.0.0.5/redfish/v1/Systems/1").as_deref(),
            Some("/redfish/v1/Systems/1")
        );
        assert_eq!(
            link_path(o, "/redfish/v1/Systems/1/Storage/1#/StorageControllers/0").as_deref(),
            Some("/redfish/v1/Systems/1/Storage/1")
        );
        for bad in [
            "https://evil.example/redfish/v1/Systems/1",
            "https://10.0.0.5.evil.example/x",
            "//evil.example/x",
            "Systems/1",
            "/a b",
            "",
        ] {
            assert_eq!(link_path(o, bad), None, "{bad}");
        }
    }

    #[test]
    fn redfish_messages_are_extracted_without_repeats() {
        let body = serde_json::json!({"error": {
            "code": "Base.1.8.GeneralError",
            "message": "A general error has occurred. See ExtendedInfo for more information.",
            "@Message.ExtendedInfo": [
                {"MessageId": "Base.1.8.PropertyValueNotInList",
                 "Message": "The value Floppy for the property BootSourceOverrideTarget is not in the list of acceptable values."},
                {"Message": "A general error has occurred. See ExtendedInfo for more information."},
                {"MessageId": "no message here"}
            ]
        }});
        assert_eq!(
            redfish_message(&body).as_deref(),
            Some(
                "A general error has occurred. See ExtendedInfo for more information.; The \
                 value Floppy for the property BootSourceOverrideTarget is not in the list of \
                 acceptable values."
            )
        );
        let top = serde_json::json!({"@Message.ExtendedInfo": [{"Message": "line\none"}]});
        assert_eq!(redfish_message(&top).as_deref(), Some("line one"));
        assert_eq!(redfish_message(&serde_json::json!({"error": 3})), None);
        assert_eq!(redfish_message(&Value::Null), None);
        let long = "x".repeat(1000);
        let capped = redfish_message(&serde_json::json!({"error": {"message": long}})).unwrap();
        assert_eq!(capped.chars().count(), 301);
    }

    #[test]
    fn base64_matches_rfc_4648() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
            ("root:calvin", "cm9vdDpjYWx2aW4="),
        ] {
            assert_eq!(base64(plain.as_bytes()), coded, "{plain}");
        }
        assert_eq!(base64(&[0xff, 0xfe]), "//4=");
    }

    #[test]
    fn bodies_are_json_or_kept_as_text() {
        let h = |ct: &str| Headers {
            location: None,
            etag: None,
            allow: None,
            token: None,
            content_type: ct.into(),
        };
        let a = read_body(200, h("application/json"), br#"{"a": 1}"#);
        assert_eq!(a.body["a"], 1);
        let a = read_body(200, h("text/html"), b"{\"a\": 1}");
        assert!(
            a.body.is_null() && a.text.is_some(),
            "HTML is never read as JSON"
        );
        let a = read_body(204, h(""), b"  \n");
        assert!(a.body.is_null() && a.text.is_none());
        let a = read_body(400, h("application/json"), b"PATCH only works for Boot");
        assert_eq!(a.text.as_deref(), Some("PATCH only works for Boot"));
    }
}
