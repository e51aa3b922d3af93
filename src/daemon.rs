//! The composition root: the only place that wires the store, the engine and the network
//! servers together. [`Daemon::start`] creates the data directory, opens and migrates the
//! database and binds the sockets; [`Daemon::run_until`] serves until a shutdown future
//! resolves, then stops gracefully (in-flight requests finish) and closes the database cleanly.
//! Signals and sd_notify readiness are handled by the caller (`stoker serve`).

use std::future::Future;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::config::Config;
use crate::dhcp::reply::{BootFiles, DhcpConfig};
use crate::dhcp::server::{DhcpServer, DhcpStats};
use crate::http::{self, AppState};
use crate::store::Store;
use crate::tftp::server::{FileSource, TftpServer, TftpStats};

/// Counters of the PXE services that run (`None`: that service is disabled).
#[derive(Debug, Clone, Default)]
pub struct PxeStats {
    pub dhcp: Option<Arc<DhcpStats>>,
    pub tftp: Option<Arc<TftpStats>>,
}

/// Files the TFTP server offers when the root directory has no file of that name:
/// `stoker.ipxe`, an iPXE script that chains to this master's per-node boot script (for sites
/// whose own DHCP server hands out an iPXE that then needs a script to run).
fn embedded_tftp_files(
    config: &Config,
    boot_port: u16,
) -> std::collections::BTreeMap<String, Arc<[u8]>> {
    let base = match config.dhcp.server_ip {
        Some(ip) => boot_base(config, &ip.to_string(), boot_port),
        None => boot_base(config, "${next-server}", boot_port),
    };
    let script = format!("#!ipxe\nchain {base}/boot/${{mac}}.ipxe\n");
    std::collections::BTreeMap::from([("stoker.ipxe".to_string(), Arc::from(script.into_bytes()))])
}

/// The host of `http.public_url`, without brackets or port.
fn public_host(config: &Config) -> Option<String> {
    let url = config.http_public_url.as_deref()?;
    let host = http::transport::url_host(url);
    Some(
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
    )
}

/// The plain-HTTP base URL iPXE uses for the DHCP answer's boot file and TFTP's
/// `stoker.ipxe` ([`http::transport::boot_base`]).
fn boot_base(config: &Config, host: &str, boot_port: u16) -> String {
    http::transport::boot_base(
        config.http_public_url.as_deref(),
        config.http_tls.is_on(),
        host,
        boot_port,
    )
}

/// The names a self-signed certificate is made for: loopback, `http.public_url`'s host, the
/// listen address (every local address when it is unspecified) and the DHCP server's address.
fn self_signed_names(config: &Config) -> Vec<String> {
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    names.extend(public_host(config));
    let ip = config.http_listen.ip();
    if ip.is_unspecified() {
        match if_addrs::get_if_addrs() {
            Ok(addrs) => names.extend(addrs.into_iter().map(|a| a.ip().to_string())),
            Err(err) => tracing::warn!(%err, "cannot list local addresses for the certificate"),
        }
    } else {
        names.push(ip.to_string());
    }
    names.extend(config.dhcp.server_ip.map(|ip| ip.to_string()));
    let mut seen = std::collections::BTreeSet::new();
    names.retain(|n| seen.insert(n.clone()));
    names
}

/// The certificate to serve, per `http.tls`; `None` for plain HTTP.
fn tls_identity(config: &Config) -> anyhow::Result<Option<crate::tls::Identity>> {
    use crate::config::TlsMode;
    let identity = match &config.http_tls {
        TlsMode::Off => return Ok(None),
        TlsMode::Files { cert, key } => crate::tls::Identity::load(cert, key)
            .context("cannot serve HTTPS with http.tls_cert and http.tls_key")?,
        TlsMode::SelfSigned => {
            let dir = config.data_dir.join("tls");
            crate::tls::Identity::self_signed(&dir, &self_signed_names(config))
                .context("cannot make or read the self-signed certificate in data_dir/tls/")?
        }
    };
    match identity.origin {
        crate::tls::Origin::SelfSigned { created: true } => tracing::warn!(
            fingerprint = %identity.fingerprint,
            path = %identity.cert_path.display(),
            names = ?self_signed_names(config),
            "made a self-signed certificate: nodes get its fingerprint and pin it; a browser \
             asks once to trust it (compare the fingerprint)"
        ),
        _ => tracing::info!(
            fingerprint = %identity.fingerprint,
            path = %identity.cert_path.display(),
            "serving HTTPS"
        ),
    }
    Ok(Some(identity))
}

