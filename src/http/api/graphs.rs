//! Nailgun's deployment graph API, for `fuel2 graph upload|list|download|delete`:
//! `/{clusters,releases,plugins}/{id}/deployment_graphs/{type}` (GET 200/404, POST 200/409,
//! PUT and PATCH 200/404, DELETE 204/404), each owner's list, `/graphs` with Nailgun's filters,
//! and an environment's `/deployment_tasks` per level. Uploads are checked by
//! [`crate::engine::graph::upload`] before anything is stored; what is read comes from
//! [`crate::graphs`].

use std::collections::HashMap;

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::Value;

use crate::engine::graph::upload;
use crate::graphs::{self, Filter, Level};
use crate::http::api::catalog::id_of;
use crate::http::api::query;
use crate::http::{ApiError, AppState};
use crate::store::{GraphBody, GraphOwner};

/// The owner a `/api/v1/{clusters|releases|plugins}/{id}/...` path names.
fn owner_of(req: &HttpRequest, id: &str) -> Result<GraphOwner, ApiError> {
    let kind = req
        .path()
        .trim_start_matches("/api/v1/")
        .split('/')
        .next()
        .unwrap_or_default();
    match kind {
        "clusters" => Ok(GraphOwner::Cluster(id_of(id, "environment")?)),
        "releases" => Ok(GraphOwner::Release(id_of(id, "release")?)),
        "plugins" => Ok(GraphOwner::Plugin(id_of(id, "plugin")?)),
        other => Err(ApiError::NotFound(format!("no graphs under {other:?}"))),
    }
}

/// A graph type from the path: what Nailgun's URL pattern (`\w+`-like) and fuel2 accept.
fn graph_type(raw: &str) -> Result<String, ApiError> {
    if crate::graphs::is_graph_type(raw) {
        Ok(raw.to_string())
    } else {
        Err(ApiError::BadRequest(format!(
            "graph type {raw:?}: expected 1-255 letters, digits, '_', '-' or '.'"
        )))
    }
}

fn missing(owner: GraphOwner, ty: &str) -> ApiError {
    ApiError::NotFound(format!(
        "Graph with type: {ty} is not defined for {} {}",
        owner.model(),
        owner.id()
    ))
}

async fn blocking<T: Send + 'static>(
    state: &AppState,
    f: impl FnOnce(&crate::store::Store, &std::path::Path) -> Result<T, crate::planner::PlanningError>
    + Send
    + 'static,
) -> Result<T, ApiError> {
    let store = std::sync::Arc::clone(&state.store);
    let data_dir = state.data_dir.clone();
    crate::http::off_worker(move || f(&store, &data_dir))
        .await?
        .map_err(ApiError::from)
}

/// `GET .../deployment_graphs/{type}`: the uploaded graph, else the package's; 404 when none.
pub async fn show(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (id, ty) = path.into_inner();
    let owner = owner_of(&req, &id)?;
    let ty = graph_type(&ty)?;
    let t = ty.clone();
    let found = blocking(&state, move |s, d| graphs::graph(s, d, owner, &t)).await?;
    let g = found.ok_or_else(|| missing(owner, &ty))?;
    Ok(HttpResponse::Ok().json(g.to_json()))
}

fn checked(ty: &str, body: &[u8]) -> Result<upload::Upload, ApiError> {
    let value: Value = ApiError::parse(body)?;
    upload::parse(ty, &value).map_err(|fields| ApiError::InvalidInput {
        what: "deployment graph",
        fields,
    })
}

