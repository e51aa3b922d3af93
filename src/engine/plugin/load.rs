//! Reading a package: `metadata.yaml`, the fixed-name files of its package version, and the
//! `*_path` loader of the release-as-plugin spec.
//!
//! For every key ending in `_path` with a string value (at any depth of `metadata.yaml`, in
//! `releases[]` and `graphs[]` too): a folder is kept as is; `repository_path` and
//! `deployment_scripts_path` are always kept; otherwise the value is a file or a glob, every
//! match (sorted by path) is parsed (`.yaml`/`.yml`/`.json` as data, `.txt`/`.md`/`.sh` as
//! text) and the results merged — lists concatenated, dicts shallow-merged (later files win),
//! one scalar kept as is — and put under the key without `_path`. A mix of list and dict roots
//! is an error naming each file and its root type (the spec's rule; Fuel's code merged them).
//! Loaded content is not searched again, except a `base_release` template, whose own `_path`
//! keys are loaded too (a stoker extension, so one template can name its files).
//! Pure: files come through [`PackageFiles`].

use super::diag::{Diagnostics, join};
use super::files::{PackageFiles, is_glob, normalize};
use super::yaml::{self, Budget, Node, Pos, Value};

/// Package format versions stoker reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PackageVersion {
    V1,
    V2,
    V3,
    V4,
    V5,
}

impl PackageVersion {
    pub fn parse(text: &str) -> Option<PackageVersion> {
        Some(match text {
            "1.0.0" => PackageVersion::V1,
            "2.0.0" => PackageVersion::V2,
            "3.0.0" => PackageVersion::V3,
            "4.0.0" => PackageVersion::V4,
            "5.0.0" => PackageVersion::V5,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PackageVersion::V1 => "1.0.0",
            PackageVersion::V2 => "2.0.0",
            PackageVersion::V3 => "3.0.0",
            PackageVersion::V4 => "4.0.0",
            PackageVersion::V5 => "5.0.0",
        }
    }

    /// The oldest Fuel release this package format works with (FPB 4.2.0's `basic_version`).
    pub fn min_fuel(self) -> &'static str {
        match self {
            PackageVersion::V1 => "6.0",
            PackageVersion::V2 => "6.1",
            PackageVersion::V3 => "7.0",
            PackageVersion::V4 => "8.0",
            PackageVersion::V5 => "9.0",
        }
    }
}

/// A fixed-name file of the package format and the key its content takes in the loaded tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedFile {
    pub file: &'static str,
    pub key: &'static str,
    pub since: PackageVersion,
}

/// Fixed-name files, by the package version that introduced them.
pub const FIXED_FILES: &[FixedFile] = &[
    FixedFile {
        file: "environment_config.yaml",
        key: "attributes_metadata",
        since: PackageVersion::V1,
    },
    FixedFile {
        file: "tasks.yaml",
        key: "tasks",
        since: PackageVersion::V1,
    },
    FixedFile {
        file: "deployment_tasks.yaml",
        key: "deployment_tasks",
        since: PackageVersion::V3,
    },
    FixedFile {
        file: "network_roles.yaml",
        key: "network_roles_metadata",
        since: PackageVersion::V3,
    },
    FixedFile {
        file: "node_roles.yaml",
        key: "roles_metadata",
        since: PackageVersion::V3,
    },
    FixedFile {
        file: "volumes.yaml",
        key: "volumes_metadata",
        since: PackageVersion::V3,
    },
    FixedFile {
        file: "components.yaml",
        key: "components_metadata",
        since: PackageVersion::V4,
    },
    FixedFile {
        file: "nic_config.yaml",
        key: "nic_attributes_metadata",
        since: PackageVersion::V5,
    },
    FixedFile {
        file: "bond_config.yaml",
        key: "bond_attributes_metadata",
        since: PackageVersion::V5,
    },
    FixedFile {
        file: "node_config.yaml",
        key: "node_attributes_metadata",
        since: PackageVersion::V5,
    },
];

