//! The HTTP edge: the dashboard pages, the JSON API under `/api/v1`, the agent endpoints and
//! the embedded assets, all served by one actix-web server.
//!
//! [`configure`] registers every route on an actix `App` (used by the daemon and by tests alike);
//! [`serve`] runs it on an already-bound listener. Handlers are thin: extract and validate the
//! input, make one call into the store on a blocking thread, render a view or JSON. No SQL and no
//! business rules live here.

pub mod access;
mod api;
mod assets;
mod error;
pub mod limit;
pub mod measure;
mod node;
mod pages;
pub mod transport;

use access::{login, users};
use api::{
    attributes, bmc, catalog, deploy, disks, environments, events, extras, facts, graphs, metrics,
    networks, nodes, openstack_config, ostf, plugins, pxe, roles, runs, sequences, snapshot,
    transaction_data, transactions,
};
use node::{agent, boot, fuel_agent, service, steps};

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::Method;
use actix_web::{App, HttpServer, dev::Server, middleware, web};

use crate::auth::Access::{Agent, Api, Node, Page, Public};
use crate::auth::Role;
pub use access::{BodyKind, RouteInfo, Routes};

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
    /// Limits the installed OS's agent's hello (`/api/v1/agent/service/hello`).
    pub service_hello_limit: Arc<limit::RateLimiter>,
    /// Limits the unauthenticated boot scripts (`/boot/{mac}.ipxe`).
    pub boot_limit: Arc<limit::RateLimiter>,
    /// Counters of the PXE services, when they run.
    pub pxe: crate::daemon::PxeStats,
    /// Image and step settings of deployments.
    pub deploy: crate::deployer::DeploySettings,
    /// Sessions, sign-in tokens and the audit log.
    pub auth: AuthSettings,
    /// Limits password sign-ins (dashboard, `/api/v1/login`, Keystone), per client address.
    pub login_limit: Arc<limit::RateLimiter>,
    /// Limits on uploaded plugin packages.
    pub package_limits: crate::package::PackageLimits,
    /// Planning within the YAQL budget, with each environment's last plan kept.
    pub plans: Arc<crate::planner::Plans>,
    /// The agent binary served to installed OSes (`agent.binary`; default: this executable).
    pub agent_binary: Option<std::path::PathBuf>,
    /// One caller at a time acts on chains of graphs (the API, the daemon's loop).
    pub chains: Arc<crate::chains::Chains>,
    /// Diagnostic snapshots: where they are written and what they say of the daemon.
    pub snapshots: Arc<crate::snapshot::Snapshots>,
    /// The nodes' BMCs: credentials, power actions, the master's BMC steps.
    pub bmc: Arc<crate::bmc::runner::Runner>,
    /// What `/metrics` shows; every request is counted in it.
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// What access control needs from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct AuthSettings {
    pub sessions: crate::store::SessionLimits,
    /// How long a token bought with a password (`/api/v1/login`, Keystone) lasts, in seconds.
    pub login_token_lifetime: i64,
    /// Whether the dashboard is served over TLS (cookies get `Secure`).
    pub tls: bool,
    /// Days the audit log keeps an entry.
    pub audit_retention_days: i64,
}

impl AuthSettings {
    pub fn from_config(config: &crate::config::Config) -> AuthSettings {
        AuthSettings {
            sessions: crate::store::SessionLimits {
                idle: config.auth.session_idle,
                absolute: config.auth.session_lifetime,
            },
            login_token_lifetime: config.auth.login_token_lifetime,
            tls: config.http_tls.is_on(),
            audit_retention_days: config.auth.audit_retention_days,
        }
    }
}

/// How long a boot token stays valid, in seconds: from the boot script to the agent's hello
/// (kernel and initramfs download, boot) takes minutes at most.
pub const BOOT_TOKEN_LIFETIME: i64 = 3600;

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
    /// Who may receive a boot token (`boot.token_binding`).
    pub binding: crate::engine::hello::Binding,
    /// Approval and the node cap (`discovery.*`).
    pub discovery: crate::config::DiscoverySettings,
    /// Under TLS: the certificate's fingerprint and chain, and the two listeners' ports.
    pub tls: Option<transport::TlsInfo>,
}

