//! Webhook notifications: every transition queues a signed body in its own transaction; the
//! delivery loop retries a failing receiver with backoff, records the outcome on the request's
//! timeline, and never holds up the request. Transitions are driven through the one writer
//! (`transition::apply`) on requests filed the way `requests::create` files them.

use std::time::Duration;

use headroom::db::provisions::{self, NewProvision};
use headroom::db::webhooks::{self, DeliveryRow};
use headroom::domain::{Actor, ProvisionState};
use headroom::provisioning::notify::{self, Event};
use headroom::provisioning::transition::{self, Outcome, Transition};
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::TestApp;

/// The signing secret of these tests: it must never be seen anywhere but in the signature.
pub const SECRET: &str = "whsec-never-shown-7c41d9";
const PUBLIC: &str = "https://console.example.test";

/// An app whose webhook posts to `receiver`'s `/hook`, allowed through the outbound policy.
pub async fn app_with_webhook(receiver: &MockServer, attempts: u32) -> TestApp {
    let url = format!("{}/hook", receiver.uri());
    TestApp::spawn_with(move |s| {
        s.webhook_url = Some(url.parse().unwrap());
        s.webhook_secret = Some(secrecy::SecretString::from(SECRET.to_owned()));
        s.public_url = PUBLIC.into();
        s.webhook_attempts = attempts;
        s.outbound_allow = headroom::outbound::AllowList::parse(&["127.0.0.1"]).unwrap();
    })
    .await
}

/// What a request being filed needs; the rest is fixed.
pub struct Filing<'a> {
    pub fleet: &'a str,
    pub machine_config: &'a str,
    pub requester: &'a str,
    pub reason: &'a str,
    pub count: i64,
}

/// Files a request in `pending_approval` with its notification, in one write transaction
/// (as `requests::create` does), at the app clock's now.
pub async fn file(app: &TestApp, f: Filing<'_>) -> i64 {
    let ctx = &app.state.ctx;
    let now = ctx.now();
    let monthly = format!("{:.4}", 4.51 * f.count as f64);
    let plan = json!({
        "provider": "hetzner", "location": "fsn1", "server_type": "cx22", "image": "debian-12",
        "machines": [], "hourly_price": "0.0072", "monthly_price": "4.51",
        "hourly_cost": format!("{:.4}", 0.0072 * f.count as f64), "monthly_cost": monthly,
        "currency": "EUR"
    })
    .to_string();
    let mut tx = headroom::db::begin_write(&app.pool).await.unwrap();
    let id = provisions::insert(
        &mut tx,
        &NewProvision {
            fleet: f.fleet,
            machine_config: f.machine_config,
            config_version: 1,
            template: "yubaba-node",
            template_version: 1,
            count: f.count,
            reason: f.reason,
            requester: f.requester,
            plan: &plan,
            plan_hash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            approvals_required: 1,
            now,
            expires_at: now + 4 * 3_600_000,
        },
    )
    .await
    .unwrap();
    notify::enqueue(&mut tx, ctx, now, Event::Requested, id)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    id
}

/// Moves a request through the one transition writer; an approval is recorded first.
pub async fn move_to(app: &TestApp, id: i64, from: ProvisionState, to: ProvisionState, who: &str) {
    let mut tx = headroom::db::begin_write(&app.pool).await.unwrap();
    apply(app, &mut tx, id, from, to, who).await;
    tx.commit().await.unwrap();
}

/// Approves and starts a request in one transaction, so the server's own runner never sees
/// it approved (this test plays the runner).
pub async fn approve_and_start(app: &TestApp, id: i64, who: &str) {
    use ProvisionState::*;
    let mut tx = headroom::db::begin_write(&app.pool).await.unwrap();
    apply(app, &mut tx, id, PendingApproval, Approved, who).await;
    apply(app, &mut tx, id, Approved, Executing, "system").await;
    tx.commit().await.unwrap();
}

