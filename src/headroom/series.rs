//! Chart series over any range, the recent-samples table and the provision events drawn on a
//! chart. Every read is one fleet over one time range, aggregated in SQL into step-wide
//! buckets, so what a chart costs follows its width (rows in the range of the resolution
//! read, at most a few thousand) and never the history kept.

use crate::context::Ctx;
use crate::db;
use crate::db::fleet_samples::{BucketRow, FleetRef};
use crate::domain::fleet::FleetSpec;
use crate::domain::headroom::{
    step_for, Annotation, Point, Resolution, SampleRow, Series, Source, CHART_POINTS,
    STEP_MIN_MILLIS,
};
use crate::domain::{Caller, FieldError, FieldErrors, Role, UnixMillis};
use crate::fleets::FleetsError;

/// Widest range a series covers: the hour rollups' default retention.
pub const MAX_RANGE_MILLIS: i64 = 400 * 24 * 3_600_000;

/// Most points a series with an explicit step may have (the API's bound on one answer).
pub const MAX_SERIES_POINTS: i64 = 2_000;

/// Most rows `recent_samples` returns.
pub const MAX_RECENT_SAMPLES: u32 = 200;

/// Most provision events a chart gets (the newest).
pub const MAX_ANNOTATIONS: u32 = 50;

/// Headroom of `fleet` over `[from, to)` (viewer and up). Without `step_ms` the step fits the
/// range in [`CHART_POINTS`] points and is at least two scrape intervals (a bucket narrower
/// than that would show a gap between two healthy ticks); with one, it is used as given,
/// rounded up to whole seconds and to whole rollup buckets. Raw samples are read when the step
/// allows it and the range is still within the raw retention, else minute, then hour rollups.
#[tracing::instrument(skip_all, fields(fleet.name = %fleet), err)]
pub async fn series(
    ctx: &Ctx,
    caller: &Caller,
    fleet: &str,
    from: UnixMillis,
    to: UnixMillis,
    step_ms: Option<i64>,
) -> Result<Series, FleetsError> {
    caller.require(Role::Viewer)?;
    check_range(from, to, step_ms)?;
    let mut conn = ctx.pool.acquire().await?;
    let (fleet_ref, spec) = find(&mut conn, fleet).await?;
    let plan = plan(
        Window { from, to },
        step_ms,
        spec.scrape_interval_secs,
        retained_since(ctx),
    )?;
    let rows = match plan.resolution {
        Resolution::Raw => {
            db::fleet_samples::raw_buckets(&mut conn, fleet_ref.id, plan.from, to, plan.step)
                .await?
        }
        res => {
            db::fleet_samples::rollup_buckets(
                &mut conn,
                fleet_ref.id,
                res,
                plan.from,
                to,
                plan.step,
            )
            .await?
        }
    };
    Ok(Series {
        fleet: spec.name,
        from: plan.from,
        to,
        step: plan.step,
        resolution: plan.resolution,
        points: rows
            .iter()
            .filter(|r| r.k >= 0)
            .map(|r| point(r, plan.from, plan.step))
            .collect(),
    })
}

/// The newest `limit` samples of `fleet` (1 to [`MAX_RECENT_SAMPLES`]), newest first (viewer
/// and up).
#[tracing::instrument(skip_all, fields(fleet.name = %fleet), err)]
pub async fn recent_samples(
    ctx: &Ctx,
    caller: &Caller,
    fleet: &str,
    limit: u32,
) -> Result<Vec<SampleRow>, FleetsError> {
    caller.require(Role::Viewer)?;
    if !(1..=MAX_RECENT_SAMPLES).contains(&limit) {
        return Err(FieldError::new(
            "limit",
            format!("must be a whole number from 1 to {MAX_RECENT_SAMPLES}"),
        )
        .into());
    }
    let mut conn = ctx.pool.acquire().await?;
    let (fleet_ref, _) = find(&mut conn, fleet).await?;
    let rows = db::fleet_samples::recent(&mut conn, fleet_ref.id, i64::from(limit)).await?;
    Ok(rows.into_iter().map(sample_row).collect())
}

