//! What `GET /metrics` shows, in the Prometheus text format (0.0.4), on the Prometheus
//! project's own client (`prometheus-client`). [`Metrics`] owns the registry and the handles
//! the hot paths increment: HTTP requests by method, route pattern and status with their
//! latency, the agents' calls by call and status with theirs, and the group writer's group
//! sizes and transaction times. The PXE services keep their own atomic counters
//! (`dhcp::server::DhcpStats`, `tftp::server::TftpStats`), read here at scrape time and never
//! counted twice; the store's counts (nodes, deployments, runs, leases) and the process's own
//! figures ([`process`]) are read at scrape time too, never tracked incrementally.
//!
//! Label values are bounded: a route label is a pattern from the route table (or
//! [`UNMATCHED`]), an agent call one of [`Route::agent`]'s names, a method one of a fixed few.
//! No actix type appears here: the HTTP edge (`http::measure`) tags each route and times each
//! request.

pub mod process;

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::dhcp::reply::Subnet;
use crate::dhcp::server::{DhcpStats, PacketResult, PacketType};
use crate::store::Gauges;
use crate::tftp::server::TftpStats;

/// The `Content-Type` of the exposition.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// The route label of a request no registered route answered (a 404, or a refusal before
/// routing): one value for all of them, whatever their paths.
pub const UNMATCHED: &str = "unmatched";

/// Latency buckets in seconds, from half a millisecond to ten seconds.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Buckets of the group writer's group sizes, up to its cap of 256 writes.
const GROUP_SIZE_BUCKETS: [f64; 9] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// Buckets of a group's transaction time in seconds: a tenth of a millisecond to a second.
const COMMIT_BUCKETS: [f64; 13] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("cannot encode the metrics")]
    Encode(#[from] std::fmt::Error),
}

