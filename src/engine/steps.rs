//! Ironic-style deploy steps: which steps a node runs, and in which order.
//!
//! A step is `interface.name` with a priority and `argsinfo` (each argument's description,
//! whether it is required, and, stoker's addition to Ironic's, the JSON type it takes). Steps come from stoker's built-ins, the release and plugins. A node
//! runs every step whose priority is above 0, highest priority first; equal priorities break by a
//! fixed interface order ([`Interface::rank`]); one step finishes before the next starts.
//!
//! Per-deployment user steps (like Ironic's deploy templates and `deploy_steps` argument) may
//! change a known step's priority (0 disables it), enable a step that is off by default, and pass
//! arguments, all validated against `argsinfo`: unknown arguments, missing required ones, and
//! values of the wrong type are refused, each problem named by its field in the request
//! (`steps[0].args.image_url`). A core step can be disabled but not moved. The rules and
//! messages follow Ironic's `conductor/steps.py`. Pure: data in, data out.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::state::Phase;
use crate::model::FieldError;

/// The driver interface a step belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Interface {
    Power,
    Management,
    Deploy,
    Boot,
    Firmware,
    Bios,
    Raid,
    Network,
    Storage,
}

impl Interface {
    pub const ALL: [Interface; 9] = [
        Interface::Power,
        Interface::Management,
        Interface::Deploy,
        Interface::Boot,
        Interface::Firmware,
        Interface::Bios,
        Interface::Raid,
        Interface::Network,
        Interface::Storage,
    ];

    /// Tie-break rank: among steps of equal priority, the higher rank runs first. power,
    /// management, deploy, bios and raid keep Ironic's relative order
    /// (`DEPLOYING_INTERFACE_PRIORITY`); stoker places boot, firmware, network and storage.
    pub fn rank(self) -> u8 {
        match self {
            Interface::Power => 9,
            Interface::Management => 8,
            Interface::Deploy => 7,
            Interface::Boot => 6,
            Interface::Firmware => 5,
            Interface::Bios => 4,
            Interface::Raid => 3,
            Interface::Network => 2,
            Interface::Storage => 1,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Interface::Power => "power",
            Interface::Management => "management",
            Interface::Deploy => "deploy",
            Interface::Boot => "boot",
            Interface::Firmware => "firmware",
            Interface::Bios => "bios",
            Interface::Raid => "raid",
            Interface::Network => "network",
            Interface::Storage => "storage",
        }
    }
}

impl fmt::Display for Interface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a step runs: in the bootstrap ramdisk (Ironic's deploy steps, through the agent that
/// booted from the network), on the installed operating system (Fuel's deployment tasks, through
/// the agent that runs there as a service), or on the master itself (against the node's BMC).
/// The location decides the phase: the ramdisk's and the master's steps provision, the installed
/// OS's deploy ([`Location::phase`]).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Location {
    #[default]
    Ramdisk,
    Os,
    Master,
}

impl Location {
    pub const ALL: [Location; 3] = [Location::Ramdisk, Location::Os, Location::Master];

    pub fn as_str(self) -> &'static str {
        match self {
            Location::Ramdisk => "ramdisk",
            Location::Os => "os",
            Location::Master => "master",
        }
    }

    pub fn parse(s: &str) -> Option<Location> {
        Location::ALL.into_iter().find(|l| l.as_str() == s)
    }

    /// The phase a step at this location belongs to: the installed OS's steps deploy, every
    /// other step provisions (the master's BMC steps, like RAID and BIOS settings, prepare the
    /// machine before its image is written).
    pub fn phase(self) -> Phase {
        match self {
            Location::Os => Phase::Deploy,
            Location::Ramdisk | Location::Master => Phase::Provision,
        }
    }

    /// How the master's messages name the place: "the bootstrap ramdisk".
    pub fn describe(self) -> &'static str {
        match self {
            Location::Ramdisk => "the bootstrap ramdisk",
            Location::Os => "the installed operating system",
            Location::Master => "the master",
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The JSON type an argument takes. Ironic's `argsinfo` has none; stoker's built-in steps
/// declare one for every argument, so a number where a URL belongs is refused before anything
/// starts instead of failing on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgType {
    String,
    Integer,
    Number,
    Boolean,
    Object,
    Array,
}

