//! DNS resolution that applies the policy to every address a name resolves to, so the address
//! reqwest connects to is always one the policy has seen (no rebinding between check and use).

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::policy::{check_resolved, AllowList, Purpose};

/// A pending lookup.
pub type LookupFuture = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;

/// Turns a host name into addresses: the system resolver in production; tests supply a table
/// so that no test ever sends a DNS query off the machine.
pub trait Lookup: Send + Sync {
    /// Every address `host` resolves to.
    fn lookup(&self, host: &str) -> LookupFuture;
}

/// The operating system's resolver (getaddrinfo on tokio's blocking pool).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str) -> LookupFuture {
        let host = host.to_owned();
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .map(|a| a.ip())
                .collect())
        })
    }
}

/// reqwest's resolver hook, judging every answer with the policy.
pub(super) struct PolicyResolver {
    pub(super) purpose: Purpose,
    pub(super) allow: Arc<AllowList>,
    pub(super) lookup: Arc<dyn Lookup>,
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let (purpose, allow, lookup) = (self.purpose, self.allow.clone(), self.lookup.clone());
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let ips = lookup.lookup(&host).await?;
            check_resolved(purpose, &allow, &host, &ips)?;
            // Port 0 is replaced by the URL's port.
            let addrs: Addrs = Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}
