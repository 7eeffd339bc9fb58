//! Time to render and validate the default template for the sample config.
//!
//! `cargo run --release --example render_bench [RUNS]` prints the median and spread over RUNS
//! renders (default 2000), without and with cloud-init's JSON schema check (when Debian's
//! cloud-init schema file is installed).

use std::hint::black_box;
use std::time::{Duration, Instant};

use headroom::cloud_init::sample::sample_spec;
use headroom::cloud_init::{render, schema, RenderRequest, Secrets, DEFAULT_TEMPLATE_BODY};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(2000)
        .max(10);
    let spec = sample_spec();
    let secrets = Secrets::default();
    let validator = match schema::locate(None) {
        Some(path) => Some(schema::load(&path)?),
        None => None,
    };
    println!(
        "render + validate of the default template ({} bytes of template), {runs} runs each",
        DEFAULT_TEMPLATE_BODY.len()
    );
    let mut cases: Vec<(&str, Option<&jsonschema::Validator>)> = vec![("checks 1-6", None)];
    match &validator {
        Some(v) => cases.push(("checks 1-7 (with cloud-init schema)", Some(v))),
        None => println!("(cloud-init schema not installed: the schema case is skipped)"),
    }
    for (label, schema) in cases {
        let req = RenderRequest {
            template_body: DEFAULT_TEMPLATE_BODY,
            spec: &spec,
            hostname: "spare-fsn1",
            secrets: &secrets,
            schema,
        };
        for _ in 0..runs / 10 {
            black_box(render(&req));
        }
        let mut times: Vec<Duration> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let r = render(black_box(&req));
                let elapsed = t.elapsed();
                assert!(r.ok);
                black_box(r);
                elapsed
            })
            .collect();
        times.sort();
        let size = render(&req).size_bytes;
        println!(
            "{label:<38} median {:>8.1} µs   p90 {:>8.1} µs   p99 {:>8.1} µs   min {:>8.1} µs   (payload {size} bytes)",
            percentile(&times, 0.5).as_secs_f64() * 1e6,
            percentile(&times, 0.9).as_secs_f64() * 1e6,
            percentile(&times, 0.99).as_secs_f64() * 1e6,
            times[0].as_secs_f64() * 1e6,
        );
    }
    Ok(())
}