impl BootSettings {
    pub fn from_config(config: &crate::config::Config) -> BootSettings {
        BootSettings {
            public_url: config.http_public_url.clone(),
            kernel_args: config.boot_kernel_args.clone(),
            images_dir: config.images_dir(),
            tftp_root: config.tftp_root(),
            token_lifetime: BOOT_TOKEN_LIFETIME,
            binding: config.boot_token_binding,
            discovery: config.discovery,
            tls: None,
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
        off_worker(move || f(&store)).await?.map_err(ApiError::from)
    }
}

/// Run `f` on the blocking pool and await it: every store call (through [`AppState::store`]),
/// every file and password hash, and the work that grows with the site (a plan of thousands of
/// nodes rendered, a page of thousands of runs serialized, a picture drawn). An actix worker
/// serves every connection it accepted, thousands of agents' among them, one request at a time
/// between awaits: a worker that spends 200 ms rendering holds up all of them for as long. The
/// error is only the pool's (the task panicked or was cancelled); `f`'s own stays in `T`.
pub(crate) async fn off_worker<T, F>(f: F) -> Result<T, ApiError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    web::block(f)
        .await
        .map_err(|e| ApiError::Internal(format!("blocking task failed: {e}")))
}

/// A JSON answer built and serialized [`off_worker`]: for collections that grow with the site
/// (every node, a page of 10,000 runs).
pub(crate) async fn big_json<T, F>(build: F) -> Result<actix_web::HttpResponse, ApiError>
where
    F: FnOnce() -> Result<T, ApiError> + Send + 'static,
    T: serde::Serialize,
{
    let body = off_worker(move || {
        serde_json::to_vec(&build()?)
            .map_err(|e| ApiError::Internal(format!("cannot write JSON: {e}")))
    })
    .await??;
    Ok(actix_web::HttpResponse::Ok()
        .content_type(actix_web::http::header::ContentType::json())
        .body(body))
}

/// The agents' step calls: thousands a second during a big deployment, so they are routed
/// before the middleware (whose trailing-slash rewrite and access-log filter cost a regex
/// each per request); their paths are exact, and their handlers log what matters (a failed
/// step, a refused token) and, at debug, every run.
pub fn agent_steps(cfg: &mut web::ServiceConfig) {
    let mut r = Routes::new(cfg);
    agent_step_routes(&mut r);
}

fn agent_step_routes(r: &mut Routes<'_>) {
    r.post("/api/v1/agent/next", Agent, steps::next);
    r.post("/api/v1/agent/runs/{id}/result", Agent, steps::result);
    r.post("/api/v1/agent/runs/{id}/output", Agent, steps::output);
}

/// Register every other route. Order matters only for the fallbacks at the end.
pub fn configure(cfg: &mut web::ServiceConfig) {
    let mut r = Routes::new(cfg);
    routes(&mut r);
    // What no route matched: JSON under the API, a page elsewhere.
    cfg.service(web::scope("/api/v1").default_service(web::to(api::not_found)))
        .default_service(web::to(pages::not_found));
}