/// Records an approval without moving the request (one of several it needs).
pub async fn add_approval(app: &TestApp, id: i64, who: &str) {
    let mut conn = app.pool.acquire().await.unwrap();
    let hash = provisions::get(&mut conn, id)
        .await
        .unwrap()
        .unwrap()
        .plan_hash;
    let now = app.state.ctx.now();
    assert!(provisions::insert_approval(&mut conn, id, who, &hash, now)
        .await
        .unwrap());
}

async fn apply(
    app: &TestApp,
    tx: &mut sqlx::AnyConnection,
    id: i64,
    from: ProvisionState,
    to: ProvisionState,
    who: &str,
) {
    let ctx = &app.state.ctx;
    let now = ctx.now();
    if to == ProvisionState::Approved {
        let hash = provisions::get(&mut *tx, id)
            .await
            .unwrap()
            .unwrap()
            .plan_hash;
        assert!(provisions::insert_approval(&mut *tx, id, who, &hash, now)
            .await
            .unwrap());
    }
    let actor = if who == "system" {
        Actor::System
    } else {
        Actor::User(who.to_owned())
    };
    let reason = match to {
        ProvisionState::Rejected => "not this quarter",
        ProvisionState::Expired => "approval window closed",
        _ => "",
    };
    let moved = transition::apply(
        &mut *tx,
        ctx,
        now,
        Transition {
            provision_id: id,
            from,
            to,
            actor: &actor,
            reason,
            details: json!({}),
        },
    )
    .await
    .unwrap();
    assert_eq!(moved, Outcome::Moved);
}

async fn deliveries(app: &TestApp, id: i64) -> Vec<DeliveryRow> {
    let mut conn = app.pool.acquire().await.unwrap();
    webhooks::for_provision(&mut conn, id).await.unwrap()
}

/// One delivery round: `deliver_once`, then waits until `delivery` has been attempted
/// `attempts` times (the server's own loop may have taken the round; the claim lets only one
/// of them send it).
async fn round(app: &TestApp, delivery: i64, attempts: i64) -> DeliveryRow {
    notify::deliver_once(&app.state.ctx).await.unwrap();
    for _ in 0..200 {
        let mut conn = app.pool.acquire().await.unwrap();
        let row = webhooks::get(&mut conn, delivery).await.unwrap().unwrap();
        if row.attempts >= attempts {
            assert_eq!(row.attempts, attempts, "one attempt per round");
            return row;
        }
        drop(conn);
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("delivery {delivery} never reached {attempts} attempts");
}

fn hmac_hex(body: &[u8]) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A webhook receiver on loopback answering 204 at `/hook`.
pub(crate) async fn ok_receiver() -> MockServer {
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&receiver)
        .await;
    receiver
}

