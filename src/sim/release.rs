//! The demo's release server: yubaba's tarball over https on loopback, so the demo's machine
//! config pins a download that really happens. headroom checks that pin the way it checks a
//! real release (the pin client, its outbound policy, the sha256 compare); the demo only
//! allow-lists this one listener and trusts this one CA.
//!
//! The certificate is for 127.0.0.1 and ::1 only, issued by a demo-only CA whose key was not
//! kept (openssl, EC P-256, valid 2026–2126). The tarball is a real gzip'd tar holding a
//! README that says what it is; the simulated cloud never unpacks it.

use std::net::SocketAddr;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::http::{self, Limits, Request, Response};

/// The demo CA's certificate (PEM): the pin client trusts it in the demo only.
pub const CA_PEM: &[u8] = include_bytes!("release/demo-ca.pem");

const LEAF_PEM: &[u8] = include_bytes!("release/demo-leaf.pem");
const LEAF_KEY: &[u8] = include_bytes!("release/demo-leaf.key");

/// The path the tarball is served at, as a real release names it.
pub const TARBALL_PATH: &str = "/yubaba-1.4.2-x86_64.tar.gz";

const TARBALL: &[u8] = include_bytes!("release/yubaba-1.4.2-x86_64.tar.gz");

/// A bound, not yet serving, release server.
pub struct ReleaseServer {
    listener: TcpListener,
    addr: SocketAddr,
}

impl ReleaseServer {
    /// Binds 127.0.0.1 on a free port (bound first, so the settings can allow-list exactly
    /// this address before the application's clients are built).
    pub async fn bind() -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        Ok(Self { listener, addr })
    }

    /// `127.0.0.1:port`: the one `outbound_allow` entry the demo adds.
    pub fn allow_entry(&self) -> String {
        self.addr.to_string()
    }

    /// The tarball's https URL.
    pub fn tarball_url(&self) -> String {
        format!("https://{}{TARBALL_PATH}", self.addr)
    }

    /// The tarball's sha256, lower-case hex: what the demo config pins.
    pub fn tarball_sha256() -> String {
        Sha256::digest(TARBALL)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Serves the tarball (GET only; anything else is 404) until `stop` turns true.
    pub async fn run_until_stopped(self, stop: watch::Receiver<bool>) -> anyhow::Result<()> {
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config()?));
        http::serve_tls(
            self.listener,
            Limits::default(),
            Arc::new(answer),
            stop,
            acceptor,
        )
        .await;
        Ok(())
    }
}

fn answer(request: &Request) -> Response {
    match (request.method.as_str(), request.path.as_str()) {
        ("GET", TARBALL_PATH) => Response {
            status: 200,
            content_type: "application/gzip",
            body: TARBALL.to_vec(),
        },
        _ => Response::text(404, "not found"),
    }
}

fn server_config() -> anyhow::Result<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(LEAF_PEM).collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(LEAF_KEY)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_sha256_is_the_served_bytes_digest() {
        let sha = ReleaseServer::tarball_sha256();
        assert_eq!(sha.len(), 64);
        assert_eq!(
            sha,
            "ebbd53acdff1c8f140a288f642977ce0bf8d956f5228f4324a72fa027a13fd81"
        );
        assert_eq!(answer(&get(TARBALL_PATH)).body, TARBALL);
        assert_eq!(answer(&get("/../etc/passwd")).status, 404);
    }

    #[test]
    fn the_certificate_and_key_load() {
        server_config().expect("the demo's certificate and key load");
    }

    fn get(path: &str) -> Request {
        Request {
            method: "GET".into(),
            path: path.into(),
            query: None,
        }
    }
}