/// Every route with what it needs, in one table: `Public` is only what a node fetches before it
/// has a credential (and signing in); `Node` a node's own hellos, which their handlers check
/// (audited only when refused); `Agent` checks the node's agent token; `Api(role)` a bearer
/// token; `Page(role)` a dashboard session (forms with its CSRF token).
fn routes(r: &mut Routes<'_>) {
    const V: Role = Role::Viewer;
    const O: Role = Role::Operator;
    const A: Role = Role::Admin;
    r.get("/healthz", Public, api::healthz);
    // The node's way in: boot, discovery (rate-limited, bounded), then its agent token.
    r.get("/boot/images/{file}", Public, boot::image);
    r.get("/boot/ipxe/{file}", Public, boot::ipxe_loader);
    r.get("/boot/{mac}.ipxe", Public, boot::ipxe_script);
    r.get("/boot/tls/chain.pem", Public, boot::tls_chain);
    r.post("/api/v1/agent/hello", Node, agent::hello);
    r.post("/api/v1/agent/service/hello", Node, service::hello);
    r.get(service::BINARY_PATH, Agent, service::binary);
    r.post("/api/nodes", Node, fuel_agent::register);
    r.put("/api/nodes/agent", Node, fuel_agent::update);
    r.get("/api/v1/agent/sync", Agent, steps::sync);
    r.get("/api/v1/agent/file", Agent, steps::file);
    // Signing in: fuel2's Keystone, the CLI's password login, the dashboard's form.
    r.get("/api/v1/version", Public, api::version);
    r.post("/keystone/v2.0/tokens", Public, users::keystone_tokens);
    r.post("/api/v1/login", Public, users::login);
    r.get("/login", Public, login::page);
    r.add_with(
        Method::POST,
        "/login",
        Public,
        BodyKind::Form,
        login::submit,
    );
    r.post("/logout", Page(V), login::logout);
    r.get("/assets/{path:.*}", Public, assets::asset);
    // The JSON API.
    r.get("/api/v1/me", Api(V), users::me);
    r.get("/api/v1/tokens", Api(V), users::tokens);
    r.post("/api/v1/tokens", Api(V), users::create_token);
    r.delete("/api/v1/tokens/{id}", Api(V), users::revoke_token);
    r.get("/api/v1/users", Api(A), users::list);
    r.post("/api/v1/users", Api(A), users::add);
    r.put("/api/v1/users/{name}", Api(V), users::update);
    r.delete("/api/v1/users/{name}", Api(A), users::remove);
    r.get("/api/v1/audit", Api(A), users::audit);
    r.get("/api/v1/nodes", Api(V), api::nodes);
    r.put("/api/v1/nodes", Api(O), nodes::update_many);
    r.delete("/api/v1/nodes", Api(O), nodes::delete_many);
    r.get("/api/v1/nodes/{id}", Api(V), api::node);
    r.post("/api/v1/nodes", Api(O), bmc::enroll);
    r.post("/api/v1/nodes/power", Api(O), bmc::power_many);
    r.get("/api/v1/nodes/{id}/bmc", Api(V), bmc::show);
    r.put("/api/v1/nodes/{id}/bmc", Api(O), bmc::update);
    r.delete("/api/v1/nodes/{id}/bmc", Api(O), bmc::delete);
    r.post("/api/v1/nodes/{id}/power", Api(O), bmc::power);
    r.put("/api/v1/nodes/{id}", Api(O), nodes::update);
    r.get("/api/v1/nodes/{id}/disks", Api(V), disks::disks);
    r.put("/api/v1/nodes/{id}/disks", Api(O), disks::update);
    r.get("/api/v1/nodes/{id}/disks/defaults", Api(V), disks::defaults);
    r.get("/api/v1/nodes/{id}/vms_conf", Api(V), extras::vms_conf);
    r.put("/api/v1/nodes/{id}/vms_conf", Api(O), extras::set_vms_conf);
    r.get(
        "/api/v1/nodes/{id}/attributes",
        Api(V),
        extras::node_attributes,
    );
    r.put(
        "/api/v1/nodes/{id}/attributes",
        Api(O),
        extras::set_node_attributes,
    );
    r.get(
        "/api/v1/nodes/{id}/attributes/defaults",
        Api(V),
        extras::node_attributes_defaults,
    );
    r.get("/api/v1/extensions", Api(V), extras::extensions);
    r.get(
        "/api/v1/releases/{id}/components",
        Api(V),
        extras::components,
    );
    r.get(
        "/api/v1/releases/{id}/attributes_metadata",
        Api(V),
        extras::attributes_metadata,
    );
    r.put(
        "/api/v1/releases/{id}/attributes_metadata",
        Api(A),
        extras::update_attributes_metadata,
    );
    r.get(
        "/api/v1/clusters/{id}/extensions",
        Api(V),
        extras::cluster_extensions,
    );
    r.put(
        "/api/v1/clusters/{id}/extensions",
        Api(O),
        extras::enable_extensions,
    );
    r.delete(
        "/api/v1/clusters/{id}/extensions",
        Api(O),
        extras::disable_extensions,
    );
    r.put("/api/v1/clusters/{id}/spawn_vms", Api(O), extras::spawn_vms);
    r.delete("/api/v1/nodes/{id}", Api(O), nodes::delete);
    r.post("/api/v1/nodes/{id}/approve", Api(O), nodes::approve);
    r.get("/api/v1/releases", Api(V), catalog::releases);
    r.get("/api/v1/releases/{id}", Api(V), catalog::release);
    r.get("/api/v1/plugins", Api(V), catalog::plugins);
    r.add_with(
        Method::POST,
        "/api/v1/plugins",
        Api(A),
        BodyKind::Binary,
        plugins::install_plugin,
    );
    r.post("/api/v1/plugins/sync", Api(A), plugins::sync_plugins);
    r.delete("/api/v1/plugins/{name}", Api(A), catalog::remove_plugin);
    r.get("/api/v1/clusters", Api(V), catalog::clusters);
    r.post("/api/v1/clusters", Api(O), catalog::create_cluster);
    r.get("/api/v1/clusters/{id}", Api(V), catalog::cluster);
    r.put("/api/v1/clusters/{id}", Api(O), catalog::update_cluster);
    r.delete("/api/v1/clusters/{id}", Api(O), catalog::delete_cluster);
    r.get("/api/v1/clusters/{id}/nodes", Api(V), environments::nodes);
    r.post(
        "/api/v1/clusters/{id}/assignment",
        Api(O),
        environments::assign_many,
    );
    r.post(
        "/api/v1/clusters/{id}/unassignment",
        Api(O),
        environments::unassign_many,
    );
    r.put(
        "/api/v1/clusters/{id}/nodes/{node}",
        Api(O),
        environments::assign,
    );
    r.delete(
        "/api/v1/clusters/{id}/nodes/{node}",
        Api(O),
        environments::unassign,
    );
    r.get(
        "/api/v1/clusters/{id}/settings",
        Api(V),
        environments::settings,
    );
    r.put(
        "/api/v1/clusters/{id}/settings",
        Api(O),
        environments::put_settings,
    );
    r.get("/ostf/testsets/{id}", Api(V), ostf::none_for);
    r.get("/ostf/tests/{id}", Api(V), ostf::none_for);
    r.get("/ostf/testruns/last/{id}", Api(V), ostf::none_for);
    r.get("/ostf/testruns", Api(V), ostf::testruns);
    r.get("/ostf/testruns/{id}", Api(V), ostf::testrun);
    r.post("/ostf/testruns", Api(O), ostf::start);
    r.put("/ostf/testruns", Api(O), ostf::act);
    r.get("/api/v1/clusters/{id}/attributes", Api(V), attributes::get);
    r.put("/api/v1/clusters/{id}/attributes", Api(O), attributes::put);
    r.get(
        "/api/v1/clusters/{id}/attributes/defaults",
        Api(V),
        attributes::defaults,
    );
    r.put(
        "/api/v1/clusters/{id}/attributes/defaults",
        Api(O),
        attributes::reset_defaults,
    );
    r.get("/api/v1/clusters/{id}/plan", Api(V), environments::plan);
    r.post("/api/v1/clusters/{id}/deploy", Api(O), deploy::deploy);
    r.get("/api/v1/clusters/{id}/deployments", Api(V), deploy::list);
    r.get("/api/v1/deployments", Api(V), runs::list);
    r.get("/api/v1/deployments/{id}", Api(V), deploy::show);
    r.get("/api/v1/deployments/{id}/runs", Api(V), runs::runs);
    r.get("/api/v1/transactions", Api(V), transactions::transactions);
    r.get(
        "/api/v1/transactions/{id}",
        Api(V),
        transactions::transaction,
    );
    r.delete(
        "/api/v1/transactions/{id}",
        Api(O),
        transactions::delete_transaction,
    );
    r.get(
        "/api/v1/transactions/{id}/deployment_info",
        Api(V),
        transaction_data::deployment_info,
    );
    r.get(
        "/api/v1/transactions/{id}/settings",
        Api(V),
        transaction_data::settings,
    );
    r.get(
        "/api/v1/transactions/{id}/network_configuration",
        Api(V),
        transaction_data::network_configuration,
    );
    // Deployment and provisioning facts (fuel2 env deployment-facts|provisioning-facts).
    let facts_of = "/api/v1/clusters/{id}/orchestrator/{kind}";
    r.get(facts_of, Api(V), facts::uploaded);
    r.put(facts_of, Api(O), facts::upload);
    r.delete(facts_of, Api(O), facts::delete);
    r.get(&format!("{facts_of}/defaults"), Api(V), facts::defaults);
    r.get(
        "/api/v1/clusters/{id}/attributes/deployed",
        Api(V),
        transaction_data::deployed_attributes,
    );
    r.get(
        "/api/v1/transactions/{id}/deployment_history",
        Api(V),
        transactions::deployment_history,
    );
    r.put(
        "/api/v1/clusters/{id}/changes",
        Api(O),
        transactions::changes,
    );
    r.put(
        "/api/v1/clusters/{id}/changes/redeploy",
        Api(O),
        transactions::redeploy,
    );
    r.put(
        "/api/v1/clusters/{id}/provision",
        Api(O),
        transactions::provision,
    );
    r.put(
        "/api/v1/clusters/{id}/deploy",
        Api(O),
        transactions::deploy_nodes,
    );
    r.put(
        "/api/v1/clusters/{id}/stop_deployment",
        Api(O),
        transactions::stop_deployment,
    );
    r.put("/api/v1/clusters/{id}/reset", Api(O), transactions::reset);
    r.post("/api/v1/graphs/execute", Api(O), transactions::execute);
    r.post("/api/v1/deployments/{id}/abort", Api(O), deploy::abort);
    r.post("/api/v1/deployments/{id}/retry", Api(O), deploy::retry);
    r.get("/api/v1/pxe", Api(V), pxe::status);
    r.get("/api/v1/events", Api(V), events::stream);
    r.get("/events", Page(V), events::stream);
    r.get("/metrics", Api(V), metrics::scrape);
    // Nailgun's OpenStack configuration overrides (fuel2 openstack-config).
    r.get("/api/v1/openstack-config", Api(V), openstack_config::list);
    r.post("/api/v1/openstack-config", Api(O), openstack_config::create);
    r.put(
        "/api/v1/openstack-config/execute",
        Api(O),
        openstack_config::execute,
    );
    r.get(
        "/api/v1/openstack-config/{id}",
        Api(V),
        openstack_config::show,
    );
    r.delete(
        "/api/v1/openstack-config/{id}",
        Api(O),
        openstack_config::delete,
    );
    // The diagnostic snapshot holds the master's whole state: the admin's only.
    r.put("/api/v1/logs/package", Api(A), snapshot::create);
    r.get(
        "/api/v1/logs/package/config/default",
        Api(A),
        snapshot::default_config,
    );
    r.get("/api/dump/{name}", Api(A), snapshot::download);
    network_routes(r);
    // Deployment graphs, as Nailgun's API (fuel2 graph upload/list/download/delete).
    // An environment's own graphs are its operators'; a release's or a plugin's change every
    // environment that uses it: admin's, as installing them is.
    for (owner, writer) in [("clusters", O), ("releases", A), ("plugins", A)] {
        let one = format!("/api/v1/{owner}/{{id}}/deployment_graphs/{{graph_type}}");
        r.get(
            &format!("/api/v1/{owner}/{{id}}/deployment_graphs"),
            Api(V),
            graphs::list_of,
        );
        r.get(&one, Api(V), graphs::show);
        r.post(&one, Api(writer), graphs::create);
        r.put(&one, Api(writer), graphs::replace);
        r.add(Method::PATCH, &one, Api(writer), graphs::replace);
        r.delete(&one, Api(writer), graphs::delete);
    }
    r.get("/api/v1/graphs", Api(V), graphs::list);
    // Deployment sequences (fuel2 sequence ...): a release's, so admin's to change, as its
    // graphs are; executing one is an operator's, as executing graphs is.
    r.get("/api/v1/sequences", Api(V), sequences::list);
    r.post("/api/v1/sequences", Api(A), sequences::create);
    r.get("/api/v1/sequences/{id}", Api(V), sequences::show);
    r.put("/api/v1/sequences/{id}", Api(A), sequences::update);
    r.add(
        Method::PATCH,
        "/api/v1/sequences/{id}",
        Api(A),
        sequences::update,
    );
    r.delete("/api/v1/sequences/{id}", Api(A), sequences::delete);
    r.post("/api/v1/sequences/{id}/execute", Api(O), sequences::execute);
    // Roles and tags: a release's are admin's to change (every environment of it uses them),
    // an environment's its operators'.
    for (owner, write) in [("releases", A), ("clusters", O)] {
        for kind in ["roles", "tags"] {
            let many = format!("/api/v1/{owner}/{{id}}/{kind}");
            let one = format!("/api/v1/{owner}/{{id}}/{kind}/{{name}}");
            r.get(&many, Api(V), roles::list);
            r.post(&many, Api(write), roles::create);
            r.get(&one, Api(V), roles::show);
            r.put(&one, Api(write), roles::update);
            r.delete(&one, Api(write), roles::delete);
        }
    }
    r.get(
        "/api/v1/clusters/{id}/deployment_tasks",
        Api(V),
        graphs::tasks,
    );
    r.get(
        "/api/v1/clusters/{id}/deployment_tasks/{level}",
        Api(V),
        graphs::tasks_at_level,
    );
    // The dashboard.
    r.get("/", Page(V), pages::overview::overview);
    r.get("/nodes", Page(V), pages::nodes::nodes);
    // Before `/nodes/{id}`, which would take "bulk" for an id.
    r.get("/nodes/bulk", Page(O), pages::bulk::review);
    r.get("/nodes/{id}", Page(V), pages::node::node);
    r.get("/nodes/{id}/state", Page(V), pages::node::state);
    r.post("/nodes/{id}/delete", Page(O), pages::node::delete_node);
    r.post("/nodes/{id}/approve", Page(O), pages::node::approve_node);
    r.post("/nodes/bulk", Page(O), pages::bulk::act);
    r.post("/nodes/{id}/name", Page(O), pages::node::rename_node);
    r.post("/nodes/{id}/power", Page(O), pages::node::power_node);
    r.post("/nodes/{id}/bmc", Page(O), pages::node::set_bmc);
    r.get("/environments", Page(V), pages::environments::environments);
    r.post(
        "/environments",
        Page(O),
        pages::environments::create_environment,
    );
    r.get(
        "/environments/{id}",
        Page(V),
        pages::environment::environment,
    );
    r.post(
        "/environments/{id}/nodes",
        Page(O),
        pages::environment_edit::add_nodes,
    );
    r.get(
        "/environments/{id}/delete",
        Page(O),
        pages::environment_edit::review_delete,
    );
    r.post(
        "/environments/{id}/delete",
        Page(O),
        pages::environment_edit::delete,
    );
    r.post(
        "/environments/{id}/deploy",
        Page(O),
        pages::environment::deploy,
    );
    r.get(
        "/environments/{id}/timeline",
        Page(V),
        pages::environment::timeline,
    );
    r.get(
        "/environments/{id}/members",
        Page(V),
        pages::environment::members,
    );
    r.get(
        "/environments/{id}/deployments",
        Page(V),
        pages::deployments::deployments,
    );
    r.get("/deployments/{id}", Page(V), pages::deployment::deployment);
    r.get(
        "/deployments/{id}/status",
        Page(V),
        pages::deployment::status,
    );
    r.get("/deployments/{id}/runs", Page(V), pages::deployment::runs);
    r.get(
        "/deployments/{id}/runs/{run}/output",
        Page(V),
        pages::deployment::output,
    );
    r.post(
        "/deployments/{id}/{action}",
        Page(O),
        pages::deployment::action,
    );
    r.post(
        "/environments/{id}/deployments/{dep}/{action}",
        Page(O),
        pages::environment::deployment_action,
    );
    r.post(
        "/environments/{id}/nodes/{node}/remove",
        Page(O),
        pages::environment_edit::remove_node,
    );
    r.get(
        "/environments/{id}/settings",
        Page(V),
        pages::settings::settings,
    );
    r.post(
        "/environments/{id}/settings",
        Page(O),
        pages::settings::save,
    );
    r.get(
        "/environments/{id}/network",
        Page(V),
        pages::network::network,
    );
    r.post("/environments/{id}/network", Page(O), pages::network::save);
    r.get("/releases", Page(V), pages::releases::releases);
    r.add_with(
        Method::POST,
        "/releases/plugins",
        Page(A),
        BodyKind::Upload,
        pages::releases::upload,
    );
    r.get(
        "/releases/plugins/{id}/remove",
        Page(A),
        pages::releases::review_remove,
    );
    r.post(
        "/releases/plugins/{id}/remove",
        Page(A),
        pages::releases::remove,
    );
    r.get("/account", Page(V), login::account);
    r.post("/account/tokens", Page(V), login::create_token);
    r.post("/account/tokens/{id}/revoke", Page(V), login::revoke_token);
    r.post("/account/password", Page(V), login::change_password);
    r.get("/audit", Page(A), login::audit);
}

