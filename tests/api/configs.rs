//! Machine configs and templates through the pages and the API; the Hetzner catalogue through
//! a fake Hetzner on loopback; pin pre-flights against a local HTTP server.

use std::time::Duration;

use headroom::cloud_init::pin::{preflight, PinLimits, PinVerdict};
use headroom::domain::Role;
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{location, texts, TestApp};
use crate::outbound::{pin_client, TlsFake};

const SHA: &str = "4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10";

fn config_form(name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("name", name.to_owned()),
        ("provider", "simulated".into()),
        ("location", "fsn1".into()),
        ("server_type", "cx22".into()),
        ("image", "debian-12".into()),
        ("region", "eu-central".into()),
        ("zone", "fsn1-dc14".into()),
        ("arch", String::new()),
        ("mesh_tags", "tag:spare, tag:eu".into()),
        ("ssh_keys", "4711".into()),
        ("labels", "team=infra\nenv=prod".into()),
        ("allocatable.memory_mb", "3584".into()),
        ("allocatable.cpu_millis", "2000".into()),
        ("taints", "dedicated=ops:NoSchedule".into()),
        ("template", "yubaba-node".into()),
        ("yubaba_channel", "stable".into()),
        (
            "yubaba_url",
            "https://releases.example.com/yubaba-1.4.2.tar.gz".into(),
        ),
        ("yubaba_sha256", SHA.into()),
    ]
}

