//! A small Redfish BMC on loopback, playing what real vendors' BMCs do and sushy-tools does
//! not: a SessionService (sessions made and deleted, `X-Auth-Token`, 401 for a wrong password,
//! no Basic auth at all), ETags checked on PATCH (412 without the current one), a reset action
//! without ForceRestart or PowerCycle whose ForceOff takes a few polls, a system document
//! without `BootSourceOverrideEnabled` that refuses the property, a BIOS Settings object that
//! answers 400 with `@Message.ExtendedInfo`, volumes made through a task monitor and deleted,
//! and firmware tasks going Running 30% → Completed or to Exception. A few paths misbehave on
//! purpose: an HTML page, an answer that never comes, a body larger than the driver reads.
//!
//! Resources sit at vendor-like paths (drives under a Chassis, a Dell-like system id) so the
//! driver can only find them through the links. Plain HTTP, or HTTPS with a self-signed
//! certificate. One thread per connection; state behind a mutex the tests read.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use stoker::bmc::{Driver, Endpoint};

pub const USER: &str = "root";
pub const PASSWORD: &str = "calvin-s3cret";
pub const SYSTEM: &str = "/redfish/v1/Systems/System.Embedded.1";
pub const STORAGE: &str = "/redfish/v1/Systems/System.Embedded.1/Storage/RAID.Integrated.1-1";
const SESSIONS: &str = "/redfish/v1/SessionService/Sessions";
const RESET: &str = "/redfish/v1/Systems/System.Embedded.1/Actions/ComputerSystem.Reset";
const RESET_INFO: &str = "/redfish/v1/Systems/System.Embedded.1/ResetActionInfo";
const RESET_TYPES: [&str; 5] = [
    "On",
    "ForceOff",
    "GracefulShutdown",
    "PushPowerButton",
    "Nmi",
];
const RESET_INFO_TYPES: [&str; 3] = ["On", "ForceOff", "PowerCycle"];
const BIOS: &str = "/redfish/v1/Systems/System.Embedded.1/Bios";
const BIOS_SETTINGS: &str = "/redfish/v1/Systems/System.Embedded.1/Bios/Settings";
const VOLUMES: &str = "/redfish/v1/Systems/System.Embedded.1/Storage/RAID.Integrated.1-1/Volumes";
const SIMPLE_UPDATE: &str = "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate";
/// Paths that misbehave, used as the system path of an endpoint's address.
pub const HTML: &str = "/redfish/v1/Systems/Login";
pub const SILENT: &str = "/redfish/v1/Systems/Silent";
pub const HUGE: &str = "/redfish/v1/Systems/Huge";

/// What the fake BMC has seen and holds; tests read and change it.
#[derive(Debug, Default)]
pub struct State {
    /// Every request, `METHOD path`.
    pub requests: Vec<String>,
    /// Token → session path.
    pub sessions: BTreeMap<String, String>,
    pub sessions_made: usize,
    pub sessions_deleted: Vec<String>,
    /// Whether any request came with an `Authorization` header (this BMC takes sessions only).
    pub basic_seen: bool,
    pub power: String,
    /// Polls left before a PoweringOff system is Off.
    pub powering_off: u32,
    pub resets: Vec<String>,
    pub system_etag: u32,
    pub boot_target: String,
    pub bios: serde_json::Map<String, Value>,
    pub bios_pending: serde_json::Map<String, Value>,
    pub settings_etag: u32,
    /// Volume path → document.
    pub volumes: BTreeMap<String, Value>,
    /// Monitor path → (polls left while running, the volume it makes).
    pub volume_tasks: BTreeMap<String, (u32, Value)>,
    pub updates: Vec<Value>,
    /// Task path → the documents it answers, one per poll (the last repeats).
    pub tasks: BTreeMap<String, Vec<Value>>,
    /// Several systems in the collection.
    pub several_systems: bool,
    /// The reset action's allowed types in an ActionInfo resource (On, ForceOff, PowerCycle)
    /// instead of the action itself.
    pub action_info: bool,
    next_id: u32,
}

