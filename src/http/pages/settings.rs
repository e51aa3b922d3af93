//! An environment's Settings page: a form generated from its attributes document (Nailgun's
//! `GET /clusters/{id}/attributes`, [`crate::engine::attributes::editable`]), as Fuel's Settings
//! tab was: the sections of the release and of each compatible plugin, in their groups
//! (general, security, compute, network, storage, logging, OpenStack services, other), each
//! section by `weight` with its switch when it has one, each attribute by `weight` with its
//! label, description and a control for its type (checkbox, text, password (never shown, kept
//! when left empty), textarea, select, radio, one-per-line lists, number, repositories); a
//! plugin's section with its switch and its version chooser (`chosen_id`). Restrictions are
//! evaluated by the engine ([`crate::engine::attributes::conditions`]) as Fuel's tab did: a
//! hidden attribute or section is not shown, a disabled one is shown disabled with the
//! restriction's message, and a section that is disabled or switched off disables its
//! attributes. A restriction that reads a setting the form edits also goes to the page as a
//! tree in `data-restrict` (its other model paths already values), which
//! `assets/js/settings.js` evaluates again as the operator edits; without JavaScript the page
//! shows what the server evaluated. A save goes through the API's own change
//! ([`crate::http::api::attributes::change`]) with the Settings tab's rule that a restricted
//! value may not change; a refusal shows the page again with the values as sent and each
//! refusal next to its field.

use std::collections::HashMap;

use actix_web::{HttpResponse, web};
use askama::Template;
use serde_json::{Map, Value as J, json};

use crate::engine::attributes::{Models, conditions};
use crate::http::access::Caller;
use crate::http::pages::notice::{self, Notice};
use crate::http::pages::views::Me;
use crate::http::pages::{PageError, VERSION};
use crate::http::{ApiError, AppState};
use crate::model::FieldError;

/// Fuel's groups of sections, in the Settings tab's order, with their headings.
const GROUPS: [(&str, &str); 8] = [
    ("general", "General"),
    ("security", "Security"),
    ("compute", "Compute"),
    ("network", "Network"),
    ("storage", "Storage"),
    ("logging", "Logging"),
    ("openstack_services", "OpenStack services"),
    ("other", "Other"),
];

/// An option of a select or radio.
pub struct Choice {
    pub value: String,
    pub label: String,
    pub description: String,
    pub selected: bool,
}

/// One repository of a `custom_repo_configuration`, as its row of inputs shows it.
pub struct RepoRow {
    pub index: usize,
    pub name: String,
    /// `deb URI SUITE SECTION...`
    pub line: String,
    pub priority: String,
}

/// One attribute's control.
pub struct Field {
    /// The form field's name, and its element's id.
    pub name: String,
    pub id: String,
    pub label: String,
    pub description: String,
    /// `checkbox`, `text`, `password`, `textarea`, `select`, `radio`, `list`, `number`,
    /// `repos`, or `readonly` (a type the form does not edit).
    pub kind: &'static str,
    pub value: String,
    pub checked: bool,
    pub choices: Vec<Choice>,
    pub min: String,
    pub max: String,
    pub disabled: bool,
    /// A `hide` restriction the browser evaluates again holds: rendered, not shown.
    pub hidden: bool,
    /// Disabled by what the browser does not evaluate again (a restriction that reads no
    /// setting of the form).
    pub fixed_disabled: bool,
    /// The restrictions the browser evaluates again (`[{a: action, c: tree}]`), or empty.
    pub restrict: String,
    /// Restriction messages.
    pub notes: Vec<Note>,
    /// What the control takes, when its type needs saying.
    pub hint: Option<String>,
    /// Why the last save refused its value.
    pub errors: Vec<String>,
    /// A password with a value stored (the placeholder says it is kept).
    pub password_set: bool,
    pub repos: Vec<RepoRow>,
    /// The form names of its repositories' inputs start with this.
    pub repo_prefix: String,
}

/// A restriction's message under a field or a section's heading.
pub struct Note {
    pub text: String,
    /// The index of its restriction in `data-restrict`, when the browser shows it while that
    /// restriction holds.
    pub live: Option<usize>,
    /// Its restriction does not hold now.
    pub hidden: bool,
}

impl Note {
    fn fixed(text: String) -> Note {
        Note {
            text,
            live: None,
            hidden: false,
        }
    }
}

