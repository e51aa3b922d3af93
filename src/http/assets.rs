//! Static assets (CSS, icons, small scripts) embedded in the binary by rust-embed, so the daemon
//! is one file and tests run from any directory (`debug-embed`). Links carry the crate version
//! as a query string, so a new release is never served a stale stylesheet.

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::{HttpResponse, web};
use rust_embed::RustEmbed;

#[derive(RustEmbed)]
#[folder = "assets/"]
struct Assets;

/// `GET /assets/{path}`
pub async fn asset(path: web::Path<String>) -> HttpResponse {
    match Assets::get(&path) {
        Some(file) => HttpResponse::Ok()
            .insert_header((CONTENT_TYPE, file.metadata.mimetype()))
            .insert_header((CACHE_CONTROL, "public, max-age=86400"))
            .body(file.data.into_owned()),
        None => HttpResponse::NotFound()
            .content_type("text/plain; charset=utf-8")
            .body(format!("no asset {path}")),
    }
}
