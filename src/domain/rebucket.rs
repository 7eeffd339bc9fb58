//! Merging a series' points into wider buckets, so a chart draws at most a fixed number of
//! points whatever the series holds. Pure: the chart view calls it before drawing.

use super::capacity::Point;
use super::UnixMillis;

/// Merges `points` (sorted by `t`, inside `[from, to)`, one per `step`) into buckets of a step
/// wide enough that the range holds at most `max_points` (a multiple of the old step, so
/// buckets never straddle an old one). Returns the merged points and their step. Per bucket:
/// spare is the minimum of the ok points (a dip is what matters), spare_max their maximum,
/// required their maximum, ok when any point was ok, and source the bucket's last point's;
/// absorption keeps its worst verdict and the most machines needed.
/// A bucket of failed points only carries no numbers.
pub fn rebucket(
    points: &[Point],
    from: UnixMillis,
    to: UnixMillis,
    step: i64,
    max_points: i64,
) -> (Vec<Point>, i64) {
    let max_points = max_points.max(1);
    let step = step.max(1);
    let wanted = ((to - from) + max_points - 1) / max_points;
    let step = ((wanted + step - 1) / step).max(1) * step;
    let mut out: Vec<Point> = Vec::with_capacity(usize::try_from(max_points).unwrap_or(0) + 1);
    for p in points {
        let t = from + (p.t - from) / step * step;
        match out.last_mut() {
            Some(last) if last.t == t => {
                if p.ok {
                    last.spare = min_opt(last.spare, p.spare);
                    last.spare_max = last.spare_max.max(p.spare_max.or(p.spare));
                    last.required = last.required.max(p.required);
                    last.absorbed = match (last.absorbed, p.absorbed) {
                        (Some(a), Some(b)) => Some(a && b),
                        (a, b) => a.or(b),
                    };
                    last.machines_needed = last.machines_needed.max(p.machines_needed);
                    last.ok = true;
                }
                last.source = p.source;
            }
            _ => {
                let mut q = p.clone();
                q.t = t;
                if !q.ok {
                    (q.spare, q.spare_max, q.required) = (None, None, None);
                    (q.absorbed, q.machines_needed) = (None, None);
                }
                out.push(q);
            }
        }
    }
    (out, step)
}

/// The smaller of two optional values; a missing one does not count.
fn min_opt(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::capacity::test_points::{failed, ok};
    use crate::domain::capacity::Source;

    const FROM: i64 = 1_000_000_000;

    #[test]
    fn the_step_grows_to_a_whole_multiple_that_fits_the_points() {
        // 100 s of 1 s points in at most 10: 10 s buckets.
        let (out, step) = rebucket(&[], FROM, FROM + 100_000, 1_000, 10);
        assert!(out.is_empty());
        assert_eq!(step, 10_000);
        // 7 s steps: the smallest multiple of 7 s at least 10 s.
        assert_eq!(rebucket(&[], FROM, FROM + 100_000, 7_000, 10).1, 14_000);
        // Already coarse enough: kept.
        assert_eq!(rebucket(&[], FROM, FROM + 100_000, 20_000, 10).1, 20_000);
    }

    #[test]
    fn a_bucket_keeps_absorptions_worst_verdict_and_the_most_machines_needed() {
        let judged = |t: i64, absorbed: Option<bool>, needed: Option<u32>| {
            let mut p = ok(t, 1, 1);
            (p.absorbed, p.machines_needed) = (absorbed, needed);
            p
        };
        let points = [
            judged(FROM, Some(true), Some(0)),
            judged(FROM + 1_000, None, None),
            judged(FROM + 2_000, Some(false), Some(2)),
            judged(FROM + 3_000, Some(true), Some(0)),
            judged(FROM + 10_000, None, None),
            judged(FROM + 11_000, Some(true), Some(0)),
        ];
        let (out, _) = rebucket(&points, FROM, FROM + 20_000, 1_000, 2);
        assert_eq!(
            out.iter()
                .map(|p| (p.absorbed, p.machines_needed))
                .collect::<Vec<_>>(),
            [(Some(false), Some(2)), (Some(true), Some(0))]
        );
        let mut gap = failed(FROM);
        gap.absorbed = Some(false);
        let (out, _) = rebucket(&[gap], FROM, FROM + 20_000, 1_000, 2);
        assert_eq!(out[0].absorbed, None, "a failed bucket judges nothing");
    }

    #[test]
    fn a_bucket_keeps_the_lowest_spare_the_highest_spare_and_the_highest_required() {
        let points = [
            ok(FROM, 5, 2),
            ok(FROM + 1_000, 1, 3),
            ok(FROM + 9_999, 4, 1),
        ];
        let (out, _) = rebucket(&points, FROM, FROM + 100_000, 1_000, 10);
        assert_eq!(out.len(), 1);
        let b = &out[0];
        assert_eq!(b.t, FROM);
        assert_eq!(
            (b.spare, b.spare_max, b.required, b.ok),
            (Some(1), Some(5), Some(3), true)
        );
    }

    #[test]
    fn a_point_on_a_bucket_edge_starts_the_next_bucket() {
        let points = [
            ok(FROM + 9_000, 0, 9),
            ok(FROM + 10_000, 7, 1),
            ok(FROM + 19_000, 6, 2),
        ];
        let (out, _) = rebucket(&points, FROM, FROM + 100_000, 1_000, 10);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(
            (out[0].t, out[0].spare, out[0].required),
            (FROM, Some(0), Some(9))
        );
        assert_eq!(
            (out[1].t, out[1].spare, out[1].spare_max, out[1].required),
            (FROM + 10_000, Some(6), Some(7), Some(2))
        );
    }

    #[test]
    fn failed_points_add_no_numbers_and_a_bucket_of_them_is_a_gap() {
        let points = [
            failed(FROM),
            ok(FROM + 1_000, 3, 2),
            failed(FROM + 2_000),
            failed(FROM + 10_000),
            failed(FROM + 11_000),
        ];
        let (out, _) = rebucket(&points, FROM, FROM + 100_000, 1_000, 10);
        assert_eq!(out.len(), 2);
        assert_eq!(
            (out[0].spare, out[0].spare_max, out[0].required, out[0].ok),
            (Some(3), Some(3), Some(2), true),
            "a failed first point does not hide the ok one after it"
        );
        assert_eq!(
            out[0].source,
            Source::None,
            "the bucket's last point's source"
        );
        assert_eq!(
            (out[1].spare, out[1].required, out[1].ok),
            (None, None, false)
        );
    }

    #[test]
    fn a_wider_bucket_reads_spare_max_of_already_merged_points() {
        let mut merged = ok(FROM, 1, 1);
        merged.spare_max = Some(8);
        let points = [merged, ok(FROM + 1_000, 2, 1)];
        let (out, _) = rebucket(&points, FROM, FROM + 100_000, 1_000, 10);
        assert_eq!((out[0].spare, out[0].spare_max), (Some(1), Some(8)));
    }
}
