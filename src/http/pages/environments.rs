//! The Environments page: the list, and the form that creates one from a deployable release.

use actix_web::{HttpResponse, web};
use askama::Template;
use askama_web::WebTemplate;

use crate::http::pages::notice::{self, Notice};
use crate::http::pages::views::Me;
use crate::http::pages::{PageError, VERSION};
use crate::http::{ApiError, AppState};
use crate::model::Release;
use crate::store::NO_RELEASE_MESSAGE;

/// One row of the environments table.
pub struct EnvironmentRow {
    id: i64,
    name: String,
    release: String,
    status: String,
    created: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "environments.html")]
pub struct EnvironmentsPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    rows: Vec<EnvironmentRow>,
    releases: Vec<Release>,
    no_release_message: &'static str,
}

/// `GET /environments`
pub async fn environments(
    state: web::Data<AppState>,
    me: Me,
) -> Result<EnvironmentsPage, PageError> {
    let (clusters, releases) = state
        .store(|s| s.read(|tx| Ok((tx.clusters()?, tx.releases()?))))
        .await?;
    let rows = clusters
        .iter()
        .map(|c| EnvironmentRow {
            id: c.id,
            name: c.name.clone(),
            release: releases
                .iter()
                .find(|r| r.id == c.release_id)
                .map_or_else(|| format!("release {}", c.release_id), |r| r.name.clone()),
            status: c.status.clone(),
            created: crate::http::pages::views::utc(c.created_at),
        })
        .collect();
    Ok(EnvironmentsPage {
        nav: "environments",
        version: VERSION,
        me,
        rows,
        releases: releases
            .into_iter()
            .filter(Release::is_deployable)
            .collect(),
        no_release_message: NO_RELEASE_MESSAGE,
    })
}

/// The create-environment form's fields.
#[derive(Debug, serde::Deserialize)]
pub struct EnvironmentForm {
    name: String,
    release_id: String,
}

/// `POST /environments`: create, then open it (post/redirect/get); a refusal goes back to the
/// list saying why.
pub async fn create_environment(
    state: web::Data<AppState>,
    form: web::Form<EnvironmentForm>,
) -> Result<HttpResponse, PageError> {
    let form = form.into_inner();
    let created = async {
        let release_id = form.release_id.trim().parse::<i64>().map_err(|_| {
            ApiError::BadRequest(format!(
                "release_id: not a release id: {:?}",
                form.release_id
            ))
        })?;
        let body = serde_json::json!({ "name": form.name, "release_id": release_id });
        let new = crate::http::api::catalog::parse_new_cluster(body.to_string().as_bytes())?;
        let now = crate::clock::now();
        state
            .store(move |s| {
                s.write(|tx| {
                    tx.create_cluster(&new.name, new.release_id, &new.net_segment_type, now)
                })
            })
            .await
    }
    .await;
    Ok(match created {
        Ok(c) => notice::redirect(
            &state,
            &format!("/environments/{}", c.id),
            Notice::ok(format!(
                "Environment {} created. Add nodes with their roles, then deploy.",
                c.name
            )),
        ),
        Err(e) => notice::redirect(
            &state,
            "/environments",
            Notice::error(format!("Not created: {e}")),
        ),
    })
}