/// A started daemon: sockets bound, database open, not yet serving requests until awaited.
pub struct Daemon {
    http_addr: SocketAddr,
    boot_addr: Option<SocketAddr>,
    dhcp_addr: Option<SocketAddr>,
    tftp_addr: Option<SocketAddr>,
    server: actix_web::dev::Server,
    dhcp: Option<DhcpServer>,
    tftp: Option<TftpServer>,
    store: Arc<Store>,
    auth: crate::config::AuthConfig,
    /// What moving chains of graphs on needs (the planner, the data dir): the API's state.
    chains: AppState,
    /// The data directory's lock, held until the daemon has stopped (after the database
    /// closed): no restore and no second daemon meanwhile.
    _lock: crate::lock::DataLock,
}

/// The master's admin network (Nailgun's `fuelweb_admin`) from its first PXE subnet
/// (`dhcp.subnets`: the subnet, its pool, its router); without one, Fuel's default admin
/// network, 10.20.0.0/24 with the pool 10.20.0.3-10.20.0.254 behind the master at 10.20.0.2.
fn admin_network(config: &Config) -> crate::engine::network::NetworkGroup {
    use crate::engine::network::ip::{Cidr, Ip, Range};
    use crate::engine::network::model;
    let ip = |a: std::net::Ipv4Addr| Ip(u32::from(a));
    match config.dhcp.subnets.first() {
        Some(s) => model::admin_network(
            &Cidr {
                addr: ip(s.network),
                prefix: s.prefix,
            },
            Some(Range {
                first: ip(s.pool_start),
                last: ip(s.pool_end),
            }),
            s.router.map(ip),
        ),
        None => model::admin_network(
            &Cidr {
                addr: Ip(0x0a14_0000),
                prefix: 24,
            },
            Some(Range {
                first: Ip(0x0a14_0003),
                last: Ip(0x0a14_00fe),
            }),
            Some(Ip(0x0a14_0002)),
        ),
    }
}

/// Every node's agent keeps a connection to the master (its held `next`, keep-alive), so
/// 10,000 nodes need more open files than the 1,024 a process gets by default: the soft limit
/// is raised to the hard one (the systemd unit sets both), and a limit too low for that is said.
fn raise_open_files() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        if let Err(err) = setrlimit(Resource::Nofile, limit) {
            tracing::debug!(%err, "cannot raise the open-file limit");
        }
    }
    match getrlimit(Resource::Nofile).current {
        Some(n) if n < 16_384 => tracing::warn!(
            limit = n,
            "open files are limited to {n}: each node's agent holds a connection, so fewer \
             nodes than that can be served at once; raise LimitNOFILE (ulimit -n)"
        ),
        n => tracing::info!(limit = ?n, "open-file limit"),
    }
}

