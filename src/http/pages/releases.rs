//! The Releases & plugins page: installed releases, and plugins with their validator
//! findings; an admin installs a package by uploading it here (streamed to disk as the API's
//! upload is, within the same limits, [`crate::http::api::plugins::install_upload`]) and
//! removes one after a review page naming what depends on it.

use actix_web::{HttpResponse, web};
use askama::Template;
use askama_web::WebTemplate;
use futures_util::StreamExt;

use crate::http::access::UploadForm;
use crate::http::pages::notice::{self, Notice};
use crate::http::pages::views::Me;
use crate::http::pages::{PageError, VERSION};
use crate::http::{ApiError, AppState};
use crate::model::Release;
use crate::package::install::InstallError;
use crate::store::NO_RELEASE_MESSAGE;

/// The most findings a notice lists.
const NOTICE_FINDINGS: usize = 6;

/// One installed plugin with its validator findings, as text lines.
pub struct PluginRow {
    id: i64,
    name: String,
    title: String,
    version: String,
    package_version: String,
    kind: &'static str,
    installed: String,
    diagnostics: Vec<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "releases.html")]
pub struct ReleasesPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    releases: Vec<Release>,
    plugins: Vec<PluginRow>,
    no_release_message: &'static str,
    /// `plugins.max_upload_bytes`, as a person reads it.
    max_upload: String,
}

/// `GET /releases`
pub async fn releases(state: web::Data<AppState>, me: Me) -> Result<ReleasesPage, PageError> {
    let now = crate::clock::now();
    let (releases, plugins) = state
        .store(|s| s.read(|tx| Ok((tx.releases()?, tx.plugins()?))))
        .await?;
    let plugins = plugins
        .into_iter()
        .map(|p| PluginRow {
            diagnostics: p
                .diagnostics
                .as_array()
                .map(|list| list.iter().map(diagnostic_line).collect())
                .unwrap_or_default(),
            kind: if p.is_release { "release" } else { "plugin" },
            id: p.id,
            installed: crate::http::pages::views::ago(p.installed_at, now),
            name: p.name,
            title: p.title,
            version: p.version,
            package_version: p.package_version,
        })
        .collect();
    Ok(ReleasesPage {
        nav: "releases",
        version: VERSION,
        me,
        releases,
        plugins,
        no_release_message: NO_RELEASE_MESSAGE,
        max_upload: crate::package::archive::bytes(state.package_limits.max_upload),
    })
}

/// A stored diagnostic as one line: `warning metadata.yaml:3:1 fuel_version: deprecated`.
fn diagnostic_line(d: &serde_json::Value) -> String {
    let text = |k: &str| d.get(k).and_then(|v| v.as_str()).unwrap_or("");
    let num = |k: &str| d.get(k).and_then(serde_json::Value::as_u64);
    let place = match (num("line"), num("column")) {
        (Some(l), Some(c)) => format!("{}:{l}:{c}", text("file")),
        _ => text("file").to_string(),
    };
    format!(
        "{} {place} {}: {}",
        text("level"),
        text("field"),
        text("message")
    )
}

/// Why a package was not installed, for a notice: the refusal and its first error findings.
fn refusal(e: &InstallError) -> String {
    match e {
        InstallError::Invalid(d) => {
            let errors: Vec<String> = d
                .iter()
                .filter(|x| x.level == crate::engine::plugin::Level::Error)
                .map(|x| {
                    diagnostic_line(&serde_json::to_value(x).unwrap_or(serde_json::Value::Null))
                })
                .collect();
            let mut text = format!("Not installed: {e}");
            for line in errors.iter().take(NOTICE_FINDINGS) {
                text.push('\n');
                text.push_str(line.trim_start_matches("error "));
            }
            if errors.len() > NOTICE_FINDINGS {
                text.push_str(&format!("\nand {} more", errors.len() - NOTICE_FINDINGS));
            }
            text
        }
        other => {
            let api = crate::http::api::plugins::install_error_of(other);
            format!("Not installed: {api}")
        }
    }
}

