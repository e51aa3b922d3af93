//! The configuration flags shared by `serve` and `healthcheck`: `--config FILE` plus one flag per
//! entry of [`crate::config::OPTIONS`], generated from that list so no option is declared twice.

use std::path::PathBuf;

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};

use crate::config::{CONFIG_FILE_ENV, ConfigError, Layers, OPTIONS};

/// `--config` and the per-option flags, as given on the command line.
#[derive(Debug, Clone, Default)]
pub struct ConfigArgs {
    pub config: Option<PathBuf>,
    pub values: Vec<(&'static str, String)>,
}

impl ConfigArgs {
    /// Layer defaults, the config file, `STOKER_*` variables and these flags.
    pub fn layers(&self) -> Result<Layers, ConfigError> {
        let mut layers = Layers::default();
        if let Some(path) = &self.config {
            layers = layers.with_file(path.clone())?;
        }
        layers = layers.with_env(|var| std::env::var(var).ok());
        for (key, value) in &self.values {
            layers = layers.with_flag(key, value.clone());
        }
        Ok(layers)
    }
}

impl Args for ConfigArgs {
    fn augment_args(cmd: Command) -> Command {
        let cmd = cmd.arg(
            Arg::new("config")
                .long("config")
                .value_name("FILE")
                .env(CONFIG_FILE_ENV)
                .value_parser(clap::value_parser!(PathBuf))
                .help("TOML configuration file (keys as in the README's table)"),
        );
        OPTIONS.iter().fold(cmd, |cmd, opt| {
            cmd.arg(
                Arg::new(opt.key)
                    .long(opt.flag)
                    .value_name("VALUE")
                    .help(format!(
                        "{} [config: {}] [env: {}] [default: {}]",
                        opt.help, opt.key, opt.env, opt.default
                    )),
            )
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for ConfigArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut args = ConfigArgs {
            config: matches.get_one::<PathBuf>("config").cloned(),
            values: Vec::new(),
        };
        for opt in OPTIONS {
            if let Some(v) = matches.get_one::<String>(opt.key) {
                args.values.push((opt.key, v.clone()));
            }
        }
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}