/// Nailgun's network API: configuration, template, VIPs, network and node groups, interfaces.
fn network_routes(r: &mut Routes<'_>) {
    const V: Role = Role::Viewer;
    const O: Role = Role::Operator;
    let config = "/api/v1/clusters/{id}/network_configuration";
    r.get(
        &format!("{config}/neutron"),
        Api(V),
        networks::configuration,
    );
    r.put(
        &format!("{config}/neutron"),
        Api(O),
        networks::put_configuration,
    );
    r.put(
        &format!("{config}/neutron/verify"),
        Api(O),
        networks::verify,
    );
    r.get(
        &format!("{config}/deployed"),
        Api(V),
        transaction_data::deployed_network,
    );
    r.get(
        &format!("{config}/nova_network"),
        Api(V),
        networks::nova_network,
    );
    r.put(
        &format!("{config}/nova_network"),
        Api(O),
        networks::nova_network,
    );
    r.get(&format!("{config}/template"), Api(V), networks::template);
    r.put(
        &format!("{config}/template"),
        Api(O),
        networks::put_template,
    );
    r.delete(
        &format!("{config}/template"),
        Api(O),
        networks::delete_template,
    );
    r.get(&format!("{config}/ips/vips"), Api(V), networks::vips);
    r.put(&format!("{config}/ips/vips"), Api(O), networks::put_vips);
    r.post(&format!("{config}/ips/vips"), Api(O), networks::create_vip);
    r.get(&format!("{config}/ips/{{ip}}/vips"), Api(V), networks::vip);
    r.put(
        &format!("{config}/ips/{{ip}}/vips"),
        Api(O),
        networks::put_vip,
    );
    r.get("/api/v1/networks", Api(V), networks::network_groups);
    r.post("/api/v1/networks", Api(O), networks::create_network_group);
    r.get("/api/v1/networks/{id}", Api(V), networks::network_group);
    r.put(
        "/api/v1/networks/{id}",
        Api(O),
        networks::update_network_group,
    );
    r.delete(
        "/api/v1/networks/{id}",
        Api(O),
        networks::delete_network_group,
    );
    r.get(
        "/api/v1/nodes/{id}/interfaces",
        Api(V),
        networks::interfaces,
    );
    r.put(
        "/api/v1/nodes/{id}/interfaces",
        Api(O),
        networks::put_interfaces,
    );
    r.get(
        "/api/v1/nodes/{id}/interfaces/default_assignment",
        Api(V),
        networks::default_interfaces,
    );
    r.get("/api/v1/nodegroups", Api(V), networks::nodegroups);
    r.get("/api/v1/nodegroups/{id}", Api(V), networks::nodegroup);
}

