//! The outbound policy: which destinations a server-side fetch may reach, per purpose.
//!
//! Every decision here is a pure function of addresses, hosts and the allow-list, so each rule
//! is unit-tested over addresses without opening a socket. The client (`super::client`) applies
//! these decisions at three points: before a request to an IP-literal or `localhost` host,
//! inside DNS resolution, and at every redirect hop.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// Why headroom is fetching; each purpose has its own rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Pin pre-flight: an operator-chosen tarball URL, expected on the public internet.
    Pin,
    /// Fleet status scraping: yubaba fleets sit on private networks, sometimes on this host.
    Scrape,
    /// Notification webhooks: an operator-chosen receiver, possibly on the private network.
    Webhook,
}

/// A destination the policy refuses, named by the rule that refused it. The first six are the
/// kinds of non-public address `classify` finds; whether one is refused depends on the purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("refused: {}", self.rule())]
pub enum Refusal {
    /// RFC 1918, shared address space (100.64.0.0/10), unique-local and site-local IPv6
    /// (refused for pins).
    Private,
    /// 127.0.0.0/8 and ::1 (refused except for scraping).
    Loopback,
    /// 169.254.0.0/16 (cloud metadata lives here) and fe80::/10.
    LinkLocal,
    /// 0.0.0.0/8 and ::; connecting to 0.0.0.0 reaches this host on Linux.
    Unspecified,
    /// 224.0.0.0/4 and ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// The first URL of a pin check is not https.
    NotHttps,
    /// A redirect of a pin check leads to plain http.
    RedirectToHttp,
    /// The scheme is neither http nor https.
    Scheme,
    /// The URL names no host.
    NoHost,
    /// The host is allow-listed, but only on other ports.
    PortNotAllowed,
}

impl Refusal {
    /// The rule's name, as callers see it after "refused: ".
    pub fn rule(self) -> &'static str {
        match self {
            Refusal::Private => "private address",
            Refusal::Loopback => "loopback address",
            Refusal::LinkLocal => "link-local address",
            Refusal::Unspecified => "unspecified address",
            Refusal::Multicast => "multicast address",
            Refusal::Broadcast => "broadcast address",
            Refusal::NotHttps => "not https",
            Refusal::RedirectToHttp => "redirect to http",
            Refusal::Scheme => "scheme is not http or https",
            Refusal::NoHost => "no host",
            Refusal::PortNotAllowed => "port not on the allow list",
        }
    }
}

/// The rule a non-public address falls under; `None` for an address routable on the internet.
/// IPv4-mapped (and NAT64, IPv4-compatible) IPv6 addresses are judged as the IPv4 address they
/// carry, since that is where the packets end up.
pub fn classify(ip: IpAddr) -> Option<Refusal> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<Refusal> {
    let [a, b, ..] = ip.octets();
    if a == 0 {
        Some(Refusal::Unspecified)
    } else if a == 127 {
        Some(Refusal::Loopback)
    } else if a == 169 && b == 254 {
        Some(Refusal::LinkLocal)
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        Some(Refusal::Private)
    } else if ip.is_multicast() {
        Some(Refusal::Multicast)
    } else if ip.is_broadcast() {
        Some(Refusal::Broadcast)
    } else {
        None
    }
}

fn classify_v6(ip: Ipv6Addr) -> Option<Refusal> {
    let first = ip.segments()[0];
    if ip.is_unspecified() {
        Some(Refusal::Unspecified)
    } else if ip.is_loopback() {
        Some(Refusal::Loopback)
    } else if first & 0xffc0 == 0xfe80 {
        Some(Refusal::LinkLocal)
    } else if first & 0xfe00 == 0xfc00 || first & 0xffc0 == 0xfec0 {
        // fc00::/7 unique-local, and the deprecated fec0::/10 site-local.
        Some(Refusal::Private)
    } else if ip.is_multicast() {
        Some(Refusal::Multicast)
    } else {
        None
    }
}

/// The IPv4 address an IPv6 address delivers to: `::ffff:a.b.c.d` (mapped), `64:ff9b::a.b.c.d`
/// (NAT64 well-known prefix) and `::a.b.c.d` (deprecated compatible form, but not `::`/`::1`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    let compatible = s[..6] == [0; 6] && s[6] != 0;
    (nat64 || compatible).then_some(tail)
}

