//! Where a scrape's requests go: the configured endpoint's base, and the base of a member
//! from the `addr` it publishes (`host:port`, also its HTTP address). Pure string work; the
//! outbound policy judges every resulting URL when it is fetched.

use url::{Host, Url};

/// `base` without its trailing `/`, so paths can be appended.
pub fn trimmed(base: &str) -> &str {
    base.trim_end_matches('/')
}

/// The base URL of a member publishing `addr`, with the scheme of the endpoint the fleet was
/// configured with (`given_base`). An unspecified address (`0.0.0.0:…`, `[::]:…`: a node
/// without an advertise address) is not reachable, so the given base stands in for it.
/// `None` when `addr` is not a plain `host:port` (a path, credentials or a query smuggled into
/// it would change what is fetched), or carries the cleaner's marks: an address that held a
/// hidden character, or was cut, is not the one the node published.
pub fn member_base(addr: &str, given_base: &str) -> Option<String> {
    let given = Url::parse(given_base).ok()?;
    if addr.is_empty()
        || addr.chars().any(|c| {
            c.is_whitespace()
                || c.is_control()
                || matches!(c, '/' | '@' | '?' | '#' | '\\')
                || c == super::text::REPLACED
                || c == super::text::CUT
        })
    {
        return None;
    }
    let url = Url::parse(&format!("{}://{addr}", given.scheme())).ok()?;
    let unspecified = match url.host()? {
        Host::Ipv4(ip) => ip.is_unspecified(),
        Host::Ipv6(ip) => ip.is_unspecified(),
        Host::Domain(_) => false,
    };
    if unspecified {
        return Some(trimmed(given_base).to_owned());
    }
    Some(url.origin().ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_keeps_the_given_scheme_and_an_unspecified_address_falls_back() {
        let given = "https://10.0.0.1:7443/";
        assert_eq!(
            member_base("10.0.0.2:7443", given).as_deref(),
            Some("https://10.0.0.2:7443")
        );
        assert_eq!(
            member_base("127.0.0.1:17442", "http://127.0.0.1:17441").as_deref(),
            Some("http://127.0.0.1:17442")
        );
        assert_eq!(
            member_base("0.0.0.0:7443", given).as_deref(),
            Some("https://10.0.0.1:7443")
        );
        assert_eq!(
            member_base("[::]:7443", given).as_deref(),
            Some("https://10.0.0.1:7443")
        );
        assert_eq!(
            member_base("[fd00::2]:7443", given).as_deref(),
            Some("https://[fd00::2]:7443")
        );
        assert_eq!(
            member_base("node-2.mesh:7443", given).as_deref(),
            Some("https://node-2.mesh:7443")
        );
    }

    #[test]
    fn an_address_that_is_not_host_port_is_refused() {
        let given = "http://10.0.0.1:7443";
        for bad in [
            "",
            "a@b:1",
            "h:1/x",
            "h:1?q",
            "h:1#f",
            "h 1:2",
            "h:99999",
            "h:1\\x",
            // The cleaner's marks: a hidden character was replaced, or the address was cut.
            "10.0.0.2:74\u{FFFD}43",
            "node-2.mesh…",
        ] {
            assert_eq!(member_base(bad, given), None, "{bad:?}");
        }
    }
}
