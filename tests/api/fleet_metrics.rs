//! `/metrics` per-fleet gauges (values, closed label set, hostile names, one valid
//! exposition), the scrape loops' counters and lag, and the rule that reading a page writes
//! nothing to the database, while idle, absolute and explicit session ends still hold.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use headroom::auth::sessions::{self, PurgeDeps};
use headroom::domain::capacity::{Member, Observation, Sample, Source};
use headroom::domain::fleet::FleetInput;
use headroom::domain::{Caller, Role};
use sqlx::Connection;

use crate::helpers::{location, TestApp};
use crate::runner::{console, fleet};

/// An ok sample at the app's now with these numbers, taken in `latency_ms`.
fn ok_sample(app: &TestApp, spare: u32, required: u32, latency_ms: u64) -> Sample {
    Sample {
        at: app.state.ctx.clock.now(),
        latency_ms,
        outcome: Ok(Observation {
            absorption: None,
            source: Source::Native,
            spare,
            required,
            leader_id: Some(1),
            leader_url: Some("http://127.0.0.1:7443".into()),
            term: Some(3),
            members: vec![Member::listed(1, "127.0.0.1:7443", true)],
            evidence: serde_json::json!({"headroom": {"spare": spare, "required": required}}),
        }),
    }
}

async fn record(app: &TestApp, name: &str, sample: &Sample) {
    headroom::capacity::record::record(&app.state.ctx, name, sample)
        .await
        .expect("record a sample");
}

async fn metrics_text(app: &TestApp) -> String {
    let res = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    res.text().await.unwrap()
}

/// Every `headroom_fleet_*{fleet="…"} value` sample, as (metric, fleet) → value.
fn fleet_samples(text: &str) -> BTreeMap<(String, String), f64> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("headroom_fleet_")) {
        let parsed = parse_sample(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if let Some(fleet) = parsed.labels.get("fleet") {
            out.insert((parsed.name, fleet.clone()), parsed.value);
        }
    }
    out
}

#[tokio::test]
async fn fleet_gauges_show_a_fleet_in_deficit_a_healthy_one_and_an_unread_one() {
    let app = console(|_| {}).await;
    let ctx = app.state.ctx.clone();
    for name in ["healthy", "short", "unread"] {
        fleet(&ctx, name, &[]).await;
    }
    let enter = ctx.settings.deficit.enter_after;
    for _ in 0..enter {
        app.clock.advance(Duration::from_secs(15));
        record(&app, "healthy", &ok_sample(&app, 5, 3, 120)).await;
        record(&app, "short", &ok_sample(&app, 1, 3, 250)).await;
    }
    let last_at = app.state.ctx.clock.now();
    let got = fleet_samples(&metrics_text(&app).await);
    let v = |metric: &str, fleet: &str| got.get(&(metric.to_owned(), fleet.to_owned())).copied();

    assert_eq!(v("headroom_fleet_spare", "healthy"), Some(5.0));
    assert_eq!(v("headroom_fleet_required", "healthy"), Some(3.0));
    assert_eq!(v("headroom_fleet_deficit", "healthy"), Some(0.0));
    assert_eq!(v("headroom_fleet_scrape_success", "healthy"), Some(1.0));
    assert_eq!(
        v("headroom_fleet_scrape_latency_seconds", "healthy"),
        Some(0.12)
    );

    assert_eq!(v("headroom_fleet_spare", "short"), Some(1.0));
    assert_eq!(v("headroom_fleet_required", "short"), Some(3.0));
    assert_eq!(
        v("headroom_fleet_deficit", "short"),
        Some(1.0),
        "{enter} samples short enter a deficit: {got:?}"
    );
    assert_eq!(v("headroom_fleet_scrape_success", "short"), Some(1.0));
    assert_eq!(
        v("headroom_fleet_scrape_latency_seconds", "short"),
        Some(0.25)
    );
    #[allow(clippy::cast_precision_loss)]
    let last_secs = last_at as f64 / 1000.0;
    for name in ["healthy", "short"] {
        assert_eq!(
            v("headroom_fleet_last_scrape_timestamp_seconds", name),
            Some(last_secs),
            "{name}"
        );
    }

    // Never scraped: not ok, no deficit, and no invented numbers.
    assert_eq!(v("headroom_fleet_scrape_success", "unread"), Some(0.0));
    assert_eq!(v("headroom_fleet_deficit", "unread"), Some(0.0));
    assert_eq!(v("headroom_fleet_spare", "unread"), None);
    assert_eq!(
        v("headroom_fleet_last_scrape_timestamp_seconds", "unread"),
        None
    );

    // A failed scrape keeps the last numbers but says the newest scrape failed.
    app.clock.advance(Duration::from_secs(15));
    let failed = Sample {
        at: app.state.ctx.clock.now(),
        latency_ms: 5_000,
        outcome: Err("timed out".into()),
    };
    record(&app, "healthy", &failed).await;
    let got = fleet_samples(&metrics_text(&app).await);
    let v = |metric: &str| got.get(&(metric.to_owned(), "healthy".to_owned())).copied();
    assert_eq!(v("headroom_fleet_scrape_success"), Some(0.0));
    assert_eq!(v("headroom_fleet_scrape_latency_seconds"), Some(5.0));
    assert_eq!(v("headroom_fleet_spare"), Some(5.0));
}