impl Daemon {
    /// Prepare everything that can fail before the daemon reports ready. Must be called inside a
    /// Tokio runtime.
    pub fn start(config: &Config) -> anyhow::Result<Daemon> {
        raise_open_files();
        http::transport::check_backlog();
        std::fs::create_dir_all(&config.data_dir).with_context(|| {
            format!("cannot create data directory {}", config.data_dir.display())
        })?;
        let lock = crate::lock::DataLock::acquire(&config.data_dir, "serve")?;
        let db_path = config.database_path();
        let store = Arc::new(Store::open(&db_path)?);
        tracing::info!(path = %db_path.display(), schema = crate::store::migrations::latest(), "database open");
        let recovered = crate::package::install::recover(&store, &config.data_dir)
            .context("cannot clear what interrupted plugin installs left")?;
        if recovered != crate::package::install::Recovered::default() {
            tracing::warn!(removed = ?recovered.removed, finished = ?recovered.finished, "cleared interrupted plugin installs");
        }
        if config.install_bundled {
            crate::package::bundled::install_on_first_start(
                &store,
                &config.data_dir,
                crate::clock::now(),
            );
        }
        match crate::auth::first_start::ensure_admin(&store, &config.data_dir, crate::clock::now())
        {
            Ok(Some(path)) => tracing::warn!(
                path = %path.display(),
                "first start: created the user admin; its password is in {} (readable by this \
                 user only): sign in and change it",
                path.display()
            ),
            Ok(None) => {}
            Err(e) => return Err(anyhow::anyhow!(e).context("cannot create the first admin")),
        }
        store
            .write(|tx| {
                tx.set_admin_network(&admin_network(config))?;
                tx.ensure_network_configs()
            })
            .context("cannot record the networks")?;
        let snapshots = Arc::new(crate::snapshot::Snapshots::new(&config.data_dir, config));
        snapshots
            .recover(&store, crate::clock::now())
            .context("cannot clear what an interrupted snapshot left")?;
        let listener = http::transport::listen(config.http_listen)
            .with_context(|| format!("cannot listen on {} (http.listen)", config.http_listen))?;
        let http_addr = listener.local_addr()?;
        let identity = tls_identity(config)?;
        let boot_listener = match &identity {
            Some(_) => Some(
                http::transport::listen(config.http_boot_listen).with_context(|| {
                    format!(
                        "cannot listen on {} (http.boot_listen, iPXE's plain HTTP under TLS)",
                        config.http_boot_listen
                    )
                })?,
            ),
            None => None,
        };
        let boot_addr = boot_listener
            .as_ref()
            .map(TcpListener::local_addr)
            .transpose()?;
        let boot_port = boot_addr.unwrap_or(http_addr).port();
        let mut pxe = PxeStats::default();
        let dhcp = match (config.dhcp.enabled, config.dhcp.server_ip) {
            (true, Some(server_ip)) => {
                // Replies to a test's socket (`reply_to`) need no interface; real ones do.
                let device = match (&config.dhcp.interface, config.dhcp.reply_to) {
                    (Some(name), _) => Some(name.clone()),
                    (None, Some(_)) => None,
                    (None, None) => Some(crate::dhcp::server::interface_of(server_ip)?),
                };
                let socket = crate::dhcp::server::bind(config.dhcp.listen, device.as_deref())?;
                if let Some(device) = &device {
                    tracing::info!(%device, "DHCP bound to interface");
                }
                let stats = Arc::new(DhcpStats::default());
                pxe.dhcp = Some(Arc::clone(&stats));
                let dhcp_config = DhcpConfig {
                    server_ip,
                    mode: config.dhcp.mode,
                    subnets: config.dhcp.subnets.clone(),
                    boot: BootFiles {
                        http_base: boot_base(config, &server_ip.to_string(), boot_port),
                        bios: "undionly.kpxe".to_string(),
                        uefi_x64: "ipxe.efi".to_string(),
                        uefi_arm64: "ipxe-arm64.efi".to_string(),
                    },
                    offer_hold: 60,
                };
                Some(DhcpServer::new(
                    socket,
                    dhcp_config,
                    config.dhcp.reply_to,
                    config.dhcp.max_rate,
                    Arc::clone(&store),
                    stats,
                )?)
            }
            _ => None,
        };
        let dhcp_addr = dhcp.as_ref().map(DhcpServer::local_addr).transpose()?;
        let tftp = if config.tftp.enabled {
            let socket = crate::tftp::server::bind(config.tftp.listen)?;
            let stats = Arc::new(TftpStats::default());
            pxe.tftp = Some(Arc::clone(&stats));
            let root = config.tftp_root();
            std::fs::create_dir_all(&root)
                .with_context(|| format!("cannot create TFTP root {}", root.display()))?;
            let limits = crate::tftp::session::Limits {
                max_blksize: config.tftp.max_blksize,
                ..crate::tftp::session::Limits::default()
            };
            Some(TftpServer::new(
                socket,
                FileSource::new(root, embedded_tftp_files(config, boot_port)),
                limits,
                config.tftp.max_transfers,
                stats,
            ))
        } else {
            None
        };
        let tftp_addr = tftp.as_ref().map(TftpServer::local_addr).transpose()?;
        let subnets = if pxe.dhcp.is_some() {
            config.dhcp.subnets.clone()
        } else {
            Vec::new()
        };
        let metrics = Arc::new(crate::metrics::Metrics::new(
            pxe.dhcp.clone(),
            pxe.tftp.clone(),
            subnets,
        ));
        let writer =
            crate::store::GroupWriter::observed(Arc::clone(&store), metrics.group_observer())
                .context("cannot start the database writer thread")?;
        let bmcs = crate::bmc::actions::Bmcs::new(&config.data_dir, &config.bmc)?;
        let bmc = Arc::new(crate::bmc::runner::Runner::new(
            Arc::new(bmcs),
            Arc::clone(&store),
            writer.clone(),
        ));
        let state = AppState {
            store: Arc::clone(&store),
            writer,
            boot: http::BootSettings {
                tls: identity.as_ref().map(|id| http::transport::TlsInfo {
                    fingerprint: id.fingerprint.to_string(),
                    chain_pem: Arc::from(id.chain_pem.as_str()),
                    api_port: http_addr.port(),
                    boot_port,
                }),
                ..http::BootSettings::from_config(config)
            },
            data_dir: config.data_dir.clone(),
            hello_limit: Arc::new(http::limit::RateLimiter::new(
                http::limit::Limits::default(),
                std::time::Instant::now(),
            )),
            service_hello_limit: Arc::new(http::limit::RateLimiter::new(
                http::limit::Limits::service_hello(),
                std::time::Instant::now(),
            )),
            boot_limit: Arc::new(http::limit::RateLimiter::new(
                http::limit::Limits::boot_scripts(),
                std::time::Instant::now(),
            )),
            pxe,
            deploy: config.deploy.clone(),
            auth: http::AuthSettings::from_config(config),
            login_limit: Arc::new(http::limit::RateLimiter::new(
                http::limit::Limits::login(),
                std::time::Instant::now(),
            )),
            package_limits: config.package_limits,
            plans: Arc::new(crate::planner::Plans::new(config.plan_yaql_budget)),
            agent_binary: config
                .agent_binary
                .clone()
                .or_else(|| std::env::current_exe().ok()),
            chains: Arc::new(crate::chains::Chains::default()),
            snapshots,
            bmc,
            metrics,
        };
        let chains = state.clone();
        let tls = identity
            .as_ref()
            .map(crate::tls::Identity::shared_config)
            .transpose()?;
        let listeners = http::Listeners {
            main: listener,
            boot: boot_listener,
            tls,
        };
        let server = http::serve(
            listeners,
            state,
            Duration::from_secs(config.http_shutdown_timeout),
        )?;
        match (&identity, boot_addr) {
            (Some(id), Some(boot)) => tracing::info!(
                fingerprint = %id.fingerprint,
                "listening on https://{http_addr}; iPXE's boot files on http://{boot}"
            ),
            _ => tracing::info!("listening on http://{http_addr}"),
        }
        Ok(Daemon {
            http_addr,
            boot_addr,
            dhcp_addr,
            tftp_addr,
            server,
            dhcp,
            tftp,
            store,
            auth: config.auth,
            chains,
            _lock: lock,
        })
    }