pub struct FakeBmc {
    pub addr: SocketAddr,
    scheme: &'static str,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

impl Drop for FakeBmc {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

const DRIVES: [&str; 4] = [
    "/redfish/v1/Chassis/System.Embedded.1/Drives/Disk.Bay.0",
    "/redfish/v1/Chassis/System.Embedded.1/Drives/Disk.Bay.1",
    "/redfish/v1/Chassis/System.Embedded.1/Drives/Disk.Bay.2",
    "/redfish/v1/Chassis/System.Embedded.1/Drives/Disk.Bay.3",
];
pub const DRIVE_BYTES: u64 = 479_559_942_144;

impl FakeBmc {
    pub fn start() -> FakeBmc {
        Self::start_with(None)
    }

    /// Serve HTTPS with a self-signed certificate made in `dir`.
    pub fn start_tls(dir: &std::path::Path) -> FakeBmc {
        let id = stoker::tls::Identity::self_signed(dir, &["bmc.invalid".to_string()]).unwrap();
        Self::start_with(Some(id.shared_config().unwrap()))
    }

    fn start_with(tls: Option<Arc<rustls::ServerConfig>>) -> FakeBmc {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut bios = serde_json::Map::new();
        bios.insert("BootMode".into(), json!("Uefi"));
        bios.insert("ProcVirtualization".into(), json!("Enabled"));
        bios.insert("SysProfile".into(), json!("PerfOptimized"));
        let mut volumes = BTreeMap::new();
        for (i, name) in ["os", "data"].into_iter().enumerate() {
            let path = format!("{VOLUMES}/Disk.Virtual.{i}");
            volumes.insert(
                path.clone(),
                json!({"@odata.id": path, "Id": format!("Disk.Virtual.{i}"), "Name": name,
                       "RAIDType": "RAID1", "CapacityBytes": DRIVE_BYTES}),
            );
        }
        let state = Arc::new(Mutex::new(State {
            power: "On".into(),
            boot_target: "None".into(),
            bios_pending: bios.clone(),
            bios,
            volumes,
            next_id: 1,
            ..State::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let scheme = if tls.is_some() { "https" } else { "http" };
        let (st, sp) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (st, sp, tls) = (st.clone(), sp.clone(), tls.clone());
                std::thread::spawn(move || match tls {
                    None => serve(conn, &st, &sp),
                    Some(cfg) => {
                        let Ok(server) = rustls::ServerConnection::new(cfg) else {
                            return;
                        };
                        serve(rustls::StreamOwned::new(server, conn), &st, &sp)
                    }
                });
            }
        });
        FakeBmc {
            addr,
            scheme,
            state,
            stop,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme, self.addr)
    }

    /// An endpoint for this BMC: `path` after the origin (a system's, or empty).
    pub fn endpoint(&self, path: &str, password: &str) -> Endpoint {
        Endpoint {
            driver: Driver::Redfish,
            address: self.url(path),
            username: USER.into(),
            password: password.into(),
            verify_tls: false,
            timeout: Duration::from_secs(5),
        }
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct Request {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body: Value,
}

struct Response {
    status: u16,
    headers: Vec<(&'static str, String)>,
    content_type: &'static str,
    body: Vec<u8>,
}

fn json_answer(status: u16, body: Value) -> Response {
    Response {
        status,
        headers: Vec::new(),
        content_type: "application/json",
        body: if body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(&body).unwrap()
        },
    }
}

fn empty(status: u16) -> Response {
    json_answer(status, Value::Null)
}

fn with(mut r: Response, name: &'static str, value: impl Into<String>) -> Response {
    r.headers.push((name, value.into()));
    r
}

/// A Redfish error as vendors send it: a general message and the specific ones.
fn error(status: u16, extended: &[&str]) -> Response {
    let info: Vec<Value> = extended
        .iter()
        .map(|m| json!({"MessageId": "Base.1.8.PropertyValueNotInList", "Message": m}))
        .collect();
    json_answer(
        status,
        json!({"error": {
            "code": "Base.1.8.GeneralError",
            "message": "A general error has occurred. See ExtendedInfo for more information.",
            "@Message.ExtendedInfo": info,
        }}),
    )
}

fn collection(path: &str, members: &[String]) -> Response {
    let m: Vec<Value> = members.iter().map(|p| json!({"@odata.id": p})).collect();
    json_answer(
        200,
        json!({"@odata.id": path, "Members@odata.count": m.len(), "Members": m}),
    )
}

fn read_request<R: BufRead>(r: &mut R) -> Option<Request> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut raw = vec![0; len];
    r.read_exact(&mut raw).ok()?;
    let body = if raw.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&raw)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&raw).into()))
    };
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}

