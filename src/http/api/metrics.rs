//! `GET /metrics`: the Prometheus exposition ([`crate::metrics`]). A viewer's API token, as
//! Prometheus sends it (`authorization` in its scrape configuration). The store's counts and
//! the process's figures are read on the blocking pool, once per scrape.

use actix_web::{HttpResponse, web};

use crate::http::{ApiError, AppState};

/// `GET /metrics`
pub async fn scrape(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let now = crate::clock::now();
    let gauges = state
        .store(move |s| {
            let mut g = s.read(|tx| tx.gauges(now))?;
            g.held_calls = u64::try_from(s.held_calls()).unwrap_or(u64::MAX);
            Ok(g)
        })
        .await?;
    let sample = crate::http::off_worker(crate::metrics::process::sample).await?;
    let text = state
        .metrics
        .render(gauges, sample)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(HttpResponse::Ok()
        .content_type(crate::metrics::CONTENT_TYPE)
        .insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
        .body(text))
}