/// `POST .../deployment_graphs/{type}`: store a graph (200 with it, as Nailgun; 409 when the
/// owner has one of the type already).
pub async fn create(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (id, ty) = path.into_inner();
    let owner = owner_of(&req, &id)?;
    let ty = graph_type(&ty)?;
    let up = checked(&ty, &body)?;
    let stored = state
        .store(move |s| {
            s.write(|tx| {
                tx.create_graph(
                    owner,
                    &ty,
                    GraphBody {
                        name: up.name.as_deref(),
                        metadata: &up.metadata,
                        tasks: &up.tasks,
                    },
                )
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(graphs::GraphView::of_stored(stored).to_json()))
}

/// `PUT` (and `PATCH`) `.../deployment_graphs/{type}`: replace an uploaded graph's tasks (and
/// its name and metadata when given); 404 when the owner has no uploaded graph of the type.
pub async fn replace(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (id, ty) = path.into_inner();
    let owner = owner_of(&req, &id)?;
    let ty = graph_type(&ty)?;
    let up = checked(&ty, &body)?;
    let t = ty.clone();
    let replaced = state
        .store(move |s| {
            s.write(|tx| {
                tx.replace_graph(
                    owner,
                    &t,
                    GraphBody {
                        name: up.name.as_deref(),
                        metadata: &up.metadata,
                        tasks: &up.tasks,
                    },
                )
            })
        })
        .await?;
    let g = replaced.ok_or_else(|| missing(owner, &ty))?;
    Ok(HttpResponse::Ok().json(graphs::GraphView::of_stored(g).to_json()))
}

/// `DELETE .../deployment_graphs/{type}`: 204, or 404 when no graph of the type was uploaded
/// (a package's own graphs go with their package).
pub async fn delete(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (id, ty) = path.into_inner();
    let owner = owner_of(&req, &id)?;
    let ty = graph_type(&ty)?;
    let t = ty.clone();
    let gone = state
        .store(move |s| s.write(|tx| tx.delete_graph(owner, &t)))
        .await?;
    if gone {
        Ok(HttpResponse::NoContent().finish())
    } else {
        Err(missing(owner, &ty))
    }
}

/// `GET /api/v1/{clusters|releases|plugins}/{id}/deployment_graphs`: the owner's graphs
/// (`fetch_related` is accepted and, as in Nailgun, changes nothing here).
pub async fn list_of(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let owner = owner_of(&req, &path)?;
    let found = blocking(&state, move |s, d| graphs::graphs_of(s, d, owner)).await?;
    Ok(HttpResponse::Ok().json(found.iter().map(|g| g.to_json()).collect::<Vec<_>>()))
}

/// `GET /api/v1/graphs?clusters_ids=&releases_ids=&plugins_ids=&graph_types=&fetch_related=`
pub async fn list(
    state: web::Data<AppState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let get = |name: &str| q.get(name).map(String::as_str);
    let filter = Filter {
        clusters: query::ids("clusters_ids", get("clusters_ids"))?,
        releases: query::ids("releases_ids", get("releases_ids"))?,
        plugins: query::ids("plugins_ids", get("plugins_ids"))?,
        types: query::list(get("graph_types")),
        fetch_related: query::flag("fetch_related", get("fetch_related"))?,
    };
    let found = blocking(&state, move |s, d| graphs::filtered(s, d, &filter)).await?;
    Ok(HttpResponse::Ok().json(found.iter().map(|g| g.to_json()).collect::<Vec<_>>()))
}

async fn tasks_at(
    state: &AppState,
    cluster: &str,
    query: &HashMap<String, String>,
    level: Level,
) -> Result<HttpResponse, ApiError> {
    let cluster = id_of(cluster, "environment")?;
    let ty = match query.get("graph_type").filter(|t| !t.is_empty()) {
        Some(t) => graph_type(t)?,
        None => "default".to_string(),
    };
    let tasks = blocking(state, move |s, d| {
        graphs::cluster_tasks(s, d, cluster, &ty, level)
    })
    .await?;
    Ok(HttpResponse::Ok().json(tasks))
}

/// `GET /api/v1/clusters/{id}/deployment_tasks?graph_type=`: the release's, the enabled
/// plugins' and the environment's own tasks merged, the environment's winning.
pub async fn tasks(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    tasks_at(&state, &path, &query, Level::All).await
}

/// `GET /api/v1/clusters/{id}/deployment_tasks/{own|release|plugins}?graph_type=`: one level.
pub async fn tasks_at_level(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let (cluster, level) = path.into_inner();
    let level = match level.as_str() {
        "own" => Level::Own,
        "release" => Level::Release,
        "plugins" => Level::Plugins,
        other => {
            return Err(ApiError::NotFound(format!(
                "no task list {other:?}: own, release or plugins"
            )));
        }
    };
    tasks_at(&state, &cluster, &query, level).await
}