fn serve<S: Read + Write>(stream: S, state: &Mutex<State>, stop: &AtomicBool) {
    let mut reader = BufReader::new(stream);
    while let Some(req) = read_request(&mut reader) {
        if req.path == SILENT {
            // Never answer (until the test is over).
            for _ in 0..300 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            return;
        }
        let resp = {
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            st.requests.push(format!("{} {}", req.method, req.path));
            route(&mut st, &req)
        };
        let mut head = format!(
            "HTTP/1.1 {} X\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
            resp.status,
            resp.content_type,
            resp.body.len()
        );
        for (k, v) in &resp.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let out = reader.get_mut();
        if out.write_all(head.as_bytes()).is_err()
            || out.write_all(&resp.body).is_err()
            || out.flush().is_err()
        {
            return;
        }
    }
}

fn route(st: &mut State, req: &Request) -> Response {
    if req.headers.contains_key("authorization") {
        st.basic_seen = true;
    }
    let (m, p) = (req.method.as_str(), req.path.as_str());
    match (m, p) {
        ("GET", "/redfish/v1/" | "/redfish/v1") => return root(),
        ("POST", SESSIONS) => return login(st, &req.body),
        _ => {}
    }
    let known = req
        .headers
        .get("x-auth-token")
        .is_some_and(|t| st.sessions.contains_key(t));
    if !known {
        return error(
            401,
            &["The authentication credentials included with this request are missing or invalid."],
        );
    }
    if let Some(r) = misbehaving(p) {
        return r;
    }
    match m {
        "GET" => get(st, p),
        "POST" => post(st, p, &req.body),
        "PATCH" => patch(st, p, req),
        "DELETE" => delete(st, p),
        _ => error(405, &["Method not allowed."]),
    }
}

fn root() -> Response {
    json_answer(
        200,
        json!({
            "@odata.id": "/redfish/v1/",
            "RedfishVersion": "1.11.0",
            "Systems": {"@odata.id": "/redfish/v1/Systems"},
            "SessionService": {"@odata.id": "/redfish/v1/SessionService"},
            "UpdateService": {"@odata.id": "/redfish/v1/UpdateService"},
            "Links": {"Sessions": {"@odata.id": SESSIONS}},
        }),
    )
}

fn login(st: &mut State, body: &Value) -> Response {
    if body["UserName"] != USER || body["Password"] != PASSWORD {
        return error(401, &["Invalid username or password."]);
    }
    let id = st.next_id;
    st.next_id += 1;
    st.sessions_made += 1;
    let token = format!("token-{id}-{}", std::process::id());
    let path = format!("{SESSIONS}/{id}");
    st.sessions.insert(token.clone(), path.clone());
    let r = json_answer(201, json!({"@odata.id": path, "UserName": USER}));
    with(with(r, "X-Auth-Token", token), "Location", path)
}