impl ArgType {
    pub fn as_str(self) -> &'static str {
        match self {
            ArgType::String => "string",
            ArgType::Integer => "integer",
            ArgType::Number => "number",
            ArgType::Boolean => "boolean",
            ArgType::Object => "object",
            ArgType::Array => "array",
        }
    }

    /// The type with its article, for messages: `a string`, `an object`.
    pub fn named(self) -> &'static str {
        match self {
            ArgType::String => "a string",
            ArgType::Integer => "an integer",
            ArgType::Number => "a number",
            ArgType::Boolean => "a boolean",
            ArgType::Object => "an object",
            ArgType::Array => "an array",
        }
    }

    /// Whether `v` is of this type (`null` is of none).
    pub fn accepts(self, v: &Value) -> bool {
        match self {
            ArgType::String => v.is_string(),
            ArgType::Integer => v.is_i64() || v.is_u64(),
            ArgType::Number => v.is_number(),
            ArgType::Boolean => v.is_boolean(),
            ArgType::Object => v.is_object(),
            ArgType::Array => v.is_array(),
        }
    }
}

impl fmt::Display for ArgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a JSON value is, for messages: `the number 123`, `a string`, `null`.
pub fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(_) => "a string".to_string(),
        Value::Array(_) => "an array".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

/// One argument a step takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgInfo {
    pub description: String,
    #[serde(default)]
    pub required: bool,
    /// The JSON type of the value; absent: any value (an Ironic-style `argsinfo`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub ty: Option<ArgType>,
    /// The values a string argument may take; absent: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<String>>,
}

impl ArgInfo {
    /// An argument of JSON type `ty`, any value of it.
    pub fn typed(description: &str, required: bool, ty: ArgType) -> ArgInfo {
        ArgInfo {
            description: description.to_string(),
            required,
            ty: Some(ty),
            choices: None,
        }
    }
}

/// Where a step definition came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "name", rename_all = "lowercase")]
pub enum Source {
    Builtin,
    Release(String),
    Plugin(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Builtin => f.write_str("built-in"),
            Source::Release(n) => write!(f, "release {n}"),
            Source::Plugin(n) => write!(f, "plugin {n}"),
        }
    }
}

/// A step a node can run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepDef {
    pub interface: Interface,
    pub step: String,
    /// Default priority; 0 means off unless a user step enables it.
    pub priority: u32,
    #[serde(default)]
    pub argsinfo: BTreeMap<String, ArgInfo>,
    /// Default arguments, overridden by a user step's.
    #[serde(default)]
    pub args: serde_json::Map<String, serde_json::Value>,
    /// A core step may be disabled but not given another priority.
    #[serde(default)]
    pub core: bool,
    /// Where it runs; a release's or plugin's step runs in the ramdisk unless it says otherwise.
    #[serde(default)]
    pub runs_on: Location,
    pub source: Source,
}

/// A per-deployment request about one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserStep {
    pub interface: Interface,
    pub step: String,
    pub priority: u32,
    #[serde(default)]
    pub args: serde_json::Map<String, serde_json::Value>,
}

/// A step as a node will run it: Ironic's `driver_internal_info.deploy_steps` entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedStep {
    pub interface: Interface,
    pub step: String,
    pub priority: u32,
    pub args: serde_json::Map<String, serde_json::Value>,
    pub argsinfo: BTreeMap<String, ArgInfo>,
    pub runs_on: Location,
    pub source: Source,
}

impl PlannedStep {
    /// `interface.step`, the id Ironic uses.
    pub fn id(&self) -> String {
        format!("{}.{}", self.interface, self.step)
    }
}

/// Why a set of steps was refused; every problem is reported, not just the first, each with
/// the field of the request it is about (`steps[1].args.image_url`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid deploy steps: {}", FieldError::joined(.0))]
pub struct StepsError(pub Vec<FieldError>);

