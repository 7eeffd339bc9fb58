//! The scraper's supervisor, driven through the fleet operations: an edited fleet's loop
//! restarts at its new endpoint, a deleted fleet's loop stops while the others go on, and no
//! more scrapes are in flight than `scrape_concurrency` allows. The supervisor lists fleets
//! every 100 ms here (instead of every 10 s); the fleets' own schedule is the real one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use headroom::auth::Caller;
use headroom::domain::fleet::{FleetInput, SCRAPE_INTERVAL_SECS_MIN};
use headroom::scraper::{supervisor, ScrapeStats};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use wiremock::MockServer;

use crate::helpers::TestApp;
use crate::runner::console;
use crate::scraper::{addr, serve_status, status};

/// How often the supervisor under test looks for fleet changes.
const LIST_OFTEN: Duration = Duration::from_millis(100);

/// A fleet at `endpoint` scraped on the shortest schedule a fleet may have.
fn fleet_at(name: &str, endpoint: String) -> FleetInput {
    FleetInput {
        name: name.into(),
        endpoints: vec![endpoint],
        restore_machine_config: "spare-fsn1".into(),
        scrape_interval_secs: Some(json!(SCRAPE_INTERVAL_SECS_MIN)),
        scrape_timeout_secs: Some(json!(4)),
        ..FleetInput::default()
    }
}

/// A healthy one-node fleet at a wiremock server, which counts the scrapes it answers
/// (shared by the lease and failover tests).
pub(crate) async fn node() -> MockServer {
    let s = MockServer::start().await;
    let members = [(1, addr(&s))];
    let body = status(
        1,
        Some(1),
        3,
        &members,
        Some(json!({"spare": 1, "required": 1})),
    );
    serve_status(&s, body).await;
    s
}

async fn scrapes(s: &MockServer) -> usize {
    s.received_requests().await.unwrap().len()
}

/// Polls until `s` has answered at least `n` scrapes (a minute at most).
async fn until_scraped(s: &MockServer, n: usize, what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while scrapes(s).await < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: fewer than {n} scrapes within a minute"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The supervisor running against the app's fleets.
struct Running {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

fn supervise(app: &TestApp) -> Running {
    let (stop, rx) = watch::channel(false);
    let task = tokio::spawn(supervisor::supervise(
        app.state.ctx.clone(),
        Arc::new(ScrapeStats::default()),
        rx,
        LIST_OFTEN,
    ));
    Running { stop, task }
}

impl Running {
    async fn stop(self) {
        self.stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("the supervisor stops")
            .unwrap();
    }
}

#[tokio::test]
async fn an_edited_fleet_is_scraped_at_its_new_endpoint_and_never_again_at_the_old_one() {
    let app = console(|_| {}).await;
    let ctx = &app.state.ctx;
    let (old, new) = (node().await, node().await);
    headroom::fleets::create(ctx, &Caller::system(), &fleet_at("prod", old.uri()))
        .await
        .unwrap();
    let running = supervise(&app);
    until_scraped(&old, 1, "the first endpoint").await;

    headroom::fleets::update(ctx, &Caller::system(), "prod", &fleet_at("prod", new.uri()))
        .await
        .unwrap();
    until_scraped(&new, 1, "the edited endpoint").await;
    // The old loop was stopped before the new one started, so its count is final now; a
    // whole interval later (the new endpoint's second scrape) it has not moved.
    let old_seen = scrapes(&old).await;
    until_scraped(&new, 2, "the edited endpoint, an interval later").await;
    assert_eq!(scrapes(&old).await, old_seen, "the old loop still scrapes");
    running.stop().await;
}

#[tokio::test]
async fn a_deleted_fleets_loop_stops_while_the_other_fleets_go_on() {
    let app = console(|_| {}).await;
    let ctx = &app.state.ctx;
    let (deleted, kept) = (node().await, node().await);
    for (name, at) in [("alpha", &deleted), ("beta", &kept)] {
        headroom::fleets::create(ctx, &Caller::system(), &fleet_at(name, at.uri()))
            .await
            .unwrap();
    }
    let running = supervise(&app);
    until_scraped(&deleted, 1, "alpha").await;
    until_scraped(&kept, 1, "beta").await;

    headroom::fleets::delete(ctx, &Caller::system(), "alpha")
        .await
        .unwrap();
    // Beta's clock: two of its scrapes later a whole interval has passed since the delete,
    // fifty times the supervisor's listing period.
    let k = scrapes(&kept).await;
    until_scraped(&kept, k + 2, "beta after the delete").await;
    let deleted_seen = scrapes(&deleted).await;
    // One more interval of beta, in which a live alpha loop (same interval) scrapes once.
    until_scraped(&kept, k + 3, "beta, an interval later").await;
    assert_eq!(
        scrapes(&deleted).await,
        deleted_seen,
        "the deleted fleet is still scraped"
    );
    running.stop().await;
}

/// Scrapes in flight across every slow node, and the most seen at once.
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    most: AtomicUsize,
}

/// A one-node fleet on loopback that takes `hold` to answer each scrape; the answer is
/// written only after the scrape has left `in_flight`, so a client that starts its next
/// scrape after reading this answer can never be counted together with it.
async fn slow_node(hold: Duration, in_flight: Arc<InFlight>, answered: Arc<AtomicUsize>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let members = [(1, address.clone())];
    let body = status(
        1,
        Some(1),
        3,
        &members,
        Some(json!({"spare": 1, "required": 1})),
    )
    .to_string();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let (in_flight, answered, body) = (in_flight.clone(), answered.clone(), body.clone());
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if sock.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                // Member reads (`/node`, `/node/usage`) are part of a scrape, not scrapes:
                // answered at once, so only status requests are counted and held.
                if !head.starts_with(b"GET /raft/status") {
                    let _ = sock
                        .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .await;
                    return;
                }
                let now = in_flight.now.fetch_add(1, Ordering::SeqCst) + 1;
                in_flight.most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(hold).await;
                in_flight.now.fetch_sub(1, Ordering::SeqCst);
                answered.fetch_add(1, Ordering::SeqCst);
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(answer.as_bytes()).await;
            });
        }
    });
    format!("http://{address}")
}

#[tokio::test]
async fn no_more_scrapes_are_in_flight_than_scrape_concurrency_allows() {
    let app = console(|s| s.scrape_concurrency = 1).await;
    let ctx = &app.state.ctx;
    // Three fleets each holding a scrape for 2 s of every 5 s: 6 s of scraping a cycle, so
    // without the bound two of them overlap in every cycle (they cannot all fit side by side).
    let in_flight = Arc::new(InFlight::default());
    let mut answered = Vec::new();
    for name in ["alpha", "beta", "gamma"] {
        let count = Arc::new(AtomicUsize::new(0));
        let uri = slow_node(Duration::from_secs(2), in_flight.clone(), count.clone()).await;
        headroom::fleets::create(ctx, &Caller::system(), &fleet_at(name, uri))
            .await
            .unwrap();
        answered.push(count);
    }
    let running = supervise(&app);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while answered.iter().any(|c| c.load(Ordering::SeqCst) < 2) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not every fleet scraped twice"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    running.stop().await;
    assert_eq!(
        in_flight.most.load(Ordering::SeqCst),
        1,
        "scrapes in flight at once with scrape_concurrency = 1"
    );
}