/// What a registered route is, for its requests' labels: attached to the route by the HTTP
/// edge when it registers it, so the label is the pattern as registered, never the raw path.
#[derive(Debug, Clone)]
pub struct Route {
    /// The route's path pattern, like `/api/v1/nodes/{id}`.
    pub pattern: Arc<str>,
    /// The agent call this route is, when it is one (`next`, `hello`, ...).
    pub agent: Option<&'static str>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: &'static str,
    route: Arc<str>,
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: &'static str,
    route: Arc<str>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    call: &'static str,
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallOnly {
    call: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// The daemon's metrics: one per daemon (tests run several in one process).
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    durations: Histograms<RouteLabels>,
    agent_calls: Family<CallLabels, Counter>,
    agent_durations: Histograms<CallOnly>,
    group_size: Histogram,
    group_seconds: Histogram,
    /// The DHCP server's subnets (empty when it does not run), for the pools' usage.
    subnets: Vec<Subnet>,
    dhcp_on: bool,
    unmatched: Arc<str>,
}

impl Metrics {
    /// Metrics over the PXE services' counters (`None`: that service does not run) and the
    /// DHCP server's `subnets`.
    pub fn new(
        dhcp: Option<Arc<DhcpStats>>,
        tftp: Option<Arc<TftpStats>>,
        subnets: Vec<Subnet>,
    ) -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "stoker_http_requests",
            "HTTP requests answered, by method, route pattern (`unmatched`: no route answered) \
             and status",
            requests.clone(),
        );
        let durations = Histograms::<RouteLabels>::new_with_constructor(latency);
        registry.register(
            "stoker_http_request_duration_seconds",
            "Time from an HTTP request's arrival to its answer's head, by method and route \
             pattern",
            durations.clone(),
        );
        let agent_calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "stoker_agent_calls",
            "Calls of the nodes' agents (hello, service_hello, next, output, result, sync, \
             file, ...) by call and HTTP status",
            agent_calls.clone(),
        );
        let agent_durations = Histograms::<CallOnly>::new_with_constructor(latency);
        registry.register(
            "stoker_agent_call_duration_seconds",
            "Time to answer an agent's call, by call",
            agent_durations.clone(),
        );
        let group_size = Histogram::new(GROUP_SIZE_BUCKETS);
        registry.register(
            "stoker_store_group_size",
            "Writes the database's group writer committed together in one transaction",
            group_size.clone(),
        );
        let group_seconds = Histogram::new(COMMIT_BUCKETS);
        registry.register(
            "stoker_store_group_commit_duration_seconds",
            "Time the group writer took for one group: its writes, each in a savepoint, and \
             the commit",
            group_seconds.clone(),
        );
        let dhcp_on = dhcp.is_some();
        registry.register_collector(Box::new(Pxe { dhcp, tftp }));
        Metrics {
            registry,
            requests,
            durations,
            agent_calls,
            agent_durations,
            group_size,
            group_seconds,
            subnets,
            dhcp_on,
            unmatched: Arc::from(UNMATCHED),
        }
    }

    /// Count one answered HTTP request of `route` (`None`: no route answered it).
    pub fn observe_request(
        &self,
        route: Option<&Route>,
        method: &'static str,
        status: u16,
        elapsed: Duration,
    ) {
        let pattern = route.map_or(&self.unmatched, |r| &r.pattern);
        let seconds = elapsed.as_secs_f64();
        self.requests
            .get_or_create(&RequestLabels {
                method,
                route: Arc::clone(pattern),
                status,
            })
            .inc();
        self.durations
            .get_or_create(&RouteLabels {
                method,
                route: Arc::clone(pattern),
            })
            .observe(seconds);
        if let Some(call) = route.and_then(|r| r.agent) {
            self.agent_calls
                .get_or_create(&CallLabels { call, status })
                .inc();
            self.agent_durations
                .get_or_create(&CallOnly { call })
                .observe(seconds);
        }
    }

    /// What the group writer calls after each group (see `store::GroupWriter::observed`).
    pub fn group_observer(&self) -> crate::store::GroupObserver {
        let (size, seconds) = (self.group_size.clone(), self.group_seconds.clone());
        Box::new(move |n, took| {
            size.observe(n as f64);
            seconds.observe(took.as_secs_f64());
        })
    }

    /// The exposition: every metric, with the store's `gauges` and the process's `sample`
    /// taken for this scrape.
    pub fn render(&self, gauges: Gauges, sample: process::Sample) -> Result<String, MetricsError> {
        let mut out = String::with_capacity(16 * 1024);
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)?;
        let (pool, free) = crate::dhcp::reply::pool_usage(&self.subnets, &gauges.held);
        let mut scrape = Registry::default();
        scrape.register_collector(Box::new(Scrape {
            gauges,
            pool: self.dhcp_on.then_some((pool, free)),
            sample,
        }));
        prometheus_client::encoding::prometheus_text::encode(&mut out, &scrape)?;
        Ok(out)
    }
}