/// A plugin section's version chooser.
pub struct Versions {
    pub name: String,
    pub choices: Vec<Choice>,
}

/// One section (a group of the document).
pub struct Section {
    pub key: String,
    pub label: String,
    /// Its switch (`metadata.enabled`), when it has one: the form name and whether it is on.
    pub toggle: Option<(String, bool)>,
    pub toggle_disabled: bool,
    pub versions: Option<Versions>,
    pub plugin: bool,
    /// A `disable` restriction holds: its switch and its attributes are disabled.
    pub disabled: bool,
    /// Disabled by a restriction the browser does not evaluate again.
    pub fixed_disabled: bool,
    /// A `hide` restriction the browser evaluates again holds: rendered, not shown.
    pub hidden: bool,
    /// The restrictions the browser evaluates again, or empty.
    pub restrict: String,
    pub notes: Vec<Note>,
    pub errors: Vec<String>,
    pub fields: Vec<Field>,
}

impl Section {
    /// Switched off: its attributes are disabled (Fuel's `toggleable && !enabled`).
    pub fn off(&self) -> bool {
        matches!(self.toggle, Some((_, false)))
    }
}

/// One of Fuel's groups with its sections.
pub struct Group {
    pub key: &'static str,
    pub label: &'static str,
    pub sections: Vec<Section>,
}

impl Group {
    /// Every section of it is hidden (until the browser shows one).
    pub fn hidden(&self) -> bool {
        self.sections.iter().all(|s| s.hidden)
    }
}

#[derive(Template)]
#[template(path = "settings.html")]
pub struct SettingsPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    id: i64,
    name: String,
    status: String,
    groups: Vec<Group>,
    /// Refusals that name no field of the form.
    general_errors: Vec<String>,
}

/// The submitted values, by form name (the last of each name counts).
type Raw = HashMap<String, Vec<String>>;

fn last<'a>(raw: &'a Raw, name: &str) -> Option<&'a str> {
    raw.get(name).and_then(|v| v.last()).map(String::as_str)
}

fn text(v: &J, k: &str) -> String {
    v.get(k)
        .and_then(J::as_str)
        .map(str::trim)
        .unwrap_or_default()
        .to_string()
}

fn weight(v: &J) -> i64 {
    v.get("weight").and_then(J::as_i64).unwrap_or(1000)
}

/// A value as one line or one item per line.
fn shown(v: &J, kind: &str) -> String {
    match (v, kind) {
        (J::Null, _) => String::new(),
        (J::String(s), _) => s.clone(),
        (J::Array(items), "list") => items
            .iter()
            .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join("\n"),
        (other, _) => other.to_string(),
    }
}

fn repo_rows(value: &J) -> Vec<RepoRow> {
    let mut rows: Vec<RepoRow> = value
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(index, r)| RepoRow {
            index,
            name: text(r, "name"),
            line: [
                text(r, "type"),
                text(r, "uri"),
                text(r, "suite"),
                text(r, "section"),
            ]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
            priority: match r.get("priority") {
                Some(J::Number(n)) => n.to_string(),
                _ => String::new(),
            },
        })
        .collect();
    // Two empty rows to add repositories.
    let n = rows.len();
    rows.extend((n..n + 2).map(|index| RepoRow {
        index,
        name: String::new(),
        line: String::new(),
        priority: String::new(),
    }));
    rows
}

fn repo_rows_raw(raw: &Raw, prefix: &str) -> Vec<RepoRow> {
    let mut rows = Vec::new();
    for index in 0..200 {
        let get = |k: &str| last(raw, &format!("{prefix}.{index}.{k}")).map(str::to_string);
        let (Some(name), Some(line)) = (get("name"), get("line")) else {
            break;
        };
        rows.push(RepoRow {
            index,
            name,
            line,
            priority: get("priority").unwrap_or_default(),
        });
    }
    rows
}

/// How the restrictions of an item (or of several, for a plugin's container and its chosen
/// version) stand on the page.
#[derive(Default)]
struct Evaluated {
    /// A `hide` restriction holds that the browser does not evaluate again: not rendered.
    fixed_hidden: bool,
    fixed_disabled: bool,
    /// A `hide` or `disable` restriction holds now, whichever.
    hidden: bool,
    disabled: bool,
    notes: Vec<Note>,
    /// `data-restrict`'s JSON, or empty.
    restrict: String,
}