/// A fixed-name file as read.
#[derive(Debug, Clone)]
pub struct LoadedFile {
    pub spec: FixedFile,
    /// `None` when the file does not exist or does not parse.
    pub node: Option<Node>,
    pub exists: bool,
}

/// A package as read: the metadata tree with every `_path` resolved, and the fixed files.
#[derive(Debug, Clone)]
pub struct Package {
    /// The metadata file's name (`metadata.yaml`, or `.yml`/`.json`).
    pub metadata_file: String,
    /// The metadata tree; null when it is missing or unreadable.
    pub metadata: Node,
    /// The metadata as written, before `_path` keys were loaded.
    pub raw_metadata: Node,
    pub package_version: Option<PackageVersion>,
    pub files: Vec<LoadedFile>,
    /// What reading found (parse errors, missing files, mixed roots ...).
    pub diagnostics: Diagnostics,
}

impl Package {
    /// A fixed file's content by name (`deployment_tasks.yaml`).
    pub fn file(&self, name: &str) -> Option<&LoadedFile> {
        self.files.iter().find(|f| f.spec.file == name)
    }

    pub fn file_node(&self, name: &str) -> Option<&Node> {
        self.file(name).and_then(|f| f.node.as_ref())
    }

    /// The plugin's name from its metadata, or "" when it has none.
    pub fn name(&self) -> &str {
        self.metadata
            .get("name")
            .and_then(Node::as_str)
            .unwrap_or("")
    }

    /// The plugin's version (a string, or a YAML number written unquoted).
    pub fn version(&self) -> String {
        match self.metadata.get("version").map(|n| &n.value) {
            Some(Value::Str(s)) => s.clone(),
            Some(Value::Int(i)) => i.to_string(),
            Some(Value::Float(f)) => f.to_string(),
            _ => String::new(),
        }
    }

    /// `releases[]` records.
    pub fn release_records(&self) -> &[Node] {
        self.metadata
            .get("releases")
            .and_then(Node::as_seq)
            .unwrap_or(&[])
    }

    /// Whether any `releases[]` record has `is_release: true`.
    pub fn is_release_plugin(&self) -> bool {
        self.release_records().iter().any(is_release_record)
    }

    /// The whole loaded tree as JSON (Nailgun's shape: metadata plus one key per fixed file).
    pub fn manifest(&self) -> serde_json::Value {
        let mut tree = self.metadata.to_json();
        if let Some(map) = tree.as_object_mut() {
            for f in &self.files {
                if let Some(node) = &f.node {
                    map.insert(f.spec.key.to_string(), node.to_json());
                }
            }
        }
        tree
    }
}

/// Whether a `releases[]` record defines a release.
pub fn is_release_record(record: &Node) -> bool {
    record.get("is_release").and_then(Node::as_bool) == Some(true)
}

/// Parse one file as data or text by its extension.
fn parse_file(
    files: &dyn PackageFiles,
    path: &str,
    budget: &Budget,
    diags: &mut Diagnostics,
) -> Option<Node> {
    let pos = Pos::file(path);
    let bytes = match files.read(path) {
        Ok(b) => b,
        Err(e) => {
            diags.error(&pos, "", e.to_string());
            return None;
        }
    };
    let Ok(text) = String::from_utf8(bytes) else {
        diags.error(&pos, "", "the file is not UTF-8 text");
        return None;
    };
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("yaml" | "yml" | "json") => match yaml::parse_within(path, &text, budget) {
            Ok(parsed) => {
                for (p, message) in parsed.warnings {
                    diags.warning(&p, "", message);
                }
                Some(parsed.root)
            }
            Err(e) => {
                diags.error(&e.pos, "", format!("cannot parse: {}", e.message));
                None
            }
        },
        Some("txt" | "md" | "sh") => Some(Node::new(
            Value::Str(text),
            Pos {
                file: pos.file,
                line: 1,
                column: 1,
            },
        )),
        _ => {
            diags.error(
                &pos,
                "",
                "unsupported file type for a _path key (use .yaml, .yml, .json, .txt, .md or .sh)",
            );
            None
        }
    }
}