fn borrowed<'a>(f: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    f.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[tokio::test]
async fn editing_a_config_twice_leaves_three_versions_with_their_diffs() {
    let app = TestApp::spawn_with(|s| s.simulated_provider = true).await;
    let op = app.session_for(Role::Operator).await;
    let res = app
        .post_form("/machine-configs", &op, &borrowed(&config_form("edge-a")))
        .await;
    assert_eq!(res.status(), 303, "{}", res.text().await.unwrap());
    assert_eq!(location(&res), "/machine-configs/edge-a");

    let mut second = config_form("edge-a");
    second[2].1 = "hel1".into();
    assert_eq!(
        app.post_form("/machine-configs/edge-a", &op, &borrowed(&second))
            .await
            .status(),
        303
    );
    let mut third = second.clone();
    third[3].1 = "cax11".into();
    third[7].1 = "aarch64".into();
    assert_eq!(
        app.post_form("/machine-configs/edge-a", &op, &borrowed(&third))
            .await
            .status(),
        303
    );
    // Saving the same again makes no fourth version.
    assert_eq!(
        app.post_form("/machine-configs/edge-a", &op, &borrowed(&third))
            .await
            .status(),
        303
    );

    let page = app
        .get("/machine-configs/edge-a", &op)
        .await
        .text()
        .await
        .unwrap();
    let rows = texts(&page, "#history tbody > tr > td:first-child");
    assert_eq!(rows, ["v3", "v2", "v1"]);
    let diff_fields = texts(&page, "#history tbody > tr:first-child table.diff th");
    assert_eq!(diff_fields, ["arch", "server_type"]);
    assert_eq!(
        texts(&page, "#history tbody > tr:first-child table.diff del"),
        ["x86_64", "cx22"]
    );
    assert_eq!(
        texts(&page, "#history tbody > tr:nth-child(2) table.diff ins"),
        ["hel1"]
    );

    // Every version stays retrievable through the API.
    let v: Vec<serde_json::Value> = app
        .get("/api/v1/machine-configs/edge-a/versions", &op)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        v.iter()
            .map(|x| x["version"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        [3, 2, 1]
    );
    assert_eq!(v[2]["location"], "fsn1");
    assert_eq!(v[1]["location"], "hel1");
    assert_eq!(v[0]["arch"], "aarch64");
    assert_eq!(v[0]["changes"][0]["field"], "arch");
    let stored: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM machine_config_versions")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(stored, 3);
    // Versions are immutable in the database too: the trigger refuses, naming the rule.
    let err = sqlx::query("UPDATE machine_config_versions SET spec = '{}'")
        .execute(&app.pool)
        .await
        .expect_err("an UPDATE of a stored version is refused");
    assert!(
        err.to_string()
            .contains("machine config versions are immutable"),
        "{err}"
    );
    let actions = app.audit_actions().await;
    assert_eq!(
        actions
            .iter()
            .filter(|a| *a == "machine_config.updated")
            .count(),
        2
    );
}

#[tokio::test]
async fn every_config_rule_is_shown_next_to_its_field_and_nothing_is_stored() {
    let app = TestApp::spawn_with(|s| s.simulated_provider = true).await;
    let op = app.session_for(Role::Operator).await;
    let cases: &[(usize, &str, &str)] = &[
        (0, "Not_A_Label", "name"),
        (0, "new", "name"),
        (1, "aws", "provider"),
        (2, "mars-1", "location"),
        (3, "t2.micro", "server_type"),
        (7, "aarch64", "arch"),
        (8, "spare", "mesh_tags"),
        (9, "abc", "ssh_keys"),
        (10, "hetzner.cloud/x=y", "labels"),
        (10, "no equals sign", "labels"),
        (11, "99999999", "allocatable.memory_mb"),
        (12, "-5", "allocatable.cpu_millis"),
        (13, "bad", "taints"),
        (14, "missing", "template"),
        (15, "nightly", "yubaba_channel"),
        (16, "http://releases.example.com/x.tar.gz", "yubaba_url"),
        (17, "ABC", "yubaba_sha256"),
    ];
    for (index, value, field) in cases {
        let mut form = config_form("rules");
        form[*index].1 = (*value).to_owned();
        let before = app.snapshot().await;
        let res = app
            .post_form("/machine-configs", &op, &borrowed(&form))
            .await;
        assert_eq!(res.status(), 422, "{field}={value}");
        let html = res.text().await.unwrap();
        let messages = texts(&html, ".error-summary li");
        assert!(
            messages.iter().any(|m| m.starts_with(&format!("{field}:"))),
            "{field}={value}: {messages:?}"
        );
        let doc = scraper::Html::parse_document(&html);
        let id = format!("#f-{}", field.replace('.', "\\."));
        let sel = scraper::Selector::parse(&id).unwrap();
        assert!(
            doc.select(&sel).next().is_some(),
            "the form re-renders with {field}"
        );
        assert_eq!(
            app.snapshot().await,
            before,
            "{field}={value} stored something"
        );
        assert_eq!(app.count("machine_configs").await, 0);
    }
}

#[tokio::test]
async fn the_api_creates_reads_and_versions_configs_and_templates() {
    let app = TestApp::spawn_with_config().await;
    app.create_user("robot", Role::Operator).await;
    let token = app.token_for("robot").await;
    let body = serde_json::json!({
        "name": "api-made", "provider": "simulated", "location": "nbg1", "server_type": "cax21", "region": "eu-central", "zone": "nbg1-dc3",
        "mesh_tags": ["tag:spare"], "ssh_keys": [1, 2], "labels": {"team": "infra"}, "allocatable": {"memory_mb": 4096, "cpu_millis": 3000},
        "taints": [], "yubaba_channel": "beta", "yubaba_url": "https://releases.example.com/y.tar.gz", "yubaba_sha256": SHA
    });
    let res = app
        .client
        .post(app.url("/api/v1/machine-configs"))
        .bearer_auth(&token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["arch"], "aarch64");
    assert_eq!(v["image"], "debian-12");
    assert_eq!(v["template"], "yubaba-node");
    assert_eq!(v["version"], 1);

    let mut changed = body.clone();
    changed["yubaba_channel"] = "stable".into();
    let res = app
        .client
        .put(app.url("/api/v1/machine-configs/api-made"))
        .bearer_auth(&token)
        .json(&changed)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<serde_json::Value>().await.unwrap()["version"], 2);
    let got: serde_json::Value = app
        .api_json("/api/v1/machine-configs/api-made", &token)
        .await;
    assert_eq!(got["yubaba_channel"], "stable");
    let list: Vec<serde_json::Value> =
        serde_json::from_value(app.api_json("/api/v1/machine-configs", &token).await).unwrap();
    assert_eq!(list.len(), 2);

    // Renaming through PUT is refused; unknown fields are refused.
    let mut renamed = body.clone();
    renamed["name"] = "other".into();
    let res = app
        .client
        .put(app.url("/api/v1/machine-configs/api-made"))
        .bearer_auth(&token)
        .json(&renamed)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    assert_eq!(
        res.json::<serde_json::Value>().await.unwrap()["errors"][0]["field"],
        "name"
    );
    let mut extra = body.clone();
    extra["flavour"] = "x".into();
    assert_eq!(
        app.client
            .post(app.url("/api/v1/machine-configs"))
            .bearer_auth(&token)
            .json(&extra)
            .send()
            .await
            .unwrap()
            .status(),
        400
    );
    assert_eq!(
        app.client
            .get(app.url("/api/v1/machine-configs/nope"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status(),
        404
    );

    // Templates: create, save a version, list versions; a syntax error names its line.
    let t = serde_json::json!({"name": "tiny", "body": "#cloud-config\nhostname: {{ hostname | yaml }}\n"});
    assert_eq!(
        app.client
            .post(app.url("/api/v1/templates"))
            .bearer_auth(&token)
            .json(&t)
            .send()
            .await
            .unwrap()
            .status(),
        201
    );
    let t2 = serde_json::json!({"body": "#cloud-config\nhostname: {{ hostname | yaml }}\nfqdn: {{ hostname | yaml }}\n"});
    let res = app
        .client
        .put(app.url("/api/v1/templates/tiny"))
        .bearer_auth(&token)
        .json(&t2)
        .send()
        .await
        .unwrap();
    assert_eq!(res.json::<serde_json::Value>().await.unwrap()["version"], 2);
    // Text from a browser's textarea arrives with CRLF; it is stored with LF.
    let crlf = serde_json::json!({"body": "#cloud-config\r\nhostname: {{ hostname | yaml }}\r\n"});
    let res = app
        .client
        .put(app.url("/api/v1/templates/tiny"))
        .bearer_auth(&token)
        .json(&crlf)
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.json::<serde_json::Value>().await.unwrap()["body"],
        "#cloud-config\nhostname: {{ hostname | yaml }}\n"
    );
    let versions: Vec<serde_json::Value> = serde_json::from_value(
        app.api_json("/api/v1/templates/tiny/versions", &token)
            .await,
    )
    .unwrap();
    assert_eq!(versions.len(), 3);
    let broken = serde_json::json!({"body": "#cloud-config\nhostname: {{ hostname | yaml }\n"});
    let res = app
        .client
        .put(app.url("/api/v1/templates/tiny"))
        .bearer_auth(&token)
        .json(&broken)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let p: serde_json::Value = res.json().await.unwrap();
    assert_eq!(p["errors"][0]["field"], "body");
    assert!(
        p["errors"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("line 2:"),
        "{p}"
    );
}

#[tokio::test]
async fn render_answers_the_documented_shape_and_flags_raw_insertions() {
    let app = TestApp::spawn_with_config().await;
    let op = app.session_for(Role::Operator).await;
    let post = |body: serde_json::Value| {
        app.client
            .post(app.url("/api/v1/render"))
            .header("Cookie", &op.cookie)
            .header("X-CSRF-Token", &op.csrf)
            .json(&body)
            .send()
    };
    let res = post(serde_json::json!({"machine_config": "spare-fsn1"}))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["payload"]
        .as_str()
        .unwrap()
        .starts_with("#cloud-config\n"));
    assert_eq!(v["sha256"].as_str().unwrap().len(), 64);
    assert!(v["size_bytes"].as_u64().unwrap() > 1000);
    assert!(v["findings"].as_array().unwrap().is_empty(), "{v}");

    // A template that inserts a value raw is flagged and blocked.
    let raw = "#cloud-config\nhostname: {{ hostname }}\nruncmd:\n  - {{ \"echo \" ~ machine.yubaba_sha256 ~ \" x | sha256sum -c -\" | yaml }}\n";
    headroom::machine_setup::templates::create(
        &app.state.ctx,
        &headroom::auth::Caller::system(),
        "raw",
        raw,
    )
    .await
    .unwrap();
    let v: serde_json::Value =
        post(serde_json::json!({"machine_config": "spare-fsn1", "template": "raw"}))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["findings"][0]["severity"], "error");
    assert_eq!(v["findings"][0]["line"], 2);
    assert!(
        v["findings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("without the yaml filter"),
        "{v}"
    );

    for (body, field) in [
        (serde_json::json!({"machine_config": "nope"}), None),
        (
            serde_json::json!({"machine_config": "spare-fsn1", "secrets": {"mesh_preauth_key": "has space"}}),
            Some("secrets.mesh_preauth_key"),
        ),
        (
            serde_json::json!({"machine_config": "spare-fsn1", "secrets": {"tunnel_token": "x".repeat(1100)}}),
            Some("secrets.tunnel_token"),
        ),
    ] {
        let res = post(body).await.unwrap();
        match field {
            None => assert_eq!(res.status(), 404),
            Some(f) => {
                assert_eq!(res.status(), 422);
                assert_eq!(
                    res.json::<serde_json::Value>().await.unwrap()["errors"][0]["field"],
                    f
                );
            }
        }
    }
}

#[tokio::test]
async fn the_hetzner_catalogue_is_fetched_with_the_token_paginated_and_cached() {
    let hetzner = MockServer::start().await;
    Mock::given(method("GET")).and(path("/locations")).and(header("authorization", "Bearer test-token"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "locations": [{"id": 1, "name": "fsn1", "description": "Falkenstein DC Park 1", "country": "DE", "city": "Falkenstein", "network_zone": "eu-central"}],
            "meta": {"pagination": {"page": 1, "per_page": 50, "next_page": null, "last_page": 1, "total_entries": 1}}})))
        .mount(&hetzner).await;
    let st = |name: &str, arch: &str| {
        serde_json::json!({"id": 1, "name": name, "description": name.to_uppercase(), "cores": 2, "memory": 4.0, "disk": 40,
        "architecture": arch, "deprecated": false, "prices": [{"location": "fsn1", "price_hourly": {"net": "0.0060", "gross": "0.0071"}, "price_monthly": {"net": "3.79", "gross": "4.5100"}}]})
    };
    Mock::given(method("GET")).and(path("/server_types")).and(query_param("page", "1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({"server_types": [st("cx22", "x86")], "meta": {"pagination": {"page": 1, "next_page": 2}}})))
        .mount(&hetzner).await;
    Mock::given(method("GET")).and(path("/server_types")).and(query_param("page", "2"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({"server_types": [st("cax11", "arm")], "meta": {"pagination": {"page": 2, "next_page": null}}})))
        .mount(&hetzner).await;
    Mock::given(method("GET")).and(path("/images")).and(query_param("type", "system"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({"images": [
            {"id": 1, "type": "system", "name": "debian-12", "description": "Debian 12", "architecture": "x86"},
            {"id": 2, "type": "system", "name": "debian-12", "description": "Debian 12", "architecture": "arm"}]})))
        .mount(&hetzner).await;

    let uri = hetzner.uri();
    let app = TestApp::spawn_with(move |s| {
        s.hetzner_api_url = uri;
        s.hetzner_api_token = Some(secrecy::SecretString::from("test-token".to_owned()));
    })
    .await;
    let op = app.session_for(Role::Operator).await;
    let res = app.post_form("/catalogue/hetzner/refresh", &op, &[]).await;
    assert_eq!(res.status(), 303);
    let page = app.get("/catalogue", &op).await.text().await.unwrap();
    assert!(
        texts(&page, ".flash")
            .iter()
            .any(|t| t.contains("1 locations, 2 server types, 1 images")),
        "{:?}",
        texts(&page, ".flash")
    );
    let names = texts(&page, "table.data tbody tr td:first-child");
    assert!(
        names.contains(&"cx22".to_owned()) && names.contains(&"cax11".to_owned()),
        "{names:?}"
    );
    // The form offers what the catalogue holds, with arch and price.
    let form = app
        .get("/machine-configs/new", &op)
        .await
        .text()
        .await
        .unwrap();
    let options = texts(&form, "#f-server_type option");
    assert!(
        options
            .iter()
            .any(|o| o.starts_with("cax11 — 2 vCPU, 4 GB, aarch64, €4.5100/month")),
        "{options:?}"
    );
    assert!(app
        .audit_actions()
        .await
        .contains(&"catalogue.refreshed".to_owned()));
    // A location the provider does not offer is refused.
    let mut form = config_form("het");
    form[1].1 = "hetzner".into();
    form[2].1 = "ash".into();
    let res = app
        .post_form("/machine-configs", &op, &borrowed(&form))
        .await;
    assert_eq!(res.status(), 422);
    assert!(texts(&res.text().await.unwrap(), ".error-summary li")
        .iter()
        .any(|m| m.starts_with("location:") && m.contains("not offered")));
}

#[tokio::test]
async fn a_refused_hetzner_token_is_reported_not_cached() {
    let hetzner = MockServer::start().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(401).set_body_json(serde_json::json!({"error": {"code": "unauthorized", "message": "unable to authenticate"}})))
        .mount(&hetzner).await;
    let uri = hetzner.uri();
    let app = TestApp::spawn_with(move |s| {
        s.hetzner_api_url = uri;
        s.hetzner_api_token = Some(secrecy::SecretString::from("bad".to_owned()));
    })
    .await;
    let op = app.session_for(Role::Operator).await;
    let res = app.post_form("/catalogue/hetzner/refresh", &op, &[]).await;
    assert_eq!(res.status(), 422);
    assert!(res
        .text()
        .await
        .unwrap()
        .contains("refused the credentials"));
    assert_eq!(app.count("catalogue").await, 0);
}

