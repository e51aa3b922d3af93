//! `stoker serve` and `stoker healthcheck`: resolve the configuration, set up logging, run the
//! daemon on a Tokio runtime until SIGTERM or SIGINT, and tell systemd when it is ready.

use std::process::ExitCode;
use std::time::Duration;

use tracing_subscriber::EnvFilter;

use super::{ConfigArgs, EXIT_USAGE};
use crate::config::{Config, LogFormat};
use crate::daemon::Daemon;

fn resolve(args: &ConfigArgs) -> Result<Config, ExitCode> {
    args.layers()
        .and_then(|layers| layers.resolve())
        .map_err(|err| {
            eprintln!("stoker: {err}");
            ExitCode::from(EXIT_USAGE)
        })
}

fn init_logging(config: &Config) {
    // The level was validated when the config was resolved.
    let filter = EnvFilter::try_new(&config.log_level).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let result = match config.log_format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    if let Err(err) = result {
        eprintln!("stoker: cannot set up logging: {err}");
    }
}

/// Register SIGTERM and SIGINT handlers now, before anything can be reported ready, so a stop
/// request that arrives during start-up is not lost to the default action (immediate death).
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("received SIGTERM"),
            _ = int.recv() => tracing::info!("received SIGINT"),
        }
    })
}

fn notify(state: sd_notify::NotifyState<'_>) {
    if let Err(err) = sd_notify::notify(&[state]) {
        tracing::warn!("sd_notify failed: {err}");
    }
}

/// The demo's OS image, under the images directory.
const DEMO_IMAGE: &str = "demo-os.img";

/// `stoker serve`
pub fn run(args: &ConfigArgs, demo_nodes: usize) -> ExitCode {
    let unpurged = super::memory::for_daemon();
    let mut config = match resolve(args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    init_logging(&config);
    if let Some(e) = unpurged {
        tracing::warn!(
            "cannot restart with {}={} ({e}): freed memory goes back to the system after \
             mimalloc's default delay (1 s), so peaks stay higher",
            super::memory::PURGE_DELAY_ENV,
            super::memory::PURGE_DELAY_MS
        );
    }
    if demo_nodes > 0 && config.deploy.image_url.is_none() {
        // The demo's nodes write a small image of the demo's own, from the master.
        let image = config.images_dir().join(DEMO_IMAGE);
        match crate::demo::write_os_image(&image) {
            Ok(()) => config.deploy.image_url = Some(format!("/boot/images/{DEMO_IMAGE}")),
            Err(e) => tracing::warn!("cannot write the demo's OS image {}: {e}", image.display()),
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("stoker")
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("stoker: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let shutdown = shutdown_signal()?;
        let daemon = Daemon::start(&config)?;
        notify(sd_notify::NotifyState::Ready);
        let stop_demo = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let demo = if demo_nodes > 0 {
            let mut http = daemon.http_addr();
            if http.ip().is_unspecified() {
                http.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            let services = crate::demo::Services {
                http: format!("http://{http}"),
                dhcp: daemon.dhcp_addr(),
                tftp: daemon.tftp_addr().map(|mut a| {
                    if a.ip().is_unspecified() {
                        a.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
                    }
                    a
                }),
            };
            tracing::info!(nodes = demo_nodes, "starting simulated demo nodes");
            crate::demo::start(demo_nodes, &services, &config.data_dir, &stop_demo)
        } else {
            Vec::new()
        };
        let outcome = daemon.run_until(shutdown).await;
        stop_demo.store(true, std::sync::atomic::Ordering::Relaxed);
        for node in demo {
            let _ = node.join();
        }
        notify(sd_notify::NotifyState::Stopping);
        outcome
    });
    match result {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(err) => {
            tracing::error!("{err:#}");
            eprintln!("stoker: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// The URL a local client reaches the daemon at: a wildcard listen address means loopback;
/// `https://` under TLS.
pub fn local_url(config: &Config) -> String {
    let mut addr = config.http_listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let scheme = if config.http_tls.is_on() {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{addr}")
}

/// `stoker healthcheck`
pub fn healthcheck(args: &ConfigArgs, url: Option<String>, timeout: u64) -> ExitCode {
    let config = match url {
        Some(_) => args.layers().and_then(|l| l.resolve()).ok(),
        None => match resolve(args) {
            Ok(config) => Some(config),
            Err(code) => return code,
        },
    };
    let base = match (url, &config) {
        (Some(u), _) => u,
        (None, Some(config)) => local_url(config),
        (None, None) => return ExitCode::FAILURE,
    };
    let timeout = Duration::from_secs(timeout);
    let fingerprint = std::env::var("STOKER_FINGERPRINT").ok();
    let tls = match super::client::trust(&base, fingerprint.as_deref(), || config, timeout) {
        Ok(tls) => tls,
        Err(err) => {
            eprintln!("unhealthy: {base}: {err:#}");
            return ExitCode::FAILURE;
        }
    };
    let url = format!("{}/healthz", base.trim_end_matches('/'));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .tls_config(tls.unwrap_or_else(crate::tls::trusting_nothing))
        .build()
        .into();
    match agent.get(&url).call() {
        Ok(resp) if resp.status() == 200 => {
            println!("ok: {url}");
            ExitCode::SUCCESS
        }
        Ok(resp) => {
            eprintln!("unhealthy: {url} answered {}", resp.status());
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("unhealthy: {url}: {err}");
            ExitCode::FAILURE
        }
    }
}