/// The state changes of `fleet`'s provision requests in `[from, to)`, oldest first, at most
/// the newest [`MAX_ANNOTATIONS`] (viewer and up): the chart's markers. A request entering
/// `pending_approval` is labelled "requested"; every other change by the state entered.
#[tracing::instrument(skip_all, fields(fleet.name = %fleet), err)]
pub async fn annotations(
    ctx: &Ctx,
    caller: &Caller,
    fleet: &str,
    from: UnixMillis,
    to: UnixMillis,
) -> Result<Vec<Annotation>, FleetsError> {
    caller.require(Role::Viewer)?;
    check_range(from, to, None)?;
    let mut conn = ctx.pool.acquire().await?;
    let (_, spec) = find(&mut conn, fleet).await?;
    let mut events = db::fleet_samples::state_events(
        &mut conn,
        &spec.name,
        from,
        to,
        i64::from(MAX_ANNOTATIONS),
    )
    .await?;
    events.reverse();
    Ok(events
        .into_iter()
        .map(|e| Annotation {
            at: e.at,
            provision_id: e.provision_id,
            label: label(&e.state),
        })
        .collect())
}

/// The chart's word for entering `state`.
fn label(state: &str) -> String {
    match state {
        "pending_approval" => "requested".to_owned(),
        "" => "state changed".to_owned(),
        other => other.to_owned(),
    }
}

async fn find(
    conn: &mut sqlx::SqliteConnection,
    fleet: &str,
) -> Result<(FleetRef, FleetSpec), FleetsError> {
    let fleet_ref = db::fleet_samples::fleet_ref(conn, fleet)
        .await?
        .ok_or_else(|| FleetsError::NotFound(format!("fleet {fleet}")))?;
    let spec: FleetSpec = serde_json::from_str(&fleet_ref.spec)
        .map_err(|e| FleetsError::Internal(anyhow::anyhow!("stored spec of fleet {fleet}: {e}")))?;
    Ok((fleet_ref, spec))
}

/// The range rules, each naming the field it is about.
fn check_range(from: UnixMillis, to: UnixMillis, step_ms: Option<i64>) -> Result<(), FieldErrors> {
    let mut errors = FieldErrors::default();
    if to <= from {
        errors.push("to", "must be later than from");
    } else if to.saturating_sub(from) > MAX_RANGE_MILLIS {
        errors.push("from", "must be at most 400 days before to");
    }
    if let Some(step) = step_ms {
        if step < STEP_MIN_MILLIS {
            errors.push("step", "must be at least 5 seconds");
        } else if errors.is_empty() && ceil_div(to - from, step) > MAX_SERIES_POINTS {
            errors.push(
                "step",
                format!(
                    "must be at least (to − from) / {MAX_SERIES_POINTS}, here {} seconds: a \
                     series has at most {MAX_SERIES_POINTS} points",
                    ceil_div(ceil_div(to - from, MAX_SERIES_POINTS), 1000)
                ),
            );
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// A requested range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    from: UnixMillis,
    to: UnixMillis,
}

/// The oldest time each resolution still holds (rows older may exist until the next prune,
/// but none is promised).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Retained {
    raw: UnixMillis,
    minute: UnixMillis,
}

fn retained_since(ctx: &Ctx) -> Retained {
    let now = ctx.now();
    let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    Retained {
        raw: now.saturating_sub(ms(ctx.settings.retention.raw)),
        minute: now.saturating_sub(ms(ctx.settings.retention.minute)),
    }
}

/// What to read: the stored resolution, the step and the (bucket-aligned) start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    resolution: Resolution,
    step: i64,
    from: UnixMillis,
}

/// The coarsest resolution whose buckets are no wider than `step`.
fn resolution_for(step: i64) -> Resolution {
    if step >= Resolution::SixHours.bucket_millis() {
        Resolution::SixHours
    } else if step >= Resolution::Hour.bucket_millis() {
        Resolution::Hour
    } else if step >= Resolution::Minute.bucket_millis() {
        Resolution::Minute
    } else {
        Resolution::Raw
    }
}

/// `v / unit` rounded up, for `unit > 0` (std's `div_ceil` on signed integers is not stable
/// yet).
fn ceil_div(v: i64, unit: i64) -> i64 {
    -(-v).div_euclid(unit)
}

/// `v` rounded up to a multiple of `unit`.
fn round_up(v: i64, unit: i64) -> i64 {
    ceil_div(v, unit) * unit
}