fn limits(max_bytes: u64, timeout_ms: u64) -> PinLimits {
    PinLimits {
        max_bytes,
        timeout: Duration::from_millis(timeout_ms),
    }
}

#[tokio::test]
async fn pin_preflight_verifies_names_both_digests_and_reports_size_and_time_limits() {
    use sha2::{Digest, Sha256};
    let server = MockServer::start().await;
    let tarball = vec![7_u8; 4096];
    let right = headroom::domain::digest::hex(&Sha256::digest(&tarball));
    Mock::given(method("GET"))
        .and(path("/yubaba.tar.gz"))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(tarball.clone()))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/slow.tar.gz"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_bytes(tarball.clone())
                .set_delay(Duration::from_secs(3)),
        )
        .mount(&server)
        .await;
    // Pins are https only and refuse loopback: reach wiremock through the TLS fake, listed.
    let fake = TlsFake::front("127.0.0.1", &server).await;
    let client = pin_client(&[fake.entry()]);
    let url = fake.url("/yubaba.tar.gz");

    assert_eq!(
        preflight(&client, &url, &right, limits(1 << 20, 5000)).await,
        PinVerdict::Verified { bytes: 4096 }
    );

    let wrong = "0".repeat(64);
    let v = preflight(&client, &url, &wrong, limits(1 << 20, 5000)).await;
    assert_eq!(v.kind(), "mismatch");
    assert!(
        v.message().contains(&wrong) && v.message().contains(&right),
        "{}",
        v.message()
    );

    let v = preflight(&client, &url, &right, limits(1000, 5000)).await;
    assert_eq!(v.kind(), "error");
    assert!(
        v.message().contains("over the 1000-byte limit"),
        "{}",
        v.message()
    );

    let v = preflight(
        &client,
        &fake.url("/slow.tar.gz"),
        &right,
        limits(1 << 20, 300),
    )
    .await;
    assert_eq!(v.kind(), "error");
    assert!(
        v.message().contains("timed out after 0.3 s"),
        "{}",
        v.message()
    );

    let v = preflight(
        &client,
        &fake.url("/missing.tar.gz"),
        &right,
        limits(1 << 20, 5000),
    )
    .await;
    assert_eq!(v.message(), "HTTP 404");
}