    /// The address the HTTP server is bound to (useful when the config asked for port 0).
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// Under TLS, the address of the plain-HTTP listener for iPXE's boot files.
    pub fn boot_addr(&self) -> Option<SocketAddr> {
        self.boot_addr
    }

    /// The address the DHCP server is bound to, when it runs.
    pub fn dhcp_addr(&self) -> Option<SocketAddr> {
        self.dhcp_addr
    }

    /// The address the TFTP server is bound to, when it runs.
    pub fn tftp_addr(&self) -> Option<SocketAddr> {
        self.tftp_addr
    }

    /// Serve until `shutdown` resolves (or the server stops by itself), then stop gracefully:
    /// no new connections, in-flight requests finish within the shutdown timeout, and the
    /// database is checkpointed and closed.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        let handle = self.server.handle();
        let mut server = tokio::spawn(self.server);
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            // An error means the sender is gone, which also means stop.
            let _ = rx.wait_for(|stop| *stop).await;
        };
        let mut udp = Vec::new();
        if let Some(dhcp) = self.dhcp {
            udp.push(tokio::spawn(dhcp.run(stopped(stop_rx.clone()))));
        }
        if let Some(tftp) = self.tftp {
            udp.push(tokio::spawn(tftp.run(stopped(stop_rx.clone()))));
        }
        udp.push(tokio::spawn(watch_timeouts(
            Arc::clone(&self.store),
            self.chains.deploy.boot_timeout_s,
            stopped(stop_rx.clone()),
        )));
        let bmc = Arc::clone(&self.chains.bmc);
        let writer = self.chains.writer.clone();
        udp.push(tokio::spawn(drive_chains(
            self.chains,
            stopped(stop_rx.clone()),
        )));
        udp.push(tokio::spawn(run_bmc_steps(
            Arc::clone(&bmc),
            Arc::clone(&self.store),
            stopped(stop_rx.clone()),
        )));
        udp.push(tokio::spawn(sync_power(
            bmc,
            Arc::clone(&self.store),
            stopped(stop_rx.clone()),
        )));
        udp.push(tokio::spawn(prune_access(
            Arc::clone(&self.store),
            self.auth,
            stopped(stop_rx.clone()),
        )));
        udp.push(tokio::spawn(prune_boot_tokens(
            Arc::clone(&self.store),
            stopped(stop_rx.clone()),
        )));
        udp.push(tokio::spawn(prune_ran(
            Arc::clone(&self.store),
            writer,
            stopped(stop_rx.clone()),
        )));
        tokio::select! {
            () = shutdown => {
                tracing::info!("shutting down: finishing in-flight requests");
                // Agents' calls held for work are answered now (`wait`), not at their end.
                self.store.stop_holding();
                let _ = stop_tx.send(true);
                // Event streams never finish by themselves: end them first.
                self.store.events().close();
                handle.stop(true).await;
                server.await.context("HTTP server task failed")??;
            }
            res = &mut server => {
                res.context("HTTP server task failed")??;
                tracing::warn!("HTTP server stopped by itself");
            }
        }
        let _ = stop_tx.send(true);
        for task in udp {
            if let Err(err) = task.await {
                tracing::warn!(%err, "a PXE service task failed");
            }
        }
        // Worker threads drop their handles to the store as they wind down, which can be a
        // moment after the server future resolves.
        let mut store = self.store;
        for _ in 0..200 {
            match Arc::try_unwrap(store) {
                Ok(owned) => {
                    owned.close()?;
                    tracing::info!("database closed");
                    return Ok(());
                }
                Err(shared) => {
                    store = shared;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
        tracing::warn!("database still referenced after shutdown; it closes on exit");
        Ok(())
    }
}

/// Every `period` (the first time at start) run `job` on the blocking pool with the current
/// time and pass what it did to `report`, until `stop` resolves. A failed run is logged as
/// `what` and the next one tries again.
async fn periodically<T, J, R>(
    period: Duration,
    what: &'static str,
    store: Arc<Store>,
    stop: impl Future<Output = ()>,
    job: J,
    report: R,
) where
    T: Send + 'static,
    J: Fn(&Store, i64) -> crate::store::Result<T> + Clone + Send + 'static,
    R: Fn(T),
{
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = tick.tick() => {}
        }
        let (s, job) = (Arc::clone(&store), job.clone());
        let now = crate::clock::now();
        match tokio::task::spawn_blocking(move || job(&s, now)).await {
            Ok(Ok(done)) => report(done),
            Ok(Err(err)) => tracing::error!(%err, "cannot {what}"),
            Err(err) => tracing::error!(%err, "the task to {what} failed"),
        }
    }
}