/// `POST /releases/plugins` (`multipart/form-data`: the CSRF token, then `package`, a `.fp`
/// file): install it; back to the page saying what was installed or why not. The file is
/// streamed to disk within `plugins.max_upload_bytes`, as the API's upload.
pub async fn upload(
    state: web::Data<AppState>,
    form: UploadForm,
) -> Result<HttpResponse, PageError> {
    let UploadForm(mut form) = form;
    let outcome = loop {
        match form.next().await {
            None => {
                break Err(ApiError::BadRequest(
                    "package: choose a plugin package (.fp) to upload".to_string(),
                ));
            }
            Some(Err(e)) => {
                break Err(ApiError::BadRequest(format!(
                    "the upload cannot be read: {e}"
                )));
            }
            Some(Ok(field)) if field.name() == Some("package") => {
                let file = field
                    .content_disposition()
                    .and_then(|d| d.get_filename())
                    .unwrap_or_default()
                    .to_string();
                let installed =
                    crate::http::api::plugins::install_upload(&state, field, None).await;
                break installed.map(|r| (file, r));
            }
            // Any other field: skipped.
            Some(Ok(_)) => {}
        }
    };
    let notice = match outcome {
        Ok((_, Ok(done))) => {
            let warnings = done
                .diagnostics
                .iter()
                .filter(|d| d.level == crate::engine::plugin::Level::Warning)
                .count();
            let mut text = format!(
                "Installed {} {} {}",
                if done.plugin.is_release {
                    "release plugin"
                } else {
                    "plugin"
                },
                done.plugin.name,
                done.plugin.version
            );
            if !done.releases.is_empty() {
                text.push_str(&format!(" with {}", done.releases.join(", ")));
            }
            text.push('.');
            if warnings > 0 {
                text.push_str(&format!(
                    " The validator has {warnings} warning(s): see below."
                ));
            }
            Notice::ok(text)
        }
        Ok((file, Err(e))) => {
            let mut n = Notice::error(refusal(&e));
            if !file.is_empty() {
                n.text = n
                    .text
                    .replacen("Not installed:", &format!("{file} not installed:"), 1);
            }
            n
        }
        Err(e) => {
            if matches!(e, ApiError::Internal(_)) {
                tracing::error!(error = %e, "plugin upload failed");
            }
            Notice::error(format!("Not installed: {e}"))
        }
    };
    // What the browser still sends is read and dropped, so it gets the answer (a refusal
    // before the end, past the size limit, would otherwise reset its connection).
    drain(&mut form, state.package_limits.max_upload.saturating_mul(2)).await;
    Ok(notice::redirect(&state, "/releases", notice))
}

/// Read and drop what is left of `form`, up to `limit` bytes.
async fn drain(form: &mut actix_multipart::Multipart, limit: u64) {
    let mut seen = 0u64;
    loop {
        let Some(Ok(mut field)) = form.next().await else {
            return;
        };
        while let Some(Ok(chunk)) = field.next().await {
            seen += chunk.len() as u64;
            if seen > limit {
                return;
            }
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "plugin_remove.html")]
pub struct RemovePage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    id: i64,
    name: String,
    title: String,
    plugin_version: String,
    is_release: bool,
    /// Environments made from its releases: the removal is refused while they exist.
    made: Vec<(i64, String)>,
    /// Environments whose settings enable it.
    enabling: Vec<(i64, String)>,
}

async fn find_plugin(state: &AppState, id: i64) -> Result<crate::model::PluginSummary, ApiError> {
    state
        .store(move |s| s.read(|r| r.plugins()))
        .await?
        .into_iter()
        .find(|p| p.id == id)
        .ok_or_else(|| ApiError::NotFound(format!("plugin {id} not found")))
}

/// `GET /releases/plugins/{id}/remove`: what depends on the plugin, and the confirmation.
pub async fn review_remove(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<String>,
) -> Result<RemovePage, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "plugin")?;
    let p = find_plugin(&state, id).await?;
    let name = p.name.clone();
    let (made, enabling) = state
        .store(move |s| s.read(|r| r.plugin_dependents(id, &name)))
        .await?;
    Ok(RemovePage {
        nav: "releases",
        version: VERSION,
        me,
        id,
        name: p.name,
        title: p.title,
        plugin_version: p.version,
        is_release: p.is_release,
        made,
        enabling,
    })
}

/// `POST /releases/plugins/{id}/remove`: remove it (as `DELETE /api/v1/plugins/NAME@VERSION`);
/// back to the page saying so, or why not.
pub async fn remove(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "plugin")?;
    if !crate::http::pages::confirm::given(&crate::http::access::url_form(&body)) {
        // Not from the review page: the review first.
        return Ok(HttpResponse::SeeOther()
            .insert_header((
                actix_web::http::header::LOCATION,
                format!("/releases/plugins/{id}/remove"),
            ))
            .finish());
    }
    let removed = async {
        let p = find_plugin(&state, id).await?;
        crate::http::api::catalog::remove_plugin_named(&state, format!("{}@{}", p.name, p.version))
            .await
    }
    .await;
    Ok(notice::after(
        &state,
        "/releases",
        removed,
        |p| format!("Removed {} {} and its files.", p.name, p.version),
        "Not removed",
    ))
}
