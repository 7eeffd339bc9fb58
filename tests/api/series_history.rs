//! Fast generation of long headroom histories, for the series tests and the chart benchmarks
//! (`benches/headroom_chart.rs` and `benches/prometheus_chart.rs` include this file; the latter
//! writes the same `tick`s for Prometheus too): realistic samples computed in Rust, their
//! minute and hour rollups folded here exactly as `db::fleet_samples::insert` folds them, and
//! everything written with multi-row inserts in large transactions. The series tests check
//! that what this stores equals what the product stores sample by sample.

#![allow(dead_code)]

use headroom::db::sql::Sql;
use headroom::domain::capacity::{Member, Observation, Resolution, Sample, Source};
use sqlx::AnyPool;

/// Rows per multi-row insert (up to 13 columns each). Kept small because SQLite reads the
/// numbered placeholders both stores share (`$1`, `$2`, …) as named variables: it finds each
/// one's name (when sqlx binds it, on every execution) by scanning the names before it, so
/// the work grows with the square of a statement's variables. At 1,000 rows the soak's 3.4
/// million samples took 666 s to write.
const ROWS_PER_INSERT: usize = 100;
/// Rows per transaction.
const ROWS_PER_TX: usize = 100_000;

/// One generated tick: numbers or a failure reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tick {
    pub at: i64,
    pub latency_ms: i64,
    /// `(spare, required, source)` or why the scrape failed.
    pub outcome: Result<(u32, u32, Source), &'static str>,
}

fn mix(mut x: u64) -> u64 {
    // splitmix64: cheap, deterministic, well spread.
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The tick of fleet `seed` at `at` (a multiple of `interval` ms): required 2 (every third
/// fleet 3), spare a little above it with a daily tenant wave, an hour-long dip below required
/// every few days, a ten-minute outage (failed scrapes) every few days and 0.5 % stray
/// failures. Native numbers for even seeds, derived for odd ones.
pub fn tick(seed: u64, at: i64, interval: i64) -> Tick {
    let n = at.div_euclid(interval);
    let h = mix(seed.wrapping_mul(1_000_003) ^ n as u64);
    let latency_ms = 2 + (h % 40) as i64;
    let per_minute = (60_000 / interval).max(1);
    let minute = n / per_minute;
    if h.is_multiple_of(200) {
        return Tick {
            at,
            latency_ms,
            outcome: Err("timed out"),
        };
    }
    if (minute / 10 + seed as i64) % 431 == 7 {
        return Tick {
            at,
            latency_ms: 5_000,
            outcome: Err("could not connect"),
        };
    }
    let required = if seed.is_multiple_of(3) { 3 } else { 2 };
    let hour_of_day = (minute / 60) % 24;
    let wave = if (9..18).contains(&hour_of_day) { 0 } else { 1 };
    let dip = (minute / 60 + seed as i64 * 7) % 83 == 11;
    let spare = if dip {
        required - 1
    } else {
        required + wave + (h >> 8) as u32 % 2
    };
    let source = if seed.is_multiple_of(2) {
        Source::Native
    } else {
        Source::Derived
    };
    Tick {
        at,
        latency_ms,
        outcome: Ok((spare, required, source)),
    }
}

/// The tick as the scraper hands it to `record`: 3 voters, one learner per spare.
pub fn as_sample(t: &Tick) -> Sample {
    Sample {
        at: t.at,
        latency_ms: t.latency_ms as u64,
        outcome: match t.outcome {
            Ok((spare, required, source)) => Ok(Observation {
                absorption: None,
                source,
                spare,
                required,
                leader_id: Some(1),
                leader_url: Some("http://127.0.0.1:7443".into()),
                term: Some(7),
                members: (1..=3 + u64::from(spare))
                    .map(|id| Member::listed(id, format!("127.0.0.{id}:7443"), id <= 3))
                    .collect(),
                evidence: serde_json::Value::Null,
            }),
            Err(why) => Err(why.to_owned()),
        },
    }
}

/// One rollup row being folded.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rollup {
    bucket: i64,
    samples: i64,
    ok_samples: i64,
    spare_min: Option<i64>,
    spare_max: Option<i64>,
    spare_last: Option<i64>,
    required_min: Option<i64>,
    required_max: Option<i64>,
    required_last: Option<i64>,
    last_at: i64,
    source_last: &'static str,
}

impl Rollup {
    fn new(bucket: i64) -> Self {
        Rollup {
            bucket,
            samples: 0,
            ok_samples: 0,
            spare_min: None,
            spare_max: None,
            spare_last: None,
            required_min: None,
            required_max: None,
            required_last: None,
            last_at: i64::MIN,
            source_last: "none",
        }
    }

    /// `fold_into_rollup` for ticks arriving in time order.
    fn fold(&mut self, t: &Tick) {
        self.samples += 1;
        self.last_at = self.last_at.max(t.at);
        // A failed sample only counts: the source stays the newest ok sample's (`none` while
        // none was ok), as the last values do.
        if let Ok((spare, required, source)) = t.outcome {
            let (s, r) = (i64::from(spare), i64::from(required));
            self.ok_samples += 1;
            self.spare_min = Some(self.spare_min.map_or(s, |v| v.min(s)));
            self.spare_max = Some(self.spare_max.map_or(s, |v| v.max(s)));
            self.required_min = Some(self.required_min.map_or(r, |v| v.min(r)));
            self.required_max = Some(self.required_max.map_or(r, |v| v.max(r)));
            self.spare_last = Some(s);
            self.required_last = Some(r);
            self.source_last = source.as_str();
        }
    }
}

/// What one `generate` stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stored {
    pub raw: u64,
    pub minute: u64,
    pub five_minutes: u64,
    pub hour: u64,
    pub two_hours: u64,
    pub six_hours: u64,
}