#[tokio::test]
async fn fleet_series_exist_only_for_fleets_in_the_table() {
    let app = console(|_| {}).await;
    let ctx = app.state.ctx.clone();
    for name in ["eu-prod", "us-prod"] {
        fleet(&ctx, name, &[]).await;
        record(&app, name, &ok_sample(&app, 2, 2, 10)).await;
    }
    // Samples for a fleet that does not exist are ignored, never a series.
    record(&app, "ghost", &ok_sample(&app, 2, 2, 10)).await;
    let labels = |text: &str| -> BTreeSet<String> {
        fleet_samples(text).into_keys().map(|(_, f)| f).collect()
    };
    let text = metrics_text(&app).await;
    assert_eq!(
        labels(&text),
        BTreeSet::from(["eu-prod".to_owned(), "us-prod".to_owned()])
    );
    assert!(text.contains("headroom_fleet_board_ok 1\n"), "{text}");

    headroom::fleets::delete(&ctx, &Caller::system(), "us-prod")
        .await
        .expect("delete");
    assert_eq!(
        labels(&metrics_text(&app).await),
        BTreeSet::from(["eu-prod".to_owned()]),
        "a deleted fleet's series go with it"
    );
}

#[tokio::test]
async fn hostile_fleet_names_never_reach_the_exposition() {
    let app = console(|_| {}).await;
    let ctx = app.state.ctx.clone();
    for hostile in [
        "a\"b",
        "a\\b",
        "a\nb",
        "x} 1\nheadroom_fleet_deficit{fleet=\"y\"} 1",
        "UPPER",
        "dot.ted",
        "",
    ] {
        let input = FleetInput {
            name: hostile.into(),
            endpoints: vec!["http://127.0.0.1:7443".into()],
            restore_machine_config: "spare-fsn1".into(),
            ..FleetInput::default()
        };
        let res = headroom::fleets::create(&ctx, &Caller::system(), &input).await;
        assert!(
            matches!(res, Err(headroom::error::OpError::Invalid(_))),
            "{hostile:?} accepted: {res:?}"
        );
    }
    fleet(&ctx, "ok-1", &[]).await;
    let text = metrics_text(&app).await;
    let labels: BTreeSet<String> = fleet_samples(&text).into_keys().map(|(_, f)| f).collect();
    assert_eq!(labels, BTreeSet::from(["ok-1".to_owned()]));
    exposition_is_valid(&text);
}

#[tokio::test]
async fn the_metrics_response_is_one_valid_text_exposition() {
    let app = console(|_| {}).await;
    let ctx = app.state.ctx.clone();
    fleet(&ctx, "prod-a", &[]).await;
    record(&app, "prod-a", &ok_sample(&app, 1, 2, 33)).await;
    // Some traffic so the request families have samples too.
    let s = app.session_for(Role::Viewer).await;
    assert_eq!(app.get("/", &s).await.status(), 200);
    let text = metrics_text(&app).await;
    let families = exposition_is_valid(&text);
    for name in [
        "headroom_http_requests_total",
        "headroom_http_request_duration_seconds",
        "headroom_password_verifications_total",
        "headroom_fleet_spare",
        "headroom_fleet_required",
        "headroom_fleet_deficit",
        "headroom_fleet_scrape_success",
        "headroom_fleet_scrape_latency_seconds",
        "headroom_fleet_last_scrape_timestamp_seconds",
        "headroom_fleet_board_ok",
        "headroom_scrape_ticks_total",
        "headroom_scrape_missed_ticks_total",
        "headroom_scrape_failures_total",
    ] {
        assert!(families.contains_key(name), "{name} missing:\n{text}");
    }
    assert_eq!(families["headroom_fleet_spare"], "gauge");
}

/// The value of the unlabelled sample `name`, if the exposition has it.
fn plain_sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| parse_sample(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .find(|s| s.name == name && s.labels.is_empty())
        .map(|s| s.value)
}

