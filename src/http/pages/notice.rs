//! What a page says after an action: every dashboard form answers with a redirect (post,
//! redirect, get: a reload never sends the form again) that carries a one-time notice, "Node
//! node-3 deleted" or "Not deployed: …", shown at the top of the page it leads to and then
//! gone. The notice travels in a short-lived cookie (`stoker_notice`, HttpOnly, SameSite=Strict,
//! a minute at most) that `access::authorize` hands to the page ([`Notice::take`]) and clears
//! once a page has shown it; its text is only ever rendered escaped.

use actix_web::http::header;
use actix_web::{HttpMessage, HttpRequest, HttpResponse};

use crate::http::{ApiError, AppState};

/// The cookie that carries a notice from an action to the page it redirects to.
pub const NOTICE_COOKIE: &str = "stoker_notice";

/// The longest notice kept, in bytes; a longer one is cut at a character boundary.
const MAX_TEXT: usize = 600;

/// How long a notice waits for its page, in seconds.
const LIFETIME: i64 = 60;

/// One message after an action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The action did what was asked.
    pub ok: bool,
    pub text: String,
}

impl Notice {
    pub fn ok(text: impl Into<String>) -> Notice {
        Notice {
            ok: true,
            text: text.into(),
        }
    }

    pub fn error(text: impl Into<String>) -> Notice {
        Notice {
            ok: false,
            text: text.into(),
        }
    }

    /// The CSS class of its box.
    pub fn class(&self) -> &'static str {
        if self.ok {
            "notice notice-ok"
        } else {
            "notice notice-error"
        }
    }

    /// The cookie's value: `ok:` or `error:` and the text, percent-encoded.
    fn encode(&self) -> String {
        let mut text = self.text.as_str();
        if text.len() > MAX_TEXT {
            let mut cut = MAX_TEXT;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text = &text[..cut];
        }
        let kind = if self.ok { "ok" } else { "error" };
        format!("{kind}:{}", crate::http::access::encode(text))
    }

    /// A notice from a cookie's value; `None` for anything that is not one.
    pub fn decode(value: &str) -> Option<Notice> {
        let (kind, text) = value.split_once(':')?;
        let ok = match kind {
            "ok" => true,
            "error" => false,
            _ => return None,
        };
        let bytes = percent_decode(text)?;
        let mut text = String::from_utf8(bytes).ok()?;
        if text.len() > MAX_TEXT || text.chars().any(|c| c.is_control() && c != '\n') {
            return None;
        }
        text.shrink_to_fit();
        Some(Notice { ok, text })
    }

    /// The notice the request carried, which `authorize` put in its extensions.
    pub fn take(req: &HttpRequest) -> Option<Notice> {
        req.extensions().get::<Notice>().cloned()
    }
}

fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// A 303 to `location` carrying `notice`.
pub fn redirect(state: &AppState, location: &str, notice: Notice) -> HttpResponse {
    let mut res = HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .finish();
    let cookie =
        crate::http::access::login::cookie(state, NOTICE_COOKIE, notice.encode(), LIFETIME);
    if let Err(e) = res.add_cookie(&cookie) {
        tracing::warn!(%e, "notice cookie not set");
    }
    res
}

/// The usual end of a form action: back to `location`, saying `done` when the action worked and
/// why not when it was refused (a form's refusal is a notice on the page it came from, not an
/// error page of its own). `what` opens the refusal, e.g. "Not deployed".
pub fn after<T>(
    state: &AppState,
    location: &str,
    result: Result<T, ApiError>,
    done: impl FnOnce(T) -> String,
    what: &str,
) -> HttpResponse {
    let notice = match result {
        Ok(v) => Notice::ok(done(v)),
        Err(e) => {
            if matches!(e, ApiError::Internal(_)) {
                tracing::error!(error = %e, "dashboard action failed");
            }
            Notice::error(format!("{what}: {e}"))
        }
    };
    redirect(state, location, notice)
}

/// A form shown again because `e` refused what it sent (its fields are said next to them):
/// the notice on top, opened by `what` ("Settings not saved"), and the status of the answer.
pub fn not_saved(what: &str, e: &ApiError) -> (Notice, actix_web::http::StatusCode) {
    use actix_web::ResponseError;
    if matches!(e, ApiError::Internal(_)) {
        tracing::error!(error = %e, "{what}");
    }
    match e.fields().len() {
        0 => (Notice::error(format!("{what}: {e}")), e.status_code()),
        n => (
            Notice::error(format!(
                "{what}: {n} value{} refused; each is said next to its field.",
                if n == 1 { "" } else { "s" }
            )),
            actix_web::http::StatusCode::BAD_REQUEST,
        ),
    }
}

/// The header that clears a shown notice.
pub fn clear(state: &AppState, res: &mut HttpResponse) {
    let gone = crate::http::access::login::cookie(state, NOTICE_COOKIE, String::new(), 0);
    if let Err(e) = res.add_cookie(&gone) {
        tracing::warn!(%e, "notice cookie not cleared");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_survives_its_cookie() {
        for n in [
            Notice::ok("Environment «prod» created; 3 nodes: a, b & c"),
            Notice::error("Not deployed: 409 environment 4 is deploying (deployment 12)"),
            Notice::ok(""),
            Notice::error("Settings not saved:\nrepo_setup.repos: not a list"),
        ] {
            assert_eq!(Notice::decode(&n.encode()), Some(n));
        }
    }

    #[test]
    fn anything_else_in_the_cookie_is_ignored() {
        for bad in [
            "",
            "ok",
            "warn:x",
            "ok:%zz",
            "ok:%4",
            "ok:%FF%FE",
            "error:a%07b",
            &format!("ok:{}", "a".repeat(MAX_TEXT + 1)),
        ] {
            assert_eq!(Notice::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_long_notice_is_cut_at_a_character() {
        let n = Notice::ok("é".repeat(MAX_TEXT));
        let back = Notice::decode(&n.encode()).unwrap();
        assert!(back.text.len() <= MAX_TEXT && back.text.chars().all(|c| c == 'é'));
    }
}
