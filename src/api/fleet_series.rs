//! GET /api/v1/fleets/{name}/headroom: a fleet's headroom over a range as JSON points, read
//! from raw samples or rollups as the range needs (the same series the fleet page charts).

use actix_web::web::{self, Json};
use serde::{Deserialize, Serialize};

use super::errors::ApiError;
use crate::auth::Principal;
use crate::capacity::series;
use crate::domain::capacity::{Point, Resolution, Series, Source};
use crate::domain::clock::{format_utc, parse_utc};
use crate::domain::{FieldErrors, UnixMillis};
use crate::export::params::query_params;
use crate::state::AppState;

/// The default range: the last hour.
const DEFAULT_RANGE_MILLIS: i64 = 3_600_000;

/// Longest `step` accepted, in seconds (the longest range, 400 days).
const STEP_MAX_SECS: i64 = series::MAX_RANGE_MILLIS / 1000;

query_params! {
    /// The query string, as submitted; empty means the default. Unknown keys are refused (400), so
    /// a misspelt `setp` is not silently ignored.
    #[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
    #[serde(default, deny_unknown_fields)]
    #[into_params(parameter_in = Query)]
    pub struct HeadroomParams {
        /// Start, inclusive, RFC 3339 (`2026-12-02T09:30:00Z`; `2026-12-02T09:30` is taken as UTC).
        /// Default: one hour before `to`. At most 400 days before `to`.
        pub from: @utc_bound,
        /// End, exclusive, RFC 3339; later than `from`. Default: now. A `to` later than now
        /// ends the series at now (nothing after now is known).
        pub to: @utc_bound,
        /// Width of one point in whole seconds, 5 to 34560000, giving at most 2000 points over the
        /// range; read from the coarsest stored resolution whose bucket divides it (25200 = 7 h:
        /// hour rollups), rounded up to whole minutes or hours only where the raw samples (48 h by
        /// default) or minute rollups (14 d) of the range are no longer kept. Default: the shortest
        /// of 5, 10, 15, 30 s, 1, 2, 5, 10, 15 min, 1, 2, 3, 6, 12 h, 1, 2 d that is at least two
        /// scrape intervals and holds the range in at most 360 steps (1 h: 30 s at a 15 s
        /// interval, 24 h: 5 min, 7 d: 1 h, 30 d: 2 h, 90 d: 6 h).
        #[param(value_type = Option<i64>, minimum = 5, maximum = 34560000)]
        pub step: String,
    }
}

/// One point: the bucket `[t, t + step)`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HeadroomPointJson {
    /// Start of the bucket, RFC 3339, UTC.
    pub t: String,
    /// The fewest spares of any ok sample in the bucket; null when none was ok.
    pub spare: Option<u32>,
    /// The most spares of any ok sample in the bucket.
    pub spare_max: Option<u32>,
    /// The highest requirement of any ok sample in the bucket.
    pub required: Option<u32>,
    /// At least one sample in the bucket succeeded; `false` is a gap (every scrape failed).
    pub ok: bool,
    /// The source of the bucket's newest ok sample (`none`: every sample failed).
    pub source: Source,
    /// Absorption's worst verdict in the bucket: `false` when any sample found a node (or
    /// region) loss the fleet could not absorb; null when no sample judged it. The whole
    /// answer (worst loss, shortfall) is on the fleet's detail for its newest sample.
    pub absorbed: Option<bool>,
    /// The most restore machines any sample in the bucket needed to absorb every loss.
    pub machines_needed: Option<u32>,
}

impl From<&Point> for HeadroomPointJson {
    fn from(p: &Point) -> Self {
        Self {
            t: format_utc(p.t),
            spare: p.spare,
            spare_max: p.spare_max,
            required: p.required,
            ok: p.ok,
            source: p.source,
            absorbed: p.absorbed,
            machines_needed: p.machines_needed,
        }
    }
}

/// A fleet's headroom over a range, oldest point first. Points start at multiples of `step`
/// from the Unix epoch, so a point covers the same time from one request to the next. A step
/// without any sample has no point (a gap as much as a point with `ok: false`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HeadroomJson {
    pub fleet: String,
    /// Start of the first bucket, RFC 3339, UTC: the first multiple of `step` at or after the
    /// requested `from` (the bucket holding an unaligned `from` is left out, unless it is the
    /// only one; then its start).
    pub from: String,
    /// End of the series, RFC 3339, UTC: the requested `to`, or now when that is later (the
    /// window never reaches into the future), so the last bucket may be partial.
    pub to: String,
    /// When the fleet was created, RFC 3339, UTC. Its history starts there: time before it
    /// is no gap, and buckets wholly before it are never returned.
    pub fleet_created_at: String,
    /// Width of one point, in seconds.
    pub step: i64,
    /// What the points were read from: `raw` samples, `minute`, `five_minutes`, `hour`, `two_hours` or `six_hours` rollups
    /// (the coarsest whose bucket divides `step`).
    pub resolution: Resolution,
    pub points: Vec<HeadroomPointJson>,
}