/// The policy decision for one address and purpose (the allow-list is applied by the callers,
/// which know the host name): loopback, link-local, unspecified, multicast and broadcast are
/// refused for every purpose, except that scraping may reach loopback; private addresses are
/// refused for pins only.
pub fn check(purpose: Purpose, ip: IpAddr) -> Result<(), Refusal> {
    match (classify(ip), purpose) {
        (Some(Refusal::Private), Purpose::Scrape | Purpose::Webhook) => Ok(()),
        (Some(Refusal::Loopback), Purpose::Scrape) => Ok(()),
        (Some(rule), _) => Err(rule),
        (None, _) => Ok(()),
    }
}

/// A host as the allow-list compares it: an address, or a lower-case name without a trailing
/// dot (`Example.COM.` and `example.com` are the same host).
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostKey {
    Ip(IpAddr),
    Name(String),
}

impl HostKey {
    fn of<S: AsRef<str>>(host: &Host<S>) -> Self {
        match host {
            Host::Ipv4(ip) => HostKey::Ip(IpAddr::V4(*ip)),
            Host::Ipv6(ip) => HostKey::Ip(IpAddr::V6(*ip)),
            Host::Domain(d) => HostKey::name(d.as_ref()),
        }
    }

    fn name(raw: &str) -> Self {
        match raw.parse::<IpAddr>() {
            Ok(ip) => HostKey::Ip(ip),
            Err(_) => HostKey::Name(raw.trim_end_matches('.').to_ascii_lowercase()),
        }
    }
}

/// One `outbound_allow` entry: `host` (any port) or `host:port` (that port only); IPv6
/// addresses in brackets when a port follows (`[::1]:8443`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowEntry {
    host: HostKey,
    port: Option<u16>,
}

impl AllowEntry {
    /// Parses one entry; the error names the rule it breaks.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let v = raw.trim();
        if v.is_empty() {
            return Err("is empty".into());
        }
        if v.contains("://") || v.contains('/') || v.contains('@') {
            return Err("must be host or host:port, not a URL".into());
        }
        if v.contains('*') {
            return Err("wildcards are not supported; list each host".into());
        }
        let (host, port) = split_host_port(v)?;
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => Some(n),
                _ => return Err(format!("port {p:?} must be a number from 1 to 65535")),
            },
        };
        let host = if let Ok(ip) = host.parse::<Ipv6Addr>() {
            HostKey::Ip(IpAddr::V6(ip))
        } else {
            let parsed =
                Host::parse(host).map_err(|e| format!("host {host:?} is not valid ({e})"))?;
            HostKey::of(&parsed)
        };
        Ok(Self { host, port })
    }
}

/// Splits `host:port`, `[v6]:port`, `[v6]`, bare `v6` and `host`.
fn split_host_port(v: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(rest) = v.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| "has '[' without a closing ']'".to_owned())?;
        return match after {
            "" => Ok((inside, None)),
            _ => match after.strip_prefix(':') {
                Some(p) => Ok((inside, Some(p))),
                None => Err("must be [address] or [address]:port".into()),
            },
        };
    }
    match v.matches(':').count() {
        0 => Ok((v, None)),
        1 => {
            let (h, p) = v.split_once(':').unwrap_or((v, ""));
            Ok((h, Some(p)))
        }
        // More than one colon without brackets: a bare IPv6 address.
        _ => Ok((v, None)),
    }
}

/// The `outbound_allow` settings list: hosts that may be fetched whatever their address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList(Vec<AllowEntry>);

impl AllowList {
    /// Parses every entry; the first bad one is named with its rule.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        entries
            .iter()
            .map(|raw| {
                AllowEntry::parse(raw.as_ref())
                    .map_err(|rule| format!("outbound_allow entry {:?} {rule}", raw.as_ref()))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(AllowList)
    }

    /// This list and one more entry.
    pub fn with(mut self, raw: &str) -> Result<Self, String> {
        let more = Self::parse(&[raw])?;
        self.0.extend(more.0);
        Ok(self)
    }

    /// Whether `host` on `port` is allow-listed.
    pub fn permits<S: AsRef<str>>(&self, host: &Host<S>, port: u16) -> bool {
        let key = HostKey::of(host);
        self.0
            .iter()
            .any(|e| e.host == key && e.port.is_none_or(|p| p == port))
    }

    /// Whether a host name appears on the list at all, on any port. DNS resolution sees only
    /// the name, so it trusts any listed name; `check_url` has already refused the ports the
    /// list does not name.
    pub fn names_host(&self, name: &str) -> bool {
        let key = HostKey::name(name);
        self.0.iter().any(|e| e.host == key)
    }
}

/// Whether a URL is the first request or a redirect hop (pins say why http was refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// The URL the caller asked for.
    First,
    /// A `Location` the server answered with.
    Redirect,
}

