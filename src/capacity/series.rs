//! Chart series over any range, the recent-samples table and the provision events drawn on a
//! chart. Every read is one fleet over one time range, aggregated in SQL into step-wide
//! buckets, so what a chart costs follows its width (rows in the range of the resolution
//! read, at most a few thousand) and never the history kept.

use crate::context::Ctx;
use crate::db;
use crate::db::fleet_samples::{BucketRow, FleetRef};
use crate::domain::capacity::{
    step_for, Annotation, Point, Resolution, SampleRow, Series, Source, CHART_POINTS,
    STEP_MIN_MILLIS,
};
use crate::domain::fleet::FleetSpec;
use crate::domain::ProvisionState;
use crate::domain::{millis, Caller, FieldError, FieldErrors, Role, UnixMillis};
use crate::error::OpError;

/// Widest range a series covers: the hour rollups' default retention.
pub const MAX_RANGE_MILLIS: i64 = 400 * 24 * 3_600_000;

/// Most points a series with an explicit step may have (the API's bound on one answer).
pub const MAX_SERIES_POINTS: i64 = 2_000;

/// Most rows `recent_samples` returns.
pub const MAX_RECENT_SAMPLES: u32 = 200;

/// Most provision events a chart gets (the newest).
pub const MAX_ANNOTATIONS: u32 = 50;

