//! The HTTP edge: the dashboard pages, the JSON API under `/api/v1`, the agent endpoints and
//! the embedded assets, all served by one actix-web server.
//!
//! [`configure`] registers every route on an actix `App` (used by the daemon and by tests alike);
//! [`serve`] runs it on an already-bound listener. Handlers are thin: extract and validate the
//! input, make one call into the store on a blocking thread, render a view or JSON. No SQL and no
//! business rules live here.

mod agent;
mod api;
mod assets;
mod boot;
mod catalog;
mod deploy;
mod environments;
mod error;
mod fuel_agent;
pub mod limit;
mod plugins;
mod pxe;
mod steps;
mod timeline;
mod ui;
mod views;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, HttpServer, dev::Server, middleware, web};

pub use error::ApiError;

use crate::store::Store;

/// Everything a handler may reach: shared by every worker thread.
#[derive(Debug, Clone)]
pub struct AppState {
    pub store: Arc<Store>,
    /// Group commit for the agents' many small writes.
    pub writer: crate::store::GroupWriter,
    pub boot: BootSettings,
    /// The data directory (installed plugins live under `plugins/` in it).
    pub data_dir: std::path::PathBuf,
    /// Limits the unauthenticated discovery hello.
    pub hello_limit: Arc<limit::RateLimiter>,
    /// Counters of the PXE services, when they run.
    pub pxe: crate::daemon::PxeStats,
    /// Image and step settings of deployments.
    pub deploy: crate::deployer::DeploySettings,
    /// Planning within the YAQL budget, with each environment's last plan kept.
    pub plans: Arc<crate::planner::Plans>,
}

/// What the boot endpoints need from the configuration.
#[derive(Debug, Clone)]
pub struct BootSettings {
    /// `http.public_url`, if set.
    pub public_url: Option<String>,
    /// Extra kernel arguments for the bootstrap image.
    pub kernel_args: String,
    /// Directory holding `vmlinuz` and `initrd.img`.
    pub images_dir: std::path::PathBuf,
    /// The TFTP root, also served over HTTP under `/boot/ipxe/` for UEFI HTTP boot.
    pub tftp_root: std::path::PathBuf,
    /// How long a boot token stays valid, in seconds.
    pub token_lifetime: i64,
}

impl BootSettings {
    pub fn from_config(config: &crate::config::Config) -> BootSettings {
        BootSettings {
            public_url: config.http_public_url.clone(),
            kernel_args: config.boot_kernel_args.clone(),
            images_dir: config.images_dir(),
            tftp_root: config.tftp_root(),
            token_lifetime: 3600,
        }
    }
}

impl AppState {
    /// Run a store call on the blocking pool, so a slow disk never stalls the event loop.
    pub(crate) async fn store<T, F>(&self, f: F) -> Result<T, ApiError>
    where
        F: FnOnce(&Store) -> crate::store::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let store = Arc::clone(&self.store);
        web::block(move || f(&store))
            .await
            .map_err(|e| ApiError::Internal(format!("blocking task failed: {e}")))?
            .map_err(ApiError::from)
    }
}

/// The agents' step calls: thousands a second during a big deployment, so they are routed
/// before the middleware (whose trailing-slash rewrite and access-log filter cost a regex
/// each per request); their paths are exact, and their handlers log what matters (a failed
/// step, a refused token) and, at debug, every run.
pub fn agent_steps(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/v1/agent/next", web::post().to(steps::next))
        .service(
            web::scope("/api/v1/agent/runs")
                .route("/{id}/result", web::post().to(steps::result))
                .route("/{id}/output", web::post().to(steps::output))
                .default_service(web::to(api::not_found)),
        );
}