/// The decision for a URL before any connection: its scheme, then its host. Allow-listed
/// `host[:port]` passes; IP literals and `localhost` names are judged here because no DNS
/// lookup will happen for them; other names are judged by the resolver once their addresses
/// are known.
pub fn check_url(purpose: Purpose, allow: &AllowList, url: &Url, hop: Hop) -> Result<(), Refusal> {
    match (url.scheme(), purpose, hop) {
        ("https", _, _) => {}
        ("http", Purpose::Pin, Hop::First) => return Err(Refusal::NotHttps),
        ("http", Purpose::Pin, Hop::Redirect) => return Err(Refusal::RedirectToHttp),
        ("http", Purpose::Scrape | Purpose::Webhook, _) => {}
        _ => return Err(Refusal::Scheme),
    }
    let host = url.host().ok_or(Refusal::NoHost)?;
    let port = url.port_or_known_default().unwrap_or(443);
    if allow.permits(&host, port) {
        return Ok(());
    }
    match host {
        Host::Ipv4(ip) => check(purpose, IpAddr::V4(ip)),
        Host::Ipv6(ip) => check(purpose, IpAddr::V6(ip)),
        Host::Domain(_) if allow.names_host(url.host_str().unwrap_or_default()) => {
            Err(Refusal::PortNotAllowed)
        }
        Host::Domain(name) if is_localhost(name) => check(purpose, Ipv4Addr::LOCALHOST.into()),
        Host::Domain(_) => Ok(()),
    }
}

/// `localhost` and `*.localhost` always mean this host (RFC 6761), whatever DNS says.
fn is_localhost(name: &str) -> bool {
    let n = name.trim_end_matches('.').to_ascii_lowercase();
    n == "localhost" || n.ends_with(".localhost")
}