fn evaluate(items: &[&J], ctx: &Ctx<'_>) -> Evaluated {
    let mut out = Evaluated::default();
    let mut live = Vec::new();
    for item in items {
        for c in conditions(item, ctx.doc, ctx.models) {
            let hide = c.holds && c.action == "hide";
            let disable = c.holds && c.action == "disable";
            match (c.error, c.tree) {
                (Some(e), _) => out.notes.push(Note::fixed(e)),
                (None, Some(tree)) => {
                    out.notes.push(Note {
                        text: c.message,
                        live: Some(live.len()),
                        hidden: !c.holds,
                    });
                    live.push(json!({"a": c.action, "c": tree}));
                }
                (None, None) => {
                    out.fixed_hidden |= hide;
                    out.fixed_disabled |= disable;
                    if c.holds {
                        out.notes.push(Note::fixed(c.message));
                    }
                }
            }
            out.hidden |= hide;
            out.disabled |= disable;
        }
    }
    if !live.is_empty() {
        out.restrict = J::Array(live).to_string();
    }
    out
}

/// The control of attribute `name` of section `section` (`attr` its document entry);
/// `locked`: its section is hidden, disabled or switched off.
fn field(section: &str, name: &str, attr: &J, locked: bool, ctx: &Ctx<'_>) -> Option<Field> {
    let ty = attr.get("type").and_then(J::as_str).unwrap_or("text");
    if ty == "hidden" {
        return None;
    }
    let r = evaluate(&[attr], ctx);
    if r.fixed_hidden {
        return None;
    }
    let form_name = format!("v.{section}.{name}");
    let value = attr.get("value").cloned().unwrap_or(J::Null);
    let kind = match ty {
        "checkbox" => "checkbox",
        "text" => "text",
        "password" => "password",
        "textarea" => "textarea",
        "select" => "select",
        "radio" => "radio",
        "text_list" | "textarea_list" => "list",
        "number" => "number",
        "custom_repo_configuration" => "repos",
        _ => "readonly",
    };
    let raw = ctx.raw.and_then(|raw| raw.get(&form_name).map(|_| raw));
    let current = |kind: &str| match raw.and_then(|raw| last(raw, &form_name)) {
        Some(s) => s.to_string(),
        None => shown(&value, kind),
    };
    let hint = match kind {
        "list" => Some("One per line.".to_string()),
        "repos" => Some(
            "A repository a row: its name, `deb URI SUITE SECTIONS`, and a priority; clear the \
             name and line to drop it."
                .to_string(),
        ),
        "readonly" => Some(format!(
            "A {ty} setting: change it through the API (fuel2 env settings upload)."
        )),
        _ => None,
    };
    let choices = attr
        .get("values")
        .and_then(J::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let data = c.get("data").map(|d| shown(d, "")).unwrap_or_default();
            Choice {
                selected: current("") == data,
                label: {
                    let l = text(c, "label");
                    if l.is_empty() { data.clone() } else { l }
                },
                description: text(c, "description"),
                value: data,
            }
        })
        .collect();
    let number = |k: &str| attr.get(k).map(|v| v.to_string()).unwrap_or_default();
    Some(Field {
        id: format!("f-{section}-{name}"),
        label: {
            let l = text(attr, "label");
            if l.is_empty() { name.to_string() } else { l }
        },
        description: text(attr, "description"),
        kind,
        checked: match raw.and_then(|raw| last(raw, &form_name)) {
            Some(s) => s == "1",
            None => value == J::Bool(true),
        },
        value: match kind {
            "password" | "repos" | "checkbox" => String::new(),
            k => current(k),
        },
        password_set: kind == "password" && value.as_str().is_some_and(|s| !s.is_empty()),
        repos: match (kind, ctx.raw) {
            ("repos", Some(raw)) if raw.contains_key(&format!("r.{section}.{name}.0.name")) => {
                repo_rows_raw(raw, &format!("r.{section}.{name}"))
            }
            ("repos", _) => repo_rows(&value),
            _ => Vec::new(),
        },
        repo_prefix: format!("r.{section}.{name}"),
        choices,
        min: number("min"),
        max: number("max"),
        disabled: r.disabled || r.hidden || locked || !ctx.operate,
        hidden: r.hidden,
        fixed_disabled: r.fixed_disabled,
        restrict: r.restrict,
        notes: r.notes,
        hint,
        errors: ctx.errors_of(section, Some(name)),
        name: form_name,
    })
}