fn misbehaving(p: &str) -> Option<Response> {
    match p {
        HTML => Some(Response {
            status: 200,
            headers: Vec::new(),
            content_type: "text/html; charset=utf-8",
            body: b"<html><body><form>Please log in</form></body></html>".to_vec(),
        }),
        HUGE => {
            let pad = "x".repeat(5 << 20);
            Some(json_answer(200, json!({ "pad": pad })))
        }
        _ => None,
    }
}

fn system(st: &mut State) -> Response {
    let power = st.power.clone();
    if st.power == "PoweringOff" {
        st.powering_off = st.powering_off.saturating_sub(1);
        if st.powering_off == 0 {
            st.power = "Off".into();
        }
    }
    let reset = if st.action_info {
        json!({"target": RESET, "@Redfish.ActionInfo": RESET_INFO})
    } else {
        json!({"target": RESET, "ResetType@Redfish.AllowableValues": RESET_TYPES})
    };
    let doc = json!({
        "@odata.id": SYSTEM,
        "Id": "System.Embedded.1",
        "PowerState": power,
        "Boot": {
            "BootSourceOverrideTarget": st.boot_target,
            "BootSourceOverrideTarget@Redfish.AllowableValues":
                ["None", "Pxe", "Hdd", "Cd", "BiosSetup"],
        },
        "Bios": {"@odata.id": BIOS},
        "Storage": {"@odata.id": format!("{SYSTEM}/Storage")},
        "Actions": {"#ComputerSystem.Reset": reset},
    });
    with(
        json_answer(200, doc),
        "ETag",
        format!("W/\"{}\"", st.system_etag),
    )
}

fn get(st: &mut State, p: &str) -> Response {
    let drive_links: Vec<Value> = DRIVES
        .iter()
        .map(|d| json!({"@odata.id": d}))
        .chain([json!({"@odata.id": "/redfish/v1/Chassis/System.Embedded.1/Drives/Disk.Bay.4"})])
        .collect();
    match p {
        "/redfish/v1/Systems" => {
            let mut members = vec![SYSTEM.to_string()];
            if st.several_systems {
                members.push("/redfish/v1/Systems/System.Embedded.2".into());
            }
            collection(p, &members)
        }
        SYSTEM => system(st),
        RESET_INFO => json_answer(
            200,
            json!({"@odata.id": p, "Parameters": [{"Name": "ResetType", "Required": true,
                   "DataType": "String", "AllowableValues": RESET_INFO_TYPES}]}),
        ),
        BIOS => json_answer(
            200,
            json!({"@odata.id": BIOS, "Attributes": st.bios,
                   "@Redfish.Settings": {"SettingsObject": {"@odata.id": BIOS_SETTINGS}}}),
        ),
        BIOS_SETTINGS => with(
            json_answer(
                200,
                json!({"@odata.id": BIOS_SETTINGS, "Attributes": st.bios_pending}),
            ),
            "ETag",
            format!("\"s{}\"", st.settings_etag),
        ),
        _ if p == format!("{SYSTEM}/Storage") => collection(p, &[STORAGE.to_string()]),
        STORAGE => json_answer(
            200,
            json!({"@odata.id": STORAGE, "Name": "PERC H740P", "Drives": drive_links,
                   "Volumes": {"@odata.id": VOLUMES}}),
        ),
        VOLUMES => collection(p, &st.volumes.keys().cloned().collect::<Vec<_>>()),
        "/redfish/v1/UpdateService" => json_answer(
            200,
            json!({"@odata.id": p, "Actions": {"#UpdateService.SimpleUpdate": {
                "target": SIMPLE_UPDATE,
                "TransferProtocol@Redfish.AllowableValues": ["HTTP", "HTTPS"]}}}),
        ),
        _ if p.ends_with("Disk.Bay.4") => json_answer(
            200,
            json!({"@odata.id": p, "Name": "Empty bay", "CapacityBytes": null}),
        ),
        _ if DRIVES.contains(&p) => json_answer(
            200,
            json!({"@odata.id": p, "Name": format!("Physical Disk 0:1:{}", &p[p.len() - 1..]),
                   "CapacityBytes": DRIVE_BYTES}),
        ),
        _ if st.volumes.contains_key(p) => with(
            json_answer(200, st.volumes[p].clone()),
            "Allow",
            "GET, PATCH, DELETE",
        ),
        _ if st.volume_tasks.contains_key(p) => volume_monitor(st, p),
        _ if st.tasks.contains_key(p) => {
            let docs = st.tasks.get_mut(p).unwrap();
            let doc = if docs.len() > 1 {
                docs.remove(0)
            } else {
                docs[0].clone()
            };
            json_answer(200, doc)
        }
        _ => error(404, &[&format!("The resource {p} was not found.")]),
    }
}

