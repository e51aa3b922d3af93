//! An environment's Network page: its network configuration (Nailgun's
//! `GET /clusters/{id}/network_configuration/neutron`) as a form: each network's CIDR,
//! gateway, VLAN, address ranges and their notation (the admin network is the master's PXE
//! subnet and only shown), and the Neutron parameters (floating ranges, VLAN or tunnel ID
//! range, the internal network, DNS servers, base MAC). A save sends what the form shows as
//! the API's `PUT …/network_configuration/neutron` body through the same function
//! ([`crate::networks::put_configuration`]: Nailgun's checks); a refusal shows the page again
//! with the values as sent and each refusal next to its field.

use std::collections::HashMap;

use actix_web::{HttpResponse, web};
use askama::Template;
use serde_json::{Map, Value as J, json};

use crate::http::pages::notice::{self, Notice};
use crate::http::pages::views::Me;
use crate::http::pages::{PageError, VERSION};
use crate::http::{ApiError, AppState};
use crate::model::FieldError;

/// The network the master's PXE subnet is (not edited here).
const ADMIN: &str = "fuelweb_admin";

/// One input of the form.
pub struct Input {
    pub name: String,
    pub value: String,
    pub errors: Vec<String>,
}

/// One network's row.
pub struct NetRow {
    pub id: i64,
    pub name: String,
    pub admin: bool,
    pub cidr: Input,
    pub gateway: Option<Input>,
    pub vlan: Input,
    pub ranges: Input,
    pub notation: String,
    pub errors: Vec<String>,
}

#[derive(Template)]
#[template(path = "network.html")]
pub struct NetworkPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    id: i64,
    name: String,
    status: String,
    networks: Vec<NetRow>,
    segmentation: String,
    /// Neutron parameters: (label, input, hint).
    params: Vec<(&'static str, Input, &'static str)>,
    general_errors: Vec<String>,
}

type Raw = HashMap<String, String>;