impl From<&Series> for HeadroomJson {
    fn from(s: &Series) -> Self {
        Self {
            fleet: s.fleet.clone(),
            from: format_utc(s.from),
            to: format_utc(s.to),
            fleet_created_at: format_utc(s.fleet_created_at),
            step: s.step / 1000,
            resolution: s.resolution,
            points: s.points.iter().map(HeadroomPointJson::from).collect(),
        }
    }
}

/// The parsed query: the range and the step in milliseconds, if given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Parsed {
    from: UnixMillis,
    to: UnixMillis,
    step_ms: Option<i64>,
}

/// Parses every parameter, naming each one that breaks its rule; the range rules themselves
/// (order, width, points) are the operation's.
fn parse(q: &HeadroomParams, now: UnixMillis) -> Result<Parsed, FieldErrors> {
    let mut errors = FieldErrors::default();
    let mut time = |field: &str, raw: &str| -> Option<UnixMillis> {
        if raw.trim().is_empty() {
            return None;
        }
        let t = parse_utc(raw);
        if t.is_none() {
            errors.push(field, "must be an RFC 3339 time, e.g. 2026-12-02T09:30:00Z");
        }
        t
    };
    let from = time("from", &q.from);
    let to = time("to", &q.to);
    let step_ms = match q.step.trim() {
        "" => None,
        raw => match raw.parse::<i64>() {
            Ok(secs) if (5..=STEP_MAX_SECS).contains(&secs) => Some(secs * 1000),
            _ => {
                errors.push(
                    "step",
                    format!("must be a whole number of seconds from 5 to {STEP_MAX_SECS}"),
                );
                None
            }
        },
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    let (from, to) = match (from, to) {
        (Some(f), Some(t)) => (f, t),
        (Some(f), None) => (f, now),
        (None, Some(t)) => (t.saturating_sub(DEFAULT_RANGE_MILLIS), t),
        (None, None) => (now - DEFAULT_RANGE_MILLIS, now),
    };
    Ok(Parsed { from, to, step_ms })
}

/// A fleet's headroom over a range (viewer and up): spare (the bucket's minimum), required
/// (its maximum) and gaps, from raw samples or rollups as the range needs. All parameters are
/// optional: the last hour by default.
#[utoipa::path(get, path = "/api/v1/fleets/{name}/headroom", tag = "fleets",
    params(("name" = String, Path, description = "The fleet's name"), HeadroomParams),
    responses((status = 200, body = HeadroomJson),
        (status = 400, body = crate::http::Problem, content_type = "application/problem+json",
            description = "An unknown query parameter"),
        (status = 404, body = crate::http::Problem, content_type = "application/problem+json"),
        (status = 422, body = crate::http::Problem, content_type = "application/problem+json",
            description = "A parameter breaks its rule; the problem names it")))]
pub async fn get(
    state: web::Data<AppState>,
    principal: Principal,
    name: web::Path<String>,
    query: web::Query<HeadroomParams>,
) -> Result<Json<HeadroomJson>, ApiError> {
    let q = parse(&query, state.ctx.now()).map_err(ApiError::invalid)?;
    let s = series::series(
        &state.ctx,
        &principal.caller(),
        &name,
        q.from,
        q.to,
        q.step_ms,
    )
    .await?;
    Ok(Json(HeadroomJson::from(&s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_796_000_000_000;

    fn params(from: &str, to: &str, step: &str) -> HeadroomParams {
        HeadroomParams {
            from: from.into(),
            to: to.into(),
            step: step.into(),
        }
    }

    #[test]
    fn every_parameter_defaults_to_the_last_hour() {
        let q = parse(&params("", " ", ""), NOW).unwrap();
        assert_eq!(
            q,
            Parsed {
                from: NOW - 3_600_000,
                to: NOW,
                step_ms: None
            }
        );
        let to = parse_utc("2026-12-02T10:00:00Z").unwrap();
        let q = parse(&params("", "2026-12-02T10:00:00Z", "60"), NOW).unwrap();
        assert_eq!(
            q,
            Parsed {
                from: to - 3_600_000,
                to,
                step_ms: Some(60_000)
            }
        );
        let q = parse(&params("2026-12-02T10:00:00+02:00", "", ""), NOW).unwrap();
        assert_eq!((q.from, q.to), (to - 2 * 3_600_000, NOW));
    }

    #[test]
    fn bad_values_name_their_field_and_rule() {
        let e = parse(&params("yesterday", "2026-13-01T00:00:00Z", "0"), NOW).unwrap_err();
        assert!(e.for_field("from").unwrap().contains("RFC 3339"));
        assert!(e.for_field("to").unwrap().contains("RFC 3339"));
        assert!(e.for_field("step").unwrap().contains("from 5 to"));
        for step in [
            "-5",
            "4",
            "1e3",
            "15.5",
            "99999999999999999999",
            "34560001",
            "0x10",
        ] {
            let e = parse(&params("", "", step), NOW).unwrap_err();
            assert!(e.for_field("step").is_some(), "{step}");
        }
        assert_eq!(
            parse(&params("", "", "34560000"), NOW).unwrap().step_ms,
            Some(34_560_000_000)
        );
    }
}