/// A task monitor: 202 while running, then the new volume (201).
fn volume_monitor(st: &mut State, p: &str) -> Response {
    let (left, doc) = st.volume_tasks.get_mut(p).unwrap();
    if *left > 0 {
        *left -= 1;
        return empty(202);
    }
    let doc = doc.clone();
    st.volume_tasks.remove(p);
    let path = doc["@odata.id"].as_str().unwrap().to_string();
    st.volumes.insert(path.clone(), doc.clone());
    with(json_answer(201, doc), "Location", path)
}

fn post(st: &mut State, p: &str, body: &Value) -> Response {
    match p {
        RESET => reset(st, body),
        VOLUMES => new_volume(st, body),
        SIMPLE_UPDATE => simple_update(st, body),
        _ => error(405, &["POST is not allowed here."]),
    }
}

fn reset(st: &mut State, body: &Value) -> Response {
    let t = body["ResetType"].as_str().unwrap_or_default().to_string();
    let allowed: &[&str] = if st.action_info {
        &RESET_INFO_TYPES
    } else {
        &RESET_TYPES
    };
    if !allowed.contains(&t.as_str()) {
        return error(
            400,
            &[&format!(
                "The value {t} for the parameter ResetType is not in the list of acceptable values."
            )],
        );
    }
    st.resets.push(t.clone());
    match t.as_str() {
        "On" if st.power != "Off" => {
            return error(
                409,
                &["The server is not powered off; it cannot be powered on."],
            );
        }
        "On" => st.power = "On".into(),
        "ForceOff" if st.power == "On" => {
            st.power = "PoweringOff".into();
            st.powering_off = 2;
        }
        "GracefulShutdown" => st.power = "Off".into(),
        _ => {}
    }
    empty(204)
}