/// Stores fleet `fleet_id`'s ticks (`seed`) from `from` to `to` every `interval` ms: raw rows
/// for ticks at or after `raw_since` (what the raw retention keeps), minute, five-minute, hour,
/// two-hour and six-hour rollups for all of them. `from` must be hour-aligned; a six-hour bucket it starts inside
/// holds only the ticks from `from` on, as the product's would for a fleet first scraped then.
pub async fn generate(
    pool: &AnyPool,
    fleet_id: i64,
    seed: u64,
    from: i64,
    to: i64,
    interval: i64,
    raw_since: i64,
) -> anyhow::Result<Stored> {
    anyhow::ensure!(from % 3_600_000 == 0, "from must be hour-aligned");
    let mut raw: Vec<Tick> = Vec::new();
    let mut minutes: Vec<Rollup> = Vec::new();
    let mut five_minutes: Vec<Rollup> = Vec::new();
    let mut hours: Vec<Rollup> = Vec::new();
    let mut two_hours: Vec<Rollup> = Vec::new();
    let mut six_hours: Vec<Rollup> = Vec::new();
    let mut stored = Stored::default();
    let mut at = from;
    while at < to {
        let t = tick(seed, at, interval);
        for (rows, width) in [
            (&mut minutes, 60_000),
            (&mut five_minutes, 300_000),
            (&mut hours, 3_600_000),
            (&mut two_hours, 7_200_000),
            (&mut six_hours, 21_600_000),
        ] {
            let bucket = at.div_euclid(width) * width;
            if rows.last().map(|r| r.bucket) != Some(bucket) {
                rows.push(Rollup::new(bucket));
            }
            rows.last_mut().expect("pushed").fold(&t);
        }
        if at >= raw_since {
            raw.push(t);
        }
        at += interval;
        if raw.len() + minutes.len() >= ROWS_PER_TX {
            stored.raw += write_raw(pool, fleet_id, &raw).await?;
            // The newest minute may still grow: keep it for the next flush.
            let open = minutes.pop();
            stored.minute += write_rollups(pool, fleet_id, Resolution::Minute, &minutes).await?;
            raw.clear();
            minutes.clear();
            minutes.extend(open);
        }
    }
    stored.raw += write_raw(pool, fleet_id, &raw).await?;
    stored.minute += write_rollups(pool, fleet_id, Resolution::Minute, &minutes).await?;
    stored.five_minutes +=
        write_rollups(pool, fleet_id, Resolution::FiveMinutes, &five_minutes).await?;
    stored.hour += write_rollups(pool, fleet_id, Resolution::Hour, &hours).await?;
    stored.two_hours += write_rollups(pool, fleet_id, Resolution::TwoHours, &two_hours).await?;
    stored.six_hours += write_rollups(pool, fleet_id, Resolution::SixHours, &six_hours).await?;
    Ok(stored)
}

