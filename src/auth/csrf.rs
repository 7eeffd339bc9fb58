//! CSRF tokens. A session's token is derived from its secret cookie token, so nothing extra is
//! stored and a leaked database yields no CSRF token. Before login, a double-submit cookie
//! protects the login form itself; its token is signed with a per-instance key, because a
//! plain double-submit trusts any cookie, and a sibling subdomain can set cookies on ours:
//! with the signature, a cookie/field pair an attacker made up is refused.
//!
//! A signed token still proves only that *someone* fetched our login page: an attacker can
//! harvest a genuine pair and plant it in a victim's browser. So unsafe browser requests are
//! also checked for where they came from ([`check_request_site`]): `Sec-Fetch-Site` must not
//! say another site (sibling subdomains are the same *site*, so `same-site` is refused too),
//! and an `Origin`, when sent, must be our own. Over TLS the pre-login cookie carries the
//! `__Host-` prefix, which a sibling cannot set.

use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use sqlx::AnyPool;

use super::secret_token;
use crate::domain::digest::hex;
use crate::domain::UnixMillis;

/// Form field carrying the token.
pub const FIELD: &str = "csrf_token";
/// Header carrying the token (htmx sends it through `hx-headers`).
pub const HEADER: &str = "x-csrf-token";
/// Cookie holding the pre-login token when the browser did not reach us over TLS.
pub const LOGIN_COOKIE: &str = "headroom_login_csrf";
/// The same cookie over TLS. Browsers accept a `__Host-` cookie only when it is `Secure`,
/// `Path=/` and has no `Domain`, set by this very host, so a sibling subdomain can neither
/// plant nor overwrite it.
pub const SECURE_LOGIN_COOKIE: &str = "__Host-headroom_login_csrf";

/// The pre-login cookie's name for a request that did (`tls`) or did not reach us over TLS.
/// Over TLS only the `__Host-` name is read: a plain-named cookie may come from a sibling.
pub fn login_cookie(tls: bool) -> &'static str {
    if tls {
        SECURE_LOGIN_COOKIE
    } else {
        LOGIN_COOKIE
    }
}

/// How long a pre-login token is accepted: long enough for a login tab left open over a
/// working day, short enough that a harvested token does not work forever.
pub const LOGIN_TOKEN_TTL_MS: UnixMillis = 12 * 60 * 60 * 1000;

/// Clock skew tolerated for a token issued "in the future" (several instances, one key).
const FUTURE_SKEW_MS: UnixMillis = 60 * 1000;

/// `instance_keys.purpose` of the login-form key.
const KEY_PURPOSE: &str = "login_csrf";

/// Domain separation: a MAC made for anything else with the same key never verifies here.
const MAC_CONTEXT: &[u8] = b"headroom login csrf v1\0";

/// The CSRF token of the session whose cookie token is `session_token`.
pub fn for_session(session_token: &str) -> String {
    secret_token::digest(&format!("csrf\0{session_token}"))
}

/// The per-instance key that signs pre-login tokens with HMAC-SHA256. It lives in the
/// database (`instance_keys`), so every instance on one database and every restart agree.
#[derive(Clone)]
pub struct LoginKey(Arc<[u8; 32]>);

impl std::fmt::Debug for LoginKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoginKey(«secret»)")
    }
}

impl LoginKey {
    /// Reads the instance's key, creating it from the OS random source on first start.
    pub async fn load_or_create(pool: &AnyPool, now: UnixMillis) -> anyhow::Result<Self> {
        let mut fresh = [0_u8; 32];
        getrandom::getrandom(&mut fresh)
            .map_err(|e| anyhow::anyhow!("the OS random source failed: {e}"))?;
        let mut conn = pool.acquire().await?;
        let stored =
            crate::db::instance_keys::get_or_insert(&mut conn, KEY_PURPOSE, &fresh, now).await?;
        let bytes: [u8; 32] = stored.try_into().map_err(|v: Vec<u8>| {
            anyhow::anyhow!(
                "instance_keys: the {KEY_PURPOSE} key must be 32 bytes, found {}",
                v.len()
            )
        })?;
        Ok(Self::from_bytes(bytes))
    }

