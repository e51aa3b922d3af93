//! Ordering legacy plugin tasks by stage postfix, exactly as the plugin-ordering spec says
//! (fuel-specs 6.1 `plugins-deployment-order`): `stage: post_deployment/100`.
//!
//! The postfix is a number after `/`: negative and decimal allowed, `+` allowed, no postfix is 0.
//! Lower runs first; equal numbers go by plugin name (alphabetical), then by the task's position
//! in its plugin's file. The syntax is FPB's: `^(pre|post)_deployment(/[-+]?(\d*\.\d+|\d+))?$`,
//! so `1e3`, `inf`, `nan`, `5.` and spaces are refused with a message saying what is allowed,
//! instead of Nailgun's silent fallback to 0. Pure.

use std::cmp::Ordering;
use std::fmt;

/// The two stages a legacy task can run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    PreDeployment,
    PostDeployment,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::PreDeployment => "pre_deployment",
            Stage::PostDeployment => "post_deployment",
        }
    }
}

/// A parsed `stage` value.
#[derive(Debug, Clone, PartialEq)]
pub struct StageSpec {
    pub stage: Stage,
    /// The postfix as written (for messages and plans), `None` when absent.
    pub postfix: Option<String>,
    /// Its value; 0 when absent. Always finite.
    pub order: f64,
}

impl fmt::Display for StageSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.postfix {
            Some(p) => write!(f, "{}/{p}", self.stage.as_str()),
            None => f.write_str(self.stage.as_str()),
        }
    }
}

/// Why a `stage` value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid stage {value:?}: {reason}; expected pre_deployment or post_deployment, \
         optionally followed by /NUMBER, like post_deployment/100 or pre_deployment/-99.9"
)]
pub struct StageError {
    pub value: String,
    pub reason: String,
}

fn is_number(s: &str) -> bool {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    match digits.split_once('.') {
        // `\d*\.\d+`: `.5` yes, `5.` no.
        Some((int, frac)) => {
            int.bytes().all(|b| b.is_ascii_digit())
                && !frac.is_empty()
                && frac.bytes().all(|b| b.is_ascii_digit())
        }
        None => !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()),
    }
}

/// Parse a legacy task's `stage`.
pub fn parse_stage(value: &str) -> Result<StageSpec, StageError> {
    let err = |reason: String| StageError {
        value: value.to_string(),
        reason,
    };
    let (name, postfix) = match value.split_once('/') {
        Some((n, p)) => (n, Some(p)),
        None => (value, None),
    };
    let stage = match name {
        "pre_deployment" => Stage::PreDeployment,
        "post_deployment" => Stage::PostDeployment,
        other => {
            let hint =
                if other.starts_with("pre_deployment") || other.starts_with("post_deployment") {
                    "the stage name is followed by something other than /NUMBER".to_string()
                } else {
                    format!("unknown stage {other:?}")
                };
            return Err(err(hint));
        }
    };
    let Some(postfix) = postfix else {
        return Ok(StageSpec {
            stage,
            postfix: None,
            order: 0.0,
        });
    };
    if !is_number(postfix) {
        return Err(err(format!(
            "the postfix {postfix:?} is not a plain decimal number (no spaces, exponents, inf or nan)"
        )));
    }
    let order: f64 = postfix
        .parse()
        .map_err(|_| err(format!("the postfix {postfix:?} is not a number")))?;
    if !order.is_finite() {
        return Err(err(format!("the postfix {postfix:?} is out of range")));
    }
    Ok(StageSpec {
        stage,
        postfix: Some(postfix.to_string()),
        order,
    })
}

/// A legacy task's place: which plugin declared it and where in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed<T> {
    pub plugin: String,
    /// 0-based position in the plugin's task file.
    pub index: usize,
    pub stage: StageSpec,
    pub task: T,
}