fn ranges_text(v: Option<&J>) -> String {
    v.and_then(J::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let r = r.as_array()?;
            let a = |i: usize| {
                r.get(i)
                    .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
            };
            Some(format!("{} - {}", a(0)?, a(1)?))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn list_text(v: Option<&J>) -> String {
    v.and_then(J::as_array)
        .into_iter()
        .flatten()
        .filter_map(J::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}

fn scalar(v: Option<&J>) -> String {
    match v {
        None | Some(J::Null) => String::new(),
        Some(J::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The Neutron parameters the form edits: key, label, hint, and how it is shown.
const PARAMS: [(&str, &str, &str); 9] = [
    (
        "floating_ranges",
        "Floating IP ranges",
        "first - last, one range per line",
    ),
    ("vlan_range", "Tenant VLAN range", "first - last VLAN ID"),
    ("gre_id_range", "Tunnel ID range", "first - last tunnel ID"),
    ("internal_cidr", "Internal network CIDR", ""),
    ("internal_gateway", "Internal network gateway", ""),
    ("internal_name", "Internal network name", ""),
    ("floating_name", "Floating network name", ""),
    ("dns_nameservers", "DNS servers", "one address per line"),
    ("base_mac", "Base MAC address", ""),
];

fn param_text(key: &str, v: Option<&J>) -> String {
    match key {
        "floating_ranges" => ranges_text(v),
        "vlan_range" | "gre_id_range" => v
            .and_then(J::as_array)
            .filter(|a| a.len() == 2)
            .map(|a| format!("{} - {}", a[0], a[1]))
            .unwrap_or_default(),
        "dns_nameservers" => list_text(v),
        _ => scalar(v),
    }
}

/// Where a refusal's field (`networks[id=3].cidr`, `networking_parameters.vlan_range`) is on
/// the form.
fn form_name(field: &str) -> Option<String> {
    if let Some(rest) = field.strip_prefix("networks[id=") {
        let (id, rest) = rest.split_once(']')?;
        let key = rest
            .trim_start_matches('.')
            .split(['.', '['])
            .next()
            .unwrap_or("");
        let key = match key {
            "vlan_start" => "vlan",
            "ip_ranges" | "meta" => "ranges",
            "cidr" | "gateway" => key,
            _ => "",
        };
        return Some(if key.is_empty() {
            format!("n.{id}")
        } else {
            format!("n.{id}.{key}")
        });
    }
    let rest = field.strip_prefix("networking_parameters.")?;
    Some(format!(
        "p.{}",
        rest.split(['.', '[']).next().unwrap_or(rest)
    ))
}

/// A network without addresses of its own (Neutron's VLAN `private`: no CIDR, no notation;
/// its VLANs are the Neutron parameters' range): not on the form, as Fuel's tab did not show
/// it, and never sent.
fn addressless(n: &J) -> bool {
    n.get("cidr").is_none_or(J::is_null)
        && n.get("meta")
            .and_then(|m| m.get("notation"))
            .is_none_or(J::is_null)
}

fn build(
    me: Me,
    cluster: &crate::model::Cluster,
    config: &J,
    raw: Option<&Raw>,
    refused: &[FieldError],
) -> NetworkPage {
    let mut errors: HashMap<String, Vec<String>> = HashMap::new();
    let mut general_errors = Vec::new();
    for f in refused {
        match form_name(&f.field) {
            Some(n) => errors.entry(n).or_default().push(f.message.clone()),
            None => general_errors.push(format!("{}: {}", f.field, f.message)),
        }
    }
    let input = |name: String, shown: String| Input {
        value: raw.and_then(|r| r.get(&name)).cloned().unwrap_or(shown),
        errors: errors.get(&name).cloned().unwrap_or_default(),
        name,
    };
    let mut networks: Vec<NetRow> = config
        .get("networks")
        .and_then(J::as_array)
        .into_iter()
        .flatten()
        .filter(|n| !addressless(n))
        .filter_map(|n| {
            let id = n.get("id")?.as_i64()?;
            let name = n.get("name").and_then(J::as_str).unwrap_or("").to_string();
            let meta = n.get("meta");
            let uses_gateway = meta
                .and_then(|m| m.get("use_gateway"))
                .and_then(J::as_bool)
                .unwrap_or(false);
            let notation = raw
                .and_then(|r| r.get(&format!("n.{id}.notation")))
                .cloned()
                .unwrap_or_else(|| scalar(meta.and_then(|m| m.get("notation"))));
            Some(NetRow {
                id,
                admin: name == ADMIN,
                cidr: input(format!("n.{id}.cidr"), scalar(n.get("cidr"))),
                gateway: (uses_gateway || !scalar(n.get("gateway")).is_empty())
                    .then(|| input(format!("n.{id}.gateway"), scalar(n.get("gateway")))),
                vlan: input(format!("n.{id}.vlan"), scalar(n.get("vlan_start"))),
                ranges: input(format!("n.{id}.ranges"), ranges_text(n.get("ip_ranges"))),
                notation,
                errors: errors.get(&format!("n.{id}")).cloned().unwrap_or_default(),
                name,
            })
        })
        .collect();
    networks.sort_by_key(|n| (n.admin, n.id));
    let p = config
        .get("networking_parameters")
        .cloned()
        .unwrap_or(J::Null);
    let segmentation = scalar(p.get("segmentation_type"));
    let params = PARAMS
        .iter()
        .filter(|(k, _, _)| match *k {
            "vlan_range" => segmentation == "vlan",
            "gre_id_range" => segmentation != "vlan",
            _ => true,
        })
        .map(|(k, label, hint)| {
            (
                *label,
                input(format!("p.{k}"), param_text(k, p.get(*k))),
                *hint,
            )
        })
        .collect();
    NetworkPage {
        nav: "environments",
        version: VERSION,
        me,
        id: cluster.id,
        name: cluster.name.clone(),
        status: cluster.status.clone(),
        networks,
        segmentation,
        params,
        general_errors,
    }
}

async fn load(state: &AppState, id: i64) -> Result<(crate::model::Cluster, J), ApiError> {
    state
        .store(move |s| {
            s.read(|r| {
                let c = r.existing_cluster(id)?;
                Ok((c, crate::networks::configuration(r, id)?))
            })
        })
        .await
}

fn render(
    page: NetworkPage,
    status: actix_web::http::StatusCode,
) -> Result<HttpResponse, ApiError> {
    let html = page
        .render()
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .body(html))
}

/// `GET /environments/{id}/network`
pub async fn network(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    let (cluster, config) = load(&state, id).await?;
    Ok(render(
        build(me, &cluster, &config, None, &[]),
        actix_web::http::StatusCode::OK,
    )?)
}

/// `a - b` lines (or `a b`, `a,b`) as `[[a, b], …]`.
fn parse_ranges(s: &str, field: &str, out: &mut Vec<FieldError>) -> J {
    let mut list = Vec::new();
    for line in s.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let parts: Vec<&str> = line
            .split(|c: char| c == '-' || c == ',' || c.is_whitespace())
            .filter(|p| !p.is_empty())
            .collect();
        match parts.as_slice() {
            [a, b] => list.push(json!([a, b])),
            _ => out.push(FieldError {
                field: field.to_string(),
                message: format!("{line:?}: write a range as `first - last`"),
            }),
        }
    }
    J::Array(list)
}

fn parse_pair(s: &str, field: &str, out: &mut Vec<FieldError>) -> Option<J> {
    let parts: Vec<&str> = s
        .split(|c: char| c == '-' || c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
        .collect();
    match parts.as_slice() {
        [a, b] => match (a.parse::<i64>(), b.parse::<i64>()) {
            (Ok(a), Ok(b)) => Some(json!([a, b])),
            _ => {
                out.push(FieldError {
                    field: field.to_string(),
                    message: format!("{s:?}: two numbers, `first - last`"),
                });
                None
            }
        },
        _ => {
            out.push(FieldError {
                field: field.to_string(),
                message: format!("{s:?}: write it as `first - last`"),
            });
            None
        }
    }
}

/// The `PUT …/network_configuration/neutron` body the form makes, or what cannot be read.
fn body(config: &J, raw: &Raw) -> Result<J, Vec<FieldError>> {
    let mut out = Vec::new();
    let mut nets = Vec::new();
    for n in config
        .get("networks")
        .and_then(J::as_array)
        .into_iter()
        .flatten()
    {
        let (Some(id), Some(name)) = (n.get("id").and_then(J::as_i64), n.get("name")) else {
            continue;
        };
        if name.as_str() == Some(ADMIN)
            || addressless(n)
            || !raw.contains_key(&format!("n.{id}.cidr"))
        {
            continue;
        }
        let get = |k: &str| {
            raw.get(&format!("n.{id}.{k}"))
                .map(|s| s.trim().to_string())
        };
        let mut net = Map::new();
        net.insert("id".into(), json!(id));
        if let Some(c) = get("cidr") {
            net.insert("cidr".into(), json!(c));
        }
        if let Some(g) = get("gateway") {
            net.insert(
                "gateway".into(),
                if g.is_empty() { J::Null } else { json!(g) },
            );
        }
        if let Some(v) = get("vlan") {
            let vlan = if v.is_empty() {
                J::Null
            } else {
                match v.parse::<i64>() {
                    Ok(n) => json!(n),
                    Err(_) => {
                        out.push(FieldError {
                            field: format!("networks[id={id}].vlan_start"),
                            message: format!("{v:?} is not a VLAN ID"),
                        });
                        continue;
                    }
                }
            };
            net.insert("vlan_start".into(), vlan);
        }
        let notation = get("notation").filter(|n| !n.is_empty());
        if let Some(nt) = &notation {
            net.insert("meta".into(), json!({ "notation": nt }));
        }
        if notation.as_deref() != Some("cidr")
            && let Some(r) = get("ranges")
        {
            net.insert(
                "ip_ranges".into(),
                parse_ranges(&r, &format!("networks[id={id}].ip_ranges"), &mut out),
            );
        }
        nets.push(J::Object(net));
    }
    let mut params = Map::new();
    for (key, _, _) in PARAMS {
        let Some(v) = raw.get(&format!("p.{key}")).map(|s| s.trim()) else {
            continue;
        };
        let field = format!("networking_parameters.{key}");
        let value = match key {
            "floating_ranges" => parse_ranges(v, &field, &mut out),
            "vlan_range" | "gre_id_range" => match parse_pair(v, &field, &mut out) {
                Some(p) => p,
                None => continue,
            },
            "dns_nameservers" => J::Array(
                v.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(|l| json!(l))
                    .collect(),
            ),
            "internal_cidr" | "internal_gateway" if v.is_empty() => J::Null,
            _ => json!(v),
        };
        params.insert(key.to_string(), value);
    }
    if out.is_empty() {
        Ok(json!({"networks": nets, "networking_parameters": params}))
    } else {
        Err(out)
    }
}

/// `POST /environments/{id}/network`: save through Nailgun's checks; the page again with a
/// notice, or with each refusal next to its field.
pub async fn save(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<String>,
    form: web::Bytes,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    let raw: Raw = crate::http::access::url_form(&form).into_iter().collect();
    let (cluster, config) = load(&state, id).await?;
    let saved = match body(&config, &raw) {
        Err(fields) => Err(ApiError::InvalidInput {
            what: "network configuration",
            fields,
        }),
        Ok(b) => state
            .store(move |s| s.write(|tx| crate::networks::put_configuration(tx, id, &b)))
            .await
            .map(|_| ()),
    };
    let e = match saved {
        Ok(()) => {
            return Ok(notice::redirect(
                &state,
                &format!("/environments/{id}/network"),
                Notice::ok(format!("Network settings of {} saved.", cluster.name)),
            ));
        }
        Err(e) => e,
    };
    let fields = e.fields().to_vec();
    let (shown, status) = notice::not_saved("Network settings not saved", &e);
    let mut me = me;
    me.notice = Some(shown);
    Ok(render(
        build(me, &cluster, &config, Some(&raw), &fields),
        status,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_find_their_input() {
        assert_eq!(
            form_name("networks[id=3].cidr").as_deref(),
            Some("n.3.cidr")
        );
        assert_eq!(
            form_name("networks[id=3].ip_ranges[0]").as_deref(),
            Some("n.3.ranges")
        );
        assert_eq!(
            form_name("networks[id=4].vlan_start").as_deref(),
            Some("n.4.vlan")
        );
        assert_eq!(form_name("networks[id=4]").as_deref(), Some("n.4"));
        assert_eq!(
            form_name("networking_parameters.floating_ranges[0]").as_deref(),
            Some("p.floating_ranges")
        );
        assert_eq!(form_name("networks"), None);
    }

    #[test]
    fn the_form_makes_the_apis_body() {
        let config = json!({"networks": [
            {"id": 1, "name": "fuelweb_admin", "cidr": "10.20.0.0/24"},
            {"id": 2, "name": "public", "cidr": "172.16.0.0/24"}]});
        let raw: Raw = [
            ("n.2.cidr", "172.16.9.0/24"),
            ("n.2.gateway", "172.16.9.1"),
            ("n.2.vlan", ""),
            ("n.2.notation", "ip_ranges"),
            ("n.2.ranges", "172.16.9.2 - 172.16.9.100\n"),
            ("p.vlan_range", "1000 - 1100"),
            ("p.dns_nameservers", "1.1.1.1\n9.9.9.9"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            body(&config, &raw).unwrap(),
            json!({"networks": [{"id": 2, "cidr": "172.16.9.0/24", "gateway": "172.16.9.1",
                                 "vlan_start": null, "meta": {"notation": "ip_ranges"},
                                 "ip_ranges": [["172.16.9.2", "172.16.9.100"]]}],
                   "networking_parameters": {"vlan_range": [1000, 1100],
                                             "dns_nameservers": ["1.1.1.1", "9.9.9.9"]}})
        );
        let mut bad = raw.clone();
        bad.insert("n.2.vlan".into(), "ten".into());
        bad.insert("p.vlan_range".into(), "1000".into());
        let e = body(&config, &bad).unwrap_err();
        assert_eq!(e.len(), 2, "{e:?}");
    }
}