/// Every route with the access it needs (the agents' fast routes included), for tests and
/// documentation: the same code that registers them fills it.
pub fn route_table() -> Vec<RouteInfo> {
    let mut r = Routes::table_only();
    agent_step_routes(&mut r);
    routes(&mut r);
    r.into_table()
}

/// Headers on every page and API answer: a content security policy with no inline script
/// and no framing, no MIME sniffing, no referrer to other sites.
fn security_headers() -> middleware::DefaultHeaders {
    middleware::DefaultHeaders::new()
        .add((
            "Content-Security-Policy",
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        ))
        .add(("X-Content-Type-Options", "nosniff"))
        .add(("X-Frame-Options", "DENY"))
        .add(("Referrer-Policy", "same-origin"))
}

/// The sockets the HTTP server serves: `main` (over TLS when `tls` is set) and, under TLS, the
/// plain `boot` listener for iPXE (see [`transport`]).
pub struct Listeners {
    pub main: TcpListener,
    pub boot: Option<TcpListener>,
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// Start serving on `listeners`. The returned [`Server`] resolves when the server has stopped;
/// its handle stops it gracefully, giving in-flight requests `shutdown_timeout` to finish.
/// Signals are not handled here: the daemon decides when to stop.
pub fn serve(
    listeners: Listeners,
    state: AppState,
    shutdown_timeout: Duration,
) -> std::io::Result<Server> {
    let metrics = Arc::clone(&state.metrics);
    let data = web::Data::new(state);
    let server = HttpServer::new(move || {
        let metrics = Arc::clone(&metrics);
        App::new()
            .wrap(middleware::from_fn(transport::listener_policy))
            .wrap(middleware::from_fn(move |req, next| {
                measure::measure(Arc::clone(&metrics), req, next)
            }))
            .wrap(middleware::ErrorHandlers::new().handler(
                actix_web::http::StatusCode::PAYLOAD_TOO_LARGE,
                error::payload_too_large_as_json,
            ))
            .app_data(data.clone())
            .app_data(web::PathConfig::default().error_handler(|err, _| {
                ApiError::BadRequest(format!("invalid path: {err}")).into()
            }))
            .configure(agent_steps)
            .service(
                web::scope("")
                    .wrap(middleware::from_fn(access::check_host))
                    .wrap(security_headers())
                    .wrap(middleware::NormalizePath::trim())
                    .wrap(middleware::Logger::new("%r %s %b %Dms").log_target("stoker::http"))
                    .configure(configure),
            )
    })
    .disable_signals()
    // Longer than the service agents' 5 s heartbeat: with actix's default 5 s, each heartbeat
    // raced the idle close of its own connection and paid a new one.
    .keep_alive(std::time::Duration::from_secs(30))
    .shutdown_timeout(shutdown_timeout.as_secs())
    .workers(std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8)));
    let server = match listeners.tls {
        Some(config) => server.listen_rustls_0_23(listeners.main, (*config).clone())?,
        None => server.listen(listeners.main)?,
    };
    let server = match listeners.boot {
        Some(boot) => server.listen(boot)?,
        None => server,
    };
    Ok(server.run())
}
