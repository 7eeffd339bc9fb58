//! The Hetzner client against the stateful fake Hetzner on loopback: the create body, answers
//! parsed, the fault matrix, the shared rate budget, and what a create must never do twice.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use headroom::provider::hetzner::{Hetzner, HetznerOptions};
use headroom::provider::{
    ActionStatus, MachineProvider, ProviderError, ServerSpec, FLEET_LABEL, PROVISION_LABEL,
};
use secrecy::SecretString;

use crate::fake_hetzner::{FakeHetzner, FakeHetznerOptions, Fault, Route};

/// Production bounds, shrunk so a test's retries take milliseconds, not seconds.
fn fast() -> HetznerOptions {
    HetznerOptions {
        connect_timeout: Duration::from_secs(1),
        timeout: Duration::from_millis(1500),
        attempts: 4,
        backoff_base: Duration::from_millis(20),
        backoff_max: Duration::from_millis(100),
        max_rate_wait: Duration::from_secs(10),
        refill_interval: Duration::from_secs(1),
    }
}

fn client(fake: &FakeHetzner) -> Hetzner {
    Hetzner::with_options(&fake.uri(), SecretString::from(fake.token()), fast())
}

fn spec(name: &str, provision: &str, ssh_keys: Vec<i64>) -> ServerSpec {
    ServerSpec {
        name: name.into(),
        server_type: "cx22".into(),
        image: "debian-12".into(),
        location: "fsn1".into(),
        user_data: SecretString::from("#cloud-config\nhostname: node-1\n".to_owned()),
        labels: BTreeMap::from([
            (PROVISION_LABEL.to_owned(), provision.to_owned()),
            (FLEET_LABEL.to_owned(), "alpha".to_owned()),
        ]),
        ssh_keys,
    }
}

fn statuses(fake: &FakeHetzner) -> Vec<u16> {
    fake.requests().iter().map(|r| r.status).collect()
}

/// The time between the arrivals of the fake's `first` and `last` recorded requests.
fn between(fake: &FakeHetzner, first: usize, last: usize) -> Duration {
    let requests = fake.requests();
    requests[last]
        .at
        .duration_since(requests[first].at)
        .expect("recorded in order")
}

#[tokio::test]
async fn create_sends_every_field_hetzner_defines_with_the_bearer_token() {
    let fake = FakeHetzner::start().await;
    let created = client(&fake)
        .create_server(&spec("node-1", "42", vec![11, 12]))
        .await
        .unwrap();

    let creates = fake.creates();
    assert_eq!(creates.len(), 1);
    let sent = &creates[0];
    assert_eq!(
        sent.authorization.as_deref(),
        Some(format!("Bearer {}", fake.token()).as_str())
    );
    let body = sent.body.as_ref().expect("a JSON body");
    assert_eq!(body["name"], "node-1");
    assert_eq!(body["server_type"], "cx22");
    assert_eq!(body["image"], "debian-12");
    assert_eq!(body["location"], "fsn1");
    assert_eq!(body["user_data"], "#cloud-config\nhostname: node-1\n");
    assert_eq!(
        body["labels"],
        serde_json::json!({"headroom-provision": "42", "headroom-fleet": "alpha"})
    );
    assert_eq!(
        body["ssh_keys"],
        serde_json::json!([11, 12]),
        "ids, as integers"
    );
    assert_eq!(
        body["public_net"],
        serde_json::json!({"enable_ipv4": true, "enable_ipv6": true})
    );
    assert_eq!(body["start_after_create"], true);

    let held = &fake.servers()[0];
    assert_eq!(created.server.id, held.id);
    assert_eq!(created.server.name, "node-1");
    assert_eq!(created.server.status, "initializing");
    assert_eq!(created.server.ipv4.as_deref(), Some(held.ipv4.as_str()));
    assert_eq!(created.server.labels.get(PROVISION_LABEL).unwrap(), "42");
    let action = created.action.expect("create_server starts an action");
    assert_eq!(
        (action.id, action.command.as_str(), action.status),
        (held.action_id, "create_server", ActionStatus::Running)
    );
}

