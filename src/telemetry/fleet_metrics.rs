//! The console's own families for `/metrics`, encoded with `prometheus-client` in the
//! Prometheus text format 0.0.4: each fleet's newest spare and required counts, whether a
//! deficit is open, whether the newest scrape succeeded, how long it took and when it ran;
//! whether the fleets' status could be read; and the scrape loops' totals (ticks, missed
//! ticks, failures) and their lag's 99th percentile.
//!
//! Rendering is pure: the handler reads the board and the scraper's counters and passes the
//! values in, so this module (process set-up, below the operations) imports neither the
//! operations nor the scraper. The board is one read of the one-row-per-fleet status, so a
//! scrape of `/metrics` costs the same with a day or a year of history behind each fleet.
//! The only per-fleet label is `fleet`, taken from the fleets table and escaped by the
//! library, so a fleet that does not exist never has a series.
//!
//! The rest of `/metrics` is text format 0.0.4 too, and the library's 0.0.4 encoder names a
//! counter's `# TYPE` line like its samples (`…_total`) and writes no OpenMetrics `# EOF`,
//! so the whole response stays one exposition in one format.

use prometheus_client::encoding::prometheus_text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::{Metric, Registry};
use std::sync::atomic::AtomicU64;

use crate::domain::capacity::FleetNow;

/// The one label of every fleet series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FleetLabel {
    fleet: String,
}

/// A gauge holding whole numbers (counts, 0/1 flags).
type Whole = Family<FleetLabel, Gauge>;
/// A gauge holding seconds, fractions kept.
type Seconds = Family<FleetLabel, Gauge<f64, AtomicU64>>;

/// The families, registered once per render: a render builds them from the board and
/// drops them, so a deleted fleet's series disappears with the fleet.
struct FleetFamilies {
    spare: Whole,
    required: Whole,
    deficit: Whole,
    scrape_success: Whole,
    scrape_latency: Seconds,
    last_scrape: Seconds,
}

impl FleetFamilies {
    fn register(registry: &mut Registry) -> Self {
        // The library appends the final full stop to each help text.
        let [spare, required, deficit, scrape_success] = [
            (
                "headroom_fleet_spare",
                "Warm spares at the fleet's newest successful scrape",
            ),
            (
                "headroom_fleet_required",
                "Warm spares required at the fleet's newest successful scrape",
            ),
            (
                "headroom_fleet_deficit",
                "1 while a headroom deficit is open for the fleet, else 0",
            ),
            (
                "headroom_fleet_scrape_success",
                "1 when the fleet's newest scrape succeeded, else 0",
            ),
        ]
        .map(|(name, help)| registered(registry, name, help));
        let [scrape_latency, last_scrape] = [
            (
                "headroom_fleet_scrape_latency_seconds",
                "Duration of the fleet's newest scrape",
            ),
            (
                "headroom_fleet_last_scrape_timestamp_seconds",
                "Unix time of the fleet's newest scrape",
            ),
        ]
        .map(|(name, help)| registered(registry, name, help));
        Self {
            spare,
            required,
            deficit,
            scrape_success,
            scrape_latency,
            last_scrape,
        }
    }

    fn set(&self, now: &FleetNow) {
        let label = FleetLabel {
            fleet: now.fleet.clone(),
        };
        // Unknown numbers (never scraped ok) get no sample: a made-up 0 would read as "no
        // spares" on a graph and fire alerts for a fleet that simply was not read yet.
        if let Some(spare) = now.spare {
            self.spare.get_or_create(&label).set(i64::from(spare));
        }
        if let Some(required) = now.required {
            self.required.get_or_create(&label).set(i64::from(required));
        }
        self.deficit
            .get_or_create(&label)
            .set(i64::from(now.deficit_since.is_some()));
        self.scrape_success
            .get_or_create(&label)
            .set(i64::from(scrape_succeeded(now)));
        if let Some(ms) = now.latency_ms {
            // Milliseconds fit an f64 exactly far beyond any real latency.
            #[allow(clippy::cast_precision_loss)]
            self.scrape_latency
                .get_or_create(&label)
                .set(ms as f64 / 1000.0);
        }
        if let Some(at) = now.last_scrape_at {
            #[allow(clippy::cast_precision_loss)]
            self.last_scrape
                .get_or_create(&label)
                .set(at as f64 / 1000.0);
        }
    }
}

/// A new empty family registered under `name`; the caller keeps the handle to fill it, the
/// registry keeps a clone of it to encode.
fn registered<M: Metric + Clone + Default>(registry: &mut Registry, name: &str, help: &str) -> M {
    let family = M::default();
    registry.register(name, help, family.clone());
    family
}

