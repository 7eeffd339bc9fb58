//! Browser-side hardening headers. Every HTML response gets a Content-Security-Policy that
//! allows only our own origin and no inline script or style (an injected `<script>` or
//! `onclick=` does not run even if escaping ever failed), refuses framing (clickjacking) and
//! keeps URLs out of the Referer sent elsewhere; every response gets `nosniff` so a browser
//! never reinterprets, say, a text export as HTML.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::error::InternalError;
use actix_web::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::Error;

/// The policy of every HTML page. `'self'` only; htmx is loaded from /static with its
/// indicator `<style>` and `eval` turned off (see `web::layout`), so nothing inline is needed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; font-src 'self'; \
     object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
/// Framing refused for browsers that predate `frame-ancestors`.
pub const X_FRAME_OPTIONS: &str = "DENY";
/// Full URLs (with audit filters, names) stay on our own origin.
pub const REFERRER_POLICY: &str = "same-origin";
/// Content types are to be believed, never sniffed.
pub const X_CONTENT_TYPE_OPTIONS: &str = "nosniff";

/// Middleware adding the headers. Errors from inner middleware are turned into their
/// responses here, so error pages carry the headers too.
pub async fn apply(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    match next.call(req).await {
        Ok(mut res) => {
            add(res.headers_mut());
            Ok(res)
        }
        // The error stays an error for the outer layers (the request log records it); its
        // response is built now so the headers can be added to it.
        Err(e) => {
            let mut res = e.error_response();
            add(res.headers_mut());
            Err(InternalError::from_response(e, res).into())
        }
    }
}

/// Adds the headers that apply to a response with these headers. A handler that set its own
/// value keeps it.
pub fn add(headers: &mut HeaderMap) {
    // Compared in place: this runs on every response, so no lowercased copy. Bytes, not
    // `to_str`, so a value with non-ASCII bytes after the type is still judged by its type.
    let is_html = headers.get(header::CONTENT_TYPE).is_some_and(|v| {
        v.as_bytes()
            .trim_ascii_start()
            .get(..9)
            .is_some_and(|t| t.eq_ignore_ascii_case(b"text/html"))
    });
    let mut set = |name: HeaderName, value: &'static str| {
        if !headers.contains_key(&name) {
            headers.insert(name, HeaderValue::from_static(value));
        }
    };
    set(header::X_CONTENT_TYPE_OPTIONS, X_CONTENT_TYPE_OPTIONS);
    set(header::REFERRER_POLICY, REFERRER_POLICY);
    if is_html {
        set(header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY);
        set(header::X_FRAME_OPTIONS, X_FRAME_OPTIONS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(h: &HeaderMap, name: HeaderName) -> &str {
        h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    fn with_type(content_type: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(content_type).unwrap(),
        );
        add(&mut h);
        h
    }

    #[test]
    fn html_gets_all_four_headers() {
        let h = with_type("text/html; charset=utf-8");
        assert_eq!(
            value(&h, header::CONTENT_SECURITY_POLICY),
            CONTENT_SECURITY_POLICY
        );
        assert_eq!(value(&h, header::X_FRAME_OPTIONS), "DENY");
        assert_eq!(value(&h, header::REFERRER_POLICY), "same-origin");
        assert_eq!(value(&h, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
    }

    #[test]
    fn the_type_is_matched_without_regard_to_case_or_leading_space() {
        for t in [
            "TEXT/HTML",
            " Text/Html; charset=utf-8",
            "\ttext/html",
            "text/html",
        ] {
            assert!(
                with_type(t).contains_key(header::CONTENT_SECURITY_POLICY),
                "{t}"
            );
        }
        // A byte `to_str` refuses after the type does not hide the page from its policy.
        let mut odd = HeaderMap::new();
        odd.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_bytes(b"text/html; charset=\xff").unwrap(),
        );
        add(&mut odd);
        assert!(odd.contains_key(header::CONTENT_SECURITY_POLICY));
        for t in ["text/htm", "text/plain", ""] {
            assert!(
                !with_type(t).contains_key(header::CONTENT_SECURITY_POLICY),
                "{t}"
            );
        }
    }

    #[test]
    fn other_types_get_nosniff_but_no_page_policy() {
        for t in ["application/json", "text/css", "application/problem+json"] {
            let h = with_type(t);
            assert_eq!(value(&h, header::X_CONTENT_TYPE_OPTIONS), "nosniff", "{t}");
            assert!(!h.contains_key(header::CONTENT_SECURITY_POLICY), "{t}");
        }
        let mut bare = HeaderMap::new();
        add(&mut bare);
        assert_eq!(value(&bare, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
    }

    #[test]
    fn the_policy_allows_nothing_inline_and_no_framing() {
        let directives: Vec<&str> = CONTENT_SECURITY_POLICY.split(';').map(str::trim).collect();
        for needed in [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "frame-ancestors 'none'",
            "base-uri 'none'",
            "form-action 'self'",
        ] {
            assert!(directives.contains(&needed), "{needed}");
        }
        assert!(!CONTENT_SECURITY_POLICY.contains("unsafe"));
    }

    #[test]
    fn a_handler_s_own_policy_is_kept() {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("sandbox"),
        );
        add(&mut h);
        assert_eq!(value(&h, header::CONTENT_SECURITY_POLICY), "sandbox");
    }
}
