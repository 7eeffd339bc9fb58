//! Absorption headroom's cost for one large fleet: 200 members with 20 sized workloads each
//! over two regions, assessed as a sample would be (every node loss, every region loss, and
//! the fewest restore machines, searched by bisection). A region's loss is short, so the
//! answer needs machines and the bisection runs.
//! Goal: the median assessment under 5 ms, so 1,000 such fleets scraped every 15 s cost under
//! a third of a core (1,000 × 5 ms / 15 s).
//!
//! `cargo bench --bench absorption` (assessments: `BENCH_ITERATIONS`, default 200).

#[path = "support/goals.rs"]
mod goals;

use std::time::Instant;

use headroom::domain::absorption::{assess, MemberLoad, Resources, RestoreMachine};

const MEMBERS: u64 = 200;
const WORKLOADS: u64 = 20;

/// A deterministic fleet: member `i` has 24 GiB and 12 cores allocatable, and 20 workloads of
/// sizes that vary by member and index (128 MiB … 1.2 GiB, 50 … 395 millicores): about 55 %
/// of memory committed, so a node's loss is absorbed and a region's is not without machines.
fn fleet() -> Vec<MemberLoad> {
    (0..MEMBERS)
        .map(|i| {
            let workloads: Vec<Resources> = (0..WORKLOADS)
                .map(|j| {
                    let k = (i * 7 + j * 13) % 24;
                    Resources::new(128 + k * 48, 50 + k * 15)
                })
                .collect();
            let committed = workloads.iter().fold(Resources::default(), |a, w| {
                Resources::new(a.memory_mb + w.memory_mb, a.cpu_millis + w.cpu_millis)
            });
            MemberLoad {
                id: i,
                region: Some(if i % 2 == 0 { "fsn1" } else { "nbg1" }.into()),
                live: true,
                allocatable: Some(Resources::new(24 * 1024, 12_000)),
                committed,
                workloads: Some(workloads),
            }
        })
        .collect()
}

fn main() {
    let iterations: usize = std::env::var("BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let members = fleet();
    let restore = RestoreMachine {
        allocatable: Resources::new(16 * 1024, 8000),
        region: Some("hel1".into()),
    };
    let answer = assess(&members, Some(&restore)).expect("members");
    println!(
        "{MEMBERS} members × {WORKLOADS} workloads: node loss absorbed {}, region loss absorbed {:?}, machines needed {:?}, basis {:?}",
        answer.node_loss.absorbed,
        answer.region_loss.as_ref().map(|r| r.absorbed),
        answer.machines_needed,
        answer.basis
    );
    let mut times: Vec<f64> = (0..iterations)
        .map(|_| {
            let started = Instant::now();
            std::hint::black_box(assess(std::hint::black_box(&members), Some(&restore)));
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    let median = at(0.5);
    println!(
        "assess: median {median:.2} ms, p90 {:.2} ms, max {:.2} ms over {iterations} runs",
        at(0.9),
        at(1.0)
    );
    println!(
        "1,000 such fleets every 15 s: {:.3} of a core",
        1000.0 * median / 15_000.0
    );
    let mut goals = goals::Goals::default();
    goals.check(
        &format!("median assessment < 5 ms ({median:.2} ms)"),
        median < 5.0,
    );
    goals.check(
        "the fleet needs machines, so the search ran",
        answer.machines_needed.is_some_and(|k| k > 0),
    );
    goals.exit_if_missed();
}