async fn write_raw(pool: &AnyPool, fleet_id: i64, ticks: &[Tick]) -> anyhow::Result<u64> {
    let mut tx = headroom::db::begin_write(pool).await?;
    for chunk in ticks.chunks(ROWS_PER_INSERT) {
        let mut q = Sql::new(
            "INSERT INTO fleet_samples (fleet_id, at, ok, source, spare, required, voters, \
             learners, leader_id, term, latency_ms, error) VALUES ",
        );
        for t in chunk {
            q.push_row(|b| {
                b.push_bind(fleet_id).push_bind(t.at);
                match t.outcome {
                    Ok((spare, required, source)) => {
                        b.push_bind(true)
                            .push_bind(source.as_str())
                            .push_bind(i64::from(spare))
                            .push_bind(i64::from(required))
                            .push_bind(3_i64)
                            .push_bind(i64::from(spare))
                            .push_bind(1_i64)
                            .push_bind(7_i64)
                            .push_bind(t.latency_ms)
                            .push_bind(None::<String>);
                    }
                    Err(why) => {
                        b.push_bind(false)
                            .push_bind("none")
                            .push_bind(None::<i64>)
                            .push_bind(None::<i64>)
                            .push_bind(None::<i64>)
                            .push_bind(None::<i64>)
                            .push_bind(None::<i64>)
                            .push_bind(None::<i64>)
                            .push_bind(t.latency_ms)
                            .push_bind(why);
                    }
                }
            });
        }
        let (sql, args) = q.finish()?;
        sqlx::query_with(sqlx::AssertSqlSafe(sql), args)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(ticks.len() as u64)
}

async fn write_rollups(
    pool: &AnyPool,
    fleet_id: i64,
    resolution: Resolution,
    rows: &[Rollup],
) -> anyhow::Result<u64> {
    let mut tx = headroom::db::begin_write(pool).await?;
    for (i, chunk) in rows.chunks(ROWS_PER_INSERT).enumerate() {
        if i > 0 && i % (ROWS_PER_TX / ROWS_PER_INSERT) == 0 {
            tx.commit().await?;
            tx = headroom::db::begin_write(pool).await?;
        }
        let mut q = Sql::new(
            "INSERT INTO fleet_rollups (fleet_id, resolution, bucket, samples, ok_samples, \
             spare_min, spare_max, spare_last, required_min, required_max, required_last, \
             last_at, source_last) VALUES ",
        );
        for r in chunk {
            q.push_row(|b| {
                b.push_bind(fleet_id)
                    .push_bind(resolution.bucket_millis() / 1000)
                    .push_bind(r.bucket)
                    .push_bind(r.samples)
                    .push_bind(r.ok_samples)
                    .push_bind(r.spare_min)
                    .push_bind(r.spare_max)
                    .push_bind(r.spare_last)
                    .push_bind(r.required_min)
                    .push_bind(r.required_max)
                    .push_bind(r.required_last)
                    .push_bind(r.last_at)
                    .push_bind(r.source_last);
            });
        }
        let (sql, args) = q.finish()?;
        sqlx::query_with(sqlx::AssertSqlSafe(sql), args)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(rows.len() as u64)
}