#[tokio::test]
async fn a_429_with_a_reset_time_waits_until_the_reset_then_succeeds() {
    let fake = FakeHetzner::start().await;
    let id = fake.add_server("node-1", &[]).id;
    fake.push_fault(Route::GetServer, Fault::RateLimited { reset_in_secs: 2 });
    let server = client(&fake).server(id).await.unwrap().unwrap();
    assert_eq!(server.name, "node-1");
    assert_eq!(statuses(&fake), [429, 200], "one refusal, one success");
    // Timed at the fake, from the 429 to the retry. The ceiling only tells "waited for the
    // reset" from "sat out the longest wait" (10 s): no load on the machine can reach it.
    let waited = between(&fake, 0, 1);
    assert!(waited >= Duration::from_secs(2), "waited only {waited:?}");
    assert!(waited < Duration::from_secs(9), "waited {waited:?}");
}

#[tokio::test]
async fn a_rate_limit_beyond_the_longest_wait_is_returned_with_its_retry_time() {
    let fake = FakeHetzner::start().await;
    fake.push_fault(Route::GetServer, Fault::RateLimited { reset_in_secs: 30 });
    let started = Instant::now();
    let err = client(&fake).server(1).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::RateLimited { retry_after } if retry_after >= Duration::from_secs(29)),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "it did not sit out 30 s"
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn two_503s_then_an_answer_make_three_requests_and_succeed() {
    let fake = FakeHetzner::start().await;
    let id = fake.add_server("node-1", &[]).id;
    fake.push_fault(Route::GetServer, Fault::Status(503));
    fake.push_fault(Route::GetServer, Fault::Status(503));
    let server = client(&fake).server(id).await.unwrap();
    assert_eq!(server.map(|s| s.id), Some(id));
    assert_eq!(statuses(&fake), [503, 503, 200]);
}

#[tokio::test]
async fn transient_failures_stop_after_the_bounded_attempts() {
    let fake = FakeHetzner::start().await;
    for _ in 0..6 {
        fake.push_fault(
            Route::GetAction,
            Fault::Error {
                status: 423,
                code: "locked".into(),
                message: "another action is running".into(),
            },
        );
    }
    let err = client(&fake).action(10_001).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Transient(m) if m.contains("another action is running")),
        "{err:?}"
    );
    assert_eq!(statuses(&fake), [423, 423, 423, 423], "4 attempts, no more");
}

/// The choice made: a create is never retried by the client after it reached Hetzner, a 5xx
/// answer included (a gateway's 502/504 can follow a create that went through). The runner
/// looks up by label and only then creates again.
#[tokio::test]
async fn a_create_answered_503_returns_transient_and_is_not_sent_again() {
    let fake = FakeHetzner::start().await;
    fake.push_fault(Route::CreateServer, Fault::Status(503));
    let err = client(&fake)
        .create_server(&spec("node-1", "5", vec![1]))
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Transient(_)), "{err:?}");
    assert_eq!(fake.creates().len(), 1, "no blind retry of a POST");
    assert!(fake.servers().is_empty());
}

#[tokio::test]
async fn a_create_refused_with_429_is_sent_again_after_the_reset_since_nothing_was_made() {
    let fake = FakeHetzner::start().await;
    fake.push_fault(Route::CreateServer, Fault::RateLimited { reset_in_secs: 1 });
    let created = client(&fake)
        .create_server(&spec("node-1", "5", vec![1]))
        .await
        .unwrap();
    assert_eq!(statuses(&fake), [429, 201]);
    assert_eq!(fake.servers().len(), 1);
    assert_eq!(created.server.name, "node-1");
}

