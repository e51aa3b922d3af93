//! A node's page: its hardware, BMC and power (with the power buttons and the BMC form), the
//! master's BMC steps on it, and its delete and approve actions.

use actix_web::{HttpResponse, web};
use askama::Template;
use askama_web::WebTemplate;

use crate::http::access::Caller;
use crate::http::pages::nodes::{PowerForm, power_action};
use crate::http::pages::notice::{self, Notice};
use crate::http::pages::views::{Me, NodeRow, human_bytes};
use crate::http::pages::{PageError, VERSION};
use crate::http::{ApiError, AppState};
use crate::model::Node;

#[derive(Template, WebTemplate)]
#[template(path = "node.html")]
pub struct NodePage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    row: NodeRow,
    node: Node,
    created: String,
    memory: String,
    disks: Vec<(String, String, String, String)>,
    bmc: Option<crate::store::StoredBmc>,
    /// The master's BMC steps on this node, newest first.
    /// The node's BMC steps, newest first, with when each finished.
    bmc_runs: Vec<(crate::store::MasterRun, String)>,
}

/// `POST /nodes/{id}/power`: one node's power button; back to its page with what the BMC said.
pub async fn power_node(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    form: web::Form<PowerForm>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let act = power_action(&form.action)?;
    let user = caller.0.user.clone();
    let r = crate::http::api::bmc::power_nodes(&state, vec![id], act, user).await?;
    let notice = match r.first() {
        Some(r) => match &r.error {
            Some(e) => Notice::error(format!("Power {} failed: {e}", r.action)),
            None => Notice::ok(format!("Power {} done.", r.action)),
        },
        None => Notice::error("No power action was taken."),
    };
    Ok(notice::redirect(&state, &format!("/nodes/{id}"), notice))
}

/// The BMC form.
#[derive(Debug, serde::Deserialize)]
pub struct BmcForm {
    driver: String,
    address: String,
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    verify_tls: Option<String>,
}

/// `POST /nodes/{id}/bmc`: set the node's BMC (an empty password keeps the stored one).
pub async fn set_bmc(
    state: web::Data<AppState>,
    path: web::Path<String>,
    form: web::Form<BmcForm>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let f = form.into_inner();
    let mut body = serde_json::json!({"driver": f.driver, "address": f.address,
        "username": f.username, "verify_tls": f.verify_tls.is_some()});
    if !f.password.is_empty() {
        body["password"] = f.password.into();
    }
    let result = crate::http::api::bmc::set_bmc(&state, id, body).await;
    Ok(notice::after(
        &state,
        &format!("/nodes/{id}#bmc"),
        result,
        |_| "BMC saved; its power is read within seconds.".to_string(),
        "BMC not saved",
    ))
}

/// `GET /nodes/{id}`
pub async fn node(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<String>,
) -> Result<NodePage, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let (node, bmc, bmc_runs) = state
        .store(move |s| s.read(|tx| Ok((tx.node(id)?, tx.bmc(id)?, tx.master_runs_of(id, 20)?))))
        .await?;
    let node = node.ok_or_else(|| ApiError::NotFound(format!("node {id} not found")))?;
    let now = crate::clock::now();
    Ok(NodePage {
        nav: "nodes",
        version: VERSION,
        me,
        row: NodeRow::new(&node, now).with_power(bmc.as_ref()),
        bmc,
        bmc_runs: bmc_runs
            .into_iter()
            .map(|r| {
                let finished = r
                    .finished_at
                    .map_or_else(String::new, crate::http::pages::views::utc);
                (r, finished)
            })
            .collect(),
        created: crate::http::pages::views::utc(node.created_at),
        memory: human_bytes(node.inventory.memory_bytes),
        disks: node
            .inventory
            .disks
            .iter()
            .map(|d| {
                (
                    d.name.clone(),
                    human_bytes(d.size_bytes),
                    d.model.clone().unwrap_or_default(),
                    d.serial.clone().unwrap_or_default(),
                )
            })
            .collect(),
        node,
    })
}

/// `POST /nodes/{id}/delete`: delete, then back to the node list.
pub async fn delete_node(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let result = crate::http::api::nodes::delete_node(&state, id).await;
    let back = if result.is_ok() {
        "/nodes".to_string()
    } else {
        format!("/nodes/{id}")
    };
    Ok(notice::after(
        &state,
        &back,
        result,
        |n| format!("Node {} ({}) deleted.", n.name, n.mac),
        "Not deleted",
    ))
}

/// `POST /nodes/{id}/approve`: approve, then back to the node.
pub async fn approve_node(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let result = crate::http::api::nodes::approve_node(&state, id).await;
    Ok(notice::after(
        &state,
        &format!("/nodes/{id}"),
        result,
        |_| "Approved: the node gets its boot token at its next network boot.".to_string(),
        "Not approved",
    ))
}