/// Order one stage's tasks: by postfix, then plugin name, then file order.
pub fn order_stage<T>(tasks: &mut [Placed<T>]) {
    tasks.sort_by(|a, b| {
        a.stage
            .order
            .partial_cmp(&b.stage.order)
            // Orders are finite by construction; equal is the only other outcome.
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.plugin.cmp(&b.plugin))
            .then_with(|| a.index.cmp(&b.index))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(plugin: &str, index: usize, stage: &str) -> Placed<String> {
        Placed {
            plugin: plugin.to_string(),
            index,
            stage: parse_stage(stage).unwrap(),
            task: format!("{plugin}:{stage}"),
        }
    }

    /// The spec's acceptance example, reproduced exactly.
    #[test]
    fn spec_worked_example() {
        let mut tasks = vec![
            placed("plugin1", 0, "pre_deployment"),
            placed("plugin1", 1, "pre_deployment/100"),
            placed("plugin1", 2, "pre_deployment/-100"),
            placed("plugin1", 3, "pre_deployment/-99.9"),
            placed("plugin2", 0, "pre_deployment"),
            placed("plugin2", 1, "pre_deployment/100.0"),
            placed("plugin2", 2, "pre_deployment/-101"),
            placed("plugin2", 3, "pre_deployment/0"),
        ];
        // Input order must not matter: reverse it first.
        tasks.reverse();
        order_stage(&mut tasks);
        let got: Vec<&str> = tasks.iter().map(|t| t.task.as_str()).collect();
        assert_eq!(
            got,
            [
                "plugin2:pre_deployment/-101",
                "plugin1:pre_deployment/-100",
                "plugin1:pre_deployment/-99.9",
                "plugin1:pre_deployment",
                "plugin2:pre_deployment",
                "plugin2:pre_deployment/0",
                "plugin1:pre_deployment/100",
                "plugin2:pre_deployment/100.0",
            ]
        );
    }

    #[test]
    fn syntax_follows_fpb() {
        for ok in [
            "post_deployment",
            "post_deployment/100",
            "pre_deployment/-99.9",
            "post_deployment/+5",
            "post_deployment/.5",
            "post_deployment/-0.5",
            "post_deployment/100.0",
        ] {
            assert!(parse_stage(ok).is_ok(), "{ok}");
        }
        for bad in [
            "post_deployment:: 50",
            "post_deployment/1e3",
            "post_deployment/inf",
            "post_deployment/nan",
            "post_deployment/5.",
            "post_deployment/ 5",
            "post_deployment/",
            "post_deployment/5/6",
            "deploy/5",
        ] {
            assert!(parse_stage(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_stage("post_deployment:: 50").unwrap_err().to_string(),
            "invalid stage \"post_deployment:: 50\": the stage name is followed by something other \
             than /NUMBER; expected pre_deployment or post_deployment, optionally followed by \
             /NUMBER, like post_deployment/100 or pre_deployment/-99.9"
        );
        let spec = parse_stage("post_deployment/-99.9").unwrap();
        assert_eq!(
            (spec.order, spec.to_string().as_str()),
            (-99.9, "post_deployment/-99.9")
        );
    }

    /// The research's worked example on real corpus plugins.
    #[test]
    fn corpus_plugins_interleave_as_fuel_did() {
        let mut tasks = vec![
            placed("lma_collector", 0, "post_deployment/8000"),
            placed("lma_collector", 1, "post_deployment/8000"),
            placed("zabbix_monitoring", 0, "post_deployment/8100"),
            placed("zabbix_monitoring", 1, "post_deployment/8101"),
            placed("glance_nfs", 0, "post_deployment/700"),
            placed("cinder_netapp", 0, "post_deployment"),
            placed("cinder_netapp", 1, "post_deployment"),
            placed("lma_collector", 2, "post_deployment/8200"),
        ];
        order_stage(&mut tasks);
        let got: Vec<(&str, usize)> = tasks.iter().map(|t| (t.plugin.as_str(), t.index)).collect();
        assert_eq!(
            got,
            [
                ("cinder_netapp", 0),
                ("cinder_netapp", 1),
                ("glance_nfs", 0),
                ("lma_collector", 0),
                ("lma_collector", 1),
                ("zabbix_monitoring", 0),
                ("zabbix_monitoring", 1),
                ("lma_collector", 2),
            ]
        );
    }
}