/// Whether the newest scrape (ok or not) is also the newest ok one.
fn scrape_succeeded(now: &FleetNow) -> bool {
    now.last_scrape_at.is_some() && now.last_scrape_at == now.last_ok_at
}

/// The scrape loops' totals at the moment `/metrics` is read, copied out of the scraper's
/// stats by the handler (this module sits below the scraper and never imports it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScrapeTotals {
    /// Scrapes started since the process started.
    pub ticks: u64,
    /// Scrapes that started more than one interval late.
    pub missed_ticks: u64,
    /// Scrapes that ended in an error sample.
    pub failures: u64,
    /// The 99th percentile of scrape lag in milliseconds; `None` before the first tick.
    pub lag_p99_ms: Option<u64>,
}

impl ScrapeTotals {
    /// Registers the three counters and, once there was a tick, the lag gauge. The values are
    /// constants for this one render: the totals live in the scraper, not here.
    fn register(&self, registry: &mut Registry) {
        // The encoder appends `_total` to each counter's name and the full stop to each help.
        for (name, help, total) in [
            (
                "headroom_scrape_ticks",
                "Fleet scrapes started since the process started",
                self.ticks,
            ),
            (
                "headroom_scrape_missed_ticks",
                "Fleet scrapes that started more than one scrape interval late",
                self.missed_ticks,
            ),
            (
                "headroom_scrape_failures",
                "Fleet scrapes that ended in an error sample",
                self.failures,
            ),
        ] {
            registry.register(name, help, ConstCounter::new(total));
        }
        // No tick yet, no lag: a made-up 0 would read as "perfectly on time".
        if let Some(ms) = self.lag_p99_ms {
            // Milliseconds fit an f64 exactly far beyond any real lag.
            #[allow(clippy::cast_precision_loss)]
            let seconds = ms as f64 / 1000.0;
            registry.register(
                "headroom_scrape_lag_p99_seconds",
                "99th percentile of how late fleet scrapes started against their schedule, since the process started",
                ConstGauge::new(seconds),
            );
        }
    }
}