/// Load a `_path` value: one file or every match of a glob, merged.
fn load_path(
    files: &dyn PackageFiles,
    value: &str,
    at: &Node,
    field: &str,
    budget: &Budget,
    diags: &mut Diagnostics,
) -> Option<Node> {
    let target = match normalize(value) {
        Ok(t) => t,
        Err(e) => {
            diags.error(&at.pos, field, e.to_string());
            return None;
        }
    };
    let matches: Vec<String> = if is_glob(&target) {
        match files.glob(&target) {
            Ok(all) => all
                .into_iter()
                .filter(|p| {
                    let ext = p.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
                    matches!(
                        ext.as_deref(),
                        Some("yaml" | "yml" | "json" | "txt" | "md" | "sh")
                    )
                })
                .collect(),
            Err(e) => {
                diags.error(&at.pos, field, e.to_string());
                return None;
            }
        }
    } else if files.is_file(&target) {
        vec![target.clone()]
    } else {
        Vec::new()
    };
    if matches.is_empty() {
        diags.error(
            &at.pos,
            field,
            format!("can't find a file or folder matching {value:?} in the package"),
        );
        return None;
    }
    let mut loaded = Vec::new();
    for path in &matches {
        let before = diags.has_errors();
        match parse_file(files, path, budget, diags) {
            Some(node) => loaded.push((path.clone(), node)),
            None if !before => return None,
            None => return None,
        }
    }
    merge_loaded(loaded, at, field, diags)
}

/// Merge the roots of several files in path order.
fn merge_loaded(
    loaded: Vec<(String, Node)>,
    at: &Node,
    field: &str,
    diags: &mut Diagnostics,
) -> Option<Node> {
    let non_null: Vec<(String, Node)> = loaded.into_iter().filter(|(_, n)| !n.is_null()).collect();
    if non_null.is_empty() {
        return Some(Node::new(Value::Null, at.pos.clone()));
    }
    if non_null.len() == 1 {
        return non_null.into_iter().next().map(|(_, n)| n);
    }
    let lists = non_null
        .iter()
        .filter(|(_, n)| n.as_seq().is_some())
        .count();
    let dicts = non_null
        .iter()
        .filter(|(_, n)| n.as_map().is_some())
        .count();
    if lists > 0 && dicts > 0 {
        let roots: Vec<String> = non_null
            .iter()
            .map(|(p, n)| format!("{p} ({})", root_kind(n)))
            .collect();
        diags.error(
            &at.pos,
            field,
            format!(
                "the matched files mix list and dict roots, which cannot be merged: {}",
                roots.join(", ")
            ),
        );
        return None;
    }
    let pos = non_null[0].1.pos.clone();
    if lists > 0 {
        let mut out = Vec::new();
        for (_, n) in non_null {
            match n.value {
                Value::Seq(items) => out.extend(items),
                other => out.push(Node::new(other, n.pos)),
            }
        }
        return Some(Node::new(Value::Seq(out), pos));
    }
    if dicts > 0 {
        let mut merged = Node::new(Value::Map(Vec::new()), pos);
        for (path, n) in non_null {
            match n.value {
                Value::Map(entries) => {
                    for (k, v) in entries {
                        merged.insert(&k.text, v);
                    }
                }
                _ => {
                    diags.error(
                        &at.pos,
                        field,
                        format!("{path} has a {} root among dict roots", root_kind(&n)),
                    );
                    return None;
                }
            }
        }
        return Some(merged);
    }
    Some(Node::new(
        Value::Seq(non_null.into_iter().map(|(_, n)| n).collect()),
        pos,
    ))
}

fn root_kind(n: &Node) -> &'static str {
    match n.value {
        Value::Seq(_) => "list",
        Value::Map(_) => "dict",
        _ => "scalar",
    }
}

/// How many `base_release_path` files may chain (a base naming a base...): a file that
/// names itself would otherwise be loaded forever.
const MAX_BASE_CHAIN: usize = 8;