/// What building the form needs besides one attribute.
struct Ctx<'a> {
    doc: &'a J,
    models: &'a Models,
    raw: Option<&'a Raw>,
    errors: &'a [(String, Option<String>, String)],
    operate: bool,
}

impl Ctx<'_> {
    fn errors_of(&self, section: &str, attr: Option<&str>) -> Vec<String> {
        self.errors
            .iter()
            .filter(|(s, a, _)| s == section && a.as_deref() == attr)
            .map(|(_, _, m)| m.clone())
            .collect()
    }
}

/// Where a refusal's field (`editable.G.A.value`, `editable.G.metadata.enabled`,
/// `editable.G.metadata.versions[0].A.value`) is on the form: section, attribute.
fn place(field: &str) -> Option<(String, Option<String>)> {
    let rest = field.strip_prefix("editable.")?;
    let (section, rest) = rest.split_once('.').unwrap_or((rest, ""));
    let rest = match rest.strip_prefix("metadata.versions") {
        Some(r) => {
            let r = r
                .strip_prefix('[')
                .map_or(r, |r| r.split_once(']').map_or(r, |x| x.1));
            r.strip_prefix('.').unwrap_or(r)
        }
        None if rest.starts_with("metadata") || rest.is_empty() => {
            return Some((section.to_string(), None));
        }
        None => rest,
    };
    let attr = rest.split('.').next().filter(|a| !a.is_empty())?;
    Some((section.to_string(), Some(attr.to_string())))
}

