//! Time to render and validate the default template for the sample config.
//!
//! `cargo run --release --example render_bench [RUNS]` prints the median and spread over RUNS
//! renders (default 500) of:
//! - the sandboxed engine alone, in this thread (what a worker process does);
//! - the full render as the server does it: a worker process per render, then validation on
//!   the blocking pool, without and with cloud-init's JSON schema check (when Debian's
//!   cloud-init schema file is installed);
//! - the same, 8 at a time, to show the permits (one per core) at work.
//!
//! This program is also its own render worker, as the server binary is.

use std::hint::black_box;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom::cloud_init::sample::sample_spec;
use headroom::cloud_init::sandbox::{self, EngineLimits, Job};
use headroom::cloud_init::{
    schema, worker, RenderLimits, RenderRequest, Renderer, Secrets, DEFAULT_TEMPLATE_BODY,
};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn report(label: &str, mut times: Vec<Duration>, extra: &str) {
    times.sort();
    println!(
        "{label:<44} median {:>8.1} µs   p90 {:>8.1} µs   p99 {:>8.1} µs   min {:>8.1} µs{extra}",
        percentile(&times, 0.5).as_secs_f64() * 1e6,
        percentile(&times, 0.9).as_secs_f64() * 1e6,
        percentile(&times, 0.99).as_secs_f64() * 1e6,
        times[0].as_secs_f64() * 1e6,
    );
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
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn bench() -> anyhow::Result<()> {
    let runs: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(500)
        .max(10);
    let spec = sample_spec();
    let secrets = Secrets::default();
    let program = std::env::current_exe()?;
    println!(
        "render + validate of the default template ({} bytes of template), {runs} runs each",
        DEFAULT_TEMPLATE_BODY.len()
    );

    let job = Job {
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
    report("sandboxed engine alone (in this thread)", times, "");

    let validator = match schema::locate(None) {
        Some(path) => Some(Arc::new(schema::load(&path)?)),
        None => {
            println!("(cloud-init schema not installed: the schema case is skipped)");
            None
        }
    };
    let mut cases = vec![("worker process + checks 1-6", None)];
    if let Some(v) = &validator {
        cases.push(("worker process + checks 1-7 (schema)", Some(v.clone())));
    }
    for (label, schema) in cases {
        let renderer = Renderer::new(program.clone(), RenderLimits::default(), schema);
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
        report(label, times, &format!("   (payload {size} bytes)"));
    }

    // Throughput with 8 renders in flight: the permits keep at most one per core running.
    let renderer = Arc::new(Renderer::new(program, RenderLimits::default(), None));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let renderer = renderer.clone();
        let spec = spec.clone();
        tasks.push(tokio::spawn(async move {
            let secrets = Secrets::default();
            for _ in 0..runs / 8 {
                let r = renderer
                    .render(&RenderRequest {
                        template_body: DEFAULT_TEMPLATE_BODY,
                        spec: &spec,
                        hostname: "spare-fsn1",
                        secrets: &secrets,
                        now: 0,
                        requested_by: "test",
                    })
                    .await;
                assert!(r.ok);
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
        "8 concurrent callers, worker processes",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}