async fn timeline(app: &TestApp) -> Vec<(String, String)> {
    sqlx::query_as("SELECT kind, message FROM provision_events ORDER BY id")
        .fetch_all(&app.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn every_transition_posts_a_body_signed_with_hmac_sha256_and_linking_to_the_request() {
    let receiver = ok_receiver().await;
    let app = app_with_webhook(&receiver, 8).await;
    let filing = |requester| Filing {
        fleet: "prod-eu",
        machine_config: "spare-fsn1",
        requester,
        reason: "restore headroom",
        count: 2,
    };
    use ProvisionState::*;
    let a = file(&app, filing("alice")).await;
    approve_and_start(&app, a, "bob").await;
    move_to(&app, a, Executing, Succeeded, "system").await;
    let b = file(&app, filing("carol")).await;
    move_to(&app, b, PendingApproval, Rejected, "bob").await;
    let c = file(&app, filing("carol")).await;
    move_to(&app, c, PendingApproval, Expired, "system").await;
    // Executing sends nothing: requested + approved + finished, requested + rejected, requested + expired.
    let mut expected = Vec::new();
    for (id, events) in [
        (
            a,
            vec![
                "provision.requested",
                "provision.approved",
                "provision.finished",
            ],
        ),
        (b, vec!["provision.requested", "provision.rejected"]),
        (c, vec!["provision.requested", "provision.expired"]),
    ] {
        let rows = deliveries(&app, id).await;
        assert_eq!(
            rows.iter().map(|r| r.event.as_str()).collect::<Vec<_>>(),
            events
        );
        for r in rows {
            expected.push((r.id, id, r.event));
        }
    }
    for (delivery, _, _) in &expected {
        let row = round(&app, *delivery, 1).await;
        assert_eq!(
            (row.state.as_str(), row.last_status),
            ("delivered", Some(204))
        );
    }

    let received = receiver.received_requests().await.unwrap();
    assert_eq!(received.len(), 7);
    for req in &received {
        let header = |n: &str| req.headers.get(n).unwrap().to_str().unwrap().to_owned();
        assert_eq!(header("content-type"), "application/json");
        let signature = header("x-headroom-signature");
        assert_eq!(
            signature,
            format!("sha256={}", hmac_hex(&req.body)),
            "recomputed HMAC"
        );
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        let delivery: i64 = header("x-headroom-delivery").parse().unwrap();
        let (_, provision, event) = expected.iter().find(|(d, _, _)| *d == delivery).unwrap();
        assert_eq!(body["delivery_id"], json!(delivery));
        assert_eq!(body["event"], json!(event));
        assert_eq!(header("x-headroom-event"), *event);
        assert_eq!(body["provision"]["id"], json!(provision));
        assert_eq!(
            body["link"],
            json!(format!("{PUBLIC}/provisions/{provision}"))
        );
        assert_eq!(body["provision"]["monthly_cost"], json!("9.0200"));
        assert_eq!(body["provision"]["currency"], json!("EUR"));
        assert!(body["at"].as_str().unwrap().ends_with('Z'));
        let text = String::from_utf8_lossy(&req.body);
        assert!(!text.contains(SECRET) && !text.contains("#cloud-config"));
    }
    let by_event = |e: &str, p: i64| -> Value {
        received
            .iter()
            .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap())
            .find(|b| b["event"] == json!(e) && b["provision"]["id"] == json!(p))
            .unwrap()
    };
    let finished = by_event("provision.finished", a);
    assert_eq!(finished["provision"]["state"], "succeeded");
    assert_eq!(finished["provision"]["approvers"], json!(["bob"]));
    assert_eq!(finished["provision"]["requester"], "alice");
    let rejected = by_event("provision.rejected", b);
    assert_eq!(rejected["provision"]["state_reason"], "not this quarter");
    assert_eq!(
        by_event("provision.expired", c)["provision"]["state"],
        "expired"
    );
    // Each delivery is a line on its request's timeline.
    let lines = timeline(&app).await;
    let delivered = lines
        .iter()
        .filter(|(k, m)| k == "webhook" && m.contains("delivered"))
        .count();
    assert_eq!(delivered, 7);
}

#[tokio::test]
async fn a_receiver_answering_500_gets_retries_with_backoff_until_it_recovers() {
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .and(wiremock::matchers::header(
            "x-headroom-event",
            "provision.requested",
        ))
        .respond_with(ResponseTemplate::new(500).set_body_string("stack trace: secret-ish"))
        .up_to_n_times(3)
        .with_priority(1)
        .mount(&receiver)
        .await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .respond_with(ResponseTemplate::new(200))
        .with_priority(2)
        .mount(&receiver)
        .await;
    let app = app_with_webhook(&receiver, 8).await;
    let id = file(
        &app,
        Filing {
            fleet: "prod-eu",
            machine_config: "spare-fsn1",
            requester: "alice",
            reason: "restore",
            count: 1,
        },
    )
    .await;
    let delivery = deliveries(&app, id).await[0].id;
    let start = app.state.ctx.now();
    let first = round(&app, delivery, 1).await;
    assert_eq!(first.state, "pending");
    assert_eq!(first.last_status, Some(500));
    assert_eq!(
        first.last_error.as_deref(),
        Some("receiver answered HTTP 500")
    );
    // The first retry waits 0.5–1 s (1 s, jittered over its upper half).
    let wait = first.next_attempt_at - start;
    assert!((500..=1000).contains(&wait), "{wait} ms");
    // Not yet due: nothing is sent.
    assert_eq!(notify::deliver_once(&app.state.ctx).await.unwrap(), 0);

    // The request moves on while its notification is failing.
    use ProvisionState::*;
    approve_and_start(&app, id, "bob").await;
    move_to(&app, id, Executing, Succeeded, "system").await;

    let mut waits = vec![wait];
    for attempt in 2..=4 {
        app.clock.advance(notify::BACKOFF_CAP);
        let now = app.state.ctx.now();
        let row = round(&app, delivery, attempt).await;
        if attempt < 4 {
            assert_eq!(
                (row.state.as_str(), row.last_status),
                ("pending", Some(500))
            );
            waits.push(row.next_attempt_at - now);
        } else {
            assert_eq!(
                (row.state.as_str(), row.last_status),
                ("delivered", Some(200))
            );
        }
    }
    // 1 s, 2 s, 4 s nominal; each jittered within its upper half.
    for (i, w) in waits.iter().enumerate() {
        let nominal = 1000 << i;
        assert!(*w >= nominal / 2 && *w <= nominal, "retry {i}: {w} ms");
    }
    let hook_calls = receiver
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.headers.get("x-headroom-delivery").unwrap() == delivery.to_string().as_str())
        .count();
    assert_eq!(hook_calls, 4, "three failures, then the delivery");
    let state: String = sqlx::query_scalar("SELECT state FROM provisions WHERE id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(state, "succeeded");
    let lines = timeline(&app).await;
    assert!(lines.iter().any(|(k, m)| k == "webhook"
        && m == "webhook provision.requested delivered (attempt 4, HTTP 200)"));
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT COALESCE(last_error, '') FROM webhook_deliveries")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert!(
        stored.iter().all(|e| !e.contains("stack trace")),
        "{stored:?}"
    );
}