/// Resolve every `_path` key under `node`, recursively. `field` is the node's dotted path;
/// `chain` counts the `base_release_path` files already followed to get here.
fn resolve_paths(
    files: &dyn PackageFiles,
    node: &mut Node,
    field: &str,
    chain: usize,
    budget: &Budget,
    diags: &mut Diagnostics,
) {
    match &mut node.value {
        Value::Seq(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                resolve_paths(files, item, &join(field, i), chain, budget, diags);
            }
        }
        Value::Map(entries) => {
            let mut replaced = Vec::new();
            for (key, value) in entries.iter_mut() {
                let here = join(field, &key.text);
                let Some(stem) = key.text.strip_suffix("_path") else {
                    resolve_paths(files, value, &here, chain, budget, diags);
                    continue;
                };
                let Some(path) = value.as_str().map(str::to_string) else {
                    continue;
                };
                if stem.is_empty() {
                    continue;
                }
                if files.is_dir(&path) {
                    diags.info(&value.pos, &here, format!("{path} is a folder, kept as is"));
                    continue;
                }
                if matches!(
                    key.text.as_str(),
                    "repository_path" | "deployment_scripts_path"
                ) {
                    continue;
                }
                if stem == "base_release" && chain >= MAX_BASE_CHAIN {
                    diags.error(
                        &value.pos,
                        &here,
                        format!(
                            "base_release_path files chain deeper than {MAX_BASE_CHAIN} (does a \
                             base name itself?)"
                        ),
                    );
                    continue;
                }
                if let Some(mut loaded) = load_path(files, &path, value, &here, budget, diags) {
                    if stem == "base_release" {
                        resolve_paths(
                            files,
                            &mut loaded,
                            &join(field, stem),
                            chain + 1,
                            budget,
                            diags,
                        );
                    }
                    replaced.push((key.text.clone(), stem.to_string(), loaded));
                }
            }
            for (old, new, loaded) in replaced {
                node.remove(&old);
                node.insert(&new, loaded);
            }
        }
        _ => {}
    }
}

/// FPB 4.2.0's plugin name rule (`consts.PLUGIN_NAME_PATTERN`, `^[a-z0-9_-]+$`): lowercase
/// ASCII letters, digits, `_` and `-`, at least one. Python's `$` also lets one trailing newline
/// through (`"name\n"`); stoker does not, since the name becomes file and folder names.
pub fn is_plugin_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// The plugin name check every reader of a package goes through: [`load`] runs it, so the
/// validator reports it and the planner (which plans only packages that load without errors)
/// refuses a package whose name the validator refuses. A name that is not a string is the
/// validator's type error, not this one.
fn check_name(metadata_file: &str, metadata: &Node, d: &mut Diagnostics) {
    let Some(node) = metadata.get("name") else {
        return;
    };
    if let Some(name) = node.as_str()
        && !is_plugin_name(name)
    {
        d.error(
            &node.pos,
            "name",
            format!(
                "{name:?} in {metadata_file} is not a valid plugin name: use lowercase letters, \
                 digits, _ and - (fuel-plugin-builder's ^[a-z0-9_-]+$)"
            ),
        );
    }
}