    /// A key from raw bytes (tests, and the database row).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(Arc::new(bytes))
    }

    /// A new pre-login token: `issued-at.nonce.mac`.
    pub fn issue(&self, now: UnixMillis) -> String {
        let body = format!("{now}.{}", secret_token::generate(""));
        let mac = self.mac(&body);
        format!("{body}.{mac}")
    }

    /// Whether `token` was issued by this instance and has not expired. Malformed tokens are
    /// simply not valid.
    pub fn verify(&self, token: &str, now: UnixMillis) -> bool {
        let Some((body, mac)) = token.rsplit_once('.') else {
            return false;
        };
        let Some((issued, nonce)) = body.split_once('.') else {
            return false;
        };
        let well_formed = issued.len() <= 15
            && !issued.is_empty()
            && issued.bytes().all(|b| b.is_ascii_digit())
            && nonce.len() == 64
            && nonce
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let Ok(issued) = issued.parse::<UnixMillis>() else {
            return false;
        };
        // The MAC is compared even for a stale token so timing does not reveal which check
        // failed.
        let genuine = secret_token::constant_time_eq(&self.mac(body), mac);
        let fresh = issued <= now + FUTURE_SKEW_MS && now - issued <= LOGIN_TOKEN_TTL_MS;
        well_formed && genuine && fresh
    }

    fn mac(&self, body: &str) -> String {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0[..]).expect("HMAC takes a key of any length");
        mac.update(MAC_CONTEXT);
        mac.update(body.as_bytes());
        hex(&mac.finalize().into_bytes())
    }
}

/// One request header as [`check_request_site`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen<'a> {
    /// Not sent.
    Absent,
    /// Sent once, as text.
    Once(&'a str),
    /// Sent more than once, or not as text: nothing a browser sends.
    Garbled,
}

/// Where a request reached this server, i.e. the origin our own pages have.
#[derive(Debug, Clone, Copy)]
pub struct OwnOrigin<'a> {
    /// Whether the browser reached us over TLS (configured, or said by a trusted proxy).
    pub tls: bool,
    /// The `Host` header (or HTTP/2 `:authority`) as the request carried it.
    pub host: Option<&'a str>,
}

impl OwnOrigin<'_> {
    fn scheme(&self) -> &'static str {
        if self.tls {
            "https"
        } else {
            "http"
        }
    }
}

