//! `stoker login`, `stoker user add|passwd|list|remove` and `stoker token create|list|revoke`.
//! User commands go through the API with an admin's token; with `--offline` they work on the
//! database itself, which is allowed only while no daemon serves it (the first admin, or a
//! lost password, on a stopped master). Passwords are read from standard input
//! (`--password-stdin`) or, when none is given, generated and printed once.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::{Value, json};

use super::client::{ClientArgs, call, token_file};
use super::output::{self, Out, OutputArgs, cell_text};
use crate::auth::{Role, check_user_name, password};

/// Where a user command acts: through the API of a running master, or on the database of a
/// stopped one.
#[derive(Debug, clap::Args)]
pub struct Target {
    #[command(flatten)]
    client: ClientArgs,
    /// Work on the database of a stopped master instead of the API
    #[arg(long)]
    offline: bool,
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// List users
    List {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Add a user (the password is read from stdin with --password-stdin, else generated)
    Add {
        name: String,
        /// admin, operator or viewer
        #[arg(long, default_value = "viewer")]
        role: String,
        #[arg(long)]
        password_stdin: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Set a user's password (from stdin with --password-stdin, else generated and printed)
    Passwd {
        name: String,
        #[arg(long)]
        password_stdin: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Remove a user (never the last admin)
    Remove {
        name: String,
        #[command(flatten)]
        target: Target,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a personal API token; it is printed once
    Create {
        name: String,
        /// At most your own role; default: your role
        #[arg(long)]
        role: Option<String>,
        /// Days until it expires
        #[arg(long, default_value_t = 90)]
        days: i64,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// List your tokens (--all: everybody's, for admins)
    List {
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        client: ClientArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Revoke a token by id
    Revoke {
        id: i64,
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// Read one line (a password) from standard input.
fn read_password() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("cannot read the password from standard input")?;
    Ok(line.trim_end_matches(['\n', '\r']).to_string())
}

/// The password to set: from stdin, or a new random one (printed once).
fn new_password(from_stdin: bool) -> anyhow::Result<(String, bool)> {
    if from_stdin {
        Ok((read_password()?, false))
    } else {
        Ok((password::generate()?, true))
    }
}

/// Open the database of a stopped master (refused while one answers on its address).
fn offline_store(client: &ClientArgs) -> anyhow::Result<crate::store::Store> {
    let config = client
        .config
        .layers()
        .and_then(|l| l.resolve())
        .context("cannot resolve the configuration to find the database")?;
    let url = format!("{}/healthz", super::serve::local_url(&config));
    let probe = super::client::probe_agent(std::time::Duration::from_secs(2));
    if probe.get(&url).call().is_ok() {
        bail!(
            "a daemon serves this master ({url}): use the API (without --offline) with an admin's token"
        );
    }
    let path = config.database_path();
    if !path.exists() {
        bail!("no database at {}", path.display());
    }
    Ok(crate::store::Store::open(&path)?)
}

fn print_users(out: &Out, users: Vec<Value>) -> anyhow::Result<()> {
    if out.structured() {
        return out.document(&Value::Array(users));
    }
    let mut t = out.table(&["NAME", "ROLE", "CREATED"]);
    for u in &users {
        t.add_row(vec![
            cell_text(&u["name"]),
            cell_text(&u["role"]),
            output::time(u["created_at"].as_i64()),
        ]);
    }
    out.print_table(&t)
}

pub fn run_user(cmd: UserCommand) -> anyhow::Result<ExitCode> {
    let now = crate::clock::now();
    match cmd {
        UserCommand::List {
            target: Target { client, offline },
            output,
        } => {
            let users: Vec<Value> = if offline {
                let store = offline_store(&client)?;
                store
                    .read(|tx| tx.users())?
                    .into_iter()
                    .map(|u| serde_json::to_value(u).unwrap_or(Value::Null))
                    .collect()
            } else {
                call(&client, "GET", "/api/v1/users", None)?
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            };
            print_users(&Out::of(&output), users)?;
        }
        UserCommand::Add {
            name,
            role,
            password_stdin,
            target: Target { client, offline },
        } => {
            check_user_name(&name)?;
            let role: Role = role.parse()?;
            let (secret, generated) = new_password(password_stdin)?;
            if offline {
                let hash = password::hash(&secret)?;
                offline_store(&client)?
                    .write(|tx| tx.create_user(&name, role, &hash, now).map(|_| ()))?;
            } else {
                call(
                    &client,
                    "POST",
                    "/api/v1/users",
                    Some(json!({"name": name, "role": role, "password": secret})),
                )?;
            }
            println!("added {name} ({role})");
            if generated {
                println!("password: {secret}");
            }
        }
        UserCommand::Passwd {
            name,
            password_stdin,
            target: Target { client, offline },
        } => {
            let (secret, generated) = new_password(password_stdin)?;
            if offline {
                let hash = password::hash(&secret)?;
                offline_store(&client)?.write(|tx| tx.set_password(&name, &hash, now))?;
            } else {
                call(
                    &client,
                    "PUT",
                    &format!("/api/v1/users/{name}"),
                    Some(json!({"password": secret})),
                )?;
            }
            println!("password of {name} changed");
            if generated {
                println!("password: {secret}");
            }
        }
        UserCommand::Remove {
            name,
            target: Target { client, offline },
        } => {
            if offline {
                offline_store(&client)?.write(|tx| tx.remove_user(&name))?;
            } else {
                call(&client, "DELETE", &format!("/api/v1/users/{name}"), None)?;
            }
            println!("removed {name}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_token(cmd: TokenCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        TokenCommand::Create {
            name,
            role,
            days,
            client,
        } => {
            let made = call(
                &client,
                "POST",
                "/api/v1/tokens",
                Some(json!({"name": name, "role": role, "expires_in_days": days})),
            )?;
            eprintln!(
                "token {} ({}, id {}) created; it is shown only now:",
                made["name"].as_str().unwrap_or(""),
                made["role"].as_str().unwrap_or(""),
                made["id"]
            );
            println!("{}", made["token"].as_str().unwrap_or(""));
        }
        TokenCommand::List {
            all,
            client,
            output,
        } => {
            let path = if all {
                "/api/v1/tokens?all=true"
            } else {
                "/api/v1/tokens"
            };
            let list = call(&client, "GET", path, None)?;
            let out = Out::of(&output);
            if out.structured() {
                out.document(&list)?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut t = out.table(&["ID", "USER", "NAME", "KIND", "ROLE", "EXPIRES"]);
            for tok in list.as_array().into_iter().flatten() {
                t.add_row(vec![
                    cell_text(&tok["id"]),
                    cell_text(&tok["user"]),
                    cell_text(&tok["name"]),
                    cell_text(&tok["kind"]),
                    cell_text(&tok["role"]),
                    output::time(tok["expires_at"].as_i64()),
                ]);
            }
            out.print_table(&t)?;
        }
        TokenCommand::Revoke { id, client } => {
            call(&client, "DELETE", &format!("/api/v1/tokens/{id}"), None)?;
            println!("token {id} revoked");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `stoker login USER`: trade the password (stdin, or STOKER_PASSWORD) for a token, kept in
/// the token file (mode 0600) for the other commands.
pub fn login(user: &str, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let secret = match std::env::var("STOKER_PASSWORD") {
        Ok(p) if !p.is_empty() => p,
        _ => {
            if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                eprint!("password for {user} (it is shown as you type): ");
                let _ = std::io::stderr().flush();
            }
            read_password()?
        }
    };
    let url = format!("{}/api/v1/login", client.base()?);
    let mut resp = client
        .agent()?
        .post(&url)
        .send_json(json!({"username": user, "password": secret}))
        .with_context(|| format!("cannot reach the master at {url}"))?;
    let status = resp.status().as_u16();
    let v: Value = serde_json::from_str(&resp.body_mut().read_to_string().unwrap_or_default())
        .unwrap_or(Value::Null);
    if status != 201 {
        bail!(
            "sign-in refused ({status}): {}",
            v["message"].as_str().unwrap_or("")
        );
    }
    let token = v["token"].as_str().unwrap_or_default();
    let file = token_file().context("no HOME or XDG_CONFIG_HOME to keep the token in")?;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&file)
            .with_context(|| format!("cannot write {}", file.display()))?;
        writeln!(f, "{token}")?;
    }
    println!(
        "signed in as {user} ({}); token kept in {}",
        v["role"].as_str().unwrap_or(""),
        file.display()
    );
    Ok(ExitCode::SUCCESS)
}
