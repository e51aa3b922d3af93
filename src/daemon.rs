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
use crate::http::{self, AppState};
use crate::store::Store;

/// A started daemon: sockets bound, database open, not yet serving requests until awaited.
pub struct Daemon {
    http_addr: SocketAddr,
    server: actix_web::dev::Server,
    store: Arc<Store>,
}

impl Daemon {
    /// Prepare everything that can fail before the daemon reports ready. Must be called inside a
    /// Tokio runtime.
    pub fn start(config: &Config) -> anyhow::Result<Daemon> {
        std::fs::create_dir_all(&config.data_dir).with_context(|| {
            format!("cannot create data directory {}", config.data_dir.display())
        })?;
        let db_path = config.database_path();
        let store = Arc::new(Store::open(&db_path)?);
        tracing::info!(path = %db_path.display(), schema = crate::store::migrations::latest(), "database open");
        if config.install_bundled {
            crate::package::bundled::install_on_first_start(
                &store,
                &config.data_dir,
                crate::clock::now(),
            );
        }
        let listener = TcpListener::bind(config.http_listen)
            .with_context(|| format!("cannot listen on {} (http.listen)", config.http_listen))?;
        let http_addr = listener.local_addr()?;
        let state = AppState {
            store: Arc::clone(&store),
            boot: http::BootSettings::from_config(config),
            data_dir: config.data_dir.clone(),
            hello_limit: Arc::new(http::limit::RateLimiter::new(
                http::limit::Limits::default(),
                std::time::Instant::now(),
            )),
        };
        let server = http::serve(
            listener,
            state,
            Duration::from_secs(config.http_shutdown_timeout),
        )?;
        tracing::info!("listening on http://{http_addr}");
        Ok(Daemon {
            http_addr,
            server,
            store,
        })
    }

    /// The address the HTTP server is bound to (useful when the config asked for port 0).
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// Serve until `shutdown` resolves (or the server stops by itself), then stop gracefully:
    /// no new connections, in-flight requests finish within the shutdown timeout, and the
    /// database is checkpointed and closed.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        let handle = self.server.handle();
        let mut server = tokio::spawn(self.server);
        tokio::select! {
            () = shutdown => {
                tracing::info!("shutting down: finishing in-flight requests");
                handle.stop(true).await;
                server.await.context("HTTP server task failed")??;
            }
            res = &mut server => {
                res.context("HTTP server task failed")??;
                tracing::warn!("HTTP server stopped by itself");
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
