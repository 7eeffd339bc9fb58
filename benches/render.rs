//! Time to render and validate the default template for the sample config:
//! - the sandboxed engine alone in this thread, parsing the template afresh (a worker keeps
//!   the parse of the last few templates, `sandbox::Parsed`, and skips this part);
//! - the pool's own cost: a one-line template on a warm worker;
//! - the whole render as the server does it: a job on a warm worker of the pool (started by
//!   the probe, as at start-up), then validation on the blocking pool, without and with
//!   cloud-init's JSON schema check (when Debian's cloud-init schema file is installed);
//! - 8 callers at once, to show the permits and the pool (one per core) at work.
//!
//! Goal: the whole round trip's p99 at most 1 ms, as the server does it (with the schema check
//! when it is installed, as the server then runs it).
//!
//! `cargo bench --bench render` (renders per case: `BENCH_ITERATIONS`, default 2000).
//!
//! This program is also its own render worker, as the server binary is.

#[path = "support/goals.rs"]
mod goals;

use std::hint::black_box;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom::cloud_init::pool::Pool;
use headroom::cloud_init::sample::sample_spec;
use headroom::cloud_init::sandbox::{self, EngineLimits, Job};
use headroom::cloud_init::{
    schema, worker, RenderLimits, RenderRequest, Renderer, Secrets, DEFAULT_TEMPLATE_BODY,
};

/// The whole round trip's p99 goal.
const P99_GOAL: Duration = Duration::from_millis(1);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Prints the spread of `times` and returns their p99.
fn report(label: &str, mut times: Vec<Duration>, extra: &str) -> Duration {
    times.sort();
    let p99 = percentile(&times, 0.99);
    println!(
        "{label:<44} median {:>8.1} µs   p90 {:>8.1} µs   p99 {:>8.1} µs   min {:>8.1} µs{extra}",
        percentile(&times, 0.5).as_secs_f64() * 1e6,
        percentile(&times, 0.9).as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        times[0].as_secs_f64() * 1e6,
    );
    p99
}

fn main() -> ExitCode {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == worker::WORKER_ARG)
    {
        return worker::serve_stdio();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    match runtime.block_on(bench()) {
        Ok(goals) => {
            goals.exit_if_missed();
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn bench() -> anyhow::Result<goals::Goals> {
    let runs: usize = std::env::var("BENCH_ITERATIONS")
        .ok()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(2000)
        .max(100);
    let spec = sample_spec();
    let secrets = Secrets::default();
    let program = std::env::current_exe()?;
    println!(
        "render + validate of the default template ({} bytes of template), {runs} runs each",
        DEFAULT_TEMPLATE_BODY.len()
    );

    let job = Job {
        owner: "bench".into(),
        body: DEFAULT_TEMPLATE_BODY.into(),
        contexts: vec![serde_json::json!({
            "hostname": "spare-fsn1", "machine": &spec, "mesh_tags_csv": "tag:x",
            "mesh_login_server": "", "mesh_preauth_key": "", "tunnel_token": "", "now": "",
        })],
        limits: EngineLimits::default(),
    };
    let times = (0..runs)
        .map(|_| {
            let t = Instant::now();
            black_box(sandbox::run(black_box(&job)));
            t.elapsed()
        })
        .collect();
    report("engine alone, parsing afresh (in this thread)", times, "");

    // The pool's own cost: a one-line template through a warm worker, no validation.
    let pool = Pool::new(program.clone(), 1);
    pool.probe().await?;
    let tiny = Job {
        owner: "bench".into(),
        body: "{{ hostname | yaml }}".into(),
        contexts: vec![serde_json::json!({"hostname": "spare-fsn1"})],
        limits: EngineLimits::default(),
    };
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        black_box(pool.run(&tiny, Duration::from_secs(1)).await?);
        times.push(t.elapsed());
    }
    report("one-line template on a warm worker", times, "");
    drop(pool);

    let validator = match schema::locate(None) {
        Some(path) => Some(Arc::new(schema::load(&path)?)),
        None => {
            println!("(cloud-init schema not installed: the schema case is skipped)");
            None
        }
    };
    let mut cases = vec![("warm worker + checks 1-6", None)];
    if let Some(v) = &validator {
        cases.push(("warm worker + checks 1-7 (schema)", Some(v.clone())));
    }
    // The server's own configuration is the last case: with the schema when it is installed.
    let mut server_p99 = Duration::ZERO;
    for (label, schema) in cases {
        let renderer = Renderer::new(program.clone(), RenderLimits::default(), schema);
        renderer.probe().await?;
        let req = RenderRequest {
            template_body: DEFAULT_TEMPLATE_BODY,
            spec: &spec,
            hostname: "spare-fsn1",
            secrets: &secrets,
            now: 0,
            requested_by: "test",
        };
        for _ in 0..runs / 10 {
            black_box(renderer.render(&req).await);
        }
        let mut times = Vec::with_capacity(runs);
        let mut size = 0;
        for _ in 0..runs {
            let t = Instant::now();
            let r = renderer.render(black_box(&req)).await;
            times.push(t.elapsed());
            assert!(r.ok, "{:#?}", r.findings);
            size = r.size_bytes;
        }
        server_p99 = report(label, times, &format!("   (payload {size} bytes)"));
    }

    // Throughput with 8 renders in flight: the permits keep at most one per core running.
    let renderer = Arc::new(Renderer::new(program, RenderLimits::default(), None));
    renderer.probe().await?;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for caller in 0..8 {
        let renderer = renderer.clone();
        let spec = spec.clone();
        tasks.push(tokio::spawn(async move {
            let secrets = Secrets::default();
            // One requester each: a requester may have only a few renders in flight.
            let requested_by = format!("caller-{caller}");
            for _ in 0..runs / 8 {
                let r = renderer
                    .render(&RenderRequest {
                        template_body: DEFAULT_TEMPLATE_BODY,
                        spec: &spec,
                        hostname: "spare-fsn1",
                        secrets: &secrets,
                        now: 0,
                        requested_by: &requested_by,
                    })
                    .await;
                assert!(r.ok, "{:#?}", r.findings);
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let total = (runs / 8) * 8;
    let elapsed = started.elapsed();
    println!(
        "{:<44} {total} renders in {:.2} s: {:.0} renders/s",
        "8 concurrent callers, warm workers",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64()
    );

    let mut goals = goals::Goals::default();
    goals.check(
        &format!(
            "whole render p99 {:.0} µs ≤ {} µs, as the server does it",
            server_p99.as_secs_f64() * 1e6,
            P99_GOAL.as_micros()
        ),
        server_p99 <= P99_GOAL,
    );
    Ok(goals)
}
