//! The confirmation every destructive form action asks for, with or without JavaScript. A
//! destructive form (Deploy, Abort, Remove, Delete, a power-off) posts `confirmed=1` only once
//! its person said yes: `assets/js/confirm.js` asks its `data-confirm` question and adds the
//! field; without JavaScript the form arrives without it, and the action answers with this
//! page instead of acting: the question, what it does, and a form that posts the same fields
//! again with `confirmed=1`, or Cancel back to where it came from. Nothing is done before that
//! second post, so a stray click or a replayed form never acts.

use actix_web::HttpResponse;
use askama::Template;

use crate::http::ApiError;
use crate::http::pages::VERSION;
use crate::http::pages::views::Me;

/// The form field that says the person confirmed.
pub const FIELD: &str = "confirmed";

/// Whether a posted form says it was confirmed.
pub fn given(pairs: &[(String, String)]) -> bool {
    pairs.iter().any(|(k, v)| k == FIELD && v == "1")
}

/// The question a destructive action asks.
pub struct Ask<'a> {
    /// "Deploy environment prod?"
    pub question: String,
    /// What it does, a sentence or two.
    pub detail: String,
    /// The action's URL, posted again.
    pub action: &'a str,
    /// The confirming button's label.
    pub button: String,
    /// Where Cancel goes.
    pub cancel: String,
    /// Whether it cannot be undone (a red button).
    pub danger: bool,
}

#[derive(Template)]
#[template(path = "confirm.html")]
struct ConfirmPage<'a> {
    nav: &'static str,
    version: &'static str,
    me: Me,
    ask: Ask<'a>,
    carried: Vec<(String, String)>,
}

/// The confirmation page for `ask`, carrying the form's other fields (not `csrf` nor
/// `confirmed`) to post them again.
pub fn page(
    me: Me,
    nav: &'static str,
    ask: Ask<'_>,
    pairs: &[(String, String)],
) -> Result<HttpResponse, ApiError> {
    let carried = pairs
        .iter()
        .filter(|(k, _)| k != crate::http::access::CSRF_FIELD && k != FIELD)
        .cloned()
        .collect();
    let html = ConfirmPage {
        nav,
        version: VERSION,
        me,
        ask,
        carried,
    }
    .render()
    .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(html))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_confirmed_one_confirms() {
        let p = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert!(given(&p("confirmed", "1")));
        for (k, v) in [("confirmed", "0"), ("confirmed", ""), ("confirm", "1")] {
            assert!(!given(&p(k, v)), "{k}={v}");
        }
    }
}
