//! Who is on the other end: the client address and whether it reached us over TLS. Forwarded
//! headers are believed only from the proxies named in `trusted_proxies`, so a client cannot
//! pick its own address to slip past login throttling.

use std::net::IpAddr;

use actix_web::HttpRequest;

/// The client's address: the TCP peer, or — when the peer is a trusted proxy — the right-most
/// address in `X-Forwarded-For` that is not itself a trusted proxy.
pub fn client_addr(req: &HttpRequest, trusted: &[IpAddr]) -> Option<IpAddr> {
    let peer = req.peer_addr()?.ip();
    if !trusted.contains(&peer) {
        return Some(peer);
    }
    let forwarded: Vec<IpAddr> = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|a| a.trim().parse().ok())
        .collect();
    Some(
        forwarded
            .into_iter()
            .rev()
            .find(|a| !trusted.contains(a))
            .unwrap_or(peer),
    )
}

/// Whether the browser reached us over TLS: configured, or said so by a trusted proxy.
pub fn over_tls(req: &HttpRequest, configured: bool, trusted: &[IpAddr]) -> bool {
    configured
        || req.peer_addr().is_some_and(|p| trusted.contains(&p.ip()))
            && req
                .headers()
                .get("x-forwarded-proto")
                .and_then(|v| v.to_str().ok())
                == Some("https")
}