/// Refuses an unsafe request that a browser says another site started: `Sec-Fetch-Site`
/// `cross-site` or `same-site` (or a value that is not one of the four), or an `Origin` that
/// is not `own` (`null` included). Requests carrying neither header (curl, old browsers) pass
/// and rest on the CSRF token alone. The error is the message for the caller, naming the
/// header and the rule.
pub fn check_request_site(
    fetch_site: Seen<'_>,
    origin: Seen<'_>,
    own: &OwnOrigin<'_>,
) -> Result<(), String> {
    const ONLY_OURS: &str = "changes are accepted only from headroom's own pages";
    match fetch_site {
        Seen::Absent => {}
        Seen::Garbled => {
            return Err(format!(
                "the Sec-Fetch-Site header must be sent once, as text; {ONLY_OURS}"
            ))
        }
        Seen::Once(v) => match v.trim().to_ascii_lowercase().as_str() {
            "same-origin" | "none" => {}
            "same-site" | "cross-site" => {
                return Err(format!(
                    "Sec-Fetch-Site: {} says another site sent this request; {ONLY_OURS} \
                     (same-origin)",
                    v.trim()
                ))
            }
            _ => {
                return Err(format!(
                    "Sec-Fetch-Site: {} is not one of same-origin, same-site, cross-site or \
                     none; {ONLY_OURS}",
                    shorten(v)
                ))
            }
        },
    }
    let origin = match origin {
        Seen::Absent => return Ok(()),
        Seen::Garbled => {
            return Err(format!(
                "the Origin header must be sent once, as text; {ONLY_OURS}"
            ))
        }
        Seen::Once(v) => v.trim(),
    };
    let scheme = own.scheme();
    let ours = own
        .host
        .and_then(|h| authority(h.trim(), default_port(scheme)?));
    let Some((host, port)) = ours else {
        return Err(format!(
            "Origin: {} cannot be compared: the request has no valid Host header; {ONLY_OURS}",
            shorten(origin)
        ));
    };
    let theirs = origin.split_once("://").and_then(|(s, rest)| {
        let s = s.to_ascii_lowercase();
        let port = default_port(&s)?;
        Some((s, authority(rest, port)?))
    });
    if theirs.is_some_and(|(s, (h, p))| s == scheme && h == host && p == port) {
        return Ok(());
    }
    let own_text = own.host.map_or_else(String::new, |h| shorten(h.trim()));
    Err(format!(
        "Origin: {} is not this console's origin ({scheme}://{own_text}); {ONLY_OURS}",
        shorten(origin)
    ))
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// `host[:port]` (IPv6 in brackets) as a lowercase host and a port, the scheme's default when
/// none is given. Anything more (a path, user info, an empty port) is not an authority here.
fn authority(text: &str, default: u16) -> Option<(String, u16)> {
    let (host, port) = match text.strip_prefix('[') {
        Some(rest) => {
            let (inside, after) = rest.split_once(']')?;
            (format!("[{inside}]"), after)
        }
        None => {
            let colon = text.find(':').unwrap_or(text.len());
            (text[..colon].to_owned(), &text[colon..])
        }
    };
    let port = match port.strip_prefix(':') {
        None if port.is_empty() => default,
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => p.parse().ok()?,
        _ => return None,
    };
    let valid = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._[]:".contains(&b))
        && (host.starts_with('[') || !host.contains(':'));
    valid.then(|| (host.to_ascii_lowercase(), port))
}

/// A header value cut short for a message (values are the client's, so keep them small).
fn shorten(v: &str) -> String {
    const MAX: usize = 80;
    if v.chars().count() <= MAX {
        v.to_owned()
    } else {
        format!("{}…", v.chars().take(MAX).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: UnixMillis = 1_796_000_000_000;

    fn key(byte: u8) -> LoginKey {
        LoginKey::from_bytes([byte; 32])
    }

    #[test]
    fn an_issued_token_verifies_with_its_own_key_only() {
        let token = key(1).issue(NOW);
        assert!(key(1).verify(&token, NOW));
        assert!(!key(2).verify(&token, NOW), "another instance's key");
    }

    #[test]
    fn made_up_and_altered_tokens_are_refused() {
        let k = key(7);
        let token = k.issue(NOW);
        let (body, mac) = token.rsplit_once('.').unwrap();
        let flipped = format!(
            "{body}.{}{}",
            &mac[..63],
            if mac.ends_with('0') { '1' } else { '0' }
        );
        let other_time = token.replacen(&NOW.to_string(), &(NOW + 1).to_string(), 1);
        for forged in [
            "0000000000000000000000000000000000000000000000000000000000000000".to_owned(),
            secret_token::generate(""),
            String::new(),
            "..".to_owned(),
            body.to_owned(),
            flipped,
            other_time,
            format!("{token}.extra"),
            token.to_uppercase(),
        ] {
            assert!(!k.verify(&forged, NOW), "{forged:?}");
        }
    }

    #[test]
    fn tokens_expire_and_are_not_valid_before_they_are_issued() {
        let k = key(3);
        let token = k.issue(NOW);
        assert!(k.verify(&token, NOW + LOGIN_TOKEN_TTL_MS));
        assert!(!k.verify(&token, NOW + LOGIN_TOKEN_TTL_MS + 1));
        assert!(k.verify(&token, NOW - FUTURE_SKEW_MS));
        assert!(!k.verify(&token, NOW - FUTURE_SKEW_MS - 1));
    }

    #[test]
    fn the_key_never_appears_in_debug_output() {
        assert_eq!(format!("{:?}", key(9)), "LoginKey(«secret»)");
    }

    const PLAIN: OwnOrigin<'static> = OwnOrigin {
        tls: false,
        host: Some("127.0.0.1:8080"),
    };
    const TLS: OwnOrigin<'static> = OwnOrigin {
        tls: true,
        host: Some("Console.Example.com"),
    };

    fn site(fetch_site: Option<&str>, origin: Option<&str>, own: &OwnOrigin) -> Result<(), String> {
        fn seen(v: Option<&str>) -> Seen<'_> {
            v.map_or(Seen::Absent, Seen::Once)
        }
        check_request_site(seen(fetch_site), seen(origin), own)
    }

    #[test]
    fn requests_without_either_header_rest_on_the_token() {
        assert_eq!(site(None, None, &PLAIN), Ok(()));
        assert_eq!(
            site(
                None,
                None,
                &OwnOrigin {
                    tls: false,
                    host: None
                }
            ),
            Ok(())
        );
    }

    #[test]
    fn another_site_named_by_sec_fetch_site_is_refused() {
        for value in ["cross-site", "same-site", "Same-Site", "whatever", ""] {
            let err = site(Some(value), None, &PLAIN).unwrap_err();
            assert!(err.starts_with("Sec-Fetch-Site: "), "{value:?}: {err}");
            // Even with an Origin that matches: the browser's word on the site decides.
            assert!(site(Some(value), Some("http://127.0.0.1:8080"), &PLAIN).is_err());
        }
        assert_eq!(site(Some("same-origin"), None, &PLAIN), Ok(()));
        assert_eq!(site(Some("none"), None, &PLAIN), Ok(()));
        let twice = check_request_site(Seen::Garbled, Seen::Absent, &PLAIN).unwrap_err();
        assert!(
            twice.contains("Sec-Fetch-Site header must be sent once"),
            "{twice}"
        );
    }

    #[test]
    fn only_our_own_origin_is_accepted() {
        for ok in ["http://127.0.0.1:8080", "HTTP://127.0.0.1:8080"] {
            assert_eq!(site(Some("same-origin"), Some(ok), &PLAIN), Ok(()), "{ok}");
            assert_eq!(site(None, Some(ok), &PLAIN), Ok(()), "{ok}");
        }
        for foreign in [
            "null",
            "https://evil.example.com",
            "http://evil.example.com",
            "https://127.0.0.1:8080",
            "http://127.0.0.1:8081",
            "http://127.0.0.1",
            "http://127.0.0.1:8080/",
            "http://user@127.0.0.1:8080",
            "http://127.0.0.1:8080.evil.example.com",
            "http://127.0.0.1:",
            "127.0.0.1:8080",
            "file://",
            "",
        ] {
            let err = site(Some("same-origin"), Some(foreign), &PLAIN).unwrap_err();
            assert!(
                err.starts_with(&format!("Origin: {foreign} is not this console's origin")),
                "{foreign:?}: {err}"
            );
            assert!(err.contains("(http://127.0.0.1:8080)"), "{err}");
        }
        let twice = check_request_site(Seen::Absent, Seen::Garbled, &PLAIN).unwrap_err();
        assert!(twice.contains("Origin header must be sent once"), "{twice}");
    }

    #[test]
    fn the_scheme_follows_tls_and_default_ports_and_host_case_do_not_matter() {
        for ok in [
            "https://console.example.com",
            "https://console.example.com:443",
            "https://CONSOLE.example.com",
        ] {
            assert_eq!(site(Some("same-origin"), Some(ok), &TLS), Ok(()), "{ok}");
        }
        for foreign in [
            "http://console.example.com",
            "https://console.example.com:8443",
        ] {
            assert!(site(None, Some(foreign), &TLS).is_err(), "{foreign}");
        }
        let v6 = OwnOrigin {
            tls: false,
            host: Some("[::1]:9000"),
        };
        assert_eq!(site(None, Some("http://[::1]:9000"), &v6), Ok(()));
        assert!(site(None, Some("http://[::2]:9000"), &v6).is_err());
        assert!(site(None, Some("http://::1:9000"), &v6).is_err());
    }

    #[test]
    fn an_origin_cannot_be_checked_without_a_host() {
        for host in [None, Some(""), Some("a b"), Some("host:port")] {
            let own = OwnOrigin { tls: false, host };
            let err = site(None, Some("http://127.0.0.1:8080"), &own).unwrap_err();
            assert!(err.contains("no valid Host header"), "{host:?}: {err}");
        }
    }

    #[test]
    fn long_header_values_are_cut_short_in_messages() {
        let long = format!("https://{}.example.com", "a".repeat(500));
        let err = site(None, Some(&long), &PLAIN).unwrap_err();
        assert!(err.len() < 300, "{err}");
        assert!(err.contains('…'));
    }

    #[test]
    fn tls_reads_only_the_host_prefixed_login_cookie() {
        assert_eq!(login_cookie(true), "__Host-headroom_login_csrf");
        assert_eq!(login_cookie(false), "headroom_login_csrf");
    }
}