#[tokio::test]
async fn after_the_attempt_cap_a_delivery_is_failed_and_never_sent_again() {
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&receiver)
        .await;
    let app = app_with_webhook(&receiver, 3).await;
    let id = file(
        &app,
        Filing {
            fleet: "prod-eu",
            machine_config: "spare-fsn1",
            requester: "alice",
            reason: "restore",
            count: 1,
        },
    )
    .await;
    let delivery = deliveries(&app, id).await[0].id;
    for attempt in 1..=3 {
        let row = round(&app, delivery, attempt).await;
        let expected = if attempt < 3 { "pending" } else { "failed" };
        assert_eq!(row.state, expected, "attempt {attempt}");
        app.clock.advance(notify::BACKOFF_CAP);
    }
    assert_eq!(notify::deliver_once(&app.state.ctx).await.unwrap(), 0);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(receiver.received_requests().await.unwrap().len(), 3);
    let lines = timeline(&app).await;
    assert!(lines.iter().any(|(k, m)| k == "webhook"
        && m == "webhook provision.requested failed after 3 attempts: receiver answered HTTP 500"));
    // The request itself was never held up.
    use ProvisionState::*;
    move_to(&app, id, PendingApproval, Cancelled, "alice").await;
}

/// A webhook receiver on loopback that holds the first delivery it gets (accepted, read,
/// never answered) until [`HeldReceiver::release`], and answers every later one at once.
/// It records each request's `X-Headroom-Delivery` as it arrives.
pub(crate) struct HeldReceiver {
    pub uri: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    release: Option<tokio::sync::oneshot::Sender<()>>,
}