/// Read a package: metadata, `_path` keys, fixed-name files. All its YAML shares one node
/// budget ([`yaml::MAX_NODES`]), so many files cannot add up to more than one file may hold.
pub fn load(files: &dyn PackageFiles) -> Package {
    let budget = Budget::default();
    let mut diags = Diagnostics::default();
    let metadata_file = ["metadata.yaml", "metadata.yml", "metadata.json"]
        .into_iter()
        .find(|f| files.is_file(f))
        .unwrap_or("metadata.yaml")
        .to_string();
    let meta_pos = Pos::file(&metadata_file);
    let raw = if files.is_file(&metadata_file) {
        parse_file(files, &metadata_file, &budget, &mut diags)
    } else {
        diags.error(
            &meta_pos,
            "",
            "the package has no metadata.yaml: is this a plugin directory?",
        );
        None
    };
    if raw.as_ref().is_some_and(Node::is_null) {
        // FPB 4.2.0 loads it as None, which its metadata schema (`type: object`) refuses
        // ("File 'metadata.yaml' is empty"; its version lookup crashes on it first).
        diags.error(
            &meta_pos,
            "",
            format!(
                "{metadata_file} is empty (nothing but comments, or null): a plugin's metadata \
                 is a mapping with its name, version, package_version and releases"
            ),
        );
    }
    let raw = raw.unwrap_or_else(|| Node::new(Value::Null, meta_pos.clone()));
    if !raw.is_null() && raw.as_map().is_none() {
        diags.error(
            &raw.pos,
            "",
            format!("metadata must be a mapping, not {}", raw.type_name()),
        );
    }
    check_name(&metadata_file, &raw, &mut diags);
    let package_version = match raw.get("package_version").map(|n| &n.value) {
        Some(Value::Str(s)) => PackageVersion::parse(s),
        _ => None,
    };
    let mut metadata = raw.clone();
    // Package versions before 5.0.0 have no `_path` loader.
    if package_version.is_none_or(|v| v >= PackageVersion::V5) && metadata.as_map().is_some() {
        resolve_paths(files, &mut metadata, "", 0, &budget, &mut diags);
    }
    let version = package_version.unwrap_or(PackageVersion::V5);
    let loaded = FIXED_FILES
        .iter()
        .filter(|f| f.since <= version)
        .map(|spec| {
            let exists = files.is_file(spec.file);
            let node = if exists {
                parse_file(files, spec.file, &budget, &mut diags)
            } else {
                None
            };
            LoadedFile {
                spec: *spec,
                node,
                exists,
            }
        })
        .collect();
    Package {
        metadata_file,
        metadata,
        raw_metadata: raw,
        package_version,
        files: loaded,
        diagnostics: diags,
    }
}

#[cfg(test)]
mod tests {
    use super::super::files::MemFiles;
    use super::*;

    fn pkg(files: &[(&str, &str)]) -> Package {
        let mut m = MemFiles::new();
        for (p, t) in files {
            m.add(p, *t).unwrap();
        }
        m.add_dir("repositories/ubuntu").unwrap();
        load(&m)
    }

    const META: &str = "name: p\npackage_version: '5.0.0'\nreleases:\n  - is_release: true\n";

    #[test]
    fn path_keys_load_files_globs_and_keep_folders() {
        let p = pkg(&[
            (
                "metadata.yaml",
                &format!(
                    "{META}    roles_path: roles/*.yaml\n    tasks_path: graphs/a.yaml\n    \
                     repository_path: repositories/ubuntu\n    notes_path: README.md\n    \
                     graphs:\n      - type: x\n        tasks_path: graphs/*.yaml\n"
                ),
            ),
            (
                "roles/b.yaml",
                "compute: {name: C}\ncontroller: {name: Old}\n",
            ),
            ("roles/a.yaml", "controller: {name: Ctl}\n"),
            ("graphs/a.yaml", "- id: a\n"),
            ("graphs/b.yaml", "- id: b\n- id: c\n"),
            ("README.md", "hello"),
        ]);
        assert!(!p.diagnostics.has_errors(), "{:?}", p.diagnostics);
        let r = &p.release_records()[0];
        let j = r.to_json();
        assert_eq!(j["roles"]["controller"]["name"], "Old", "later file wins");
        assert_eq!(j["roles"]["compute"]["name"], "C");
        assert_eq!(j["tasks"], serde_json::json!([{"id": "a"}]));
        assert_eq!(j["notes"], "hello");
        assert_eq!(j["repository_path"], "repositories/ubuntu");
        assert_eq!(j["graphs"][0]["tasks"].as_array().unwrap().len(), 3);
        assert!(j.get("roles_path").is_none());
        // Positions survive: the loaded role points into its own file.
        let role = r.get("roles").unwrap().get("compute").unwrap();
        assert_eq!((&*role.pos.file, role.pos.line), ("roles/b.yaml", 1));
    }