#[tokio::test]
async fn the_config_page_shows_the_remembered_pin_verdict_with_its_time() {
    let app = TestApp::spawn_with_config().await;
    let op = app.session_for(Role::Operator).await;
    // Point the config at a loopback port: the policy refuses it, and that is remembered.
    let mut input = headroom::machine_setup::configs::latest(
        &app.state.ctx,
        &headroom::auth::Caller::system(),
        "spare-fsn1",
    )
    .await
    .unwrap()
    .spec
    .to_input();
    input.yubaba_url = "https://127.0.0.1:9/yubaba.tar.gz".into();
    headroom::machine_setup::configs::update(
        &app.state.ctx,
        &headroom::auth::Caller::system(),
        "spare-fsn1",
        &input,
    )
    .await
    .unwrap();
    let res = app
        .post_form("/machine-configs/spare-fsn1/pin-check", &op, &[])
        .await;
    assert_eq!(res.status(), 303);
    let page = app
        .get("/machine-configs/spare-fsn1", &op)
        .await
        .text()
        .await
        .unwrap();
    let verdict = texts(&page, "#pin .badge");
    assert_eq!(verdict, ["error"]);
    assert!(
        texts(&page, "#pin p")
            .iter()
            .any(|t| t == "error refused: loopback address"),
        "{page}"
    );
    assert!(texts(&page, "#pin p.muted")
        .iter()
        .any(|t| t.starts_with("Checked ") && t.contains("UTC by operator-user")));
    let stored: (String, String) = sqlx::query_as("SELECT verdict, checked_by FROM pin_checks")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(stored, ("error".to_owned(), "operator-user".to_owned()));
    assert!(app
        .audit_actions()
        .await
        .contains(&"pin.checked".to_owned()));
}

