//! A node's page: its hardware, BMC and power (with the power buttons and the BMC form), the
//! master's BMC steps on it, and its delete and approve actions.

use actix_web::{HttpResponse, web};
use askama::Template;
use askama_web::WebTemplate;

use crate::http::access::Caller;
use crate::http::pages::nodes::{PowerForm, power_action};
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
    /// What the last power action or BMC change said.
    message: Option<String>,
}

/// `POST /nodes/{id}/power`: one node's power button; its page with what the BMC said.
pub async fn power_node(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    form: web::Form<PowerForm>,
) -> Result<NodePage, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let act = power_action(&form.action)?;
    let user = caller.0.user.clone();
    let r = crate::http::api::bmc::power_nodes(&state, vec![id], act, user).await?;
    let message = r.first().map(|r| match &r.error {
        Some(e) => format!("Power {} failed: {e}", r.action),
        None => format!("Power {} done.", r.action),
    });
    node_page(&state, caller, id, message).await
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
    caller: Caller,
    path: web::Path<String>,
    form: web::Form<BmcForm>,
) -> Result<NodePage, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let f = form.into_inner();
    let mut body = serde_json::json!({"driver": f.driver, "address": f.address,
        "username": f.username, "verify_tls": f.verify_tls.is_some()});
    if !f.password.is_empty() {
        body["password"] = f.password.into();
    }
    let message = match crate::http::api::bmc::set_bmc(&state, id, body).await {
        Ok(_) => "BMC saved; its power is read within seconds.".to_string(),
        Err(e) => format!("BMC not saved: {e}"),
    };
    node_page(&state, caller, id, Some(message)).await
}

/// `GET /nodes/{id}`
pub async fn node(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<NodePage, PageError> {
    let id = crate::http::api::node_id(&path)?;
    node_page(&state, caller, id, None).await
}

async fn node_page(
    state: &AppState,
    caller: Caller,
    id: i64,
    message: Option<String>,
) -> Result<NodePage, PageError> {
    let (node, bmc, bmc_runs) = state
        .store(move |s| s.read(|tx| Ok((tx.node(id)?, tx.bmc(id)?, tx.master_runs_of(id, 20)?))))
        .await?;
    let node = node.ok_or_else(|| ApiError::NotFound(format!("node {id} not found")))?;
    let now = crate::clock::now();
    Ok(NodePage {
        nav: "nodes",
        version: VERSION,
        me: Me::of(&caller),
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
        message,
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
    crate::http::api::nodes::delete_node(&state, id).await?;
    Ok(HttpResponse::SeeOther()
        .insert_header(("Location", "/nodes"))
        .finish())
}

/// `POST /nodes/{id}/approve`: approve, then back to the node.
pub async fn approve_node(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::node_id(&path)?;
    crate::http::api::nodes::approve_node(&state, id).await?;
    Ok(HttpResponse::SeeOther()
        .insert_header(("Location", format!("/nodes/{id}")))
        .finish())
}