fn sections(ctx: &Ctx<'_>) -> Vec<Group> {
    let mut by_group: Vec<Group> = GROUPS
        .iter()
        .map(|(key, label)| Group {
            key,
            label,
            sections: Vec::new(),
        })
        .collect();
    let mut all: Vec<(i64, String, &'static str, Section)> = Vec::new();
    for (key, data) in ctx.doc.as_object().into_iter().flatten() {
        let meta = data.get("metadata").cloned().unwrap_or(J::Null);
        let plugin = meta.get("class").and_then(J::as_str) == Some("plugin");
        // A plugin's restrictions are its chosen version's.
        let chosen_id = meta.get("chosen_id").and_then(J::as_i64);
        let versions: Vec<&J> = if plugin {
            meta.get("versions")
                .and_then(J::as_array)
                .into_iter()
                .flatten()
                .collect()
        } else {
            Vec::new()
        };
        let chosen = versions.iter().copied().find(|v| {
            v.get("metadata")
                .and_then(|m| m.get("plugin_id"))
                .and_then(J::as_i64)
                == chosen_id
        });
        let r = evaluate(&[data, chosen.unwrap_or(&J::Null)], ctx);
        if r.fixed_hidden {
            continue;
        }
        let toggleable = meta.get("toggleable").and_then(J::as_bool) == Some(true)
            || meta.get("enabled").is_some();
        let toggle_name = format!("g.{key}");
        let on = match ctx.raw.and_then(|raw| last(raw, &toggle_name)) {
            Some(s) => s == "1",
            None => meta.get("enabled").and_then(J::as_bool).unwrap_or(false),
        };
        let mut section = Section {
            key: key.clone(),
            label: {
                let l = text(&meta, "label");
                if l.is_empty() { key.clone() } else { l }
            },
            toggle: toggleable.then_some((toggle_name, on)),
            toggle_disabled: r.disabled || r.hidden || !ctx.operate,
            versions: None,
            plugin,
            disabled: r.disabled,
            fixed_disabled: r.fixed_disabled,
            hidden: r.hidden,
            restrict: r.restrict,
            notes: r.notes,
            errors: ctx.errors_of(key, None),
            fields: Vec::new(),
        };
        let attrs: Vec<(String, J)> = if plugin {
            let pick = format!("c.{key}");
            let picked = ctx
                .raw
                .and_then(|raw| last(raw, &pick))
                .and_then(|s| s.parse::<i64>().ok())
                .or(chosen_id);
            section.versions = Some(Versions {
                choices: versions
                    .iter()
                    .filter_map(|v| {
                        let m = v.get("metadata")?;
                        let id = m.get("plugin_id")?.as_i64()?;
                        Some(Choice {
                            value: id.to_string(),
                            label: format!("version {}", text(m, "plugin_version")),
                            description: String::new(),
                            selected: Some(id) == picked,
                        })
                    })
                    .collect(),
                name: pick,
            });
            // The chosen version's attributes.
            chosen
                .and_then(J::as_object)
                .map(|m| {
                    m.iter()
                        .filter(|(k, _)| *k != "metadata")
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default()
        } else {
            data.as_object()
                .map(|m| {
                    m.iter()
                        .filter(|(k, _)| *k != "metadata")
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut attrs = attrs;
        attrs.sort_by(|a, b| weight(&a.1).cmp(&weight(&b.1)).then_with(|| a.0.cmp(&b.0)));
        let locked = section.disabled || section.hidden || section.off();
        section.fields = attrs
            .iter()
            .filter_map(|(name, attr)| field(key, name, attr, locked, ctx))
            .collect();
        if section.fields.is_empty() && section.toggle.is_none() {
            continue;
        }
        let group = meta
            .get("group")
            .and_then(J::as_str)
            .and_then(|g| GROUPS.iter().find(|(k, _)| *k == g))
            .map_or(if plugin { "other" } else { "general" }, |(k, _)| k);
        all.push((weight(&meta), key.clone(), group, section));
    }
    all.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    for (_, _, group, section) in all {
        if let Some(g) = by_group.iter_mut().find(|g| g.key == group) {
            g.sections.push(section);
        }
    }
    by_group.retain(|g| !g.sections.is_empty());
    by_group
}

/// What the page is made of: the environment, its document as this caller may see it, and
/// the models restrictions read.
async fn load(
    state: &AppState,
    caller: &Caller,
    id: i64,
) -> Result<(crate::model::Cluster, J, Models), ApiError> {
    let accepts = crate::http::api::environments::accepts(state, id).await?;
    let (settings, found) = state
        .store(move |s| s.read(|r| Ok((r.cluster_settings(id)?, r.cluster_with_release(id)?))))
        .await?;
    let (cluster, release) =
        found.ok_or_else(|| ApiError::NotFound(format!("environment {id} not found")))?;
    let doc = crate::engine::attributes::editable(
        crate::engine::attributes::Source {
            release: &accepts.release_attributes,
            plugins: &accepts.plugins,
        },
        &settings,
    );
    let models = crate::http::api::attributes::models(&cluster, &release);
    Ok((cluster, caller.shown(doc), models))
}

fn render(
    page: SettingsPage,
    status: actix_web::http::StatusCode,
) -> Result<HttpResponse, ApiError> {
    let html = page
        .render()
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .body(html))
}

fn page(
    me: Me,
    cluster: &crate::model::Cluster,
    doc: &J,
    models: &Models,
    raw: Option<&Raw>,
    refused: &[FieldError],
) -> SettingsPage {
    let mut errors = Vec::new();
    let mut general_errors = Vec::new();
    for f in refused {
        match place(&f.field) {
            Some((s, a)) if doc.get(&s).is_some() => errors.push((s, a, f.message.clone())),
            _ => general_errors.push(format!("{}: {}", f.field, f.message)),
        }
    }
    let ctx = Ctx {
        doc,
        models,
        raw,
        errors: &errors,
        operate: me.operate,
    };
    SettingsPage {
        nav: "environments",
        version: VERSION,
        groups: sections(&ctx),
        me,
        id: cluster.id,
        name: cluster.name.clone(),
        status: cluster.status.clone(),
        general_errors,
    }
}

/// `GET /environments/{id}/settings`
pub async fn settings(
    state: web::Data<AppState>,
    me: Me,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    let (cluster, doc, models) = load(&state, &caller, id).await?;
    Ok(render(
        page(me, &cluster, &doc, &models, None, &[]),
        actix_web::http::StatusCode::OK,
    )?)
}

/// A list from one-per-line text (blank lines dropped).
fn lines(s: &str) -> J {
    J::Array(
        s.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| J::String(l.to_string()))
            .collect(),
    )
}

/// A repository list from its rows (`r.G.A.i.name|line|priority`).
fn repos(raw: &Raw, prefix: &str, field: &str, out: &mut Vec<FieldError>) -> J {
    let mut list = Vec::new();
    for row in repo_rows_raw(raw, prefix) {
        let (name, line) = (row.name.trim(), row.line.trim());
        if name.is_empty() && line.is_empty() {
            continue;
        }
        let at = format!("{field}[{}]", row.index);
        let mut words = line.split_whitespace();
        let (ty, uri, suite) = (words.next(), words.next(), words.next());
        let section: Vec<&str> = words.collect();
        let (Some(ty @ ("deb" | "deb-src")), Some(uri), Some(suite)) = (ty, uri, suite) else {
            out.push(FieldError {
                field: at,
                message: format!(
                    "repository {name:?}: write it as `deb URI SUITE SECTIONS`, found {line:?}"
                ),
            });
            continue;
        };
        if name.is_empty() {
            out.push(FieldError {
                field: at,
                message: format!("the repository {uri} needs a name"),
            });
            continue;
        }
        let priority = match row.priority.trim() {
            "" => J::Null,
            p => match p.parse::<i64>() {
                Ok(n) => json!(n),
                Err(_) => {
                    out.push(FieldError {
                        field: at,
                        message: format!("repository {name}: priority {p:?} is not a number"),
                    });
                    continue;
                }
            },
        };
        list.push(json!({"name": name, "type": ty, "uri": uri, "suite": suite,
                         "section": section.join(" "), "priority": priority}));
    }
    J::Array(list)
}

/// The attributes request a submitted form makes (only what the form carried, each value of
/// its attribute's type), or the values that are not of it.
fn request(doc: &J, raw: &Raw) -> Result<J, Vec<FieldError>> {
    let mut out = Vec::new();
    let mut editable = Map::new();
    for (section, data) in doc.as_object().into_iter().flatten() {
        let meta = data.get("metadata").cloned().unwrap_or(J::Null);
        let plugin = meta.get("class").and_then(J::as_str) == Some("plugin");
        let mut sent = Map::new();
        let mut metadata = Map::new();
        if let Some(v) = last(raw, &format!("g.{section}")) {
            metadata.insert("enabled".into(), J::Bool(v == "1"));
        }
        let attrs: Map<String, J> = if plugin {
            if let Some(v) = last(raw, &format!("c.{section}")).and_then(|s| s.parse::<i64>().ok())
            {
                metadata.insert("chosen_id".into(), json!(v));
            }
            let chosen = meta.get("chosen_id").and_then(J::as_i64);
            meta.get("versions")
                .and_then(J::as_array)
                .into_iter()
                .flatten()
                .find(|v| {
                    v.get("metadata")
                        .and_then(|m| m.get("plugin_id"))
                        .and_then(J::as_i64)
                        == chosen
                })
                .and_then(J::as_object)
                .cloned()
                .unwrap_or_default()
        } else {
            data.as_object().cloned().unwrap_or_default()
        };
        for (name, attr) in attrs.iter().filter(|(k, _)| *k != "metadata") {
            let ty = attr.get("type").and_then(J::as_str).unwrap_or("text");
            let form = format!("v.{section}.{name}");
            let field = format!("editable.{section}.{name}.value");
            let value = if ty == "custom_repo_configuration" {
                let prefix = format!("r.{section}.{name}");
                if !raw.contains_key(&format!("{prefix}.0.name")) {
                    continue;
                }
                repos(raw, &prefix, &field, &mut out)
            } else {
                let Some(v) = last(raw, &form) else {
                    continue;
                };
                match ty {
                    "checkbox" => J::Bool(v == "1"),
                    // Left empty: kept as it is.
                    "password" if v.is_empty() => continue,
                    "number" if v.trim().is_empty() => J::Null,
                    "number" => match v.trim().parse::<i64>() {
                        Ok(n) => json!(n),
                        Err(_) => match v.trim().parse::<f64>() {
                            Ok(f) => json!(f),
                            Err(_) => {
                                out.push(FieldError {
                                    field,
                                    message: format!("{v:?} is not a number"),
                                });
                                continue;
                            }
                        },
                    },
                    "text_list" | "textarea_list" => lines(v),
                    _ => J::String(v.to_string()),
                }
            };
            sent.insert(name.clone(), json!({ "value": value }));
        }
        if plugin {
            let chosen = metadata
                .get("chosen_id")
                .and_then(J::as_i64)
                .or_else(|| meta.get("chosen_id").and_then(J::as_i64));
            if !sent.is_empty() {
                let mut version = sent;
                version.insert("metadata".into(), json!({ "plugin_id": chosen }));
                // The attributes shown are the version chosen when the page was made; a new
                // choice takes effect first, its own attributes are set on the next save.
                if metadata.get("chosen_id").and_then(J::as_i64)
                    == meta.get("chosen_id").and_then(J::as_i64)
                    || !metadata.contains_key("chosen_id")
                {
                    metadata.insert("versions".into(), json!([J::Object(version)]));
                }
            }
            if !metadata.is_empty() {
                editable.insert(section.clone(), json!({ "metadata": metadata }));
            }
        } else {
            if !metadata.is_empty() {
                sent.insert("metadata".into(), J::Object(metadata));
            }
            if !sent.is_empty() {
                editable.insert(section.clone(), J::Object(sent));
            }
        }
    }
    if out.is_empty() {
        Ok(json!({ "editable": editable }))
    } else {
        Err(out)
    }
}

/// `POST /environments/{id}/settings`: save; the page again with a notice, or with each
/// refusal next to its field and the values as sent.
pub async fn save(
    state: web::Data<AppState>,
    me: Me,
    caller: Caller,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    let mut raw: Raw = HashMap::new();
    for (k, v) in crate::http::access::url_form(&body) {
        raw.entry(k).or_default().push(v);
    }
    let (cluster, doc, models) = load(&state, &caller, id).await?;
    let refused = match request(&doc, &raw) {
        Err(fields) => Err(ApiError::InvalidInput {
            what: "settings",
            fields,
        }),
        Ok(req) => {
            crate::http::api::attributes::change(
                &state,
                id,
                req,
                crate::http::api::attributes::Change {
                    force: false,
                    locked: true,
                },
            )
            .await
        }
    };
    let e = match refused {
        Ok(_) => {
            return Ok(notice::redirect(
                &state,
                &format!("/environments/{id}/settings"),
                Notice::ok(format!("Settings of {} saved.", cluster.name)),
            ));
        }
        Err(e) => e,
    };
    let fields = e.fields().to_vec();
    let (shown, status) = notice::not_saved("Settings not saved", &e);
    let mut me = me;
    me.notice = Some(shown);
    Ok(render(
        page(me, &cluster, &doc, &models, Some(&raw), &fields),
        status,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_find_their_field() {
        let p = |f: &str| place(f);
        assert_eq!(
            p("editable.common.debug.value"),
            Some(("common".into(), Some("debug".into())))
        );
        assert_eq!(
            p("editable.storage.metadata.enabled"),
            Some(("storage".into(), None))
        );
        assert_eq!(
            p("editable.fw.metadata.versions[0].rules.value"),
            Some(("fw".into(), Some("rules".into())))
        );
        assert_eq!(
            p("editable.fw.metadata.versions.rules.value"),
            Some(("fw".into(), Some("rules".into())))
        );
        assert_eq!(p("body"), None);
    }

    #[test]
    fn a_form_becomes_a_request_of_typed_values() {
        let doc = json!({
            "common": {"metadata": {"label": "Common"},
                       "debug": {"type": "checkbox", "value": false},
                       "workers": {"type": "number", "value": 2},
                       "dns": {"type": "text_list", "value": ["a"]},
                       "secret": {"type": "password", "value": "x"}},
            "repo_setup": {"repos": {"type": "custom_repo_configuration", "value": []}},
        });
        let mut raw: Raw = HashMap::new();
        for (k, v) in [
            ("v.common.debug", "0"),
            ("v.common.debug", "1"),
            ("v.common.workers", "8"),
            ("v.common.dns", "8.8.8.8\n\n 1.1.1.1 "),
            ("v.common.secret", ""),
            ("r.repo_setup.repos.0.name", "ubuntu"),
            (
                "r.repo_setup.repos.0.line",
                "deb http://a/ubuntu xenial main universe",
            ),
            ("r.repo_setup.repos.0.priority", ""),
            ("r.repo_setup.repos.1.name", ""),
            ("r.repo_setup.repos.1.line", ""),
            ("r.repo_setup.repos.1.priority", ""),
        ] {
            raw.entry(k.to_string()).or_default().push(v.to_string());
        }
        let req = request(&doc, &raw).unwrap();
        assert_eq!(
            req,
            json!({"editable": {
                "common": {"debug": {"value": true}, "workers": {"value": 8},
                           "dns": {"value": ["8.8.8.8", "1.1.1.1"]}},
                "repo_setup": {"repos": {"value": [{"name": "ubuntu", "type": "deb",
                    "uri": "http://a/ubuntu", "suite": "xenial", "section": "main universe",
                    "priority": null}]}},
            }})
        );
        raw.insert("v.common.workers".into(), vec!["many".into()]);
        let e = request(&doc, &raw).unwrap_err();
        assert_eq!(e[0].field, "editable.common.workers.value");
    }
}