#[tokio::test]
async fn viewers_read_configs_and_templates_but_cannot_change_them() {
    let app = TestApp::spawn_with_config().await;
    let viewer = app.session_for(Role::Viewer).await;
    let page = app
        .get("/machine-configs/spare-fsn1", &viewer)
        .await
        .text()
        .await
        .unwrap();
    assert!(
        texts(&page, "a.button").is_empty(),
        "no edit buttons for viewers"
    );
    assert_eq!(
        app.post_form(
            "/machine-configs/spare-fsn1",
            &viewer,
            &borrowed(&config_form("spare-fsn1"))
        )
        .await
        .status(),
        403
    );
    assert_eq!(
        app.get("/templates/yubaba-node", &viewer).await.status(),
        200
    );
    assert_eq!(
        app.post_form("/preview", &viewer, &[("config", "spare-fsn1")])
            .await
            .status(),
        403
    );
}

#[tokio::test]
async fn template_and_preview_forms_reject_hostile_values_by_field() {
    let app = TestApp::spawn_with_config().await;
    let op = app.session_for(Role::Operator).await;
    let good_body = "#cloud-config\nhostname: {{ hostname | yaml }}\n";
    let names = [
        "",
        &"a".repeat(10 * 1024),
        "ab\u{0}c",
        "<script>alert(1)</script>",
        "x'; DROP TABLE templates; --",
        "new",
        "Upper",
    ];
    for name in names {
        let before = app.snapshot().await;
        let res = app
            .post_form("/templates", &op, &[("name", name), ("body", good_body)])
            .await;
        assert_eq!(res.status(), 422, "name {name:?}");
        let html = res.text().await.unwrap();
        assert!(
            texts(&html, ".error-summary li")
                .iter()
                .any(|m| m.starts_with("name:")),
            "name {name:?}"
        );
        assert!(!html.contains("<script>alert(1)</script>"));
        assert_eq!(app.snapshot().await, before);
    }
    let bodies = [
        "",
        "   ",
        "#cloud-config\n\u{0}",
        "#cloud-config\n{% if %}\n",
        "#cloud-config\n{{ unclosed\n",
    ];
    for body in bodies {
        let res = app
            .post_form("/templates", &op, &[("name", "fine"), ("body", body)])
            .await;
        assert_eq!(res.status(), 422, "body {body:?}");
        assert!(
            texts(&res.text().await.unwrap(), ".error-summary li")
                .iter()
                .any(|m| m.starts_with("body:")),
            "body {body:?}"
        );
    }
    let big = format!("#cloud-config\n# {}\n", "x".repeat(130 * 1024));
    let res = app
        .post_form("/templates", &op, &[("name", "fine"), ("body", &big)])
        .await;
    assert_eq!(res.status(), 422);
    assert!(texts(&res.text().await.unwrap(), ".error-summary li")
        .iter()
        .any(|m| m.starts_with("body: must be at most")));
    assert_eq!(app.count("templates").await, 1);

    // The preview: bad secrets are named; markup in the template comes back escaped.
    let res = app
        .htmx_post(
            "/preview",
            &op,
            &[
                ("config", "spare-fsn1"),
                ("body", good_body),
                ("mesh_preauth_key", "two words"),
            ],
        )
        .await;
    assert_eq!(res.status(), 422);
    assert!(res
        .text()
        .await
        .unwrap()
        .contains("mesh_preauth_key: must be"));
    let res = app
        .htmx_post(
            "/preview",
            &op,
            &[
                ("config", "spare-fsn1"),
                ("body", "#cloud-config\n# <script>alert(1)</script>\n"),
            ],
        )
        .await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(!html.contains("<script>alert(1)</script>") && html.contains("&lt;script&gt;"));
    let res = app
        .htmx_post(
            "/preview",
            &op,
            &[("config", "no-such"), ("body", good_body)],
        )
        .await;
    assert_eq!(res.status(), 404);
}

