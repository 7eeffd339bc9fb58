//! How audit-page queries and chain verification scale with the size of the log.
//!
//! `cargo run --release --example audit_bench [ENTRIES]` fills a temporary SQLite file with
//! ENTRIES audit entries (default 200,000; 10 % login failures, the rest spread over users),
//! and prints the median time of each audit-page query at 10 % of that size and at full size.
//! Flat figures between the two columns mean a page's cost does not grow with history.

use std::time::{Duration, Instant};

use headroom::audit::{self, Action, Actor, NewEntry};
use headroom::db::{self, audit::AuditFilter};

const ACTORS: [&str; 20] = [
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory",
    "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter", "system",
];
const ACTIONS: [Action; 6] = [
    Action::UserCreated,
    Action::UserRoleChanged,
    Action::MachineConfigUpdated,
    Action::TemplateUpdated,
    Action::AuthLoginSucceeded,
    Action::TokenCreated,
];
const START: i64 = 1_767_225_600_000; // 2026-01-01, one entry a minute after.

async fn fill(pool: &sqlx::SqlitePool, from: i64, to: i64) -> anyhow::Result<()> {
    let mut tx = db::begin_write(pool).await?;
    for i in from..to {
        let (actor, action) = if i % 10 == 0 {
            (Actor::Anonymous, Action::AuthLoginFailed)
        } else {
            (
                Actor::User(ACTORS[(i % 20) as usize].into()),
                ACTIONS[(i % 6) as usize],
            )
        };
        let target = format!("t{}", i % 500);
        audit::append(
            &mut tx,
            START + i * 60_000,
            NewEntry {
                actor: &actor,
                action,
                target_kind: "user",
                target_id: &target,
                details: serde_json::json!({ "i": i }),
            },
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

async fn median(
    pool: &sqlx::SqlitePool,
    filter: &AuditFilter,
    before: Option<i64>,
) -> anyhow::Result<Duration> {
    let mut times = Vec::new();
    for _ in 0..25 {
        let mut conn = pool.acquire().await?;
        let t = Instant::now();
        let rows = db::audit::page(&mut conn, filter, before, 51).await?;
        times.push(t.elapsed());
        std::hint::black_box(rows);
    }
    times.sort();
    Ok(times[times.len() / 2])
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let total: i64 = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(200_000)
        .max(1000);
    let dir = tempfile_dir()?;
    let pool = db::connect(&format!("sqlite:{}/audit-bench.db", dir.display())).await?;
    let small = total / 10;
    let cases: Vec<(&str, AuditFilter, Option<i64>)> = vec![
        ("newest page, no filter", AuditFilter::default(), None),
        (
            "actor = mallory",
            AuditFilter {
                actor: Some("mallory".into()),
                ..Default::default()
            },
            None,
        ),
        (
            "action = auth.login_failed",
            AuditFilter {
                action: Some("auth.login_failed".into()),
                ..Default::default()
            },
            None,
        ),
        (
            "action prefix user.",
            AuditFilter {
                action: Some("user.".into()),
                ..Default::default()
            },
            None,
        ),
        (
            "action prefix token. (1 entry in 7)",
            AuditFilter {
                action: Some("token.".into()),
                ..Default::default()
            },
            None,
        ),
        (
            "action prefix pin. (matches nothing)",
            AuditFilter {
                action: Some("pin.".into()),
                ..Default::default()
            },
            None,
        ),
        (
            "target = user:t42",
            AuditFilter {
                target: Some("user:t42".into()),
                ..Default::default()
            },
            None,
        ),
        (
            "one day, 3 days after start",
            AuditFilter {
                from: Some(START + 3 * 86_400_000),
                to: Some(START + 4 * 86_400_000),
                ..Default::default()
            },
            None,
        ),
        ("cursor in the middle", AuditFilter::default(), Some(0)),
    ];
    let mut results: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
    let mut verify = Vec::new();
    for (size, from) in [(small, 0), (total, small)] {
        let t = Instant::now();
        fill(&pool, from, size).await?;
        eprintln!(
            "filled to {size} entries in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        for (i, (_, filter, before)) in cases.iter().enumerate() {
            let cursor = before.map(|_| size / 2);
            results[i].push(median(&pool, filter, cursor).await?);
        }
        let ctx = headroom::context::Ctx::build(
            headroom::config::Settings::default(),
            pool.clone(),
            std::sync::Arc::new(headroom::domain::SystemClock),
        )?;
        let t = Instant::now();
        let ok = audit::verify(&ctx, &headroom::domain::Caller::system()).await?;
        verify.push((t.elapsed(), ok.is_ok()));
    }
    println!(
        "audit page (51 rows), median of 25        {:>12} {:>12}",
        format!("{small} rows"),
        format!("{total} rows")
    );
    for (i, (label, _, _)) in cases.iter().enumerate() {
        println!(
            "  {label:<40} {:>9.3} ms {:>9.3} ms",
            results[i][0].as_secs_f64() * 1e3,
            results[i][1].as_secs_f64() * 1e3
        );
    }
    println!(
        "  {:<40} {:>9.1} ms {:>9.1} ms   (whole chain, intact: {})",
        "audit verify",
        verify[0].0.as_secs_f64() * 1e3,
        verify[1].0.as_secs_f64() * 1e3,
        verify[1].1
    );
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("headroom-audit-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