impl HeldReceiver {
    pub(crate) async fn start() -> HeldReceiver {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri = format!("http://{}", listener.local_addr().unwrap());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let log = seen.clone();
        tokio::spawn(async move {
            let mut first = Some(released);
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let held = first.take();
                let log = log.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        if sock.read(&mut byte).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let head = String::from_utf8_lossy(&head).to_lowercase();
                    let header = |name: &str| {
                        head.lines()
                            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()))
                    };
                    let length: usize = header("content-length:")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    let mut body = vec![0u8; length];
                    if sock.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    log.lock()
                        .unwrap()
                        .push(header("x-headroom-delivery:").unwrap_or_default());
                    if let Some(released) = held {
                        let _ = released.await;
                    }
                    let _ = sock
                        .write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
                        .await;
                });
            }
        });
        HeldReceiver {
            uri,
            seen,
            release: Some(release),
        }
    }

    /// The `X-Headroom-Delivery` of every request received so far.
    pub(crate) fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// Polls until the held delivery has arrived (10 s at most).
    pub(crate) async fn until_holding(&self) {
        for _ in 0..400 {
            if !self.seen().is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no delivery reached the receiver");
    }

    /// Lets the held delivery be answered.
    pub(crate) fn release(&mut self) {
        if let Some(r) = self.release.take() {
            let _ = r.send(());
        }
    }
}

/// An app whose webhook posts to `uri`'s `/hook`, loopback allowed.
async fn app_posting_to(uri: &str) -> TestApp {
    let url = format!("{uri}/hook");
    TestApp::spawn_with(move |s| {
        s.webhook_url = Some(url.parse().unwrap());
        s.webhook_secret = Some(secrecy::SecretString::from(SECRET.to_owned()));
        s.public_url = PUBLIC.into();
        s.webhook_attempts = 8;
        s.outbound_allow = headroom::outbound::AllowList::parse(&["127.0.0.1"]).unwrap();
    })
    .await
}

fn restore_for_alice() -> Filing<'static> {
    Filing {
        fleet: "prod-eu",
        machine_config: "spare-fsn1",
        requester: "alice",
        reason: "restore",
        count: 1,
    }
}

#[tokio::test]
async fn a_hanging_receiver_does_not_hold_a_transition() {
    let receiver = HeldReceiver::start().await;
    let app = app_posting_to(&receiver.uri).await;
    let id = file(&app, restore_for_alice()).await;
    let delivery = deliveries(&app, id).await[0].id;
    // A delivery is in flight (the server's loop or this one) and the receiver holds it.
    let ctx = app.state.ctx.clone();
    let sending = tokio::spawn(async move { notify::deliver_once(&ctx).await });
    receiver.until_holding().await;
    use ProvisionState::*;
    move_to(&app, id, PendingApproval, Approved, "bob").await;
    // The transition is done while the receiver still holds the delivery unanswered: it
    // waited for no receiver (nor for the lock of a write left open during the send).
    let mut conn = app.pool.acquire().await.unwrap();
    let row = webhooks::get(&mut conn, delivery).await.unwrap().unwrap();
    assert_eq!(
        (row.state.as_str(), row.attempts),
        ("pending", 0),
        "the held delivery is not settled yet"
    );
    assert_eq!(receiver.seen(), [delivery.to_string()]);
    sending.abort();
}

#[tokio::test]
async fn two_delivery_loops_never_send_one_delivery_twice() {
    let mut receiver = HeldReceiver::start().await;
    let app = app_posting_to(&receiver.uri).await;
    let id = file(&app, restore_for_alice()).await;
    let delivery = deliveries(&app, id).await[0].id;
    // Loop one (this one, or the server's own if it got there first) claims the delivery and
    // is held sending it.
    let ctx = app.state.ctx.clone();
    let first = tokio::spawn(async move { notify::deliver_once(&ctx).await });
    receiver.until_holding().await;
    // Loop two runs half a lease later: the delivery is claimed, not due.
    app.clock.advance(Duration::from_secs(30));
    assert_eq!(
        notify::deliver_once(&app.state.ctx).await.unwrap(),
        0,
        "a second loop sent a delivery another loop was sending"
    );
    receiver.release();
    first.await.unwrap().unwrap();
    let row = round(&app, delivery, 1).await;
    assert_eq!(row.state, "delivered");
    assert_eq!(
        receiver.seen(),
        [delivery.to_string()],
        "the receiver got the delivery exactly once"
    );
}