/// Chooses resolution, step and start for a window (checked by `check_range`). Pure, so the
/// choices are unit-tested without a database.
fn plan(
    w: Window,
    step_ms: Option<i64>,
    interval_secs: u32,
    retained: Retained,
) -> Result<Plan, FieldErrors> {
    // Default: the chart's points, but never a bucket that a healthy fleet's ticks (with
    // their jitter) could leave empty, since an empty bucket is drawn as a gap.
    let wanted = match step_ms {
        Some(step) => step,
        None => step_for(w.to - w.from, CHART_POINTS)
            .0
            .max(2 * i64::from(interval_secs) * 1000),
    };
    let mut resolution = resolution_for(wanted);
    // Raw rows are gone before the retention; the rollups span the same time coarser. A
    // bucket coarser than the step is still right, only fewer points.
    if resolution == Resolution::Raw && w.from < retained.raw {
        resolution = Resolution::Minute;
    }
    if resolution == Resolution::Minute && w.from < retained.minute {
        resolution = Resolution::Hour;
    }
    let width = resolution.bucket_millis().max(1000);
    // Rollup buckets start on their width: aligning the start makes every point hold whole
    // buckets, never a bucket split between two points. Aligned up, so the range (and the
    // point count) never grows past what was asked; the part of a bucket left out is less
    // than one bucket. A range inside one bucket keeps that bucket.
    let up = round_up(w.from, width);
    let from = if up < w.to {
        up
    } else {
        w.from.div_euclid(width) * width
    };
    let mut step = round_up(wanted.max(width), width);
    if step_ms.is_none() {
        step = step.max(round_up(ceil_div(w.to - from, CHART_POINTS), width));
    } else if ceil_div(w.to - from, step) > MAX_SERIES_POINTS {
        let mut errors = FieldErrors::default();
        errors.push(
            "step",
            format!("gives more than {MAX_SERIES_POINTS} points over this range"),
        );
        return Err(errors);
    }
    Ok(Plan {
        resolution,
        step,
        from,
    })
}

fn narrow(v: Option<i64>) -> Option<u32> {
    v.and_then(|v| u32::try_from(v).ok())
}

fn point(r: &BucketRow, from: UnixMillis, step: i64) -> Point {
    let ok = r.ok_samples > 0;
    Point {
        t: from + r.k * step,
        spare: if ok { narrow(r.spare_min) } else { None },
        spare_max: if ok { narrow(r.spare_max) } else { None },
        required: if ok { narrow(r.required_max) } else { None },
        ok,
        source: r.source,
    }
}