#[tokio::test]
async fn the_scrape_loops_totals_are_exported_as_counters_and_a_lag_gauge() {
    // Tests run without the scrape loops, so the counters move only as this test drives them.
    let app = console(|_| {}).await;
    let text = metrics_text(&app).await;
    exposition_is_valid(&text);
    for name in [
        "headroom_scrape_ticks_total",
        "headroom_scrape_missed_ticks_total",
        "headroom_scrape_failures_total",
    ] {
        assert_eq!(plain_sample(&text, name), Some(0.0), "{name}:\n{text}");
    }
    assert!(
        !text.contains("headroom_scrape_lag_p99_seconds"),
        "no lag before the first tick:\n{text}"
    );

    let stats = &app.state.scrape_stats;
    for _ in 0..99 {
        stats.tick(4, false);
    }
    // Two of 101 ticks over 40 s late: more than 1 %, so the 99th percentile is one of them.
    stats.tick(40_000, true);
    stats.tick(40_000, true);
    for _ in 0..3 {
        stats.failure();
    }
    let text = metrics_text(&app).await;
    let families = exposition_is_valid(&text);
    assert_eq!(
        plain_sample(&text, "headroom_scrape_ticks_total"),
        Some(101.0)
    );
    assert_eq!(
        plain_sample(&text, "headroom_scrape_missed_ticks_total"),
        Some(2.0)
    );
    assert_eq!(
        plain_sample(&text, "headroom_scrape_failures_total"),
        Some(3.0)
    );
    let lag = plain_sample(&text, "headroom_scrape_lag_p99_seconds").expect("a lag gauge");
    assert!((40.0..=42.5).contains(&lag), "p99 lag {lag} s:\n{text}");
    #[allow(clippy::cast_precision_loss)]
    let expected = stats.lag_p99_ms().unwrap() as f64 / 1000.0;
    assert_eq!(lag, expected);
    for (name, kind) in [
        ("headroom_scrape_ticks_total", "counter"),
        ("headroom_scrape_missed_ticks_total", "counter"),
        ("headroom_scrape_failures_total", "counter"),
        ("headroom_scrape_lag_p99_seconds", "gauge"),
    ] {
        assert_eq!(families.get(name).map(String::as_str), Some(kind), "{name}");
    }
}

/// One parsed sample line.
struct ParsedSample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Parses `name{k="v",…} value` of text format 0.0.4, label values with `\\`, `\"`, `\n`.
fn parse_sample(line: &str) -> Result<ParsedSample, String> {
    let name_end = line.find(['{', ' ']).ok_or("no value after the name")?;
    let name = &line[..name_end];
    if !is_metric_name(name) {
        return Err(format!("bad metric name {name:?}"));
    }
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices().peekable();
        loop {
            let key_start = chars.peek().map(|(i, _)| *i).ok_or("unclosed labels")?;
            if inner[key_start..].starts_with('}') {
                chars.next();
                rest = &inner[key_start + 1..];
                break;
            }
            let eq = inner[key_start..].find('=').ok_or("label without '='")? + key_start;
            let key = &inner[key_start..eq];
            if !is_metric_name(key) || key.contains(':') {
                return Err(format!("bad label name {key:?}"));
            }
            while chars.peek().is_some_and(|(i, _)| *i <= eq) {
                chars.next();
            }
            if chars.next().map(|(_, c)| c) != Some('"') {
                return Err("label value not quoted".into());
            }
            let mut value = String::new();
            loop {
                match chars.next().map(|(_, c)| c) {
                    Some('\\') => match chars.next().map(|(_, c)| c) {
                        Some('\\') => value.push('\\'),
                        Some('"') => value.push('"'),
                        Some('n') => value.push('\n'),
                        other => return Err(format!("bad escape {other:?}")),
                    },
                    Some('"') => break,
                    Some('\n') | None => return Err("unterminated label value".into()),
                    Some(c) => value.push(c),
                }
            }
            if labels.insert(key.to_owned(), value).is_some() {
                return Err(format!("label {key} twice"));
            }
            match chars.peek().map(|(_, c)| *c) {
                Some(',') => {
                    chars.next();
                }
                Some('}') => {}
                _ => return Err("expected ',' or '}' after a label".into()),
            }
        }
    }
    let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().map_err(|e| format!("value {v:?}: {e}"))?,
    };
    Ok(ParsedSample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// Checks every line of a text-format 0.0.4 exposition: `# HELP`/`# TYPE` once per family,
/// TYPE before its samples, each sample of a declared family (histograms through their
/// `_bucket`/`_sum`/`_count`), no series twice, no OpenMetrics `# EOF`. Returns family →
/// type.
fn exposition_is_valid(text: &str) -> BTreeMap<String, String> {
    assert!(text.ends_with('\n'), "the exposition ends with a newline");
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut helps = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for line in text.lines() {
        if let Some(help) = line.strip_prefix("# HELP ") {
            let name = help.split(' ').next().unwrap();
            assert!(is_metric_name(name), "{line}");
            assert!(helps.insert(name.to_owned()), "HELP twice: {line}");
        } else if let Some(ty) = line.strip_prefix("# TYPE ") {
            let (name, kind) = ty.split_once(' ').expect(line);
            assert!(is_metric_name(name), "{line}");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line}"
            );
            assert!(
                types.insert(name.to_owned(), kind.to_owned()).is_none(),
                "TYPE twice (two expositions glued together?): {line}"
            );
        } else if line.starts_with('#') {
            panic!("a comment that is neither HELP nor TYPE: {line:?}");
        } else {
            assert!(!line.trim().is_empty(), "an empty line");
            let sample = parse_sample(line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
            let family = if types.contains_key(&sample.name) {
                sample.name.clone()
            } else {
                ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| {
                        let base = sample.name.strip_suffix(suffix)?;
                        (types.get(base).map(String::as_str) == Some("histogram"))
                            .then(|| base.to_owned())
                    })
                    .unwrap_or_else(|| panic!("sample before (or without) its TYPE: {line}"))
            };
            assert!(types.contains_key(&family));
            assert!(
                seen.insert((sample.name.clone(), format!("{:?}", sample.labels))),
                "the same series twice: {line}"
            );
        }
    }
    types
}