/// Once a second, fail the deploy steps that outlived their timeout (a node that died
/// mid-step never reports), and those no agent took in time (`boot_s` after a boot).
async fn watch_timeouts(store: Arc<Store>, boot_s: u64, stop: impl Future<Output = ()>) {
    periodically(
        Duration::from_secs(1),
        "check deploy step timeouts",
        store,
        stop,
        move |s, now| s.write(|tx| tx.expire_runs(now, boot_s)),
        |n| {
            if n > 0 {
                tracing::warn!(runs = n, "deploy steps timed out");
            }
        },
    )
    .await;
}

/// Once a second (and at start, so a chain cut short by a stop carries on), move chains of
/// graphs on: the next graph starts when the one before it ended well, a chain ends when its
/// last graph did or one failed or was stopped ([`crate::chains::tick`]).
async fn drive_chains(state: AppState, stop: impl Future<Output = ()>) {
    let store = Arc::clone(&state.store);
    periodically(
        Duration::from_secs(1),
        "move chains of graphs on",
        store,
        stop,
        move |s, now| {
            let master = crate::deployer::Master {
                store: s,
                writer: &state.writer,
                data_dir: &state.data_dir,
                settings: &state.deploy,
                plans: &state.plans,
            };
            crate::chains::tick(&master, &state.chains, now)
        },
        |_| {},
    )
    .await;
}