#[tokio::test]
async fn a_create_whose_answer_is_lost_returns_transient_and_the_label_finds_the_one_server() {
    let fake = FakeHetzner::start().await;
    fake.push_fault(
        Route::CreateServer,
        Fault::CreateThenHang(Duration::from_secs(4)),
    );
    let hetzner = client(&fake);
    let started = Instant::now();
    let err = hetzner
        .create_server(&spec("node-1", "77", vec![1]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ProviderError::Transient(m) if m.contains("timed out")),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the timeout cut it short"
    );
    assert_eq!(
        fake.creates().len(),
        1,
        "the lost create was not sent again"
    );
    assert_eq!(fake.servers().len(), 1, "the server exists nevertheless");
    // What the runner does next: look by label, adopt, never create a second.
    let found = hetzner.find_by_label(PROVISION_LABEL, "77").await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].id, fake.servers()[0].id);
    assert_eq!(fake.servers().len(), 1);
}

#[tokio::test]
async fn a_taken_name_is_a_name_conflict_with_hetzner_s_message_after_one_request() {
    let fake = FakeHetzner::start().await;
    fake.add_server("node-1", &[]);
    let err = client(&fake)
        .create_server(&spec("node-1", "5", vec![1]))
        .await
        .unwrap_err();
    match err {
        ProviderError::NameConflict(api) => {
            assert_eq!(api.code, "uniqueness_error");
            assert_eq!(api.message, "server name is already used");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(fake.servers().len(), 1);
}

#[tokio::test]
async fn invalid_input_carries_hetzner_s_own_message_and_is_not_retried() {
    let fake = FakeHetzner::start().await;
    fake.push_fault(
        Route::CreateServer,
        Fault::Error {
            status: 400,
            code: "invalid_input".into(),
            message: "invalid input in field 'server_type'".into(),
        },
    );
    let err = client(&fake)
        .create_server(&spec("node-1", "5", vec![1]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ProviderError::InvalidInput(api) if api.message == "invalid input in field 'server_type'" && api.code == "invalid_input"),
        "{err:?}"
    );
    assert!(err
        .to_string()
        .contains("invalid input in field 'server_type'"));
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn a_wrong_token_is_unauthorized_after_one_request() {
    let fake = FakeHetzner::start().await;
    let hetzner = Hetzner::with_options(
        &fake.uri(),
        SecretString::from("not-the-token".to_owned()),
        fast(),
    );
    let err = hetzner.find_by_name("node-1").await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Unauthorized(ref a) if a.code == "unauthorized"),
        "{err:?}"
    );
    assert_eq!(statuses(&fake), [401]);
}

#[tokio::test]
async fn an_action_ending_in_error_is_parsed_with_its_code_and_message() {
    let fake = FakeHetzner::start().await;
    fake.set_action_polls(2);
    fake.push_fault(
        Route::CreateServer,
        Fault::ActionError {
            code: "server_create_failed".into(),
            message: "no capacity left in fsn1".into(),
        },
    );
    let hetzner = client(&fake);
    let created = hetzner
        .create_server(&spec("node-1", "5", vec![1]))
        .await
        .unwrap();
    let id = created.action.unwrap().id;
    let first = hetzner.action(id).await.unwrap();
    assert_eq!((first.status, first.progress), (ActionStatus::Running, 50));
    assert_eq!(first.error, None);
    let done = hetzner.action(id).await.unwrap();
    assert_eq!(done.status, ActionStatus::Error);
    let error = done.error.expect("the action's error");
    assert_eq!(error.code, "server_create_failed");
    assert_eq!(error.message, "no capacity left in fsn1");
    let server = hetzner.server(created.server.id).await.unwrap().unwrap();
    assert_eq!(server.status, "off");
}

#[tokio::test]
async fn with_two_requests_and_one_back_per_second_four_calls_wait_instead_of_meeting_a_429() {
    let fake = FakeHetzner::start_with(FakeHetznerOptions {
        capacity: 2,
        refill_per_sec: 1.0,
        ..FakeHetznerOptions::default()
    })
    .await;
    let hetzner = client(&fake);
    for _ in 0..4 {
        assert_eq!(hetzner.server(999).await.unwrap(), None);
    }
    // Two calls spend the bucket; the third and fourth each wait for a refill. Timed at the
    // fake from the first call; the ceiling only tells "waited for refills" from "waited for
    // the longest wait" (10 s each), which no load on the machine can reach.
    let spread = between(&fake, 0, 3);
    assert!(
        spread >= Duration::from_millis(1900),
        "took only {spread:?}"
    );
    assert!(spread < Duration::from_secs(9), "took {spread:?}");
    assert_eq!(
        fake.rate_limited(),
        0,
        "no call was sent that would be refused"
    );
    assert_eq!(fake.requests().len(), 4);
}

#[tokio::test]
async fn root_password_in_a_create_answer_appears_nowhere_in_the_parsed_value() {
    let fake = FakeHetzner::start().await;
    let created = client(&fake)
        .create_server(&spec("node-1", "5", vec![]))
        .await
        .unwrap();
    assert_eq!(fake.creates()[0].status, 201);
    let text = serde_json::to_string(&created).unwrap();
    assert!(!text.contains("fake-root-password-ZQ9"), "{text}");
    assert!(!text.contains("root_password"), "{text}");
    assert!(!format!("{created:?}").contains("fake-root-password-ZQ9"));
}

#[tokio::test]
async fn find_by_label_reads_every_page_and_refuses_a_selector_outside_the_label_syntax() {
    let fake = FakeHetzner::start().await;
    for i in 0..55 {
        fake.add_server(&format!("node-{i}"), &[(PROVISION_LABEL, "7")]);
    }
    fake.add_server("other", &[(PROVISION_LABEL, "8")]);
    let hetzner = client(&fake);
    let found = hetzner.find_by_label(PROVISION_LABEL, "7").await.unwrap();
    assert_eq!(found.len(), 55);
    let lists = fake.requests();
    assert_eq!(lists.len(), 2, "two pages of 50");
    assert!(lists[0]
        .query
        .contains(&("label_selector".into(), "headroom-provision==7".into())));

    for (key, value) in [
        (PROVISION_LABEL, "7,b!=c"),
        ("a b", "7"),
        (PROVISION_LABEL, "x in (1)"),
    ] {
        let err = hetzner.find_by_label(key, value).await.unwrap_err();
        assert!(
            matches!(&err, ProviderError::InvalidInput(a) if a.message.starts_with("label selector")),
            "{key}={value}: {err:?}"
        );
    }
    assert_eq!(fake.requests().len(), 2, "a refused selector is never sent");
}

#[tokio::test]
async fn by_name_by_id_and_destroy_read_the_fake_s_state_and_a_gone_server_is_none() {
    let fake = FakeHetzner::start().await;
    let made = fake.add_server("node-1", &[(FLEET_LABEL, "alpha")]);
    fake.add_server("node-10", &[]);
    let hetzner = client(&fake);
    let by_name = hetzner.find_by_name("node-1").await.unwrap().unwrap();
    assert_eq!((by_name.id, by_name.status.as_str()), (made.id, "running"));
    assert_eq!(hetzner.find_by_name("node-2").await.unwrap(), None);
    hetzner.destroy(made.id).await.unwrap();
    hetzner.destroy(made.id).await.unwrap();
    assert_eq!(hetzner.server(made.id).await.unwrap(), None);
    assert_eq!(fake.servers().len(), 1);
    assert_eq!(
        statuses(&fake),
        [200, 200, 200, 404, 404],
        "the second delete met a 404 and that is fine"
    );
}

#[tokio::test]
async fn the_catalogue_carries_hourly_and_monthly_prices_per_location() {
    let fake = FakeHetzner::start().await;
    let catalogue = client(&fake).catalogue().await.unwrap();
    assert_eq!(catalogue.locations.len(), 3);
    let cx22 = catalogue
        .server_types
        .iter()
        .find(|t| t.name == "cx22")
        .unwrap();
    assert!(cx22
        .monthly_price
        .contains(&("fsn1".into(), "4.5900".into())));
    assert!(cx22
        .hourly_price
        .contains(&("fsn1".into(), "0.0063".into())));
    assert_eq!(catalogue.images[0].archs, ["x86_64", "aarch64"]);
}