/// Register every other route. Order matters only for the fallbacks at the end.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(api::healthz))
        .service(
            web::scope("/api/v1")
                .route("/version", web::get().to(api::version))
                .route("/nodes", web::get().to(api::nodes))
                .route("/nodes/{id}", web::get().to(api::node))
                .route("/agent/hello", web::post().to(agent::hello))
                .route("/releases", web::get().to(catalog::releases))
                .route("/releases/{id}", web::get().to(catalog::release))
                .service(
                    web::resource("/plugins")
                        .app_data(web::PayloadConfig::new(plugins::MAX_UPLOAD))
                        .route(web::get().to(catalog::plugins))
                        .route(web::post().to(plugins::install_plugin)),
                )
                .route("/plugins/sync", web::post().to(plugins::sync_plugins))
                .route("/plugins/{name}", web::delete().to(catalog::remove_plugin))
                .route("/clusters", web::get().to(catalog::clusters))
                .route("/clusters", web::post().to(catalog::create_cluster))
                .route("/clusters/{id}", web::get().to(catalog::cluster))
                .route("/clusters/{id}", web::delete().to(catalog::delete_cluster))
                .route("/clusters/{id}/nodes", web::get().to(environments::nodes))
                .route(
                    "/clusters/{id}/assignment",
                    web::post().to(environments::assign_many),
                )
                .route(
                    "/clusters/{id}/unassignment",
                    web::post().to(environments::unassign_many),
                )
                .route(
                    "/clusters/{id}/nodes/{node}",
                    web::put().to(environments::assign),
                )
                .route(
                    "/clusters/{id}/nodes/{node}",
                    web::delete().to(environments::unassign),
                )
                .route(
                    "/clusters/{id}/settings",
                    web::get().to(environments::settings),
                )
                .route(
                    "/clusters/{id}/settings",
                    web::put().to(environments::put_settings),
                )
                .route("/clusters/{id}/plan", web::get().to(environments::plan))
                .route("/clusters/{id}/deploy", web::post().to(deploy::deploy))
                .route("/clusters/{id}/deployments", web::get().to(deploy::list))
                .route("/deployments/{id}", web::get().to(deploy::show))
                .route("/transactions", web::get().to(deploy::transactions))
                .route("/transactions/{id}", web::get().to(deploy::transaction))
                .route("/deployments/{id}/abort", web::post().to(deploy::abort))
                .route("/deployments/{id}/retry", web::post().to(deploy::retry))
                .route("/agent/sync", web::get().to(steps::sync))
                .route("/agent/file", web::get().to(steps::file))
                .route("/pxe", web::get().to(pxe::status))
                .default_service(web::to(api::not_found)),
        )
        // Fuel's nailgun-agent, for discovery only.
        .route("/api/nodes", web::post().to(fuel_agent::register))
        .route("/api/nodes/agent", web::put().to(fuel_agent::update))
        .route("/boot/images/{file}", web::get().to(boot::image))
        .route("/boot/ipxe/{file}", web::get().to(boot::ipxe_loader))
        .route("/boot/{mac}.ipxe", web::get().to(boot::ipxe_script))
        .route("/assets/{path:.*}", web::get().to(assets::asset))
        .route("/", web::get().to(ui::overview))
        .route("/nodes", web::get().to(ui::nodes))
        .route("/nodes/{id}", web::get().to(ui::node))
        .route("/environments", web::get().to(ui::environments))
        .route("/environments", web::post().to(ui::create_environment))
        .route("/environments/{id}", web::get().to(ui::environment))
        .route("/environments/{id}/nodes", web::post().to(ui::assign_node))
        .route("/environments/{id}/deploy", web::post().to(ui::deploy))
        .route("/environments/{id}/timeline", web::get().to(ui::timeline))
        .route(
            "/environments/{id}/deployments/{dep}/{action}",
            web::post().to(ui::deployment_action),
        )
        .route(
            "/environments/{id}/nodes/{node}/remove",
            web::post().to(ui::remove_node),
        )
        .route("/releases", web::get().to(ui::releases))
        .default_service(web::to(ui::not_found));
}

/// Start serving on `listener`. The returned [`Server`] resolves when the server has stopped;
/// its handle stops it gracefully, giving in-flight requests `shutdown_timeout` to finish.
/// Signals are not handled here: the daemon decides when to stop.
pub fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown_timeout: Duration,
) -> std::io::Result<Server> {
    let data = web::Data::new(state);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .app_data(web::PathConfig::default().error_handler(|err, _| {
                ApiError::BadRequest(format!("invalid path: {err}")).into()
            }))
            .configure(agent_steps)
            .service(
                web::scope("")
                    .wrap(middleware::NormalizePath::trim())
                    .wrap(middleware::Logger::new("%r %s %b %Dms").log_target("stoker::http"))
                    .configure(configure),
            )
    })
    .disable_signals()
    .shutdown_timeout(shutdown_timeout.as_secs())
    .workers(std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8)))
    .listen(listener)?
    .run();
    Ok(server)
}
