//! The Overview page: node counts by status, the activity feed, and what to do first on a new
//! master (no release, no node).

use actix_web::web;
use askama::Template;
use askama_web::WebTemplate;

use crate::http::AppState;
use crate::http::pages::views::{CountTile, HistoryRow, Me};
use crate::http::pages::{PageError, VERSION};
use crate::store::NO_RELEASE_MESSAGE;

#[derive(Template, WebTemplate)]
#[template(path = "overview.html")]
pub struct OverviewPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    tiles: Vec<CountTile>,
    history: Vec<HistoryRow>,
    has_nodes: bool,
    no_release: bool,
    no_release_message: &'static str,
}

/// `GET /`
pub async fn overview(state: web::Data<AppState>, me: Me) -> Result<OverviewPage, PageError> {
    let now = crate::clock::now();
    let (counts, history, releases) = state
        .store(|s| {
            s.read(|tx| {
                Ok((
                    tx.node_counts()?,
                    tx.recent_history(15)?,
                    tx.releases()?.len(),
                ))
            })
        })
        .await?;
    Ok(OverviewPage {
        nav: "overview",
        version: VERSION,
        me,
        no_release: releases == 0,
        no_release_message: NO_RELEASE_MESSAGE,
        has_nodes: counts.total > 0,
        tiles: CountTile::from_counts(&counts),
        history: history.iter().map(|h| HistoryRow::new(h, now)).collect(),
    })
}
