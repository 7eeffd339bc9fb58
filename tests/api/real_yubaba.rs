//! The scraper against the real open-source yubaba (crates.io `yubaba`, built without its
//! default features, so its workload runtime is the stub): three processes on loopback form a
//! raft cluster across three regions, and a fleet created through the API is read with every
//! member and judged by absorption on committed totals (the stub's empty `/workloads` says
//! nothing about sizes), under either headroom rule, with no failed sample and no proposal.
//!
//! yubaba 0.8.48 publishes its own count (the `headroom` section) only from its first
//! evaluation, 30 s after start, and a leader's first count reads no spare (it has not yet
//! confirmed its peers); before that headroom derives the count from the members. Each
//! sample is checked against whichever of the two the leader gave, never against a fixed
//! verdict, so the test holds on a machine slow enough to cross the 30 s.
//!
//! The binary is `HEADROOM_YUBABA_BIN`, else `target/yubaba/bin/yubaba`, where
//! `scripts/test.sh` installs it (`scripts/yubaba.sh`). `HEADROOM_SKIP_YUBABA=1` at build time
//! reports the test as ignored, never as passed (refused in CI).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use headroom::auth::Caller;
use headroom::capacity::record::record;
use headroom::domain::absorption::Basis;
use headroom::domain::capacity::Source;
use headroom::scraper::scrape_once;
use serde_json::{json, Value};
use tokio::process::{Child, Command};

use crate::helpers::TestApp;
use crate::runner::console;

const REGIONS: [&str; 3] = ["fsn1", "nbg1", "hel1"];

/// The yubaba binary to run, or a panic naming how to get one.
fn yubaba_bin() -> PathBuf {
    let bin = std::env::var_os("HEADROOM_YUBABA_BIN").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target/yubaba/bin/yubaba"),
        PathBuf::from,
    );
    assert!(
        bin.is_file(),
        "no yubaba at {}: run scripts/yubaba.sh (scripts/test.sh does) or set HEADROOM_YUBABA_BIN",
        bin.display()
    );
    bin
}

/// Lines of each node's log a failure shows.
const LOG_TAIL: usize = 40;

/// Three yubaba processes, killed when dropped; each node's log is in `dir`, which a failing
/// test keeps (its path printed).
struct Cluster {
    nodes: Vec<Child>,
    addrs: Vec<String>,
    dir: Option<tempfile::TempDir>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some(dir) = self.dir.take() {
                eprintln!("yubaba's logs are kept in {}", dir.keep().display());
            }
        }
    }
}

impl Cluster {
    async fn start() -> Cluster {
        let bin = yubaba_bin();
        let dir = tempfile::tempdir().unwrap();
        let addrs: Vec<String> = (0..3)
            .map(|_| format!("127.0.0.1:{}", crate::helpers::free_port()))
            .collect();
        // yubaba runs host tools (it starts and stops a headscale unit with `systemctl` on
        // every leadership change): on its PATH there is only `df`, which it reads disk
        // usage with, so nothing it runs reaches the machine's services.
        let tools = dir.path().join("bin");
        std::fs::create_dir_all(&tools).unwrap();
        std::os::unix::fs::symlink("/usr/bin/df", tools.join("df")).unwrap();
        let mut nodes = Vec::new();
        for (i, addr) in addrs.iter().enumerate() {
            let id = i + 1;
            let home = dir.path().join(format!("n{id}"));
            std::fs::create_dir_all(&home).unwrap();
            let log = std::fs::File::create(home.join("log")).unwrap();
            // Started through util-linux's `setpriv --pdeathsig`: yubaba dies with the test
            // process even when that is killed outright (no unwinding, so no kill_on_drop).
            let mut command = Command::new("/usr/bin/setpriv");
            command.args(["--pdeathsig", "KILL", "--"]).arg(&bin);
            let child = command
                .args(["serve", "--bind", addr])
                .arg("--state")
                .arg(home.join("state.json"))
                .args(["--raft-node-id", &id.to_string(), "--region", REGIONS[i]])
                .arg("--raft-dir")
                .arg(home.join("raft"))
                // Nothing of the test's environment (tokens, proxies) reaches yubaba; its
                // warning on every unauthenticated peer call would drown the log.
                .env_clear()
                .env("PATH", &tools)
                .env("HOME", &home)
                .env("RUST_LOG", "yubaba=info,yubaba::http_auth=error")
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .kill_on_drop(true)
                .spawn()
                .expect("yubaba starts");
            nodes.push(child);
        }
        Cluster {
            nodes,
            addrs,
            dir: Some(dir),
        }
    }