fn new_volume(st: &mut State, body: &Value) -> Response {
    let types = [
        ("RAID0", "NonRedundant"),
        ("RAID1", "Mirrored"),
        ("RAID5", "StripedWithParity"),
        ("RAID10", "SpannedMirrors"),
    ];
    let typed = types
        .iter()
        .any(|(r, v)| body["RAIDType"] == *r && body["VolumeType"] == *v);
    let drives = body["Links"]["Drives"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let known = !drives.is_empty()
        && drives.iter().all(|d| {
            d["@odata.id"]
                .as_str()
                .is_some_and(|id| DRIVES.contains(&id))
        });
    if !typed || !known || !body["Name"].is_string() || body["CapacityBytes"].as_u64().is_none() {
        return error(400, &[&format!("The volume {body} cannot be made.")]);
    }
    let id = st.next_id;
    st.next_id += 1;
    let path = format!("{VOLUMES}/Disk.Virtual.{id}");
    let doc = json!({"@odata.id": path, "Id": format!("Disk.Virtual.{id}"),
        "Name": body["Name"], "RAIDType": body["RAIDType"], "CapacityBytes": body["CapacityBytes"],
        "Links": {"Drives": drives}});
    let monitor = format!("/redfish/v1/TaskService/TaskMonitors/{id}");
    st.volume_tasks.insert(monitor.clone(), (1, doc));
    with(empty(202), "Location", monitor)
}

fn simple_update(st: &mut State, body: &Value) -> Response {
    st.updates.push(body.clone());
    let uri = body["ImageURI"].as_str().unwrap_or_default();
    let scheme_ok = (uri.starts_with("https://") && body["TransferProtocol"] == "HTTPS")
        || (uri.starts_with("http://") && body["TransferProtocol"] == "HTTP");
    if !scheme_ok || body["Targets"] != json!([SYSTEM]) {
        return error(400, &[&format!("SimpleUpdate cannot take {body}.")]);
    }
    let id = st.next_id;
    st.next_id += 1;
    let path = format!("/redfish/v1/TaskService/Tasks/JID_{id}");
    let task = |state: &str, pct: u64, messages: &[&str]| {
        let m: Vec<Value> = messages.iter().map(|x| json!({"Message": x})).collect();
        json!({"@odata.id": path, "Id": format!("JID_{id}"), "TaskState": state,
               "PercentComplete": pct, "Messages": m})
    };
    let docs = if uri.contains("unsigned") {
        vec![
            task("Running", 10, &[]),
            task("Exception", 10, &["Image signature is invalid."]),
        ]
    } else {
        vec![
            task("New", 0, &[]),
            task("Running", 30, &[]),
            task("Running", 30, &[]),
            task(
                "Completed",
                100,
                &["Firmware package staged; it is applied at the next reboot."],
            ),
        ]
    };
    let first = docs[0].clone();
    st.tasks.insert(path.clone(), docs);
    with(json_answer(202, first), "Location", path)
}

fn patch(st: &mut State, p: &str, req: &Request) -> Response {
    let if_match = req.headers.get("if-match").cloned().unwrap_or_default();
    match p {
        SYSTEM => {
            if if_match != format!("W/\"{}\"", st.system_etag) {
                return error(412, &["The resource has changed since it was read."]);
            }
            let boot = &req.body["Boot"];
            if boot.get("BootSourceOverrideEnabled").is_some() {
                return error(
                    400,
                    &[
                        "The property BootSourceOverrideEnabled is not in the list of valid properties for the resource.",
                    ],
                );
            }
            let target = boot["BootSourceOverrideTarget"]
                .as_str()
                .unwrap_or_default();
            if !["None", "Pxe", "Hdd", "Cd", "BiosSetup"].contains(&target) {
                return error(400, &[&format!("The value {target} is not acceptable.")]);
            }
            st.boot_target = target.into();
            st.system_etag += 1;
            empty(204)
        }
        BIOS_SETTINGS => {
            if if_match != format!("\"s{}\"", st.settings_etag) {
                return error(412, &["The resource has changed since it was read."]);
            }
            let Some(attrs) = req.body["Attributes"].as_object() else {
                return error(400, &["Attributes are required."]);
            };
            for (k, v) in attrs {
                if k == "BootMode" && v != "Uefi" && v != "Bios" {
                    return error(
                        400,
                        &[&format!(
                            "The value {v} for the property BootMode is not in the list of acceptable values."
                        )],
                    );
                }
            }
            for (k, v) in attrs {
                st.bios_pending.insert(k.clone(), v.clone());
            }
            st.settings_etag += 1;
            json_answer(
                200,
                json!({"@Message.ExtendedInfo": [{"Message": "Successfully Completed Request"}]}),
            )
        }
        _ => error(405, &["PATCH is not allowed here."]),
    }
}

fn delete(st: &mut State, p: &str) -> Response {
    if st.volumes.remove(p).is_some() {
        return empty(204);
    }
    if let Some(token) = st
        .sessions
        .iter()
        .find(|(_, path)| *path == p)
        .map(|(t, _)| t.clone())
    {
        st.sessions.remove(&token);
        st.sessions_deleted.push(p.to_string());
        return empty(204);
    }
    error(404, &[&format!("The resource {p} was not found.")])
}