/// Headroom of `fleet` over `[from, to)` (viewer and up). Without `step_ms` the step is the
/// shortest of [`crate::domain::capacity::DEFAULT_STEPS`] that holds the range in at most
/// [`CHART_POINTS`] whole steps and is at least two scrape intervals (a bucket narrower than
/// that would show a gap between two healthy ticks); with one, it is used as given (whole
/// seconds). Either way the points are read from the coarsest stored resolution whose bucket
/// divides the step (six-hour, two-hour, hour, five-minute, minute rollups, else raw samples) — rounded up to whole
/// minutes or hours only when the range is older than the raw or minute retention.
///
/// The grid is epoch-aligned: points start at multiples of the step, so a point covers the
/// same time (and shows the same value) from one poll to the next. The bucket holding `from`
/// is dropped when `from` is not on the grid (it would show only part of its time), unless it
/// is the only one. The series ends at `to`, or now when `to` is later (nothing after now is
/// known, and a window drawn past it would squeeze the present into its middle): the last
/// bucket may be partial. Buckets wholly before the fleet was created are left out (they hold
/// an earlier fleet's history, if any, never this one's gaps).
#[tracing::instrument(skip_all, fields(fleet.name = %fleet), err)]
pub async fn series(
    ctx: &Ctx,
    caller: &Caller,
    fleet: &str,
    from: UnixMillis,
    to: UnixMillis,
    step_ms: Option<i64>,
) -> Result<Series, OpError> {
    caller.require(Role::Viewer)?;
    check_range(from, to, step_ms)?;
    let mut conn = ctx.pool.acquire().await?;
    let (fleet_ref, spec) = find(&mut conn, fleet).await?;
    let plan = plan(
        Window {
            from,
            to: end_at_now(from, to, ctx.now()),
        },
        step_ms,
        spec.scrape_interval_secs(),
        retained_since(ctx),
    );
    let rows = match plan.resolution {
        Resolution::Raw => {
            db::fleet_samples::raw_buckets(&mut conn, fleet_ref.id, plan.from, plan.to, plan.step)
                .await?
        }
        res => {
            db::fleet_samples::rollup_buckets(
                &mut conn,
                fleet_ref.id,
                res,
                plan.from,
                plan.to,
                plan.step,
            )
            .await?
        }
    };
    Ok(Series {
        fleet: spec.name().to_string(),
        from: plan.from,
        to: plan.to,
        step: plan.step,
        resolution: plan.resolution,
        fleet_created_at: fleet_ref.created_at,
        points: rows
            .iter()
            .filter(|r| r.k >= 0)
            .map(|r| point(r, plan.from, plan.step))
            .filter(|p| p.t + plan.step > fleet_ref.created_at)
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
) -> Result<Vec<SampleRow>, OpError> {
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

/// `fleet`'s provision requests alive in `[from, to)`, oldest first, at most the newest
/// [`MAX_ANNOTATIONS`] (viewer and up): the chart's spans, one a request from its filing to
/// its end. Requests older than the fleet (an earlier fleet of the same name) are left out.
#[tracing::instrument(skip_all, fields(fleet.name = %fleet), err)]
pub async fn annotations(
    ctx: &Ctx,
    caller: &Caller,
    fleet: &str,
    from: UnixMillis,
    to: UnixMillis,
) -> Result<Vec<Annotation>, OpError> {
    caller.require(Role::Viewer)?;
    check_range(from, to, None)?;
    let mut conn = ctx.pool.acquire().await?;
    let (fleet_ref, spec) = find(&mut conn, fleet).await?;
    let mut rows = db::fleet_samples::request_spans(
        &mut conn,
        spec.name(),
        from,
        to,
        i64::from(MAX_ANNOTATIONS),
        fleet_ref.created_at,
    )
    .await?;
    rows.reverse();
    rows.into_iter()
        .map(|r| {
            let state = r.state.parse::<ProvisionState>().map_err(|_| {
                anyhow::anyhow!(
                    "provision {}: unknown stored state {:?}",
                    r.provision_id,
                    r.state
                )
            })?;
            Ok(Annotation {
                provision_id: r.provision_id,
                requested_at: r.created_at,
                finished_at: r.finished_at,
                state,
            })
        })
        .collect()
}

/// Where a window asked to end at `to` does end: at `to`, or at `now` when `to` is later and
/// the window started before now (a window wholly in the future is left as asked: it is
/// empty, and its rules are still checked).
fn end_at_now(from: UnixMillis, to: UnixMillis, now: UnixMillis) -> UnixMillis {
    if to > now && from < now {
        now
    } else {
        to
    }
}

async fn find(
    conn: &mut sqlx::AnyConnection,
    fleet: &str,
) -> Result<(FleetRef, FleetSpec), OpError> {
    let fleet_ref = db::fleet_samples::fleet_ref(conn, fleet)
        .await?
        .ok_or_else(|| OpError::NotFound(format!("fleet {fleet}")))?;
    let spec = FleetSpec::from_stored(fleet, &fleet_ref.spec).map_err(anyhow::Error::from)?;
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
    Retained {
        raw: now.saturating_sub(millis(ctx.settings.retention.raw)),
        minute: now.saturating_sub(millis(ctx.settings.retention.minute)),
    }
}

/// What to read: the stored resolution, the step and the grid-aligned range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    resolution: Resolution,
    step: i64,
    from: UnixMillis,
    to: UnixMillis,
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

/// The finest bucket the rows of a range starting at `from` are still kept at: raw rows
/// (whole seconds), else minute, else hour rollups.
fn finest_kept(from: UnixMillis, retained: Retained) -> i64 {
    if from >= retained.raw {
        1_000
    } else if from >= retained.minute {
        Resolution::Minute.bucket_millis()
    } else {
        Resolution::Hour.bucket_millis()
    }
}

/// Chooses resolution, step and grid for a window (checked by `check_range`). Pure, so the
/// choices are unit-tested without a database.
fn plan(w: Window, step_ms: Option<i64>, interval_secs: u32, retained: Retained) -> Plan {
    // Raw rows are gone before their retention, minute rows before theirs: the step is then a
    // whole number of the finest rows still kept (every default step of a minute or more
    // already is one).
    let finest = finest_kept(w.from, retained);
    let step = match step_ms {
        // Never a bucket that a healthy fleet's ticks (with their jitter) could leave empty,
        // since an empty bucket is drawn as a gap.
        None => {
            let at_least = (2 * i64::from(interval_secs) * 1000).max(finest);
            step_for(w.to - w.from, CHART_POINTS, at_least).0
        }
        Some(step) => round_up(step.max(STEP_MIN_MILLIS), finest),
    };
    let resolution = Resolution::dividing(step);
    // Epoch-aligned edges: the bucket holding `from` is left out unless it is the only one
    // (it would hold only part of its time, and keeping it would make a range of N whole
    // steps N + 1 points); the bucket holding `to` is kept whole.
    let first = round_up(w.from, step);
    let from = if first < w.to {
        first
    } else {
        w.from.div_euclid(step) * step
    };
    // At most `ceil((w.to − w.from) / step)` buckets: `check_range` bounds an explicit step's.
    // The window ends where it was asked to (now, for the last N hours): the last bucket may
    // be partial, and nothing is drawn in the future.
    Plan {
        resolution,
        step,
        from,
        to: w.to,
    }
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
        absorbed: r.absorbed_min.filter(|_| ok).map(|v| v != 0),
        machines_needed: if ok {
            narrow(r.machines_needed_max)
        } else {
            None
        },
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
    use crate::domain::capacity::Range;

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

    const MINUTE: i64 = 60_000;

    #[test]
    fn every_chart_range_gets_a_nice_step_read_from_whole_rows_of_the_coarsest_resolution() {
        let p = |r| plan(last(r), None, 15, retained());
        let got: Vec<(i64, Resolution, i64)> = Range::ALL
            .into_iter()
            .map(|r| {
                let p = p(r);
                (p.step, p.resolution, ceil_div(p.to - p.from, p.step))
            })
            .collect();
        assert_eq!(
            got,
            [
                (30_000, Resolution::Raw, 30),
                (30_000, Resolution::Raw, 120),
                (MINUTE, Resolution::Minute, 360),
                (5 * MINUTE, Resolution::FiveMinutes, 288),
                (HOUR, Resolution::Hour, 168),
                (2 * HOUR, Resolution::TwoHours, 360),
                (6 * HOUR, Resolution::SixHours, 360),
            ]
        );
        for r in Range::ALL {
            let p = p(r);
            // The grid on the step, the first whole bucket first, and the window ending at
            // now: the newest bucket is kept, partial.
            assert_eq!(p.from % p.step, 0, "{r:?}");
            assert!(p.from >= NOW - r.millis() && p.from - (NOW - r.millis()) < p.step);
            assert_eq!(p.to, NOW, "{r:?}: the window ends at now");
        }
    }

    #[test]
    fn the_grid_does_not_move_with_now() {
        // Two polls 7 s apart (and one a whole step later): the points they share start at the
        // same instants, so each shows the same bucket.
        for r in Range::ALL {
            let a = plan(last(r), None, 15, retained());
            let later = Window {
                from: NOW + 7_000 - r.millis(),
                to: NOW + 7_000,
            };
            let b = plan(later, None, 15, retained());
            assert_eq!(a.step, b.step, "{r:?}");
            assert_eq!((b.from - a.from) % a.step, 0, "{r:?}");
            let c = plan(
                Window {
                    from: a.from + a.step,
                    to: NOW + a.step,
                },
                None,
                15,
                retained(),
            );
            assert_eq!(c.from, a.from + a.step, "{r:?}");
        }
        // An hour of 30 s points: 120 buckets, the newest partial unless now is on the grid.
        let p = plan(last(Range::H1), None, 15, retained());
        assert_eq!(ceil_div(p.to - p.from, p.step), 120);
    }

    #[test]
    fn a_range_a_little_wider_than_90_days_keeps_six_hour_points() {
        let w = Window {
            from: NOW - 90 * DAY - 7 * MINUTE,
            to: NOW,
        };
        let p = plan(w, None, 15, retained());
        assert_eq!((p.step, p.resolution), (6 * HOUR, Resolution::SixHours));
        let points = ceil_div(p.to - p.from, p.step);
        assert!((360..=361).contains(&points), "{points}");
    }

    #[test]
    fn the_default_step_is_at_least_two_scrape_intervals() {
        let p = plan(last(Range::H1), None, 15, retained());
        assert_eq!((p.step, p.resolution), (30_000, Resolution::Raw));
        let p = plan(last(Range::H1), None, 5, retained());
        assert_eq!(p.step, 10_000);
        // 45 s: 90 s is no default step; two minutes, from minute rows.
        let p = plan(last(Range::H1), None, 45, retained());
        assert_eq!((p.step, p.resolution), (2 * MINUTE, Resolution::Minute));
        // A fleet scraped hourly: minute buckets would be mostly empty, hence drawn as gaps.
        let p = plan(last(Range::H6), None, 3600, retained());
        assert_eq!((p.step, p.resolution), (2 * HOUR, Resolution::TwoHours));
    }

    #[test]
    fn a_range_older_than_the_raw_retention_reads_minute_then_hour_rollups() {
        let three_days_ago = Window {
            from: NOW - 3 * DAY - HOUR,
            to: NOW - 3 * DAY,
        };
        let p = plan(three_days_ago, None, 15, retained());
        assert_eq!((p.resolution, p.step), (Resolution::Minute, MINUTE));
        let p = plan(three_days_ago, Some(5_000), 15, retained());
        assert_eq!((p.resolution, p.step), (Resolution::Minute, MINUTE));
        let p = plan(three_days_ago, Some(90_000), 15, retained());
        assert_eq!((p.resolution, p.step), (Resolution::Minute, 2 * MINUTE));
        let a_month_ago = Window {
            from: NOW - 30 * DAY - HOUR,
            to: NOW - 30 * DAY,
        };
        let p = plan(a_month_ago, None, 15, retained());
        assert_eq!((p.resolution, p.step), (Resolution::Hour, HOUR));
        let p = plan(a_month_ago, Some(90 * MINUTE), 15, retained());
        assert_eq!((p.resolution, p.step), (Resolution::TwoHours, 2 * HOUR));
        // Within the raw window, the same hour is read raw.
        let p = plan(last(Range::H1), Some(5_000), 15, retained());
        assert_eq!((p.resolution, p.step), (Resolution::Raw, 5_000));
    }

    #[test]
    fn an_explicit_step_is_kept_and_read_from_the_coarsest_resolution_dividing_it() {
        let p = |w, step| {
            let p = plan(w, Some(step), 15, retained());
            (p.resolution, p.step)
        };
        // 7 h: hour rows, seven a point (not rounded up to 12 h of six-hour rows).
        assert_eq!(p(last(Range::D7), 7 * HOUR), (Resolution::Hour, 7 * HOUR));
        assert_eq!(
            p(last(Range::D30), 12 * HOUR),
            (Resolution::SixHours, 12 * HOUR)
        );
        assert_eq!(
            p(last(Range::D7), 2 * HOUR),
            (Resolution::TwoHours, 2 * HOUR)
        );
        assert_eq!(
            p(last(Range::H24), 30 * MINUTE),
            (Resolution::FiveMinutes, 30 * MINUTE)
        );
        assert_eq!(
            p(last(Range::H24), 3 * MINUTE),
            (Resolution::Minute, 3 * MINUTE)
        );
        // 90 s is no whole number of minutes: raw rows, while they are kept.
        assert_eq!(p(last(Range::H24), 90_000), (Resolution::Raw, 90_000));
        assert_eq!(p(last(Range::H24), 59_000), (Resolution::Raw, 59_000));
        // Whole seconds.
        assert_eq!(p(last(Range::H1), 5_500), (Resolution::Raw, 6_000));
        let p = plan(last(Range::D7), Some(7 * HOUR), 15, retained());
        assert_eq!((p.from % (7 * HOUR), p.to), (0, NOW));
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
    fn a_bucket_without_an_ok_sample_is_a_gap_with_source_none() {
        let row = BucketRow {
            k: 3,
            spare_min: None,
            spare_max: None,
            required_max: None,
            ok_samples: 0,
            source: Source::None,
            absorbed_min: Some(0),
            machines_needed_max: Some(3),
        };
        let p = point(&row, 1_000, 10);
        assert_eq!((p.t, p.ok, p.spare, p.required), (1_030, false, None, None));
        assert_eq!(
            (p.absorbed, p.machines_needed),
            (None, None),
            "a gap judges nothing"
        );
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
        assert_eq!((p.absorbed, p.machines_needed), (Some(false), Some(3)));
        let row = BucketRow {
            absorbed_min: None,
            machines_needed_max: None,
            ..row
        };
        assert_eq!(point(&row, 0, 10).absorbed, None, "not judged");
    }

    #[test]
    fn an_unaligned_start_is_aligned_up_unless_the_range_is_inside_one_bucket() {
        // 20 s past a whole minute.
        let three_days_ago = NOW - 3 * DAY - NOW.rem_euclid(MINUTE) + 20_000;
        let w = Window {
            from: three_days_ago,
            to: three_days_ago + 2 * MINUTE,
        };
        let p = plan(w, None, 15, retained());
        assert_eq!(
            (p.from, p.to),
            (three_days_ago + 40_000, three_days_ago + 2 * MINUTE)
        );
        let inside = Window {
            from: three_days_ago,
            to: three_days_ago + 10_000,
        };
        let p = plan(inside, None, 15, retained());
        assert_eq!(
            (p.from, p.to),
            (three_days_ago - 20_000, three_days_ago + 10_000)
        );
        assert_eq!(
            (ceil_div(7, 2), ceil_div(-7, 2), ceil_div(6, 2)),
            (4, -3, 3)
        );
    }

    #[test]
    fn a_window_ends_at_now_never_in_the_future() {
        assert_eq!(end_at_now(NOW - HOUR, NOW + DAY, NOW), NOW);
        assert_eq!(end_at_now(NOW - HOUR, NOW - MINUTE, NOW), NOW - MINUTE);
        // Wholly in the future: left as asked (empty), not turned backwards.
        assert_eq!(end_at_now(NOW + HOUR, NOW + DAY, NOW), NOW + DAY);
        // Every range's plan, the clock at an unaligned instant: the right edge is now, the
        // left edge the first whole bucket, so the last bucket is partial.
        let now = NOW + 7_777;
        for r in Range::ALL {
            let w = Window {
                from: now - r.millis(),
                to: now,
            };
            let p = plan(w, None, 15, retained());
            assert_eq!(p.to, now, "{r:?}");
            assert_eq!(p.from % p.step, 0, "{r:?}");
            assert!(p.from >= w.from && p.from - w.from < p.step, "{r:?}");
        }
    }
}