#[tokio::test]
async fn the_config_template_and_render_api_reject_hostile_values_by_field() {
    let app = TestApp::spawn_with_config().await;
    app.create_user("robot", Role::Operator).await;
    let token = app.token_for("robot").await;
    app.client
        .get(app.url("/api/v1/me"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let hostile: Vec<serde_json::Value> = vec![
        "".into(),
        "a".repeat(10 * 1024).into(),
        "ab\u{0}c\n".into(),
        "<script>alert(1)</script>".into(),
        "x'); DROP TABLE machine_configs; --".into(),
        serde_json::json!(42),
        serde_json::json!(null),
    ];
    let base = serde_json::json!({
        "name": "api-hostile", "provider": "simulated", "location": "fsn1", "server_type": "cx22", "region": "eu-central",
        "zone": "fsn1-dc14", "yubaba_url": "https://releases.example.com/y.tar.gz", "yubaba_sha256": SHA
    });
    let post = |body: serde_json::Value| {
        app.client
            .post(app.url("/api/v1/machine-configs"))
            .bearer_auth(&token)
            .json(&body)
            .send()
    };
    for field in [
        "name",
        "provider",
        "location",
        "server_type",
        "region",
        "zone",
        "arch",
        "template",
        "yubaba_channel",
        "yubaba_url",
        "yubaba_sha256",
    ] {
        for value in &hostile {
            // Empty is a valid choice for fields with a default.
            if value == "" && ["arch", "template", "yubaba_channel"].contains(&field) {
                continue;
            }
            let mut body = base.clone();
            body[field] = value.clone();
            let before = app.snapshot().await;
            let res = post(body).await.unwrap();
            let status = res.status();
            let problem: serde_json::Value = res.json().await.unwrap();
            assert!(status == 422 || status == 400, "{field}={value}: {status}");
            if status == 422 {
                assert!(
                    problem["errors"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|e| e["field"] == field),
                    "{field}={value}: {problem}"
                );
            } else {
                // Wrong JSON types are refused by the decoder, which names the field too.
                assert_eq!(
                    problem["errors"][0]["field"], field,
                    "{field}={value}: {problem}"
                );
                assert!(
                    problem["detail"]
                        .as_str()
                        .unwrap()
                        .starts_with(&format!("body: invalid JSON at {field}:")),
                    "{problem}"
                );
            }
            assert_eq!(
                app.snapshot().await,
                before,
                "{field}={value} stored something"
            );
        }
    }
    for (field, value) in [
        ("mesh_tags", serde_json::json!(["<b>x</b>"])),
        ("ssh_keys", serde_json::json!([-1])),
        ("labels", serde_json::json!({"a b": "c"})),
        ("taints", serde_json::json!(["x=y:Sometimes"])),
        ("allocatable", serde_json::json!({"memory_mb": "lots"})),
    ] {
        let mut body = base.clone();
        body[field] = value;
        let res = post(body).await.unwrap();
        assert_eq!(res.status(), 422, "{field}");
        let p: serde_json::Value = res.json().await.unwrap();
        assert!(
            p["errors"][0]["field"].as_str().unwrap().starts_with(field),
            "{p}"
        );
    }

    // Templates and render name their fields too.
    for value in &hostile[..5] {
        let res = app
            .client
            .post(app.url("/api/v1/templates"))
            .bearer_auth(&token)
            .json(&serde_json::json!({"name": value, "body": "#cloud-config\n"}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 422, "template name {value}");
        assert_eq!(
            res.json::<serde_json::Value>().await.unwrap()["errors"][0]["field"],
            "name"
        );
        let res = app
            .client
            .post(app.url("/api/v1/render"))
            .bearer_auth(&token)
            .json(&serde_json::json!({"machine_config": value}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 422, "render machine_config {value}");
        assert_eq!(
            res.json::<serde_json::Value>().await.unwrap()["errors"][0]["field"],
            "machine_config"
        );
    }
    let res = app
        .client
        .put(app.url("/api/v1/templates/yubaba-node"))
        .bearer_auth(&token)
        .json(&serde_json::json!({"body": "x".repeat(200 * 1024)}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let res = app
        .client
        .put(app.url("/api/v1/templates/yubaba-node"))
        .bearer_auth(&token)
        .json(&serde_json::json!({"body": "x".repeat(300 * 1024)}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    assert_eq!(app.count("machine_configs").await, 1);
    assert_eq!(app.count("template_versions").await, 1);
}

#[tokio::test]
async fn the_live_preview_names_a_malformed_config_in_its_own_pane() {
    let app = TestApp::spawn_with_config().await;
    let op = app.session_for(Role::Operator).await;
    let res = app
        .htmx_post(
            "/preview",
            &op,
            &[("config", "<script>"), ("body", "#cloud-config\n")],
        )
        .await;
    assert_eq!(res.status(), 422);
    let html = res.text().await.unwrap();
    assert!(
        html.starts_with("<p class=\"error-text\">machine_config: must be an RFC 1123 label"),
        "a fragment for the pane: {html}"
    );
    let res = app
        .htmx_post(
            "/preview",
            &op,
            &[
                ("config", "spare-fsn1"),
                ("template", "no-such"),
                ("body", ""),
            ],
        )
        .await;
    assert_eq!(res.status(), 404);
    assert!(res
        .text()
        .await
        .unwrap()
        .contains("template no-such not found"));
}

#[tokio::test]
async fn every_config_form_field_rejects_hostile_values_by_name() {
    let app = TestApp::spawn_with(|s| s.simulated_provider = true).await;
    let op = app.session_for(Role::Operator).await;
    let hostile = [
        "",
        &"a".repeat(10 * 1024),
        "ab\u{0}c\n\u{1b}[31m",
        "<script>alert(1)</script>",
        "x'); DROP TABLE machine_configs; --",
    ];
    // Fields where empty means "use the default" or "none".
    let may_be_empty = [
        "image",
        "arch",
        "mesh_tags",
        "ssh_keys",
        "labels",
        "allocatable.memory_mb",
        "allocatable.cpu_millis",
        "taints",
        "template",
        "yubaba_channel",
    ];
    let fields: Vec<&str> = config_form("x").iter().map(|(k, _)| *k).collect();
    for (index, field) in fields.iter().enumerate() {
        for value in hostile {
            if value.is_empty() && may_be_empty.contains(field) {
                continue;
            }
            let mut form = config_form("hostile");
            form[index].1 = value.to_owned();
            let before = app.snapshot().await;
            let res = app
                .post_form("/machine-configs", &op, &borrowed(&form))
                .await;
            assert_eq!(res.status(), 422, "{field}={value:.20}");
            let html = res.text().await.unwrap();
            let messages = texts(&html, ".error-summary li");
            assert!(
                messages.iter().any(|m| m.starts_with(&format!("{field}:"))),
                "{field}={value:.20}: {messages:?}"
            );
            assert!(
                !html.contains("<script>alert(1)</script>"),
                "{field}: markup echoed unescaped"
            );
            assert_eq!(
                app.snapshot().await,
                before,
                "{field}={value:.20} stored something"
            );
        }
    }
}

/// A fake Hetzner on loopback offering fsn1 and nbg1, cx22 and cax11, and debian-12, as the
/// real API shapes them (one page each).
pub async fn fake_hetzner() -> MockServer {
    let hetzner = MockServer::start().await;
    mount_catalogue(&hetzner).await;
    hetzner
}

async fn mount_catalogue(hetzner: &MockServer) {
    let location = |name: &str| serde_json::json!({"id": 1, "name": name, "description": name, "country": "DE", "city": name, "network_zone": "eu-central"});
    let st = |name: &str, arch: &str| {
        serde_json::json!({"id": 1, "name": name, "description": name.to_uppercase(), "cores": 2, "memory": 4.0, "disk": 40,
        "architecture": arch, "deprecated": false, "prices": [{"location": "fsn1", "price_hourly": {"net": "0.0060", "gross": "0.0071"}, "price_monthly": {"net": "3.79", "gross": "4.5100"}}]})
    };
    let last_page = serde_json::json!({"pagination": {"page": 1, "next_page": null}});
    Mock::given(method("GET")).and(path("/locations"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({"locations": [location("fsn1"), location("nbg1")], "meta": last_page})))
        .mount(hetzner).await;
    Mock::given(method("GET")).and(path("/server_types"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({"server_types": [st("cx22", "x86"), st("cax11", "arm")], "meta": last_page})))
        .mount(hetzner).await;
    Mock::given(method("GET")).and(path("/images"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({"images": [
            {"id": 1, "type": "system", "name": "debian-12", "description": "Debian 12", "architecture": "x86"}], "meta": last_page})))
        .mount(hetzner).await;
}

fn hetzner_config(name: &str) -> serde_json::Value {
    serde_json::json!({
        "name": name, "provider": "hetzner", "location": "fsn1", "server_type": "cx22", "region": "eu-central",
        "zone": "fsn1-dc14", "yubaba_url": "https://releases.example.com/y.tar.gz", "yubaba_sha256": SHA
    })
}

async fn hetzner_app(
    uri: String,
    adjust: impl FnOnce(&mut headroom::config::Settings) + Send + 'static,
) -> (TestApp, String) {
    let app = TestApp::spawn_with(move |s| {
        s.hetzner_api_url = uri;
        s.hetzner_api_token = Some(secrecy::SecretString::from("test-token".to_owned()));
        adjust(s);
    })
    .await;
    app.create_user("robot", Role::Operator).await;
    let token = app.token_for("robot").await;
    (app, token)
}

#[tokio::test]
async fn an_empty_hetzner_catalogue_is_fetched_when_a_config_needs_it() {
    let hetzner = fake_hetzner().await;
    let (app, token) = hetzner_app(hetzner.uri(), |_| {}).await;
    // Whether the start-up fetch got there first or not, nobody clicked Refresh.
    let res = app
        .client
        .post(app.url("/api/v1/machine-configs"))
        .bearer_auth(&token)
        .json(&hetzner_config("first-try"))
        .send()
        .await
        .unwrap();
    let status = res.status();
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["location"], "fsn1");
    let fetches = hetzner
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/locations")
        .count();
    assert_eq!(fetches, 1, "fetched once, not once per use");
    assert!(app
        .audit_actions()
        .await
        .contains(&"catalogue.refreshed".to_owned()));
}

#[tokio::test]
async fn a_stale_catalogue_is_fetched_again_on_use_and_a_fresh_one_is_not() {
    let hetzner = fake_hetzner().await;
    let (app, token) = hetzner_app(hetzner.uri(), |s| {
        s.catalogue_max_age = Duration::from_secs(3600)
    })
    .await;
    let locations = || async {
        hetzner
            .received_requests()
            .await
            .unwrap()
            .iter()
            .filter(|r| r.url.path() == "/locations")
            .count()
    };
    let get = || {
        app.client
            .get(app.url("/api/v1/catalogue"))
            .bearer_auth(&token)
            .send()
    };
    let first: serde_json::Value = get().await.unwrap().json().await.unwrap();
    let hetzner_entry = first["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == "hetzner")
        .cloned()
        .expect("hetzner is listed");
    assert_eq!(
        hetzner_entry["server_types"][0]["prices"][0]["monthly"],
        "4.5100"
    );
    assert_eq!(locations().await, 1);
    app.clock.advance(Duration::from_secs(30 * 60));
    get().await.unwrap();
    assert_eq!(
        locations().await,
        1,
        "a 30-minute-old catalogue is still fresh"
    );
    app.clock.advance(Duration::from_secs(31 * 60));
    let again: serde_json::Value = get().await.unwrap().json().await.unwrap();
    assert_eq!(
        locations().await,
        2,
        "an hour-old catalogue is fetched again"
    );
    let fetched_at = again["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == "hetzner")
        .unwrap()["fetched_at"]
        .clone();
    assert_ne!(fetched_at, hetzner_entry["fetched_at"]);
}

#[tokio::test]
async fn with_the_catalogue_unreachable_validation_names_the_catalogue() {
    let hetzner = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(503).set_body_json(serde_json::json!({"error": {"code": "unavailable", "message": "down for maintenance"}})))
        .mount(&hetzner)
        .await;
    let (app, token) = hetzner_app(hetzner.uri(), |_| {}).await;
    let before = app.count("machine_configs").await;
    let res = app
        .client
        .post(app.url("/api/v1/machine-configs"))
        .bearer_auth(&token)
        .json(&hetzner_config("not-yet"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let problem: serde_json::Value = res.json().await.unwrap();
    let provider = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["field"] == "provider")
        .unwrap_or_else(|| panic!("no provider error: {problem}"));
    let message = provider["message"].as_str().unwrap();
    assert!(
        message.starts_with("the hetzner catalogue could not be fetched: ")
            && message.ends_with("; refresh it on /catalogue"),
        "{message}"
    );
    assert!(
        !problem.to_string().contains("choose one of: )"),
        "{problem}"
    );
    assert_eq!(app.count("machine_configs").await, before);
    // Once the provider answers again, the same request succeeds without a click.
    hetzner.reset().await;
    mount_catalogue(&hetzner).await;
    let res = app
        .client
        .post(app.url("/api/v1/machine-configs"))
        .bearer_auth(&token)
        .json(&hetzner_config("not-yet"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
}

#[tokio::test]
async fn a_burst_of_catalogue_refreshes_costs_the_provider_one_call() {
    let app = TestApp::spawn_with_config().await;
    app.create_user("op", Role::Operator).await;
    let token = app.token_for("op").await;
    let refreshed = |actions: Vec<String>| {
        actions
            .iter()
            .filter(|a| *a == "catalogue.refreshed")
            .count()
    };
    // Start-up fetched it once; twenty refreshes at once within the minute answer from it.
    assert_eq!(refreshed(app.audit_actions().await), 1);
    let mut calls = Vec::new();
    for _ in 0..20 {
        let client = app.client.clone();
        let url = app.url("/api/v1/catalogue/simulated/refresh");
        let token = token.clone();
        calls.push(tokio::spawn(async move {
            client
                .post(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .status()
        }));
    }
    for c in calls {
        assert_eq!(c.await.unwrap(), 200);
    }
    assert_eq!(refreshed(app.audit_actions().await), 1);
    // A minute later the next refresh asks the provider again.
    app.clock.advance(std::time::Duration::from_secs(61));
    let res = app
        .client
        .post(app.url("/api/v1/catalogue/simulated/refresh"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(refreshed(app.audit_actions().await), 2);
}
