//! The Releases & plugins page: installed releases, and plugins with their validator findings.

use actix_web::web;
use askama::Template;
use askama_web::WebTemplate;

use crate::http::AppState;
use crate::http::pages::views::Me;
use crate::http::pages::{PageError, VERSION};
use crate::model::Release;
use crate::store::NO_RELEASE_MESSAGE;

/// One installed plugin with its validator findings, as text lines.
pub struct PluginRow {
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
