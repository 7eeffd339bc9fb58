//! The outbound policy end to end: pin checks through the API and the outbound client against
//! loopback servers only. Every destination in this file is on 127.0.0.0/8 or ::1, and names
//! are answered from a table, never by a DNS server: a failing test still sends nothing off
//! the machine.
//!
//! The https fakes are wiremock behind a small TLS front (`TlsFake`) with a certificate for
//! 127.0.0.1, 127.0.0.2, ::1, localhost and tarballs.test, issued by a test-only CA that the
//! app trusts through `outbound_ca_file`. The fixtures were made with openssl (EC P-256,
//! valid 2025–2125): a self-signed CA (`CA:TRUE`, keyCertSign) and a leaf (`CA:FALSE`,
//! serverAuth, the names above as subjectAltName); the CA's key was not kept.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use headroom::domain::Role;
use headroom::outbound::policy::Purpose;
use headroom::outbound::resolver::{Lookup, LookupFuture};
use headroom::outbound::{AllowList, FetchError, OutboundClient};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::TestApp;

/// The test CA's certificate (PEM), for `outbound_ca_file`.
pub fn ca_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/api/fixtures/outbound-ca.pem")
}

const LEAF_PEM: &[u8] = include_bytes!("fixtures/outbound-leaf.pem");
const LEAF_KEY: &[u8] = include_bytes!("fixtures/outbound-leaf.key");