// ---- Reading pages writes nothing ----

/// Counts the changes committed to the app's database by anyone. SQLite: its change counter
/// as seen from a connection of our own (it moves whenever another connection commits a
/// change to the file). PostgreSQL: a row trigger on every table adds each row written to a
/// counter table of the test's own.
enum WriteCounter {
    Sqlite(sqlx::AnyConnection),
    Postgres,
}

impl WriteCounter {
    async fn install(app: &TestApp) -> Self {
        if !crate::helpers::store::on_postgres() {
            let url = format!("sqlite:{}", app.db_path.display());
            return Self::Sqlite(sqlx::AnyConnection::connect(&url).await.unwrap());
        }
        sqlx::raw_sql(
            "CREATE TABLE test_rows_written (n BIGINT NOT NULL);
             INSERT INTO test_rows_written VALUES (0);
             CREATE FUNCTION test_count_row() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN UPDATE test_rows_written SET n = n + 1; RETURN NULL; END $$;
             DO $$ DECLARE t text; BEGIN
               FOR t IN SELECT table_name FROM information_schema.tables
                        WHERE table_schema = 'public' AND table_type = 'BASE TABLE'
                          AND table_name <> 'test_rows_written' LOOP
                 EXECUTE format('CREATE TRIGGER test_count_rows AFTER INSERT OR UPDATE OR DELETE
                                 ON %I FOR EACH ROW EXECUTE FUNCTION test_count_row()', t);
               END LOOP;
             END $$;",
        )
        .execute(&app.pool)
        .await
        .unwrap();
        Self::Postgres
    }

    async fn read(&mut self, app: &TestApp) -> i64 {
        match self {
            Self::Sqlite(conn) => sqlx::query_scalar("PRAGMA data_version")
                .fetch_one(conn)
                .await
                .unwrap(),
            Self::Postgres => sqlx::query_scalar("SELECT n FROM test_rows_written")
                .fetch_one(&app.pool)
                .await
                .unwrap(),
        }
    }
}

async fn last_seen(app: &TestApp) -> Vec<i64> {
    sqlx::query_scalar("SELECT last_seen_at FROM sessions ORDER BY id")
        .fetch_all(&app.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn reading_pages_writes_nothing_to_the_database() {
    let app = console(|_| {}).await;
    let ctx = app.state.ctx.clone();
    fleet(&ctx, "prod-a", &[]).await;
    record(&app, "prod-a", &ok_sample(&app, 3, 2, 20)).await;
    app.create_user("root", Role::Admin).await;
    let s = app
        .login("root", crate::helpers::PASSWORD)
        .await
        .expect("login");
    let mut watcher = WriteCounter::install(&app).await;
    let before = app.snapshot().await;
    let version = watcher.read(&app).await;
    let pages = [
        "/",
        "/fleets",
        "/fleets/prod-a",
        "/provisions",
        "/approvals",
        "/machine-configs",
        "/templates",
        "/catalogue",
        "/users",
        "/tokens",
        "/audit",
        "/account",
        "/metrics",
    ];
    // Minutes apart, so the old once-a-minute activity write would have happened each time.
    for round in 0..3 {
        for page in pages {
            app.clock.advance(Duration::from_secs(61));
            let res = app.get(page, &s).await;
            assert_eq!(res.status(), 200, "GET {page} (round {round})");
        }
    }
    assert_eq!(
        watcher.read(&app).await,
        version,
        "a GET committed a change to the database"
    );
    assert_eq!(app.snapshot().await, before);
}

#[tokio::test]
async fn an_active_session_lives_on_from_memory_and_the_purge_writes_it_back() {
    let app = TestApp::spawn().await;
    let s = app.session_for(Role::Viewer).await;
    let created = last_seen(&app).await;
    let idle = app.state.ctx.settings.session_idle;
    // Three steps of most of the idle limit: past it since login, never since a page view.
    for _ in 0..3 {
        app.clock.advance(idle - Duration::from_secs(60));
        assert_eq!(app.get("/", &s).await.status(), 200);
    }
    assert_eq!(last_seen(&app).await, created, "activity stayed in memory");
    assert_eq!(app.state.sessions.len(), 1);

    let deps = PurgeDeps {
        pool: app.pool.clone(),
        clock: app.state.ctx.clock.clone(),
        life: sessions::Lifetimes {
            idle,
            absolute: app.state.ctx.settings.session_absolute,
        },
        every: sessions::PURGE_EVERY,
        activity: app.state.sessions.clone(),
    };
    assert_eq!(
        sessions::purge_expired_once(&deps).await.unwrap(),
        0,
        "the purge writes activity back before it judges idleness"
    );
    assert_eq!(last_seen(&app).await, vec![app.state.ctx.clock.now()]);
    assert!(app.state.sessions.is_empty(), "written back, memory let go");
    assert_eq!(app.get("/", &s).await.status(), 200);
}

#[tokio::test]
async fn an_idle_session_ends_even_after_activity_held_in_memory() {
    let app = TestApp::spawn().await;
    let s = app.session_for(Role::Viewer).await;
    let idle = app.state.ctx.settings.session_idle;
    app.clock.advance(idle / 2);
    assert_eq!(app.get("/", &s).await.status(), 200);
    app.clock.advance(idle - Duration::from_secs(1));
    assert_eq!(
        app.get("/", &s).await.status(),
        200,
        "idle just under the limit"
    );
    app.clock.advance(idle + Duration::from_secs(1));
    let res = app.get("/", &s).await;
    assert_eq!(res.status(), 303);
    assert!(location(&res).starts_with("/login"));
    assert_eq!(app.count("sessions").await, 0);
    assert!(
        app.state.sessions.is_empty(),
        "an ended session is not held"
    );
}

#[tokio::test]
async fn logged_out_and_revoked_sessions_end_at_once_despite_held_activity() {
    let app = TestApp::spawn().await;
    let s = app.session_for(Role::Viewer).await;
    assert_eq!(app.get("/", &s).await.status(), 200);
    assert_eq!(app.post_form("/logout", &s, &[]).await.status(), 303);
    assert_eq!(app.get("/", &s).await.status(), 303, "logged out");

    app.create_user("olga", Role::Operator).await;
    let olga = app.quick_session("olga").await;
    assert_eq!(app.get("/", &olga).await.status(), 200);
    headroom::auth::users::set_disabled(&app.state.ctx, &Caller::system(), "olga", true)
        .await
        .expect("disable olga");
    assert_eq!(app.get("/", &olga).await.status(), 303, "disabled user");
}

#[tokio::test]
async fn a_clean_stop_writes_held_activity_back() {
    let app = TestApp::spawn().await;
    let s = app.session_for(Role::Viewer).await;
    let created = last_seen(&app).await;
    app.clock.advance(Duration::from_secs(600));
    assert_eq!(app.get("/", &s).await.status(), 200);
    assert_eq!(last_seen(&app).await, created);
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let deps = PurgeDeps {
        pool: app.pool.clone(),
        clock: app.state.ctx.clock.clone(),
        life: sessions::Lifetimes {
            idle: app.state.ctx.settings.session_idle,
            absolute: app.state.ctx.settings.session_absolute,
        },
        every: sessions::PURGE_EVERY,
        // A loop of its own over the app's memory, so stopping it leaves the app running.
        activity: app.state.sessions.clone(),
    };
    let task = tokio::spawn(sessions::run_until_stopped(deps, shutdown));
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("stops")
        .unwrap();
    assert_eq!(last_seen(&app).await, vec![app.state.ctx.clock.now()]);
}