/// Two loops that both read the delivery as due race for it: the claim lets one through.
#[tokio::test]
async fn of_two_loops_that_both_saw_a_delivery_due_only_one_claims_it() {
    let receiver = ok_receiver().await;
    let app = app_with_webhook(&receiver, 8).await;
    let id = file(&app, restore_for_alice()).await;
    let delivery = deliveries(&app, id).await[0].id;
    let now = app.state.ctx.now();
    let lease = now + 60_000;
    let mut conn = app.pool.acquire().await.unwrap();
    let (due_one, due_two) = (
        webhooks::due(&mut conn, now, 20).await.unwrap(),
        webhooks::due(&mut conn, now, 20).await.unwrap(),
    );
    assert!(due_one.iter().chain(&due_two).all(|r| r.id == delivery));
    let first = webhooks::claim(&mut conn, delivery, now, lease)
        .await
        .unwrap();
    let second = webhooks::claim(&mut conn, delivery, now, lease)
        .await
        .unwrap();
    // The server's own loop may have claimed it before either: then neither wins here.
    assert!(!(first && second), "both loops claimed delivery {delivery}");
    assert!(!second, "the second claim of one due read succeeded");
}

#[tokio::test]
async fn a_receiver_the_outbound_policy_does_not_allow_receives_nothing() {
    let receiver = ok_receiver().await;
    let url = format!("{}/hook", receiver.uri());
    // The receiver is on loopback, which the webhook policy refuses unless allow-listed.
    let app = TestApp::spawn_with(move |s| {
        s.webhook_url = Some(url.parse().unwrap());
        s.webhook_secret = Some(secrecy::SecretString::from(SECRET.to_owned()));
        s.public_url = PUBLIC.into();
        s.webhook_attempts = 1;
    })
    .await;
    let id = file(&app, restore_for_alice()).await;
    let delivery = deliveries(&app, id).await[0].id;
    let row = round(&app, delivery, 1).await;
    assert_eq!(row.state, "failed", "{row:?}");
    assert_eq!(row.last_status, None, "{row:?}");
    let error = row.last_error.unwrap_or_default();
    assert!(
        error.contains("loopback"),
        "the refusal names its rule: {error}"
    );
    assert!(
        receiver.received_requests().await.unwrap().is_empty(),
        "a receiver the policy does not allow got a request"
    );
}

#[tokio::test]
async fn the_webhook_secret_appears_in_no_page_no_api_answer_no_audit_entry_and_no_database_row() {
    let receiver = ok_receiver().await;
    let app = app_with_webhook(&receiver, 8).await;
    let id = file(
        &app,
        Filing {
            fleet: "prod-eu",
            machine_config: "spare-fsn1",
            requester: "alice",
            reason: "restore",
            count: 1,
        },
    )
    .await;
    use ProvisionState::*;
    move_to(&app, id, PendingApproval, Approved, "bob").await;
    let delivery = deliveries(&app, id).await[0].id;
    round(&app, delivery, 1).await;
    let admin = app.session_for(headroom::domain::Role::Admin).await;
    for page in [
        "/provisions",
        "/provisions/export?format=csv",
        "/provisions/export?format=jsonl",
        "/audit",
        "/audit/export?format=jsonl",
        "/api/v1/audit",
        "/api/v1/provisions/export?format=jsonl",
    ] {
        let res = app.get(page, &admin).await;
        assert_eq!(res.status(), 200, "{page}");
        let text = res.text().await.unwrap();
        assert!(!text.contains(SECRET), "{page} shows the secret");
    }
    assert!(app
        .audit_actions()
        .await
        .contains(&"provision.approved".to_owned()));
    // Every byte of the database (and its write-ahead log) is free of it.
    if crate::helpers::store::on_postgres() {
        let found = crate::helpers::store::tables_holding(&app.pool, SECRET).await;
        assert!(found.is_empty(), "tables holding the secret: {found:?}");
    } else {
        scan_sqlite_files(&app).await;
    }
    assert!(app
        .snapshot()
        .await
        .iter()
        .any(|(t, n, _)| t == "webhook_deliveries" && *n == 2));
}