/// A TLS listener on a loopback address that counts the connections it accepts and, when it
/// fronts a wiremock server, forwards each one's plaintext there.
pub struct TlsFake {
    /// Where it listens.
    pub addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl TlsFake {
    /// Listens on `ip` (any port) in front of `upstream`.
    pub async fn front(ip: &str, upstream: &MockServer) -> Self {
        Self::start(ip, Some(*upstream.address())).await
    }

    /// Listens on `ip` and only counts: a port that is open but serves nothing.
    pub async fn counting(ip: &str) -> Self {
        Self::start(ip, None).await
    }

    async fn start(ip: &str, upstream: Option<SocketAddr>) -> Self {
        let listener = TcpListener::bind((ip, 0)).await.expect("bind loopback");
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config()));
        let count = accepted.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let Some(upstream) = upstream else {
                    drop(tcp);
                    continue;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut plain) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        Self {
            addr,
            accepted,
            task,
        }
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// `https://<addr><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// The allow-list entry for exactly this listener: `ip:port`.
    pub fn entry(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for TlsFake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn server_config() -> rustls::ServerConfig {
    // Both ring and aws-lc-rs are linked into the test binary; name the provider.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = CertificateDer::pem_slice_iter(LEAF_PEM)
        .collect::<Result<Vec<_>, _>>()
        .expect("leaf certificate");
    let key = PrivateKeyDer::from_pem_slice(LEAF_KEY).expect("leaf key");
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server config")
}

/// A pin client as the app builds one, trusting the test CA.
pub fn pin_client(allow: &[String]) -> OutboundClient {
    client(Purpose::Pin, allow, None)
}

fn client(purpose: Purpose, allow: &[String], lookup: Option<Table>) -> OutboundClient {
    let mut b = OutboundClient::builder(purpose, AllowList::parse(allow).unwrap())
        .connect_timeout(Duration::from_millis(500))
        .timeout(Duration::from_secs(10))
        .ca_file(&ca_file())
        .unwrap();
    if let Some(table) = lookup {
        b = b.lookup(Arc::new(table));
    }
    b.build().unwrap()
}

/// Names answered from a table; anything else does not exist. No DNS server is asked.
#[derive(Clone, Default)]
struct Table(HashMap<String, Vec<IpAddr>>);

impl Table {
    fn with(mut self, name: &str, ips: &[&str]) -> Self {
        let ips = ips.iter().map(|s| s.parse().unwrap()).collect();
        self.0.insert(name.to_owned(), ips);
        self
    }
}

impl Lookup for Table {
    fn lookup(&self, host: &str) -> LookupFuture {
        let found = self.0.get(host).cloned();
        Box::pin(async move {
            found.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such name"))
        })
    }
}

/// The app with the demo config, trusting the test CA and allow-listing `allow`.
async fn app_allowing(allow: &[String]) -> TestApp {
    let allow = AllowList::parse(allow).unwrap();
    let app = TestApp::spawn_with(move |s| {
        s.simulated_provider = true;
        s.outbound_allow = allow;
        s.outbound_ca_file = Some(ca_file());
    })
    .await;
    headroom::sim::demo::seed_config(&app.state)
        .await
        .expect("seed config");
    app
}

/// Points `spare-fsn1` at a tarball URL and pin (as an operator's edit would).
pub(crate) async fn set_tarball(app: &TestApp, url: &str, sha256: &str) {
    let mut input = headroom::machine_setup::configs::latest(
        &app.state.ctx,
        &headroom::auth::Caller::system(),
        "spare-fsn1",
    )
    .await
    .unwrap()
    .spec
    .to_input();
    input.yubaba_url = url.into();
    input.yubaba_sha256 = sha256.into();
    headroom::machine_setup::configs::update(
        &app.state.ctx,
        &headroom::auth::Caller::system(),
        "spare-fsn1",
        &input,
    )
    .await
    .expect("config accepts the URL");
}

async fn operator_token(app: &TestApp) -> String {
    app.create_user("op", Role::Operator).await;
    app.token_for("op").await
}

/// `POST /api/v1/machine-configs/spare-fsn1/pin-check`, expecting 200.
async fn api_pin_check(app: &TestApp, token: &str) -> serde_json::Value {
    let res = app
        .client
        .post(app.url("/api/v1/machine-configs/spare-fsn1/pin-check"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

const ANY_SHA: &str = "4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10";

pub(crate) fn tarball() -> (Vec<u8>, String) {
    let bytes = vec![7_u8; 4096];
    let sha = headroom::domain::digest::hex(&Sha256::digest(&bytes));
    (bytes, sha)
}

pub(crate) async fn serve_tarball(server: &MockServer, at: &str, bytes: Vec<u8>) {
    Mock::given(method("GET"))
        .and(path(at))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(bytes))
        .mount(server)
        .await;
}

async fn redirect(server: &MockServer, from: &str, to: &str) {
    Mock::given(method("GET"))
        .and(path(from))
        .respond_with(ResponseTemplate::new(302).insert_header("Location", to))
        .mount(server)
        .await;
}

#[tokio::test]
async fn loopback_pin_checks_are_refused_with_one_message_before_any_connection() {
    let upstream = MockServer::start().await;
    let (bytes, sha) = tarball();
    serve_tarball(&upstream, "/x", bytes).await;
    // An open port that would serve the right tarball, if anything connected to it.
    let open = TlsFake::front("127.0.0.1", &upstream).await;
    let app = app_allowing(&[]).await;
    let token = operator_token(&app).await;

    let urls = [
        "https://127.0.0.1:1/x".to_owned(),
        open.url("/x"),
        "https://127.0.0.2:1/x".to_owned(),
        "https://[::1]:1/x".to_owned(),
    ];
    for url in &urls {
        set_tarball(&app, url, &sha).await;
        let v = api_pin_check(&app, &token).await;
        assert_eq!(v["ok"], false, "{url}: {v}");
        assert_eq!(v["message"], "refused: loopback address", "{url}: {v}");
        assert_eq!(v["bytes"], serde_json::Value::Null, "{url}: {v}");
        let at = v["checked_at"].as_str().unwrap();
        time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|e| panic!("checked_at {at:?} is not RFC 3339: {e}"));
    }
    assert_eq!(open.accepted(), 0, "the open port was never connected to");
    assert!(upstream.received_requests().await.unwrap().is_empty());
    let audited = app
        .audit_actions()
        .await
        .into_iter()
        .filter(|a| a == "pin.checked")
        .count();
    assert_eq!(audited, urls.len(), "each check is audited like the page's");
}

#[tokio::test]
async fn an_allow_listed_loopback_server_is_fetched_and_the_verdict_remembered() {
    let upstream = MockServer::start().await;
    let (bytes, sha) = tarball();
    serve_tarball(&upstream, "/yubaba.tar.gz", bytes).await;
    let fake = TlsFake::front("127.0.0.1", &upstream).await;
    let app = app_allowing(&[fake.entry()]).await;
    let token = operator_token(&app).await;

    set_tarball(&app, &fake.url("/yubaba.tar.gz"), &sha).await;
    let v = api_pin_check(&app, &token).await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["verdict"], "verified", "{v}");
    assert_eq!(v["bytes"], 4096, "{v}");
    assert_eq!(v["url"], fake.url("/yubaba.tar.gz"));
    assert!(fake.accepted() >= 1);

    set_tarball(&app, &fake.url("/yubaba.tar.gz"), ANY_SHA).await;
    let v = api_pin_check(&app, &token).await;
    assert_eq!(
        (&v["ok"], &v["verdict"]),
        (&false.into(), &"mismatch".into())
    );
    assert!(v["message"].as_str().unwrap().contains(&sha), "{v}");

    // The page shows what the API checked: one operation, one remembered verdict.
    let op = app.quick_session("op").await;
    let page = app
        .get("/machine-configs/spare-fsn1", &op)
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(crate::helpers::texts(&page, "#pin .badge"), ["mismatch"]);
}

#[tokio::test]
async fn redirects_are_rechecked_at_every_hop() {
    let upstream = MockServer::start().await;
    let (bytes, sha) = tarball();
    serve_tarball(&upstream, "/yubaba.tar.gz", bytes).await;
    let allowed = TlsFake::front("127.0.0.1", &upstream).await;
    // Serves the tarball too, but is not on the list.
    let other = TlsFake::front("127.0.0.2", &upstream).await;
    redirect(&upstream, "/to-other", &other.url("/yubaba.tar.gz")).await;
    let plain = format!("http://{}/yubaba.tar.gz", upstream.address());
    redirect(&upstream, "/to-http", &plain).await;
    redirect(&upstream, "/to-self", &allowed.url("/yubaba.tar.gz")).await;
    redirect(&upstream, "/loop", &allowed.url("/loop")).await;
    let app = app_allowing(&[allowed.entry()]).await;
    let token = operator_token(&app).await;

    for (from, message) in [
        ("/to-other", "refused: loopback address"),
        ("/to-http", "refused: redirect to http"),
        ("/loop", "too many redirects"),
    ] {
        set_tarball(&app, &allowed.url(from), &sha).await;
        let v = api_pin_check(&app, &token).await;
        assert_eq!(v["ok"], false, "{from}: {v}");
        assert_eq!(v["message"], message, "{from}: {v}");
    }
    assert_eq!(
        other.accepted(),
        0,
        "the refused hop was never connected to"
    );
    let paths: Vec<String> = upstream
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.url.path().to_owned())
        .collect();
    assert!(
        !paths.contains(&"/yubaba.tar.gz".to_owned()),
        "neither refused hop was fetched: {paths:?}"
    );
    // The first request and three redirects, then the fourth is refused.
    assert_eq!(
        paths.iter().filter(|p| *p == "/loop").count(),
        4,
        "{paths:?}"
    );

    // A hop that stays on the allow-list is followed.
    set_tarball(&app, &allowed.url("/to-self"), &sha).await;
    let v = api_pin_check(&app, &token).await;
    assert_eq!((&v["ok"], &v["bytes"]), (&true.into(), &4096.into()), "{v}");
}

#[tokio::test]
async fn names_are_judged_by_every_address_they_resolve_to() {
    let upstream = MockServer::start().await;
    let (bytes, sha) = tarball();
    serve_tarball(&upstream, "/yubaba.tar.gz", bytes).await;
    let fake = TlsFake::front("127.0.0.1", &upstream).await;
    let port = fake.addr.port();
    // Names that resolve to this host, as a rebinding attacker's name would.
    let table = Table::default()
        .with("tarballs.test", &["127.0.0.1"])
        .with("rebind.test", &["127.0.0.1", "::1"]);
    let limits = headroom::cloud_init::pin::PinLimits {
        max_bytes: 1 << 20,
        timeout: Duration::from_secs(10),
    };
    let allow = vec![format!("tarballs.test:{port}")];
    let pins = client(Purpose::Pin, &allow, Some(table.clone()));

    let check = |url: String| {
        let pins = pins.clone();
        let sha = sha.clone();
        async move {
            headroom::cloud_init::pin::preflight(&pins, &url, &sha, limits)
                .await
                .message()
        }
    };
    assert_eq!(
        check(format!("https://rebind.test:{port}/yubaba.tar.gz")).await,
        "refused: loopback address"
    );
    assert_eq!(
        check(format!("https://localhost:{port}/yubaba.tar.gz")).await,
        "refused: loopback address"
    );
    // Listed with another port: the name is trusted only where the list says.
    assert_eq!(
        check("https://tarballs.test:1/yubaba.tar.gz".into()).await,
        "refused: port not on the allow list"
    );
    assert_eq!(fake.accepted(), 0);
    // Unknown names look like closed ports.
    assert_eq!(
        check(format!("https://missing.test:{port}/yubaba.tar.gz")).await,
        "could not connect"
    );
    // The allow-listed name is resolved and fetched (the certificate names it).
    assert!(check(format!("https://tarballs.test:{port}/yubaba.tar.gz"))
        .await
        .starts_with("verified: 4096 bytes"),);
    assert_eq!(fake.accepted(), 1);
}

#[tokio::test]
async fn each_purpose_applies_its_own_rules_in_the_client() {
    let upstream = MockServer::start().await;
    serve_tarball(&upstream, "/raft/status", b"{}".to_vec()).await;
    let fake = TlsFake::front("127.0.0.1", &upstream).await;
    let url = fake.url("/raft/status");
    let plain = format!("http://{}/raft/status", upstream.address());

    // Fleets may sit on this host; webhooks and pins may not reach it.
    let scrape = client(Purpose::Scrape, &[], None);
    assert_eq!(scrape.get(&url).await.unwrap().status(), 200);
    assert_eq!(scrape.get(&plain).await.unwrap().status(), 200);
    for purpose in [Purpose::Webhook, Purpose::Pin] {
        let err = client(purpose, &[], None).get(&url).await.unwrap_err();
        assert_eq!(err.to_string(), "refused: loopback address", "{purpose:?}");
    }
    // Pins are https only, even to an allow-listed host.
    let pins = client(Purpose::Pin, &[upstream.address().to_string()], None);
    assert_eq!(
        pins.get(&plain).await.unwrap_err().to_string(),
        "refused: not https"
    );
    assert_eq!(fake.accepted(), 1, "only the scrape connected over TLS");
}

#[tokio::test]
async fn closed_silent_non_tls_and_untrusted_ports_all_say_could_not_connect() {
    // A closed port: bound, noted, released.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    // An open port that accepts and says nothing (the connect timeout ends the wait).
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    // An open port that accepts and hangs up at once (no TLS).
    let hangs_up = TlsFake::counting("127.0.0.1").await;
    let pins = client(Purpose::Pin, &["127.0.0.1".to_owned()], None);

    for port in [closed_port, silent_port, hangs_up.addr.port()] {
        let err = pins
            .get(&format!("https://127.0.0.1:{port}/x"))
            .await
            .unwrap_err();
        assert_eq!(err, FetchError::CouldNotConnect, "port {port}");
    }
    assert_eq!(hangs_up.accepted(), 1);
    drop(silent);

    // A server whose certificate the client does not trust: the handshake fails, and that
    // reads the same.
    let upstream = MockServer::start().await;
    let untrusted = TlsFake::front("127.0.0.1", &upstream).await;
    let no_test_ca = OutboundClient::builder(
        Purpose::Pin,
        AllowList::parse(&[untrusted.entry()]).unwrap(),
    )
    .build()
    .unwrap();
    let err = no_test_ca.get(&untrusted.url("/x")).await.unwrap_err();
    assert_eq!(err, FetchError::CouldNotConnect);
    assert_eq!(untrusted.accepted(), 1);
    assert!(upstream.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_slow_answer_times_out_with_a_generic_reason() {
    let upstream = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(5)))
        .mount(&upstream)
        .await;
    let fake = TlsFake::front("127.0.0.1", &upstream).await;
    let pins = OutboundClient::builder(Purpose::Pin, AllowList::parse(&[fake.entry()]).unwrap())
        .timeout(Duration::from_millis(300))
        .ca_file(&ca_file())
        .unwrap()
        .build()
        .unwrap();
    let err = pins.get(&fake.url("/x")).await.unwrap_err();
    assert_eq!(err, FetchError::TimedOut);
    assert_eq!(err.to_string(), "timed out");
}

#[tokio::test]
async fn the_pin_check_is_documented_in_openapi() {
    let app = TestApp::spawn().await;
    let doc: serde_json::Value = app
        .client
        .get(app.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let op = &doc["paths"]["/api/v1/machine-configs/{name}/pin-check"]["post"];
    let params = op["parameters"].as_array().expect("parameters");
    assert_eq!(params.len(), 1, "{params:?}");
    assert_eq!(params[0]["name"], "name");
    assert!(params[0]["description"]
        .as_str()
        .is_some_and(|d| d.contains("RFC 1123")));
    assert_eq!(
        op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/PinCheckJson"
    );
    let props = &doc["components"]["schemas"]["PinCheckJson"]["properties"];
    for field in ["ok", "message", "bytes", "checked_at"] {
        assert!(props.get(field).is_some(), "{field} in {props}");
    }
}