    #[test]
    fn mixed_roots_are_an_error_naming_each_file() {
        let p = pkg(&[
            (
                "metadata.yaml",
                &format!("{META}    roles_path: r/*.yaml\n"),
            ),
            ("r/a.yaml", "- x\n"),
            ("r/b.yaml", "k: v\n"),
        ]);
        let e = &p.diagnostics.0[0];
        assert!(
            e.message.contains("r/a.yaml (list)") && e.message.contains("r/b.yaml (dict)"),
            "{e:?}"
        );
        assert_eq!((e.line, e.field.as_str()), (5, "releases.0.roles_path"));
    }

    #[test]
    fn missing_files_are_errors_and_keep_the_key() {
        let p = pkg(&[(
            "metadata.yaml",
            &format!("{META}    roles_path: nope.yaml\n"),
        )]);
        assert!(p.diagnostics.has_errors());
        assert!(p.release_records()[0].get("roles_path").is_some());
    }

    #[test]
    fn a_base_release_that_names_itself_is_an_error_not_a_crash() {
        let p = pkg(&[
            (
                "metadata.yaml",
                &format!("{META}    base_release_path: base.yaml\n"),
            ),
            ("base.yaml", "base_release_path: base.yaml\nx: 1\n"),
        ]);
        let e = p
            .diagnostics
            .iter()
            .find(|d| d.message.contains("chain deeper"))
            .unwrap_or_else(|| panic!("{:?}", p.diagnostics));
        assert_eq!(&*e.file, "base.yaml");
    }

    #[test]
    fn an_empty_metadata_and_a_bad_name_are_load_errors() {
        for text in ["", "# only a comment\n", "null\n"] {
            let p = pkg(&[("metadata.yaml", text)]);
            let e: Vec<String> = p.diagnostics.iter().map(|d| d.render()).collect();
            assert_eq!(e.len(), 1, "{text:?}: {e:?}");
            assert!(
                e[0].starts_with("metadata.yaml: error: metadata.yaml is empty"),
                "{e:?}"
            );
        }
        for (name, ok) in [
            ("p", true),
            ("my_plugin-2", true),
            ("My", false),
            ("a b", false),
            ("a.b", false),
            ("ü", false),
            ("", false),
            ("name\n", false),
        ] {
            let p = pkg(&[("metadata.yaml", &format!("name: {name:?}\n"))]);
            let errors: Vec<&str> = p
                .diagnostics
                .iter()
                .filter(|d| d.field == "name")
                .map(|d| d.message.as_str())
                .collect();
            assert_eq!(errors.is_empty(), ok, "{name:?}: {errors:?}");
            assert_eq!(is_plugin_name(name), ok, "{name:?}");
            if !ok {
                assert!(
                    errors[0].starts_with(&format!("{name:?} in metadata.yaml is not a valid")),
                    "{errors:?}"
                );
            }
        }
        // Not a string: the validator's type error, not a name error here.
        assert!(
            !pkg(&[("metadata.yaml", "name: [a]\n")])
                .diagnostics
                .has_errors()
        );
    }

    #[test]
    fn every_file_of_a_package_pays_from_one_budget() {
        // Ten files of 30,000 nodes each: each fits a budget of its own, all together do not.
        let big: String = (0..30_000).map(|i| format!("- {i}\n")).collect();
        let mut files = vec![(
            "metadata.yaml".to_string(),
            format!("{META}    attributes_path: a/*.yaml\n"),
        )];
        for i in 0..10 {
            files.push((
                format!("a/{i}.yaml"),
                format!("k{i}:\n{}", big.replace("- ", "  - ")),
            ));
        }
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let p = pkg(&refs);
        let e = p
            .diagnostics
            .iter()
            .find(|d| d.message.contains("YAML nodes"))
            .unwrap_or_else(|| panic!("{:?}", p.diagnostics));
        assert!(e.file.starts_with("a/"), "{e:?}");
    }
}