/// Write one metric family: `name` of `kind`, one sample per label set.
fn family<L: EncodeLabelSet, M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    samples: impl IntoIterator<Item = (L, M)>,
) -> Result<(), std::fmt::Error> {
    let mut help_text = String::with_capacity(help.len() + 1);
    help_text.push_str(help);
    help_text.push('.');
    let mut metric = encoder.encode_descriptor(name, &help_text, None, kind)?;
    for (labels, value) in samples {
        value.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Write one metric without labels.
fn single<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: M,
) -> Result<(), std::fmt::Error> {
    let help_text = format!("{help}.");
    let metric = encoder.encode_descriptor(name, &help_text, None, value.metric_type())?;
    value.encode(metric)
}

/// The PXE services' own counters, read at scrape time.
#[derive(Debug)]
struct Pxe {
    dhcp: Option<Arc<DhcpStats>>,
    tftp: Option<Arc<TftpStats>>,
}

impl Collector for Pxe {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use std::sync::atomic::Ordering::Relaxed;
        if let Some(d) = &self.dhcp {
            let mut packets = Vec::with_capacity(PacketType::ALL.len() * PacketResult::ALL.len());
            for kind in PacketType::ALL {
                for result in PacketResult::ALL {
                    packets.push((
                        [("type", kind.as_str()), ("result", result.as_str())],
                        ConstCounter::new(d.packets(kind, result)),
                    ));
                }
            }
            family(
                &mut encoder,
                "stoker_dhcp_packets",
                "DHCP packets received, by message type (`none`: none could be read) and what \
                 the server made of them: offered, acked, naked, recorded (a lease change \
                 without an answer), ignored, rate_limited, malformed, unavailable (leases \
                 could not be kept: nothing decided)",
                MetricType::Counter,
                packets,
            )?;
            single(
                &mut encoder,
                "stoker_dhcp_replies_sent",
                "DHCP answers sent (after their lease changes were stored)",
                ConstCounter::new(d.replied.load(Relaxed)),
            )?;
            single(
                &mut encoder,
                "stoker_dhcp_pool_exhausted",
                "DHCP requests that got no address because the pool was full",
                ConstCounter::new(d.pool_exhausted.load(Relaxed)),
            )?;
            single(
                &mut encoder,
                "stoker_dhcp_store_errors",
                "Groups of DHCP lease changes the database refused or could not flush (their \
                 answers held back)",
                ConstCounter::new(d.store_errors.load(Relaxed)),
            )?;
            single(
                &mut encoder,
                "stoker_dhcp_lease_flushes",
                "Groups of DHCP lease changes committed and flushed to disk, one fdatasync each, \
                 before their answers left",
                ConstCounter::new(d.lease_groups.load(Relaxed)),
            )?;
            #[allow(clippy::cast_precision_loss)] // nanoseconds as seconds
            let seconds = |c: &std::sync::atomic::AtomicU64| c.load(Relaxed) as f64 / 1e9;
            single(
                &mut encoder,
                "stoker_dhcp_lease_commit_seconds",
                "Time spent committing DHCP lease changes (holding the database's writer)",
                ConstCounter::new(seconds(&d.lease_commit_nanos)),
            )?;
            single(
                &mut encoder,
                "stoker_dhcp_lease_flush_seconds",
                "Time spent flushing DHCP lease changes to disk (fdatasync, holding no lock)",
                ConstCounter::new(seconds(&d.lease_sync_nanos)),
            )?;
        }
        if let Some(t) = &self.tftp {
            let c = t.snapshot();
            single(
                &mut encoder,
                "stoker_tftp_requests",
                "TFTP read requests received",
                ConstCounter::new(c.requests),
            )?;
            family(
                &mut encoder,
                "stoker_tftp_transfers",
                "TFTP read requests by how they ended: completed, failed (timed out or an I/O \
                 error), aborted (by the client), evicted (no ACK while every slot was taken), \
                 refused (no such file, or not allowed), busy (every slot taken)",
                MetricType::Counter,
                [
                    ("completed", c.completed),
                    ("failed", c.failed),
                    ("aborted", c.aborted),
                    ("evicted", c.evicted),
                    ("refused", c.refused),
                    ("busy", c.busy),
                ]
                .map(|(result, n)| ([("result", result)], ConstCounter::new(n))),
            )?;
            single(
                &mut encoder,
                "stoker_tftp_sent_bytes",
                "Bytes of file data the TFTP server sent",
                ConstCounter::new(c.bytes_sent),
            )?;
            single(
                &mut encoder,
                "stoker_tftp_malformed_packets",
                "TFTP packets on the listening socket that were not a valid read request",
                ConstCounter::new(c.malformed),
            )?;
        }
        Ok(())
    }
}