/// The console's families in text format 0.0.4: the per-fleet gauges of `board` (`None`
/// when the fleets' status could not be read: the fleet series are then left out and
/// `headroom_fleet_board_ok` says 0, rather than failing the whole response), then the
/// scrape loops' totals.
pub fn render(board: Option<&[FleetNow]>, scrape: &ScrapeTotals) -> String {
    let mut registry = Registry::default();
    let families = FleetFamilies::register(&mut registry);
    for fleet in board.unwrap_or_default() {
        families.set(fleet);
    }
    registry.register(
        "headroom_fleet_board_ok",
        "1 when the fleets' status could be read for this scrape, else 0 (the fleet series are then absent)",
        ConstGauge::new(i64::from(board.is_some())),
    );
    scrape.register(&mut registry);
    let mut out = String::new();
    // Writing into a String cannot fail; the library's signature is for any writer.
    if let Err(e) = encode(&mut out, &registry) {
        tracing::warn!(error = %e, "cannot encode the console's metric families");
        return String::new();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::capacity::{Health, Source};

    fn fleet(name: &str) -> FleetNow {
        FleetNow {
            fleet: name.into(),
            status: Health::Healthy,
            pending: None,
            n_plus: Some(4),
            spare: Some(4),
            required: Some(3),
            source: Source::Native,
            leader_id: Some(1),
            leader: None,
            members: vec![],
            voters: None,
            learners: None,
            last_scrape_at: Some(1_796_000_000_250),
            last_ok_at: Some(1_796_000_000_250),
            last_error: None,
            latency_ms: Some(42),
            deficit_since: None,
            open_requests: 0,
            scrape_interval_secs: 15,
            absorption: None,
        }
    }

    #[test]
    fn a_healthy_fleet_has_every_gauge_with_its_values() {
        let text = render(Some(&[fleet("alpha")]), &ScrapeTotals::default());
        for line in [
            "headroom_fleet_spare{fleet=\"alpha\"} 4\n",
            "headroom_fleet_required{fleet=\"alpha\"} 3\n",
            "headroom_fleet_deficit{fleet=\"alpha\"} 0\n",
            "headroom_fleet_scrape_success{fleet=\"alpha\"} 1\n",
            "headroom_fleet_scrape_latency_seconds{fleet=\"alpha\"} 0.042\n",
            "headroom_fleet_last_scrape_timestamp_seconds{fleet=\"alpha\"} 1796000000.25\n",
            "# TYPE headroom_fleet_spare gauge\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
        assert!(!text.contains("# EOF"), "{text}");
    }

    #[test]
    fn a_failed_newest_scrape_keeps_the_last_numbers_and_reports_failure() {
        let mut f = fleet("beta");
        f.last_scrape_at = Some(1_796_000_015_000);
        f.last_error = Some("timed out".into());
        f.deficit_since = Some(1_796_000_000_000);
        let text = render(Some(&[f]), &ScrapeTotals::default());
        assert!(
            text.contains("headroom_fleet_scrape_success{fleet=\"beta\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("headroom_fleet_deficit{fleet=\"beta\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("headroom_fleet_spare{fleet=\"beta\"} 4\n"),
            "{text}"
        );
    }

    #[test]
    fn a_never_scraped_fleet_has_no_made_up_numbers() {
        let mut f = fleet("gamma");
        f.spare = None;
        f.required = None;
        f.last_scrape_at = None;
        f.last_ok_at = None;
        f.latency_ms = None;
        let text = render(Some(&[f]), &ScrapeTotals::default());
        assert!(!text.contains("headroom_fleet_spare{"), "{text}");
        assert!(!text.contains("headroom_fleet_required{"), "{text}");
        assert!(
            !text.contains("headroom_fleet_scrape_latency_seconds{"),
            "{text}"
        );
        assert!(
            text.contains("headroom_fleet_scrape_success{fleet=\"gamma\"} 0\n"),
            "{text}"
        );
    }

    #[test]
    fn hostile_label_values_are_escaped_by_the_library() {
        let text = render(Some(&[fleet("a\"b\\c\nd} 9")]), &ScrapeTotals::default());
        assert!(
            text.contains("headroom_fleet_spare{fleet=\"a\\\"b\\\\c\\nd} 9\"} 4\n"),
            "{text}"
        );
        // Every line is still one sample or one comment: the newline did not split one.
        assert!(text
            .lines()
            .all(|l| l.starts_with("# ") || l.starts_with("headroom_")));
    }

    /// Each sample line's name (before `{` or the space), and each `# TYPE` line's name.
    fn names(text: &str) -> (Vec<&str>, Vec<(&str, &str)>) {
        let mut samples = vec![];
        let mut types = vec![];
        for line in text.lines() {
            if let Some(ty) = line.strip_prefix("# TYPE ") {
                types.push(ty.split_once(' ').unwrap());
            } else if !line.starts_with('#') {
                samples.push(line.split(['{', ' ']).next().unwrap());
            }
        }
        (samples, types)
    }

    #[test]
    fn scrape_totals_are_text_format_counters_named_like_their_samples() {
        let totals = ScrapeTotals {
            ticks: 1_234,
            missed_ticks: 5,
            failures: 17,
            lag_p99_ms: Some(1_250),
        };
        let text = render(Some(&[fleet("alpha")]), &totals);
        for line in [
            "# TYPE headroom_scrape_ticks_total counter\nheadroom_scrape_ticks_total 1234\n",
            "# TYPE headroom_scrape_missed_ticks_total counter\nheadroom_scrape_missed_ticks_total 5\n",
            "# TYPE headroom_scrape_failures_total counter\nheadroom_scrape_failures_total 17\n",
            "# TYPE headroom_scrape_lag_p99_seconds gauge\nheadroom_scrape_lag_p99_seconds 1.25\n",
            "# TYPE headroom_fleet_board_ok gauge\nheadroom_fleet_board_ok 1\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
        // Text format 0.0.4: every sample belongs to a family declared by that very name
        // (OpenMetrics would declare `headroom_scrape_ticks` and end with `# EOF`).
        let (samples, types) = names(&text);
        for sample in samples {
            assert!(
                types.iter().any(|(name, _)| *name == sample),
                "{sample} has no TYPE line of its own:\n{text}"
            );
        }
        assert!(!text.contains("# EOF"), "{text}");
    }

    #[test]
    fn before_the_first_tick_the_counters_are_zero_and_there_is_no_lag() {
        let text = render(Some(&[]), &ScrapeTotals::default());
        assert!(text.contains("headroom_scrape_ticks_total 0\n"), "{text}");
        assert!(
            text.contains("headroom_scrape_failures_total 0\n"),
            "{text}"
        );
        assert!(!text.contains("headroom_scrape_lag_p99_seconds"), "{text}");
    }

    #[test]
    fn an_unreadable_board_says_so_and_keeps_the_scrape_totals() {
        let totals = ScrapeTotals {
            ticks: 3,
            ..ScrapeTotals::default()
        };
        let text = render(None, &totals);
        assert!(text.contains("headroom_fleet_board_ok 0\n"), "{text}");
        assert!(text.contains("headroom_scrape_ticks_total 3\n"), "{text}");
        let (samples, _) = names(&text);
        assert!(
            samples
                .iter()
                .all(|s| !s.starts_with("headroom_fleet_") || *s == "headroom_fleet_board_ok"),
            "{text}"
        );
    }
}