/// Once a second, start the deploy steps due on the master (against nodes' BMCs).
async fn run_bmc_steps(
    runner: Arc<crate::bmc::runner::Runner>,
    store: Arc<Store>,
    stop: impl Future<Output = ()>,
) {
    periodically(
        Duration::from_secs(1),
        "start the master's BMC steps",
        store,
        stop,
        move |_, _| Ok(runner.tick()),
        |_| {},
    )
    .await;
}

/// Every few seconds, read the power of the BMCs that are due (each once per
/// `bmc.sync_interval`, the unreachable ones backing off).
async fn sync_power(
    runner: Arc<crate::bmc::runner::Runner>,
    store: Arc<Store>,
    stop: impl Future<Output = ()>,
) {
    let period = Duration::from_secs(runner.bmcs.interval.clamp(1, 5));
    periodically(
        period,
        "read the BMCs' power states",
        store,
        stop,
        move |s, now| Ok(runner.bmcs.sweep(s, now, 100_000)),
        |sweep| {
            if sweep.failed > 0 {
                tracing::warn!(
                    read = sweep.read,
                    failed = sweep.failed,
                    "some BMCs did not answer"
                );
            }
        },
    )
    .await;
}

/// Every ten minutes (and at start), forget expired sessions and tokens, and audit entries
/// past `audit.retention_days`.
async fn prune_access(
    store: Arc<Store>,
    auth: crate::config::AuthConfig,
    stop: impl Future<Output = ()>,
) {
    let limits = crate::store::SessionLimits {
        idle: auth.session_idle,
        absolute: auth.session_lifetime,
    };
    let retention = auth.audit_retention_days.saturating_mul(86_400);
    periodically(
        Duration::from_secs(600),
        "prune expired credentials and old audit entries",
        store,
        stop,
        move |s, now| {
            s.write(|tx| {
                Ok((
                    tx.prune_credentials(now, limits)?,
                    tx.prune_audit(now.saturating_sub(retention))?,
                ))
            })
        },
        |(credentials, audit)| {
            if credentials + audit > 0 {
                tracing::info!(
                    credentials,
                    audit,
                    "expired sessions, tokens and audit entries pruned"
                );
            }
        },
    )
    .await;
}

/// Every 10 s, delete what successful deployments ran, copied into their environment's
/// deployed state at their end (`WriteTxn::prune_ran`), a thousand rows a write, each queued
/// through the group writer behind the agents' calls already waiting (as a deployment's runs
/// are written), so they go on between them.
async fn prune_ran(
    store: Arc<Store>,
    writer: crate::store::GroupWriter,
    stop: impl Future<Output = ()>,
) {
    const PART: usize = 1_000;
    periodically(
        Duration::from_secs(10),
        "prune what finished deployments ran",
        store,
        stop,
        move |_, _| {
            let mut pruned = 0;
            loop {
                let n = writer.write_blocking(|tx| tx.prune_ran(PART))?;
                pruned += n;
                if n < PART {
                    return Ok(pruned);
                }
            }
        },
        |n| {
            if n > 0 {
                tracing::debug!(rows = n, "pruned what finished deployments ran");
            }
        },
    )
    .await;
}

/// Once a minute, forget the boot tokens that can no longer be used (used or expired), so
/// scripts asked for MACs that never boot leave nothing behind.
async fn prune_boot_tokens(store: Arc<Store>, stop: impl Future<Output = ()>) {
    periodically(
        Duration::from_secs(60),
        "prune boot tokens",
        store,
        stop,
        |s, now| s.write(|tx| tx.prune_boot_tokens(now, http::BOOT_TOKEN_LIFETIME)),
        |n| {
            if n > 0 {
                tracing::debug!(tokens = n, "pruned used and expired boot tokens");
            }
        },
    )
    .await;
}