fn problem(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

fn id(interface: Interface, step: &str) -> String {
    format!("{interface}.{step}")
}

/// Order `defs` as a node runs them, after applying `user` steps (`user[i]` is the request's
/// `steps[i]`).
pub fn plan(defs: &[StepDef], user: &[UserStep]) -> Result<Vec<PlannedStep>, StepsError> {
    let mut errors = Vec::new();
    let mut by_id: BTreeMap<String, &StepDef> = BTreeMap::new();
    for def in defs {
        let sid = id(def.interface, &def.step);
        if let Some(first) = by_id.insert(sid.clone(), def) {
            errors.push(problem(
                sid.clone(),
                format!(
                    "deploy step {sid} is defined twice, by {} and by {}",
                    first.source, def.source
                ),
            ));
        }
    }
    let mut seen_user = BTreeSet::new();
    let mut overrides: BTreeMap<String, &UserStep> = BTreeMap::new();
    for (i, u) in user.iter().enumerate() {
        let field = format!("steps[{i}]");
        let uid = id(u.interface, &u.step);
        if !seen_user.insert(uid.clone()) {
            errors.push(problem(
                field,
                format!("deploy step {uid} is given more than once"),
            ));
            continue;
        }
        let Some(def) = by_id.get(&uid) else {
            errors.push(problem(
                field,
                format!(
                    "no node supports the deploy step {uid}; the steps are: {}",
                    by_id.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
            continue;
        };
        check_args(&field, &uid, def, u, &mut errors);
        if u.priority > 0 {
            for (name, info) in &def.argsinfo {
                if info.required && !u.args.contains_key(name) && !def.args.contains_key(name) {
                    errors.push(problem(
                        format!("{field}.args.{name}"),
                        format!(
                            "deploy step {uid} is missing this required argument: {name} ({})",
                            info.description
                        ),
                    ));
                }
            }
            if def.core && u.priority != def.priority {
                errors.push(problem(
                    format!("{field}.priority"),
                    format!(
                        "deploy step {uid} is a core step and cannot be given another \
                         priority; it may be disabled by setting the priority to 0"
                    ),
                ));
            }
        }
        overrides.insert(uid, u);
    }
    if !errors.is_empty() {
        return Err(StepsError(errors));
    }
    let mut planned: Vec<PlannedStep> = defs
        .iter()
        .filter_map(|def| {
            let uid = id(def.interface, &def.step);
            let (priority, extra) = match overrides.get(&uid) {
                Some(u) => (u.priority, Some(&u.args)),
                None => (def.priority, None),
            };
            if priority == 0 {
                return None;
            }
            let mut args = def.args.clone();
            if let Some(extra) = extra {
                args.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            Some(PlannedStep {
                interface: def.interface,
                step: def.step.clone(),
                priority,
                args,
                argsinfo: def.argsinfo.clone(),
                runs_on: def.runs_on,
                source: def.source.clone(),
            })
        })
        .collect();
    // Provisioning before deploying, as in Fuel; within a phase the highest priority first.
    // Stable: steps equal in priority and interface keep their definition order.
    planned.sort_by_key(|s| {
        (
            s.runs_on.phase(),
            std::cmp::Reverse((s.priority, s.interface.rank())),
        )
    });
    Ok(planned)
}

/// A user step's arguments against the step's `argsinfo`: each must be declared, and of the
/// declared type.
fn check_args(field: &str, uid: &str, def: &StepDef, u: &UserStep, errors: &mut Vec<FieldError>) {
    for (name, value) in &u.args {
        let at = format!("{field}.args.{name}");
        let Some(info) = def.argsinfo.get(name) else {
            let takes = if def.argsinfo.is_empty() {
                "it takes no arguments".to_string()
            } else {
                format!(
                    "it takes: {}",
                    def.argsinfo.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            };
            errors.push(problem(
                at,
                format!("deploy step {uid} has this unexpected argument: {name}; {takes}"),
            ));
            continue;
        };
        if let Some(ty) = info.ty
            && !ty.accepts(value)
        {
            errors.push(problem(
                at,
                format!(
                    "expected {} ({}), found {}",
                    ty.named(),
                    info.description,
                    describe(value)
                ),
            ));
        } else if let (Some(choices), Some(v)) = (&info.choices, value.as_str())
            && !choices.iter().any(|c| c == v)
        {
            errors.push(problem(
                at,
                format!("{v:?} is not one of: {}", choices.join(", ")),
            ));
        }
    }
}

/// stoker's built-in deploy steps, as every node runs them unless a user step says otherwise.
/// Provisioning, in the ramdisk: `deploy.write_image` (80; on only when an image is given, since
/// a node without one keeps the operating system it has), `deploy.configure` (70: host name,
/// facts, and the service agent put onto the installed OS by a config drive or by injection,
/// `agent_install`), `power.reboot_to_disk` (10). Deploying, on the installed OS:
/// `deploy.run_tasks` (60, the node's graph tasks) and `deploy.collect_logs` (0: off unless
/// enabled).
pub fn builtins(image_url: Option<&str>, image_checksum: Option<&str>) -> Vec<StepDef> {
    builtins_with(image_url, image_checksum, AgentInstall::default())
}

/// How `deploy.configure` puts the service agent onto the installed OS.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum AgentInstall {
    /// An OpenStack `config-2` config drive for the image's cloud-init.
    #[default]
    #[serde(rename = "config-2")]
    ConfigTwo,
    /// A NoCloud `cidata` config drive for the image's cloud-init.
    #[serde(rename = "nocloud")]
    NoCloud,
    /// Into the image's root filesystem, for images without cloud-init.
    #[serde(rename = "inject")]
    Inject,
}

impl AgentInstall {
    pub const ALL: [AgentInstall; 3] = [
        AgentInstall::ConfigTwo,
        AgentInstall::NoCloud,
        AgentInstall::Inject,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AgentInstall::ConfigTwo => "config-2",
            AgentInstall::NoCloud => "nocloud",
            AgentInstall::Inject => "inject",
        }
    }

    pub fn parse(s: &str) -> Option<AgentInstall> {
        AgentInstall::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

/// [`builtins`] with the way the master's image takes its agent (`deploy.agent_install`).
pub fn builtins_with(
    image_url: Option<&str>,
    image_checksum: Option<&str>,
    install: AgentInstall,
) -> Vec<StepDef> {
    let arg = ArgInfo::typed;
    let base = |interface, step: &str, priority, core| StepDef {
        interface,
        step: step.to_string(),
        priority,
        argsinfo: BTreeMap::new(),
        args: serde_json::Map::new(),
        core,
        runs_on: Location::Ramdisk,
        source: Source::Builtin,
    };
    let mut write = base(
        Interface::Deploy,
        "write_image",
        if image_url.is_some() { 80 } else { 0 },
        false,
    );
    write.argsinfo.insert(
        "image_url".into(),
        arg(
            "HTTP URL of a raw or qcow2 disk image",
            true,
            ArgType::String,
        ),
    );
    write.argsinfo.insert(
        "checksum".into(),
        arg(
            "sha256:<hex> or md5:<hex> of the image file",
            false,
            ArgType::String,
        ),
    );
    write.argsinfo.insert(
        "disk_format".into(),
        arg("raw or qcow2 (default: detected)", false, ArgType::String),
    );
    write.argsinfo.insert(
        "target".into(),
        arg(
            "the disk to write (default: the first disk)",
            false,
            ArgType::String,
        ),
    );
    if let Some(url) = image_url {
        write.args.insert("image_url".into(), url.into());
    }
    if let Some(sum) = image_checksum {
        write.args.insert("checksum".into(), sum.into());
    }
    let mut configure = base(Interface::Deploy, "configure", 70, false);
    configure.argsinfo.insert(
        "hostname".into(),
        arg("the node's host name", false, ArgType::String),
    );
    configure.argsinfo.insert(
        "fqdn".into(),
        arg("the node's fully qualified name", false, ArgType::String),
    );
    configure.argsinfo.insert(
        "agent_install".into(),
        arg(
            "how the service agent reaches the installed OS: config-2 or nocloud (a config \
             drive for cloud-init), or inject (into the image's root filesystem)",
            false,
            ArgType::String,
        ),
    );
    if let Some(info) = configure.argsinfo.get_mut("agent_install") {
        info.choices = Some(
            AgentInstall::ALL
                .iter()
                .map(|a| a.as_str().to_string())
                .collect(),
        );
    }
    configure
        .args
        .insert("agent_install".into(), install.as_str().into());
    configure.argsinfo.insert(
        "facts".into(),
        arg(
            "facts written to /etc/stoker/facts.json",
            false,
            ArgType::Object,
        ),
    );
    let on_os = |mut s: StepDef| {
        s.runs_on = Location::Os;
        s
    };
    let mut all = vec![
        write,
        configure,
        base(Interface::Power, "reboot_to_disk", 10, false),
        on_os(base(Interface::Deploy, "run_tasks", 60, true)),
        on_os(base(Interface::Deploy, "collect_logs", 0, false)),
    ];
    all.extend(super::bmc_steps::defs());
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(interface: Interface, step: &str, priority: u32) -> StepDef {
        StepDef {
            interface,
            step: step.to_string(),
            priority,
            argsinfo: BTreeMap::new(),
            args: serde_json::Map::new(),
            core: false,
            runs_on: if step == "run_tasks" || step == "collect_logs" {
                Location::Os
            } else {
                Location::Ramdisk
            },
            source: Source::Builtin,
        }
    }

    fn user(interface: Interface, step: &str, priority: u32, args: serde_json::Value) -> UserStep {
        UserStep {
            interface,
            step: step.to_string(),
            priority,
            args: args.as_object().cloned().unwrap_or_default(),
        }
    }

    fn ids(steps: &[PlannedStep]) -> Vec<String> {
        steps.iter().map(PlannedStep::id).collect()
    }

    fn builtins() -> Vec<StepDef> {
        let mut write = def(Interface::Deploy, "write_image", 80);
        write.core = true;
        write.argsinfo.insert(
            "image_url".into(),
            ArgInfo {
                description: "HTTP URL of a raw or qcow2 image".into(),
                required: true,
                ty: Some(ArgType::String),
                choices: None,
            },
        );
        write
            .args
            .insert("image_url".into(), json!("http://m/boot/images/os.img"));
        let mut bios = def(Interface::Bios, "apply_configuration", 0);
        bios.argsinfo.insert(
            "settings".into(),
            ArgInfo {
                description: "BIOS settings to apply".into(),
                required: true,
                ty: None,
                choices: None,
            },
        );
        vec![
            def(Interface::Deploy, "configure", 70),
            write,
            def(Interface::Deploy, "run_tasks", 60),
            def(Interface::Power, "reboot_to_disk", 10),
            def(Interface::Deploy, "collect_logs", 10),
            bios,
            def(Interface::Raid, "create_configuration", 0),
        ]
    }

    #[test]
    fn highest_priority_first_ties_by_interface_and_zero_never_runs() {
        let steps = plan(&builtins(), &[]).unwrap();
        assert_eq!(
            ids(&steps),
            [
                "deploy.write_image",
                "deploy.configure",
                "power.reboot_to_disk",
                "deploy.run_tasks",
                "deploy.collect_logs"
            ]
        );
        assert_eq!(steps[0].args["image_url"], "http://m/boot/images/os.img");
    }

    #[test]
    fn user_steps_reprioritise_enable_and_disable() {
        let steps = plan(
            &builtins(),
            &[
                user(
                    Interface::Bios,
                    "apply_configuration",
                    90,
                    json!({"settings": [{"name": "HT", "value": "off"}]}),
                ),
                user(Interface::Deploy, "collect_logs", 0, json!({})),
                user(Interface::Deploy, "run_tasks", 75, json!({})),
            ],
        )
        .unwrap();
        // run_tasks at 75 outranks configure (70) but stays in its phase: the installed OS's
        // steps come after every provisioning step, whatever their priorities.
        assert_eq!(
            ids(&steps),
            [
                "bios.apply_configuration",
                "deploy.write_image",
                "deploy.configure",
                "power.reboot_to_disk",
                "deploy.run_tasks"
            ]
        );
        assert_eq!(steps[0].args["settings"][0]["name"], "HT");
    }

    #[test]
    fn every_problem_is_reported_in_ironic_words() {
        let err = plan(
            &builtins(),
            &[
                user(
                    Interface::Bios,
                    "apply_configuration",
                    90,
                    json!({"bogus": 1}),
                ),
                user(Interface::Deploy, "write_image", 95, json!({})),
                user(Interface::Raid, "nope", 10, json!({})),
                user(Interface::Deploy, "configure", 10, json!({})),
                user(Interface::Deploy, "configure", 20, json!({})),
            ],
        )
        .unwrap_err();
        let got: Vec<String> = err.0.iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                "steps[0].args.bogus: deploy step bios.apply_configuration has this unexpected argument: bogus; it takes: settings",
                "steps[0].args.settings: deploy step bios.apply_configuration is missing this required argument: settings (BIOS settings to apply)",
                "steps[1].priority: deploy step deploy.write_image is a core step and cannot be given another priority; it may be disabled by setting the priority to 0",
                "steps[2]: no node supports the deploy step raid.nope; the steps are: bios.apply_configuration, deploy.collect_logs, deploy.configure, deploy.run_tasks, deploy.write_image, power.reboot_to_disk, raid.create_configuration",
                "steps[4]: deploy step deploy.configure is given more than once",
            ]
        );
        // A core step may still be disabled.
        let steps = plan(
            &builtins(),
            &[user(Interface::Deploy, "write_image", 0, json!({}))],
        )
        .unwrap();
        assert!(!ids(&steps).contains(&"deploy.write_image".to_string()));
    }

    #[test]
    fn two_sources_defining_one_step_conflict() {
        let mut defs = builtins();
        let mut dup = def(Interface::Deploy, "configure", 50);
        dup.source = Source::Plugin("lma".into());
        defs.push(dup);
        let err = plan(&defs, &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid deploy steps: deploy.configure: deploy step deploy.configure is defined twice, by built-in and by plugin lma"
        );
    }

    #[test]
    fn ties_on_priority_and_interface_keep_definition_order() {
        let defs = vec![
            def(Interface::Deploy, "b", 10),
            def(Interface::Deploy, "a", 10),
            def(Interface::Raid, "c", 10),
            def(Interface::Power, "d", 10),
        ];
        assert_eq!(
            ids(&plan(&defs, &[]).unwrap()),
            ["power.d", "deploy.b", "deploy.a", "raid.c"]
        );
        let mut ranks: Vec<u8> = Interface::ALL.iter().map(|i| i.rank()).collect();
        ranks.dedup();
        assert_eq!(ranks.len(), Interface::ALL.len(), "ranks are distinct");
    }

    #[test]
    fn argument_values_are_checked_against_their_declared_types() {
        let defs = super::builtins(Some("http://m/os.img"), None);
        let err = plan(
            &defs,
            &[
                user(
                    Interface::Deploy,
                    "write_image",
                    80,
                    json!({"image_url": 123, "checksum": null, "target": "/dev/sdb"}),
                ),
                user(
                    Interface::Deploy,
                    "configure",
                    70,
                    json!({"facts": ["not", "an", "object"], "hostname": true}),
                ),
            ],
        )
        .unwrap_err();
        let got: Vec<(String, String)> = err
            .0
            .iter()
            .map(|e| (e.field.clone(), e.message.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "steps[0].args.checksum".to_string(),
                    "expected a string (sha256:<hex> or md5:<hex> of the image file), found null"
                        .to_string()
                ),
                (
                    "steps[0].args.image_url".to_string(),
                    "expected a string (HTTP URL of a raw or qcow2 disk image), found the number 123"
                        .to_string()
                ),
                (
                    "steps[1].args.facts".to_string(),
                    "expected an object (facts written to /etc/stoker/facts.json), found an array"
                        .to_string()
                ),
                (
                    "steps[1].args.hostname".to_string(),
                    "expected a string (the node's host name), found the boolean true".to_string()
                ),
            ]
        );
        // The same arguments with the right types pass, and reach the planned step.
        let steps = plan(
            &defs,
            &[user(
                Interface::Deploy,
                "write_image",
                80,
                json!({"image_url": "http://m/other.img", "checksum": "sha256:00"}),
            )],
        )
        .unwrap();
        let write = steps.iter().find(|s| s.step == "write_image").unwrap();
        assert_eq!(write.args["image_url"], "http://m/other.img");
    }

    #[test]
    fn an_untyped_argument_takes_any_value_and_types_accept_only_their_own() {
        let steps = plan(
            &builtins(),
            &[user(
                Interface::Bios,
                "apply_configuration",
                90,
                json!({"settings": 5}),
            )],
        )
        .unwrap();
        assert_eq!(steps[0].args["settings"], 5);
        let cases = [
            (ArgType::String, json!("x"), json!(1)),
            (ArgType::Integer, json!(3), json!(3.5)),
            (ArgType::Number, json!(3.5), json!("3.5")),
            (ArgType::Boolean, json!(false), json!("false")),
            (ArgType::Object, json!({}), json!([])),
            (ArgType::Array, json!([]), json!({})),
        ];
        for (ty, good, bad) in cases {
            assert!(ty.accepts(&good), "{ty} {good}");
            assert!(!ty.accepts(&bad), "{ty} {bad}");
            assert!(!ty.accepts(&serde_json::Value::Null), "{ty} null");
        }
    }
}