fn sample_row(s: db::fleet_samples::StoredSample) -> SampleRow {
    SampleRow {
        at: s.at,
        ok: s.ok,
        source: Source::parse(&s.source),
        spare: narrow(s.spare),
        required: narrow(s.required),
        voters: narrow(s.voters),
        learners: narrow(s.learners),
        leader_id: s.leader_id.and_then(|v| u64::try_from(v).ok()),
        term: s.term.and_then(|v| u64::try_from(v).ok()),
        latency_ms: u64::try_from(s.latency_ms).unwrap_or(0),
        error: s.error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::headroom::Range;

    const HOUR: i64 = 3_600_000;
    const DAY: i64 = 24 * HOUR;
    const NOW: i64 = 1_796_000_000_000;

    fn retained() -> Retained {
        Retained {
            raw: NOW - 48 * HOUR,
            minute: NOW - 14 * DAY,
        }
    }

    fn last(range: Range) -> Window {
        Window {
            from: NOW - range.millis(),
            to: NOW,
        }
    }

    #[test]
    fn every_chart_range_fits_its_points_in_whole_buckets() {
        for r in Range::ALL {
            let p = plan(last(r), None, 15, retained()).unwrap();
            let width = p.resolution.bucket_millis().max(1000);
            assert_eq!(p.step % width, 0, "{r:?}: step {} of {width}", p.step);
            assert_eq!(p.from % width, 0, "{r:?}");
            assert!(p.from >= NOW - r.millis() && p.from - (NOW - r.millis()) < width);
            assert!(
                ceil_div(NOW - p.from, p.step) <= CHART_POINTS,
                "{r:?}: {} points",
                ceil_div(NOW - p.from, p.step)
            );
        }
        let res = |r| plan(last(r), None, 15, retained()).unwrap().resolution;
        assert_eq!(res(Range::H1), Resolution::Raw);
        assert_eq!(res(Range::H24), Resolution::Minute);
        assert_eq!(res(Range::D7), Resolution::Minute);
        assert_eq!(res(Range::D30), Resolution::Hour);
        assert_eq!(res(Range::D90), Resolution::SixHours);
    }

    #[test]
    fn the_default_step_is_at_least_two_scrape_intervals() {
        let p = plan(last(Range::H1), None, 15, retained()).unwrap();
        assert_eq!((p.step, p.resolution), (30_000, Resolution::Raw));
        let p = plan(last(Range::H1), None, 5, retained()).unwrap();
        assert_eq!(p.step, 10_000);
        // A fleet scraped hourly: minute buckets would be mostly empty, hence drawn as gaps.
        let p = plan(last(Range::H6), None, 3600, retained()).unwrap();
        assert_eq!((p.step, p.resolution), (2 * HOUR, Resolution::Hour));
    }

    #[test]
    fn a_range_older_than_the_raw_retention_reads_minute_then_hour_rollups() {
        let three_days_ago = Window {
            from: NOW - 3 * DAY - HOUR,
            to: NOW - 3 * DAY,
        };
        let p = plan(three_days_ago, None, 15, retained()).unwrap();
        assert_eq!((p.resolution, p.step), (Resolution::Minute, 60_000));
        let p = plan(three_days_ago, Some(5_000), 15, retained()).unwrap();
        assert_eq!((p.resolution, p.step), (Resolution::Minute, 60_000));
        let a_month_ago = Window {
            from: NOW - 30 * DAY - HOUR,
            to: NOW - 30 * DAY,
        };
        let p = plan(a_month_ago, None, 15, retained()).unwrap();
        assert_eq!((p.resolution, p.step), (Resolution::Hour, HOUR));
        // Within the raw window, the same hour is read raw.
        let p = plan(last(Range::H1), Some(5_000), 15, retained()).unwrap();
        assert_eq!((p.resolution, p.step), (Resolution::Raw, 5_000));
    }

    #[test]
    fn an_explicit_step_picks_the_coarsest_resolution_that_fits_and_whole_buckets() {
        let p = plan(last(Range::H24), Some(90_000), 15, retained()).unwrap();
        assert_eq!((p.resolution, p.step), (Resolution::Minute, 120_000));
        let p = plan(last(Range::D7), Some(2 * HOUR), 15, retained()).unwrap();
        assert_eq!((p.resolution, p.step), (Resolution::Hour, 2 * HOUR));
        let p = plan(last(Range::H24), Some(59_000), 15, retained()).unwrap();
        assert_eq!((p.resolution, p.step), (Resolution::Raw, 59_000));
    }

    #[test]
    fn range_rules_name_the_field_and_the_rule() {
        let e = check_range(NOW, NOW, None).unwrap_err();
        assert_eq!(e.for_field("to"), Some("must be later than from"));
        let e = check_range(NOW - 401 * DAY, NOW, None).unwrap_err();
        assert_eq!(
            e.for_field("from"),
            Some("must be at most 400 days before to")
        );
        assert!(check_range(NOW - 400 * DAY, NOW, None).is_ok());
        let e = check_range(NOW - HOUR, NOW, Some(4_999)).unwrap_err();
        assert_eq!(e.for_field("step"), Some("must be at least 5 seconds"));
        let e = check_range(NOW - 30 * DAY, NOW, Some(5_000)).unwrap_err();
        assert!(e.for_field("step").unwrap().contains("at most 2000 points"));
        assert!(check_range(NOW - HOUR, NOW, Some(5_000)).is_ok());
        assert!(check_range(i64::MIN, i64::MAX, None).is_err());
    }

    #[test]
    fn a_bucket_without_an_ok_sample_is_a_gap_with_the_newest_source() {
        let row = BucketRow {
            k: 3,
            spare_min: None,
            spare_max: None,
            required_max: None,
            ok_samples: 0,
            source: Source::None,
        };
        let p = point(&row, 1_000, 10);
        assert_eq!((p.t, p.ok, p.spare, p.required), (1_030, false, None, None));
        let row = BucketRow {
            ok_samples: 2,
            spare_min: Some(1),
            spare_max: Some(4),
            required_max: Some(2),
            source: Source::Derived,
            ..row
        };
        let p = point(&row, 0, 10);
        assert_eq!(
            (p.ok, p.spare, p.spare_max, p.required, p.source),
            (true, Some(1), Some(4), Some(2), Source::Derived)
        );
    }

    #[test]
    fn an_unaligned_start_is_aligned_up_unless_the_range_is_inside_one_bucket() {
        // 20 s past a whole minute.
        let three_days_ago = NOW - 3 * DAY - NOW.rem_euclid(60_000) + 20_000;
        let w = Window {
            from: three_days_ago,
            to: three_days_ago + 2 * 60_000,
        };
        let p = plan(w, None, 15, retained()).unwrap();
        assert_eq!(p.from, three_days_ago + 40_000);
        let inside = Window {
            from: three_days_ago,
            to: three_days_ago + 10_000,
        };
        let p = plan(inside, None, 15, retained()).unwrap();
        assert_eq!(p.from, three_days_ago - 20_000);
        assert_eq!(
            (ceil_div(7, 2), ceil_div(-7, 2), ceil_div(6, 2)),
            (4, -3, 3)
        );
    }

    #[test]
    fn labels_name_the_state_entered() {
        assert_eq!(label("pending_approval"), "requested");
        assert_eq!(label("superseded"), "superseded");
        assert_eq!(label(""), "state changed");
    }
}
