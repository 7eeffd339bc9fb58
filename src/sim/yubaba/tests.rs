//! The simulated fleet over real sockets: its bodies have the fixtures' shapes, garbage does not
//! stop a node, tenants take spares away and servers of the simulated provider join.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::provider::simulated::SimTiming;
use crate::provider::{MachineProvider, ServerSpec};

/// `/raft/status` exactly as the fixtures have it: unknown keys refused, so a key the sim
/// invents (or misspells) fails here, while every fixture must parse too.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct RaftStatus {
    node_id: u64,
    state: String,
    current_leader: Option<u64>,
    current_term: u64,
    last_log_index: Option<u64>,
    last_applied: Option<LogId>,
    membership_config: MembershipConfig,
    #[serde(default)]
    lease_liveness: Option<Value>,
    #[serde(default)]
    headroom: Option<Headroom>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct LogId {
    leader_id: LeaderId,
    index: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct LeaderId {
    term: u64,
    node_id: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MembershipConfig {
    #[allow(dead_code)]
    log_id: Option<LogId>,
    membership: Membership,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Membership {
    configs: Vec<Vec<u64>>,
    nodes: BTreeMap<String, Addr>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Addr {
    addr: String,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Headroom {
    spare: u32,
    required: u32,
}

const RAFT_FIXTURES: [&str; 6] = [
    include_str!("../../../tests/fixtures/yubaba/raft-status-follower-v0.8.json"),
    include_str!("../../../tests/fixtures/yubaba/raft-status-follower-with-null-headroom.json"),
    include_str!("../../../tests/fixtures/yubaba/raft-status-joint-config.json"),
    include_str!("../../../tests/fixtures/yubaba/raft-status-leader-with-headroom.json"),
    include_str!("../../../tests/fixtures/yubaba/raft-status-single-node.json"),
    include_str!("../../../tests/fixtures/yubaba/raft-status-uninitialised.json"),
];
const NODE_FIXTURE: &str = include_str!("../../../tests/fixtures/yubaba/node.json");
const USAGE_IDLE_FIXTURE: &str =
    include_str!("../../../tests/fixtures/yubaba/node-usage-idle.json");
const USAGE_BUSY_FIXTURE: &str =
    include_str!("../../../tests/fixtures/yubaba/node-usage-busy.json");

/// Fast timings: tests drive tenants by hand unless they test the loop.
fn options(name: &str, native: bool) -> SimFleetOptions {
    SimFleetOptions {
        name: name.into(),
        native,
        first_tenant_after: Duration::from_secs(3600),
        tenant_every: None,
        join_after: Duration::from_millis(50),
        poll_every: Duration::from_millis(20),
        ..SimFleetOptions::default()
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .no_proxy()
        .build()
        .unwrap()
}

async fn get(addr: &str, path: &str) -> (u16, Value) {
    let res = client()
        .get(format!("http://{addr}{path}"))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

/// Sends raw bytes on a fresh connection and returns everything the node answers until it
/// closes the connection (or 5 s pass).
async fn raw(addr: &str, bytes: &[u8]) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out)).await;
    assert!(
        read.is_ok(),
        "the node kept the connection open after {bytes:?}"
    );
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn every_raft_status_fixture_parses_with_the_strict_shape_used_for_the_sim() {
    for text in RAFT_FIXTURES {
        serde_json::from_str::<RaftStatus>(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    }
}

#[tokio::test]
async fn a_native_fleet_answers_raft_status_in_the_fixture_shape_with_the_section_on_the_leader_only(
) {
    let fleet = SimFleet::start(options("alpha", true)).await.unwrap();
    let nodes = fleet.nodes();
    assert_eq!(nodes.len(), 4);
    for node in &nodes {
        let (status, body) = get(&node.addr, "/raft/status").await;
        assert_eq!(status, 200);
        let parsed: RaftStatus = serde_json::from_value(body.clone()).unwrap();
        assert_eq!(parsed.node_id, node.id);
        assert_eq!(parsed.current_leader, Some(1));
        assert_eq!(
            parsed.membership_config.membership.configs,
            vec![vec![1, 2, 3]]
        );
        // Every member's addr is its real listening address: following the leader works.
        let addrs: Vec<(String, String)> = parsed
            .membership_config
            .membership
            .nodes
            .iter()
            .map(|(id, a)| (id.clone(), a.addr.clone()))
            .collect();
        let expected: Vec<(String, String)> = nodes
            .iter()
            .map(|n| (n.id.to_string(), n.addr.clone()))
            .collect();
        assert_eq!(addrs, expected);
        match node.id {
            1 => {
                assert_eq!(parsed.state, "Leader");
                assert_eq!(
                    parsed.headroom,
                    Some(Headroom {
                        spare: 1,
                        required: 1
                    })
                );
            }
            2 | 3 => {
                assert_eq!(parsed.state, "Follower");
                assert_eq!(
                    body.get("headroom"),
                    Some(&Value::Null),
                    "null on followers"
                );
            }
            _ => {
                assert_eq!(parsed.state, "Learner");
                assert_eq!(body.get("headroom"), Some(&Value::Null));
            }
        }
    }
    // Followers first, the leader last: a scraper must follow `current_leader`.
    let endpoints = fleet.endpoints();
    assert_eq!(endpoints.len(), 3);
    assert_eq!(endpoints[2], format!("http://{}", nodes[0].addr));
}

#[tokio::test]
async fn a_derived_fleet_has_no_headroom_section_on_any_node() {
    let fleet = SimFleet::start(options("legacy", false)).await.unwrap();
    for node in fleet.nodes() {
        let (_, body) = get(&node.addr, "/raft/status").await;
        serde_json::from_value::<RaftStatus>(body.clone()).unwrap();
        assert_eq!(body.get("headroom"), None, "node {}", node.id);
    }
}

#[tokio::test]
async fn node_and_usage_answers_carry_the_fixture_keys_and_the_tenants() {
    let fleet = SimFleet::start(options("alpha", false)).await.unwrap();
    let nodes = fleet.nodes();
    let node_fixture: Value = serde_json::from_str(NODE_FIXTURE).unwrap();
    let idle: Value = serde_json::from_str(USAGE_IDLE_FIXTURE).unwrap();
    let busy: Value = serde_json::from_str(USAGE_BUSY_FIXTURE).unwrap();
    for node in &nodes {
        let (status, body) = get(&node.addr, "/node").await;
        assert_eq!(status, 200);
        assert_eq!(keys(&body), keys(&node_fixture), "node {}", node.id);
        assert_eq!(body["yah.allocatable.memory_mb"], 7807);
        let (status, usage) = get(&node.addr, "/node/usage?window_ms=500").await;
        assert_eq!(status, 200);
        assert_eq!(keys(&usage), keys(&idle));
        assert!(keys(&usage).is_superset(&keys(&busy)));
        assert_eq!(usage["yah.workloads.count"], node.tenants);
        assert_eq!(usage["yah.sample.window_ms"], 500);
        // The workloads add up to what /node/usage commits, and the reader takes them.
        let (status, workloads) = get(&node.addr, "/workloads").await;
        assert_eq!(status, 200);
        let read = crate::scraper::workloads::parse_workloads(
            200,
            crate::scraper::workloads::WorkloadSource::Unnamed,
            workloads.to_string().as_bytes(),
        )
        .unwrap();
        assert_eq!(read.count, node.tenants as usize);
        let sizes = read.sizes.unwrap();
        assert_eq!(
            sizes.iter().map(|w| w.memory_mb).sum::<u64>(),
            usage["yah.committed.memory_mb"].as_u64().unwrap()
        );
        assert_eq!(
            sizes.iter().map(|w| w.cpu_millis).sum::<u64>(),
            usage["yah.committed.cpu_millis"].as_u64().unwrap()
        );
        let (status, health) = get(&node.addr, "/health").await;
        assert_eq!(status, 200);
        assert_eq!(health["mode"], "clustered");
        assert_eq!(health["name"], node.name.as_str());
    }
    // Voters carry tenants, the learner none: exactly one spare by the derived rule.
    let tenants: Vec<u32> = nodes.iter().map(|n| n.tenants).collect();
    assert_eq!(tenants, [2, 2, 2, 0]);
    let (status, refused) = get(&nodes[0].addr, "/node/usage?window_ms=10").await;
    assert_eq!(status, 400);
    assert!(refused.as_str().unwrap().contains("window_ms"), "{refused}");
}

#[tokio::test]
async fn a_tenant_landing_on_the_spare_brings_the_leader_s_spare_to_zero() {
    let fleet = SimFleet::start(options("alpha", true)).await.unwrap();
    let leader = fleet.nodes()[0].addr.clone();
    let (_, before) = get(&leader, "/raft/status").await;
    assert_eq!(before["headroom"]["spare"], 1);
    let landed = fleet.land_tenant().expect("a spare to land on");
    assert_eq!(landed, 4);
    let (_, after) = get(&leader, "/raft/status").await;
    assert_eq!(
        after["headroom"],
        serde_json::json!({"spare": 0, "required": 1})
    );
    assert!(after["last_log_index"].as_u64() > before["last_log_index"].as_u64());
    let learner = fleet.nodes()[3].addr.clone();
    let (_, usage) = get(&learner, "/node/usage?window_ms=500").await;
    assert_eq!(usage["yah.workloads.count"], 1);
    assert_eq!(fleet.land_tenant(), None, "no spare left to land on");
    let joined = fleet.add_spare().await.unwrap();
    assert_eq!(joined, 5);
    assert_eq!(fleet.headroom(), (1, 1));
    let (_, status) = get(&leader, "/raft/status").await;
    assert_eq!(
        status["membership_config"]["membership"]["nodes"]["5"]["addr"],
        fleet.nodes()[4].addr
    );
    assert_eq!(
        status["membership_config"]["membership"]["configs"],
        serde_json::json!([[1, 2, 3]])
    );
}

#[tokio::test]
async fn nodes_in_two_regions_require_two_spares() {
    let fleet = SimFleet::start(SimFleetOptions {
        regions: vec!["eu-central".into(), "us-east".into()],
        ..options("wide", true)
    })
    .await
    .unwrap();
    assert_eq!(fleet.headroom(), (1, 2));
    let (_, body) = get(&fleet.nodes()[0].addr, "/raft/status").await;
    assert_eq!(
        body["headroom"],
        serde_json::json!({"spare": 1, "required": 2})
    );
}

#[tokio::test]
async fn garbage_oversized_and_silent_clients_do_not_stop_a_node() {
    let fleet = SimFleet::start(SimFleetOptions {
        limits: http::Limits {
            head_bytes: 1024,
            io_timeout: Duration::from_millis(300),
            max_connections: 8,
        },
        ..options("alpha", true)
    })
    .await
    .unwrap();
    let addr = fleet.nodes()[0].addr.clone();
    let answer = raw(
        &addr,
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    let answer = raw(&addr, b"DELETE /raft/status HTTP/1.1\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 405 "), "{answer:?}");
    let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(4096));
    let answer = raw(&addr, long.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    let answer = raw(
        &addr,
        b"POST /raft/status HTTP/1.1\r\nContent-Length: 9\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    // A client that sends half a head and stops is dropped after the read timeout.
    let answer = raw(&addr, b"GET /raft/st").await;
    assert_eq!(answer, "");
    // More connections than allowed at once: the extra ones are closed, the node lives on.
    let mut idle = Vec::new();
    for _ in 0..12 {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    drop(idle);
    let (status, body) = get(&addr, "/raft/status").await;
    assert_eq!(status, 200);
    assert_eq!(body["state"], "Leader");
    let (status, _) = get(&addr, "/nothing").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn one_keep_alive_connection_serves_several_requests_in_order() {
    let fleet = SimFleet::start(options("alpha", true)).await.unwrap();
    let addr = fleet.nodes()[1].addr.clone();
    let answer = raw(
        &addr,
        b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /raft/status HTTP/1.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(answer.matches("HTTP/1.1 200 OK").count(), 2, "{answer}");
    let second = answer.rsplit("\r\n\r\n").next().unwrap();
    let status: RaftStatus = serde_json::from_str(second).unwrap();
    assert_eq!((status.node_id, status.state.as_str()), (2, "Follower"));
}

fn labelled(name: &str, fleet: &str) -> ServerSpec {
    ServerSpec::sample(name, (FLEET_LABEL, fleet))
}

/// Polls `check` every 20 ms for up to 5 s.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_server_the_simulated_provider_creates_for_the_fleet_joins_as_a_spare_once_running() {
    let cloud = Arc::new(Simulated::with_timing(SimTiming {
        answer_after: Duration::from_millis(10),
        starting_after: Duration::from_millis(50),
        running_after: Duration::from_millis(200),
    }));
    let fleet = SimFleet::start(options("alpha", true)).await.unwrap();
    fleet.land_tenant().unwrap();
    assert_eq!(fleet.headroom(), (0, 1));
    let (stop, stopped) = watch::channel(false);
    let run = tokio::spawn(
        fleet
            .clone()
            .run_until_stopped(Some(cloud.clone()), stopped),
    );

    let other = cloud
        .create_server(&labelled("other-1", "beta"))
        .await
        .unwrap();
    let ours = cloud
        .create_server(&labelled("spare-fsn1-abc123", "alpha"))
        .await
        .unwrap();
    // Not before it runs: an initializing server is no member.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(fleet.nodes().len(), 4);
    eventually("the server joins", || fleet.nodes().len() == 5).await;
    let node = fleet.nodes().pop().unwrap();
    assert_eq!(node.server_id, Some(ours.server.id));
    assert_eq!(node.name, "spare-fsn1-abc123");
    assert!(node.is_spare() && !node.voter);
    assert_eq!(fleet.headroom(), (1, 1));
    let (_, body) = get(&fleet.nodes()[0].addr, "/raft/status").await;
    assert_eq!(body["headroom"]["spare"], 1);
    let (_, joined) = get(&node.addr, "/raft/status").await;
    assert_eq!(joined["state"], "Learner");
    // The other fleet's server never joins this one.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(fleet
        .nodes()
        .iter()
        .all(|n| n.server_id != Some(other.server.id)));
    // A destroyed server's node leaves, and its port stops answering.
    cloud.destroy(ours.server.id).await.unwrap();
    eventually("the node leaves", || fleet.nodes().len() == 4).await;
    eventually("the port closes", || {
        std::net::TcpStream::connect(&node.addr).is_err()
    })
    .await;

    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(2), run)
        .await
        .expect("the loop stops on shutdown")
        .unwrap();
}

#[tokio::test]
async fn the_loop_lands_tenants_over_time_until_no_spare_is_left() {
    let fleet = SimFleet::start(SimFleetOptions {
        spares: 2,
        first_tenant_after: Duration::from_millis(50),
        tenant_every: Some(Duration::from_millis(100)),
        ..options("alpha", true)
    })
    .await
    .unwrap();
    assert_eq!(fleet.headroom(), (2, 1));
    let (stop, stopped) = watch::channel(false);
    let run = tokio::spawn(fleet.clone().run_until_stopped(None, stopped));
    eventually("one tenant", || fleet.headroom().0 == 1).await;
    eventually("two tenants", || fleet.headroom().0 == 0).await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    let tenants: u32 = fleet.nodes().iter().map(|n| n.tenants).sum();
    assert_eq!(tenants, 3 * 2 + 2, "tenants land on spares only");
    drop(stop);
    tokio::time::timeout(Duration::from_secs(2), run)
        .await
        .expect("the loop stops when its shutdown sender is gone")
        .unwrap();
}

#[tokio::test]
async fn dropping_the_fleet_closes_every_listener() {
    let fleet = SimFleet::start(options("alpha", true)).await.unwrap();
    let addrs: Vec<String> = fleet.nodes().into_iter().map(|n| n.addr).collect();
    drop(fleet);
    for addr in addrs {
        eventually("the port closes", || {
            std::net::TcpStream::connect(&addr).is_err()
        })
        .await;
    }
}

#[tokio::test]
async fn options_the_simulation_cannot_honour_are_refused_by_field() {
    let cases = [
        (
            SimFleetOptions {
                name: " ".into(),
                ..options("a", true)
            },
            "name",
        ),
        (
            SimFleetOptions {
                voters: 0,
                ..options("a", true)
            },
            "voters",
        ),
        (
            SimFleetOptions {
                tenants_per_voter: 0,
                ..options("a", true)
            },
            "tenants_per_voter",
        ),
        (
            SimFleetOptions {
                spares: 300,
                ..options("a", true)
            },
            "voters + spares",
        ),
        (
            SimFleetOptions {
                regions: vec![],
                ..options("a", true)
            },
            "regions",
        ),
        (
            SimFleetOptions {
                regions: vec!["".into()],
                ..options("a", true)
            },
            "regions",
        ),
        (
            SimFleetOptions {
                poll_every: Duration::ZERO,
                ..options("a", true)
            },
            "poll_every",
        ),
    ];
    for (opts, field) in cases {
        let err = SimFleet::start(opts).await.unwrap_err().to_string();
        assert!(
            err.contains(&format!("sim fleet {field}:")),
            "{field}: {err}"
        );
    }
}