/// The SQLite database's file and write-ahead log are free of the webhook secret.
async fn scan_sqlite_files(app: &TestApp) {
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&app.pool)
        .await
        .unwrap();
    let mut files = vec![app.db_path.clone()];
    files.push(app.db_path.with_extension("db-wal"));
    for f in files {
        if let Ok(bytes) = std::fs::read(&f) {
            assert!(
                !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
                "{} holds the secret",
                f.display()
            );
        }
    }
}

#[tokio::test]
async fn without_a_webhook_nothing_is_queued() {
    let app = TestApp::spawn().await;
    let id = file(
        &app,
        Filing {
            fleet: "prod-eu",
            machine_config: "spare-fsn1",
            requester: "alice",
            reason: "restore",
            count: 1,
        },
    )
    .await;
    move_to(
        &app,
        id,
        ProvisionState::PendingApproval,
        ProvisionState::Rejected,
        "bob",
    )
    .await;
    assert_eq!(app.count("webhook_deliveries").await, 0);
    assert_eq!(notify::deliver_once(&app.state.ctx).await.unwrap(), 0);
}

#[tokio::test]
async fn a_receiver_answering_500_never_holds_up_the_runner_and_the_provision_succeeds() {
    use headroom::domain::Role;
    use headroom::provider::fake::Fake;
    use headroom::provisioning::runner;
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&receiver)
        .await;
    let url = format!("{}/hook", receiver.uri());
    let app = TestApp::spawn_with(move |s| {
        s.webhook_url = Some(url.parse().unwrap());
        s.webhook_secret = Some(secrecy::SecretString::from(SECRET.to_owned()));
        s.public_url = PUBLIC.into();
        s.outbound_allow = headroom::outbound::AllowList::parse(&["127.0.0.1"]).unwrap();
        s.simulated_provider = true;
        s.runner_poll = Duration::from_secs(3600);
        s.runner_action_poll = Duration::from_millis(10);
    })
    .await;
    headroom::sim::demo::seed_config(&app.state)
        .await
        .expect("seed config");
    app.create_user("olga", Role::Operator).await;
    app.create_user("abe", Role::Approver).await;
    let fake = Fake::new();
    let ctx = crate::runner::ctx_with(&app, std::sync::Arc::new(fake.clone()));
    crate::runner::fleet(&ctx, "prod", &[]).await;
    // Filed and approved through the operations, executed by the runner itself.
    let id = crate::runner::approved(&ctx, "prod", 2).await;
    // The receiver fails every delivery before and while the runner works.
    notify::deliver_once(&ctx).await.unwrap();
    while runner::run_once(&ctx).await.unwrap() {}
    let detail = crate::runner::record(&ctx, id).await;
    assert_eq!(detail.provision.state, ProvisionState::Succeeded);
    assert_eq!(fake.servers().len(), 2);
    // Later rounds retry (the clock moves past each backoff); none ever succeeds.
    for _ in 0..3 {
        app.clock.advance(Duration::from_secs(700));
        notify::deliver_once(&ctx).await.unwrap();
    }
    let rows = deliveries(&app, id).await;
    let events: Vec<&str> = rows.iter().map(|r| r.event.as_str()).collect();
    assert_eq!(
        events,
        [
            "provision.requested",
            "provision.approved",
            "provision.finished"
        ]
    );
    for row in &rows {
        assert_eq!(row.state, "pending", "{row:?}");
        assert!(row.attempts >= 2, "retried: {row:?}");
        assert_eq!(row.last_status, Some(500));
    }
    let posts = receiver.received_requests().await.unwrap().len();
    assert!(posts >= 6, "{posts} attempts reached the receiver");
    // And the request stayed succeeded throughout.
    assert_eq!(
        crate::runner::record(&ctx, id).await.provision.state,
        ProvisionState::Succeeded
    );
}
