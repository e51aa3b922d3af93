//! `GET /api/v1/pxe`: what the PXE services are doing — their counters (packets received,
//! answered, malformed, ignored, rate-limited) and the DHCP leases. Read-only; the services
//! themselves live in `dhcp` and `tftp`.

use actix_web::{HttpResponse, web};
use serde::Serialize;

use crate::dhcp::server::DhcpCounters;
use crate::http::{ApiError, AppState};
use crate::tftp::server::TftpCounters;

#[derive(Serialize)]
struct LeaseView {
    ip: String,
    mac: String,
    state: &'static str,
    expires_at: i64,
}

#[derive(Serialize)]
struct DhcpView {
    enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    counters: Option<DhcpCounters>,
    leases: Vec<LeaseView>,
}

#[derive(Serialize)]
struct TftpView {
    enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    counters: Option<TftpCounters>,
}

#[derive(Serialize)]
struct PxeView {
    dhcp: DhcpView,
    tftp: TftpView,
}

/// `GET /api/v1/pxe`
pub async fn status(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let leases = state.store(|s| s.read(|tx| tx.leases())).await?;
    let dhcp = DhcpView {
        enabled: state.pxe.dhcp.is_some(),
        counters: state.pxe.dhcp.as_ref().map(|s| s.snapshot()),
        leases: leases
            .into_iter()
            .map(|l| LeaseView {
                ip: l.ip.to_string(),
                mac: l.mac.to_string(),
                state: l.state.as_str(),
                expires_at: l.expires_at,
            })
            .collect(),
    };
    let tftp = TftpView {
        enabled: state.pxe.tftp.is_some(),
        counters: state.pxe.tftp.as_ref().map(|s| s.snapshot()),
    };
    Ok(HttpResponse::Ok().json(PxeView { dhcp, tftp }))
}