    /// The tail of every node's log, for a failure's message.
    fn logs(&self) -> String {
        let Some(dir) = &self.dir else {
            return String::new();
        };
        (1..=3)
            .map(|id| {
                let text = std::fs::read_to_string(dir.path().join(format!("n{id}/log")))
                    .unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = &lines[lines.len().saturating_sub(LOG_TAIL)..];
                format!("node {id}:\n{}", tail.join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Three nodes answering `/health`, formed into a raft group with a leader. A node that
    /// exits before it answers most likely lost its port to another process between
    /// `free_port` and its bind: the cluster is started again on new ports (twice at most).
    async fn formed(client: &reqwest::Client) -> Cluster {
        let mut attempt = 1;
        loop {
            let mut cluster = Cluster::start().await;
            match cluster.all_healthy(client).await {
                Ok(()) => {
                    cluster.form(client).await;
                    return cluster;
                }
                Err(why) if attempt < 3 => {
                    eprintln!("yubaba did not start ({why}); again on new ports");
                    attempt += 1;
                }
                Err(why) => panic!("{why}"),
            }
        }
    }

    async fn all_healthy(&mut self, client: &reqwest::Client) -> Result<(), String> {
        for addr in self.addrs.clone() {
            self.until(client, &format!("http://{addr}/health"), |_| true)
                .await?;
        }
        Ok(())
    }

    /// Forms the raft group (one member per region: yubaba refuses a region holding a
    /// majority) and waits for a leader.
    async fn form(&mut self, client: &reqwest::Client) {
        let members: serde_json::Map<String, Value> = self
            .addrs
            .iter()
            .enumerate()
            .map(|(i, addr)| {
                (
                    (i + 1).to_string(),
                    json!({ "addr": addr, "region": REGIONS[i] }),
                )
            })
            .collect();
        let res = client
            .post(format!("http://{}/raft/initialize", self.addrs[0]))
            .json(&json!({ "members": members }))
            .send()
            .await
            .unwrap();
        let status = res.status();
        let body = res.text().await.unwrap();
        assert!(status.is_success(), "initialize: {status} {body}");
        let leader = format!("http://{}/raft/status", self.addrs[0]);
        let led = self
            .until(client, &leader, |s| {
                s["current_leader"].is_u64()
                    && s["members"].as_object().is_some_and(|m| m.len() == 3)
            })
            .await;
        if let Err(why) = led {
            panic!("{why}");
        }
    }

    /// Polls `url` (a minute at most) until it answers 200 with JSON that `ready` accepts;
    /// an error when a node has exited meanwhile.
    async fn until(
        &mut self,
        client: &reqwest::Client,
        url: &str,
        ready: impl Fn(&Value) -> bool,
    ) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(res) = client.get(url).send().await {
                if res.status().is_success() {
                    if let Ok(body) = res.json::<Value>().await {
                        if ready(&body) {
                            return Ok(());
                        }
                    }
                }
            }
            for node in &mut self.nodes {
                if let Ok(Some(exit)) = node.try_wait() {
                    return Err(format!("a yubaba exited ({exit}):\n{}", self.logs()));
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{url} not ready within a minute:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Scrapes fleet `real` as stored now and records the sample, a scrape interval later on the
/// app's clock. The sample must be ok, and its count the one the leader gave: yubaba's own
/// section when it published one (native), else one spare per idle member (derived: every
/// member publishes its allocatable and runs nothing).
async fn tick(app: &TestApp, cluster: &Cluster) -> Source {
    let ctx = &app.state.ctx;
    let fleet = headroom::fleets::get(ctx, &Caller::system(), "real")
        .await
        .unwrap();
    app.clock.advance(Duration::from_secs(15));
    let sample = scrape_once(ctx, &fleet.spec).await;
    let o = match &sample.outcome {
        Ok(o) => o,
        Err(e) => panic!("a failed sample: {e}\n{}", cluster.logs()),
    };
    let published = &o.evidence["headroom"];
    match o.source {
        Source::Native => assert_eq!(
            (json!(o.spare), json!(o.required)),
            (published["spare"].clone(), published["required"].clone()),
            "yubaba's own count, as published"
        ),
        Source::Derived => {
            assert_eq!(published, &Value::Null, "derived only without a section");
            assert_eq!(
                (o.spare, o.required),
                (3, 2),
                "three idle members, three regions"
            );
        }
        Source::None => panic!("an ok sample names its source"),
    }
    let basis = o.absorption.as_ref().map(|a| a.basis);
    assert_eq!(basis, Some(Basis::Committed));
    record(ctx, "real", &sample).await.expect("recorded");
    o.source
}

/// What the fleet API says after the newest sample: read, judged on committed totals with
/// every loss absorbed (nothing is committed anywhere), three regions.
fn assert_read_on_committed_totals(detail: &Value) {
    assert_eq!(detail["last_error"], Value::Null, "{detail}");
    // Three declared regions: N+2, by yubaba's rule (its members' regions, published beside
    // raft's membership) whether yubaba has counted yet or headroom counts for it.
    assert_eq!(detail["required"], 2, "{detail}");
    let members = detail["members"].as_array().expect("members");
    assert_eq!(members.len(), 3, "{detail}");
    assert!(members.iter().all(|m| m["voter"] == true), "{detail}");
    let abs = &detail["absorption"];
    assert_eq!(abs["basis"], "committed", "{detail}");
    for loss in ["node_loss", "region_loss"] {
        // Three regions: a region's loss is judged as well as a node's.
        assert_eq!(abs[loss]["absorbed"], true, "{loss}: {detail}");
        assert_eq!(abs[loss]["short_memory_mb"], 0, "{loss}: {detail}");
        assert_eq!(abs[loss]["short_cpu_millis"], 0, "{loss}: {detail}");
    }
    assert_eq!(abs["machines_needed"], 0, "{detail}");
}

#[tokio::test]
#[cfg_attr(
    headroom_skip_yubaba,
    ignore = "HEADROOM_SKIP_YUBABA was set when the tests were built"
)]
async fn the_real_yubaba_is_read_on_committed_totals_and_nothing_fails() {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let cluster = Cluster::formed(&client).await;

    // The premise: the open-source build's stub runtime lists nothing, and says so.
    let res = client
        .get(format!("http://{}/workloads", cluster.addrs[1]))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-workload-source"], "stub");
    assert_eq!(
        res.json::<Value>().await.unwrap(),
        json!({ "workloads": [] })
    );

    // The fleet is created as an operator would, through the API, under absorption.
    let app = console(|_| {}).await;
    let operator = app.token_for("olga").await;
    let endpoints: Vec<String> = cluster
        .addrs
        .iter()
        .map(|a| format!("http://{a}"))
        .collect();
    let (status, body) = app
        .post_json(
            "/api/v1/fleets",
            &operator,
            &json!({
                "name": "real",
                "endpoints": endpoints,
                "restore_machine_config": "spare-fsn1",
                "headroom_rule": "absorption",
            }),
        )
        .await;
    assert_eq!(status, 201, "{body}");

    let mut sources = Vec::new();
    for _ in 0..3 {
        sources.push(tick(&app, &cluster).await);
    }
    app.create_user("vera", headroom::domain::Role::Viewer)
        .await;
    let viewer = app.token_for("vera").await;
    let detail = app.api_json("/api/v1/fleets/real", &viewer).await;
    assert_read_on_committed_totals(&detail);
    // Under absorption the verdict is the packing's, whatever yubaba counts.
    assert_eq!(detail["status"], "healthy", "{detail}");
    let series = app.api_json("/api/v1/fleets/real/headroom", &viewer).await;
    let points = series["points"].as_array().expect("points");
    assert!(!points.is_empty(), "{series}");
    for p in points {
        assert_eq!(p["absorbed"], true, "{p}");
        assert_eq!(p["ok"], true, "{p}");
    }

    // yubaba's own count decides again: the same reading, still healthy.
    let res = app
        .client
        .put(app.url("/api/v1/fleets/real"))
        .bearer_auth(&operator)
        .json(&json!({
            "endpoints": endpoints,
            "restore_machine_config": "spare-fsn1",
            "headroom_rule": "spare_count",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    sources.push(tick(&app, &cluster).await);
    let detail = app.api_json("/api/v1/fleets/real", &viewer).await;
    assert_eq!(detail["headroom_rule"], "spare_count");
    assert_read_on_committed_totals(&detail);
    println!("samples by source: {sources:?}");

    // Nothing failed and nothing was proposed: every sample ok, no deficit (one sample under
    // yubaba's count is fewer than a deficit needs), no provision.
    let failed: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM fleet_samples WHERE error IS NOT NULL")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(failed, 0);
    assert_eq!(app.count("fleet_deficits").await, 0);
    assert_eq!(app.count("provisions").await, 0);
}