/// The decision for a resolved name: allowed when the name is allow-listed, otherwise refused
/// when any one of its addresses is refused, so a name that answers with one public and one
/// private address (DNS rebinding) cannot reach the private one.
pub fn check_resolved(
    purpose: Purpose,
    allow: &AllowList,
    name: &str,
    addrs: &[IpAddr],
) -> Result<(), Refusal> {
    if allow.names_host(name) {
        return Ok(());
    }
    if is_localhost(name) {
        check(purpose, Ipv4Addr::LOCALHOST.into())?;
    }
    addrs.iter().try_for_each(|ip| check(purpose, *ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    const ALL: [Purpose; 3] = [Purpose::Pin, Purpose::Scrape, Purpose::Webhook];

    #[test]
    fn each_purpose_refuses_the_addresses_its_rules_name() {
        use Refusal::*;
        // What a pin, a scrape and a webhook get for an address; None = allowed.
        type Row = (
            &'static str,
            Option<Refusal>,
            Option<Refusal>,
            Option<Refusal>,
        );
        let table: [Row; 11] = [
            (
                "169.254.169.254",
                Some(LinkLocal),
                Some(LinkLocal),
                Some(LinkLocal),
            ),
            ("fe80::1", Some(LinkLocal), Some(LinkLocal), Some(LinkLocal)),
            ("10.0.0.1", Some(Private), None, None),
            ("172.16.0.1", Some(Private), None, None),
            ("192.168.1.1", Some(Private), None, None),
            ("100.64.0.1", Some(Private), None, None),
            ("fd00::1", Some(Private), None, None),
            (
                "0.0.0.0",
                Some(Unspecified),
                Some(Unspecified),
                Some(Unspecified),
            ),
            ("127.0.0.1", Some(Loopback), None, Some(Loopback)),
            ("::1", Some(Loopback), None, Some(Loopback)),
            ("93.184.215.14", None, None, None),
        ];
        for (addr, pin, scrape, webhook) in table {
            for (purpose, expected) in [
                (Purpose::Pin, pin),
                (Purpose::Scrape, scrape),
                (Purpose::Webhook, webhook),
            ] {
                let expected = expected.map_or(Ok(()), Err);
                assert_eq!(check(purpose, ip(addr)), expected, "{addr} for {purpose:?}");
            }
        }
        // Each refused one passes once its host is allow-listed, whatever the address.
        for (addr, ..) in table {
            let host = match ip(addr) {
                IpAddr::V6(_) => format!("[{addr}]"),
                IpAddr::V4(_) => addr.to_owned(),
            };
            let allow = AllowList::parse(&[host.as_str()]).unwrap();
            let u = url(&format!("https://{host}:8443/yubaba.tar.gz"));
            for purpose in ALL {
                assert_eq!(check_url(purpose, &allow, &u, Hop::First), Ok(()), "{u}");
            }
        }
    }

    #[test]
    fn link_local_unspecified_and_multicast_are_refused_for_every_purpose() {
        for purpose in ALL {
            for (addr, refusal) in [
                ("169.254.169.254", Refusal::LinkLocal),
                ("fe80::1", Refusal::LinkLocal),
                ("::ffff:169.254.169.254", Refusal::LinkLocal),
                ("64:ff9b::a9fe:a9fe", Refusal::LinkLocal),
                ("0.0.0.0", Refusal::Unspecified),
                ("0.1.2.3", Refusal::Unspecified),
                ("::", Refusal::Unspecified),
                ("224.0.0.1", Refusal::Multicast),
                ("ff02::1", Refusal::Multicast),
                ("255.255.255.255", Refusal::Broadcast),
            ] {
                assert_eq!(
                    check(purpose, ip(addr)),
                    Err(refusal),
                    "{addr} for {purpose:?}"
                );
            }
        }
    }

    #[test]
    fn loopback_is_refused_except_for_scraping() {
        for addr in [
            "127.0.0.1",
            "127.0.0.2",
            "::1",
            "::ffff:127.0.0.1",
            "::7f00:1",
        ] {
            assert_eq!(
                check(Purpose::Pin, ip(addr)),
                Err(Refusal::Loopback),
                "{addr}"
            );
            assert_eq!(
                check(Purpose::Webhook, ip(addr)),
                Err(Refusal::Loopback),
                "{addr}"
            );
            assert_eq!(check(Purpose::Scrape, ip(addr)), Ok(()), "{addr}");
        }
    }

    #[test]
    fn private_addresses_are_refused_for_pins_only() {
        for addr in [
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.254",
            "192.168.1.1",
            "100.64.0.1",
            "100.127.255.254",
            "fd00::1",
            "fc00::1",
            "fec0::1",
            "::ffff:10.0.0.1",
        ] {
            assert_eq!(
                check(Purpose::Pin, ip(addr)),
                Err(Refusal::Private),
                "{addr}"
            );
            assert_eq!(check(Purpose::Scrape, ip(addr)), Ok(()), "{addr}");
            assert_eq!(check(Purpose::Webhook, ip(addr)), Ok(()), "{addr}");
        }
    }

    #[test]
    fn public_addresses_are_allowed_for_every_purpose() {
        // Neighbours of the refused ranges are public: the ranges are not drawn too wide.
        for addr in [
            "93.184.215.14",
            "172.32.0.1",
            "100.128.0.1",
            "169.255.0.1",
            "2a01:4f8::1",
            "::ffff:93.184.215.14",
        ] {
            for purpose in ALL {
                assert_eq!(check(purpose, ip(addr)), Ok(()), "{addr} for {purpose:?}");
            }
        }
    }

    #[test]
    fn refusals_name_their_rule() {
        assert_eq!(Refusal::Private.to_string(), "refused: private address");
        assert_eq!(Refusal::Loopback.to_string(), "refused: loopback address");
        assert_eq!(
            Refusal::LinkLocal.to_string(),
            "refused: link-local address"
        );
        assert_eq!(
            Refusal::RedirectToHttp.to_string(),
            "refused: redirect to http"
        );
    }

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    // These URLs are only parsed and judged: this module opens no socket and resolves no name,
    // so the private and link-local addresses below are never contacted.
    #[test]
    fn ip_literal_and_localhost_urls_are_judged_before_any_lookup() {
        let none = AllowList::default();
        for (u, refusal) in [
            ("https://127.0.0.1:1/x", Refusal::Loopback),
            ("https://127.0.0.2:1/x", Refusal::Loopback),
            ("https://[::1]:1/x", Refusal::Loopback),
            ("https://2130706433/x", Refusal::Loopback),
            ("https://0x7f.1/x", Refusal::Loopback),
            ("https://localhost/x", Refusal::Loopback),
            ("https://api.LOCALHOST./x", Refusal::Loopback),
            (
                "https://169.254.169.254/latest/meta-data",
                Refusal::LinkLocal,
            ),
            ("https://[fe80::1]/x", Refusal::LinkLocal),
            ("https://10.0.0.1/x", Refusal::Private),
            ("https://[::ffff:192.168.1.1]/x", Refusal::Private),
            ("https://0.0.0.0/x", Refusal::Unspecified),
            ("http://releases.example.com/x", Refusal::NotHttps),
            ("ftp://releases.example.com/x", Refusal::Scheme),
        ] {
            assert_eq!(
                check_url(Purpose::Pin, &none, &url(u), Hop::First),
                Err(refusal),
                "{u}"
            );
        }
        // A name is left to the resolver, which will know its addresses.
        assert_eq!(
            check_url(
                Purpose::Pin,
                &none,
                &url("https://releases.example.com/x"),
                Hop::First
            ),
            Ok(())
        );
    }

    #[test]
    fn pins_refuse_redirects_to_http_while_scrapes_follow_them() {
        let none = AllowList::default();
        let target = url("http://93.184.215.14/x");
        assert_eq!(
            check_url(Purpose::Pin, &none, &target, Hop::Redirect),
            Err(Refusal::RedirectToHttp)
        );
        assert_eq!(
            check_url(Purpose::Scrape, &none, &target, Hop::Redirect),
            Ok(())
        );
    }

    #[test]
    fn allow_listed_hosts_are_allowed_whatever_their_address() {
        let allow = AllowList::parse(&[
            "127.0.0.1:8443",
            "[::1]",
            "Mirror.Internal.",
            "tarballs.test:9443",
        ])
        .unwrap();
        let ok = |u: &str| check_url(Purpose::Pin, &allow, &url(u), Hop::First);
        assert_eq!(ok("https://127.0.0.1:8443/x"), Ok(()));
        assert_eq!(ok("https://[::1]:1/x"), Ok(()));
        assert_eq!(ok("https://mirror.internal/x"), Ok(()));
        assert_eq!(ok("https://tarballs.test:9443/x"), Ok(()));
        // Only the listed port of a listed address or name.
        assert_eq!(ok("https://127.0.0.1:8444/x"), Err(Refusal::Loopback));
        assert_eq!(
            ok("https://tarballs.test:22/x"),
            Err(Refusal::PortNotAllowed)
        );
        // The resolver trusts listed names, judges others by every address they resolve to.
        assert_eq!(
            check_resolved(Purpose::Pin, &allow, "mirror.internal", &[ip("10.1.2.3")]),
            Ok(())
        );
        assert_eq!(
            check_resolved(
                Purpose::Pin,
                &allow,
                "rebind.example.com",
                &[ip("93.184.215.14"), ip("169.254.169.254")]
            ),
            Err(Refusal::LinkLocal)
        );
        assert_eq!(
            check_resolved(
                Purpose::Pin,
                &allow,
                "www.example.com",
                &[ip("93.184.215.14"), ip("2a01:4f8::1")]
            ),
            Ok(())
        );
    }

    #[test]
    fn allow_list_entries_are_checked_when_loaded() {
        for (raw, rule) in [
            ("", "is empty"),
            ("https://mirror.internal", "not a URL"),
            ("*.example.com", "wildcards"),
            ("mirror.internal:0", "from 1 to 65535"),
            ("mirror.internal:https", "from 1 to 65535"),
            ("[::1", "closing ']'"),
            ("[::1]x", "[address]:port"),
        ] {
            let err = AllowList::parse(&[raw]).unwrap_err();
            assert!(
                err.contains("outbound_allow entry") && err.contains(rule),
                "{raw:?}: {err}"
            );
        }
        assert!(AllowList::parse(&["fd00::1", "[fd00::2]:443", "host.example"]).is_ok());
    }
}