/// What one scrape read: the store's counts and the process's figures.
#[derive(Debug)]
struct Scrape {
    gauges: Gauges,
    /// The DHCP pools' `(addresses, free)`, when DHCP runs.
    pool: Option<(u64, u64)>,
    sample: process::Sample,
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let g = &self.gauges;
        family(
            &mut encoder,
            "stoker_nodes",
            "Nodes by status, and whether their agent called in the last 30 s (online)",
            MetricType::Gauge,
            g.nodes.iter().map(|(status, online, n)| {
                (
                    [
                        ("status", status.as_str()),
                        ("online", if *online { "true" } else { "false" }),
                    ],
                    ConstGauge::new(*n as i64),
                )
            }),
        )?;
        family(
            &mut encoder,
            "stoker_deployments",
            "Deployments (and master tasks' rows among them) by status",
            MetricType::Gauge,
            g.deployments
                .iter()
                .map(|(status, n)| ([("status", status.as_str())], ConstGauge::new(*n as i64))),
        )?;
        family(
            &mut encoder,
            "stoker_deployment_runs",
            "Step runs of the deployments in progress, by run status",
            MetricType::Gauge,
            g.runs
                .iter()
                .map(|(status, n)| ([("status", status.as_str())], ConstGauge::new(*n as i64))),
        )?;
        single(
            &mut encoder,
            "stoker_agent_calls_held",
            "The agents' calls for work held now until a run is due for their node (long-poll)",
            ConstGauge::new(i64::try_from(g.held_calls).unwrap_or(i64::MAX)),
        )?;
        if let Some((pool, free)) = self.pool {
            family(
                &mut encoder,
                "stoker_dhcp_leases",
                "Unexpired DHCP leases stored, by state (bound, declined; offers are held in memory)",
                MetricType::Gauge,
                g.leases
                    .iter()
                    .map(|(state, n)| ([("state", state.as_str())], ConstGauge::new(*n as i64))),
            )?;
            single(
                &mut encoder,
                "stoker_dhcp_pool_addresses",
                "Addresses in the DHCP pools, but those reservations keep",
                ConstGauge::new(pool as i64),
            )?;
            single(
                &mut encoder,
                "stoker_dhcp_pool_free_addresses",
                "Addresses in the DHCP pools that no unexpired lease holds",
                ConstGauge::new(free as i64),
            )?;
        }
        family(
            &mut encoder,
            "stoker_build_info",
            "The running stoker's version (always 1)",
            MetricType::Gauge,
            [(
                [("version", env!("CARGO_PKG_VERSION"))],
                ConstGauge::new(1i64),
            )],
        )?;
        let s = &self.sample;
        if let Some(v) = s.cpu_seconds {
            single(
                &mut encoder,
                "process_cpu_seconds",
                "User and system CPU time the process spent, in seconds",
                ConstCounter::new(v),
            )?;
        }
        let gauges: [(&str, &str, Option<f64>); 5] = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                s.resident_bytes.map(|v| v as f64),
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                s.virtual_bytes.map(|v| v as f64),
            ),
            (
                "process_open_fds",
                "Open file descriptors",
                s.open_fds.map(|v| v as f64),
            ),
            (
                "process_max_fds",
                "The limit on open file descriptors",
                s.max_fds.map(|v| v as f64),
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch, in seconds",
                s.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(v) = value {
                single(&mut encoder, name, help, ConstGauge::new(v))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_of_no_route_share_one_label_and_agent_calls_are_counted_twice() {
        let m = Metrics::new(None, None, Vec::new());
        let node = Route {
            pattern: Arc::from("/api/v1/nodes/{id}"),
            agent: None,
        };
        let next = Route {
            pattern: Arc::from("/api/v1/agent/next"),
            agent: Some("next"),
        };
        let ms = Duration::from_millis(1);
        m.observe_request(Some(&node), "GET", 200, ms);
        m.observe_request(Some(&node), "GET", 200, ms);
        m.observe_request(None, "GET", 404, ms);
        m.observe_request(None, "GET", 404, ms);
        m.observe_request(Some(&next), "POST", 200, ms);
        let text = m
            .render(Gauges::default(), process::Sample::default())
            .unwrap();
        assert!(text.contains(
            "stoker_http_requests_total{method=\"GET\",route=\"/api/v1/nodes/{id}\",status=\"200\"} 2\n"
        ));
        assert!(text.contains(
            "stoker_http_requests_total{method=\"GET\",route=\"unmatched\",status=\"404\"} 2\n"
        ));
        assert!(text.contains("stoker_agent_calls_total{call=\"next\",status=\"200\"} 1\n"));
        assert!(text.contains("stoker_agent_call_duration_seconds_count{call=\"next\"} 1\n"));
        assert!(
            !text.contains("stoker_dhcp"),
            "no DHCP families without DHCP"
        );
    }
}
