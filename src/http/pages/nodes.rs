//! The Nodes page: every node with its hardware, status, liveness and power, and the bulk
//! actions on the nodes ticked.

use actix_web::web;
use askama::Template;
use askama_web::WebTemplate;

use crate::http::access::Caller;
use crate::http::pages::views::{Me, NodeRow};
use crate::http::pages::{PageError, VERSION};
use crate::http::{ApiError, AppState};

#[derive(Template, WebTemplate)]
#[template(path = "nodes.html")]
pub struct NodesPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    rows: Vec<NodeRow>,
    /// After a bulk power action: a line per node.
    results: Vec<(i64, bool, String)>,
}

/// `GET /nodes`
pub async fn nodes(state: web::Data<AppState>, me: Me) -> Result<NodesPage, PageError> {
    let now = crate::clock::now();
    nodes_page(&state, me, now, Vec::new()).await
}

async fn nodes_page(
    state: &AppState,
    me: Me,
    now: i64,
    results: Vec<(i64, bool, String)>,
) -> Result<NodesPage, PageError> {
    let (nodes, bmcs) = state
        .store(|s| s.read(|tx| Ok((tx.nodes()?, tx.bmcs()?))))
        .await?;
    let bmcs: std::collections::BTreeMap<i64, crate::store::StoredBmc> =
        bmcs.into_iter().map(|b| (b.node_id, b)).collect();
    Ok(NodesPage {
        nav: "nodes",
        version: VERSION,
        me,
        rows: nodes
            .iter()
            .map(|n| NodeRow::new(n, now).with_power(bmcs.get(&n.id)))
            .collect(),
        results,
    })
}

/// A node page's power button.
#[derive(Debug, serde::Deserialize)]
pub struct PowerForm {
    pub(super) action: String,
}

pub(super) fn power_action(action: &str) -> Result<crate::bmc::actions::Act, ApiError> {
    crate::bmc::actions::Act::parse(action)
        .ok_or_else(|| ApiError::BadRequest(format!("action: no power action {action:?}")))
}

/// `POST /nodes/power`: a power action on the nodes ticked; the list again with a line per
/// node.
pub async fn power_nodes(
    state: web::Data<AppState>,
    caller: Caller,
    body: web::Bytes,
) -> Result<NodesPage, PageError> {
    // Repeated `nodes=` fields: serde_urlencoded takes them as a sequence only by hand.
    let mut action = String::new();
    let mut nodes = Vec::new();
    for (k, v) in serde_urlencoded::from_bytes::<Vec<(String, String)>>(&body)
        .map_err(|e| ApiError::BadRequest(format!("form: {e}")))?
    {
        match k.as_str() {
            "action" => action = v,
            "nodes" => nodes.push(crate::http::api::node_id(&v)?),
            _ => {}
        }
    }
    let act = power_action(&action)?;
    if nodes.is_empty() {
        return Err(ApiError::BadRequest("tick at least one node".into()).into());
    }
    let user = caller.0.user.clone();
    let results = crate::http::api::bmc::power_nodes(&state, nodes, act, user).await?;
    let lines = results
        .into_iter()
        .map(|r| {
            let text = match (&r.error, r.power_state) {
                (Some(e), _) => format!("{} failed: {e}", r.action),
                (None, p) => format!(
                    "{} done, power {}",
                    r.action,
                    p.map_or("unknown", crate::bmc::PowerState::as_str)
                ),
            };
            (r.node, r.ok, text)
        })
        .collect();
    nodes_page(&state, Me::of(&caller), crate::clock::now(), lines).await
}
