//! The roles picker: the roles an environment accepts (its release's, its own and its enabled
//! plugins', [`crate::planner::Accepts`]) as checkboxes with what each says of itself: its
//! label and description, the roles it conflicts with, its limits, and the messages of its
//! restrictions that hold over the environment's settings (evaluated by
//! [`crate::engine::attributes::restricted`], as Fuel's UI showed them). Choosing is the form's;
//! refusing (unknown roles, conflicts) is the engine's, on submit.

use serde_json::Value as J;

use crate::http::api::attributes::models;
use crate::http::{ApiError, AppState};

/// One role of the picker.
pub struct RoleChoice {
    pub name: String,
    pub label: String,
    pub description: String,
    pub checked: bool,
    /// Conflicts, limits and restriction messages, each a short sentence.
    pub notes: Vec<String>,
    /// A restriction holds: the role is shown as unavailable (the engine still decides).
    pub restricted: bool,
}

fn limits_note(limits: &J) -> Option<String> {
    let num = |k: &str| limits.get(k).and_then(J::as_u64);
    let parts: Vec<String> = [
        ("at least", num("min")),
        ("at most", num("max")),
        ("recommended", num("recommended")),
    ]
    .into_iter()
    .filter_map(|(what, n)| n.map(|n| format!("{what} {n}")))
    .collect();
    (!parts.is_empty()).then(|| format!("Nodes: {}.", parts.join(", ")))
}

/// Environment `env`'s roles for the picker, those of `checked` ticked, by weight then name.
pub async fn role_choices(
    state: &AppState,
    env: i64,
    checked: &[String],
) -> Result<Vec<RoleChoice>, ApiError> {
    let accepts = crate::http::api::environments::accepts(state, env).await?;
    let (settings, found) = state
        .store(move |s| s.read(|r| Ok((r.cluster_settings(env)?, r.cluster_with_release(env)?))))
        .await?;
    let (cluster, release) =
        found.ok_or_else(|| ApiError::NotFound(format!("environment {env} not found")))?;
    let doc = crate::engine::attributes::editable(
        crate::engine::attributes::Source {
            release: &accepts.release_attributes,
            plugins: &accepts.plugins,
        },
        &settings,
    );
    let models = models(&cluster, &release);
    let mut out: Vec<(i64, RoleChoice)> = accepts
        .roles
        .iter()
        .map(|name| {
            let meta = accepts.role_metadata.get(name).cloned().unwrap_or(J::Null);
            let text = |k: &str| meta.get(k).and_then(J::as_str).map(str::trim);
            let mut notes = Vec::new();
            match meta.get("conflicts") {
                Some(J::String(s)) if s == "*" => notes.push("Not with any other role.".into()),
                Some(J::Array(list)) if !list.is_empty() => notes.push(format!(
                    "Not with {}.",
                    list.iter()
                        .filter_map(J::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                _ => {}
            }
            notes.extend(meta.get("limits").and_then(limits_note));
            let r = crate::engine::attributes::restricted(&meta, &doc, &models);
            notes.extend(r.messages.iter().cloned());
            (
                meta.get("weight").and_then(J::as_i64).unwrap_or(1000),
                RoleChoice {
                    name: name.clone(),
                    label: text("name").unwrap_or(name).to_string(),
                    description: text("description").unwrap_or_default().to_string(),
                    checked: checked.contains(name),
                    notes,
                    restricted: r.hidden || r.disabled,
                },
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
    Ok(out.into_iter().map(|(_, c)| c).collect())
}
