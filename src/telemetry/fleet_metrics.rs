//! Per-fleet gauges for `/metrics`, encoded with `prometheus-client`: each fleet's newest
//! spare and required counts, whether a deficit is open, whether the newest scrape succeeded,
//! how long it took and when it ran.
//!
//! The values come from the board (`crate::headroom::board::board`): one read of the
//! one-row-per-fleet status, so a scrape of `/metrics` costs the same with a day or a year
//! of history behind each fleet. The only label is `fleet`, taken from the fleets table and
//! escaped by the library, so a fleet that does not exist never has a series.
//!
//! The rest of `/metrics` is Prometheus text format 0.0.4; these families are written in the
//! shape both formats share (`# HELP`, `# TYPE … gauge`, samples) and without the OpenMetrics
//! `# EOF` marker, so the whole response stays one exposition in one format.

use prometheus_client::encoding::text::encode_registry;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use crate::context::Ctx;
use crate::domain::headroom::FleetNow;
use crate::domain::Caller;

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
        let f = Self {
            spare: Whole::default(),
            required: Whole::default(),
            deficit: Whole::default(),
            scrape_success: Whole::default(),
            scrape_latency: Seconds::default(),
            last_scrape: Seconds::default(),
        };
        // The library appends the final full stop to each help text.
        registry.register(
            "headroom_fleet_spare",
            "Warm spares at the fleet's newest successful scrape",
            f.spare.clone(),
        );
        registry.register(
            "headroom_fleet_required",
            "Warm spares required at the fleet's newest successful scrape",
            f.required.clone(),
        );
        registry.register(
            "headroom_fleet_deficit",
            "1 while a headroom deficit is open for the fleet, else 0",
            f.deficit.clone(),
        );
        registry.register(
            "headroom_fleet_scrape_success",
            "1 when the fleet's newest scrape succeeded, else 0",
            f.scrape_success.clone(),
        );
        registry.register(
            "headroom_fleet_scrape_latency_seconds",
            "Duration of the fleet's newest scrape",
            f.scrape_latency.clone(),
        );
        registry.register(
            "headroom_fleet_last_scrape_timestamp_seconds",
            "Unix time of the fleet's newest scrape",
            f.last_scrape.clone(),
        );
        f
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

/// Whether the newest scrape (ok or not) is also the newest ok one.
fn scrape_succeeded(now: &FleetNow) -> bool {
    now.last_scrape_at.is_some() && now.last_scrape_at == now.last_ok_at
}

/// The per-fleet gauge families for these fleets, in text format without an `# EOF`.
pub fn render(fleets: &[FleetNow]) -> String {
    let mut registry = Registry::default();
    let families = FleetFamilies::register(&mut registry);
    for fleet in fleets {
        families.set(fleet);
    }
    let mut out = String::new();
    // Writing into a String cannot fail; the library's signature is for any writer.
    if let Err(e) = encode_registry(&mut out, &registry) {
        tracing::warn!(error = %e, "cannot encode fleet gauges");
        return String::new();
    }
    out
}

/// Help and type lines of the gauge telling whether the board could be read.
const BOARD_OK_HEADER: &str = "# HELP headroom_fleet_board_ok 1 when the fleets' status could be read for this scrape, else 0 (the fleet series are then absent).\n# TYPE headroom_fleet_board_ok gauge\n";

/// Every fleet's gauges, read from the board as the system, plus `headroom_fleet_board_ok`.
/// A board that cannot be read leaves the fleet series out for this scrape (the request
/// counters are still worth scraping) and says so, rather than failing the whole response.
pub async fn render_for(ctx: &Ctx) -> String {
    match crate::headroom::board::board(ctx, &Caller::system()).await {
        Ok(fleets) => format!(
            "{}{BOARD_OK_HEADER}headroom_fleet_board_ok 1\n",
            render(&fleets)
        ),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the fleets' status for /metrics");
            format!("{BOARD_OK_HEADER}headroom_fleet_board_ok 0\n")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::headroom::{Health, Source};

    fn fleet(name: &str) -> FleetNow {
        FleetNow {
            fleet: name.into(),
            status: Health::Healthy,
            spare: Some(4),
            required: Some(3),
            source: Source::Native,
            leader_id: Some(1),
            leader: None,
            members: vec![],
            last_scrape_at: Some(1_796_000_000_250),
            last_ok_at: Some(1_796_000_000_250),
            last_error: None,
            latency_ms: Some(42),
            deficit_since: None,
            open_requests: 0,
            scrape_interval_secs: 15,
        }
    }

    #[test]
    fn a_healthy_fleet_has_every_gauge_with_its_values() {
        let text = render(&[fleet("alpha")]);
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
        let text = render(&[f]);
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
        let text = render(&[f]);
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
        let text = render(&[fleet("a\"b\\c\nd} 9")]);
        assert!(
            text.contains("headroom_fleet_spare{fleet=\"a\\\"b\\\\c\\nd} 9\"} 4\n"),
            "{text}"
        );
        // Every line is still one sample or one comment: the newline did not split one.
        assert!(text
            .lines()
            .all(|l| l.starts_with("# ") || l.starts_with("headroom_fleet_")));
    }
}
