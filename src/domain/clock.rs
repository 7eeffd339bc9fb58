use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// Milliseconds since the unix epoch, UTC.
pub type UnixMillis = i64;

/// The source of "now". Time-dependent rules (session expiry, throttling) take a clock so tests
/// can move time instead of sleeping.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> UnixMillis;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> UnixMillis {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
    }
}

/// A clock that only moves when told to (tests).
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock showing `start`.
    pub fn new(start: UnixMillis) -> Self {
        Self(Arc::new(AtomicI64::new(start)))
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: std::time::Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> UnixMillis {
        self.0.load(Ordering::SeqCst)
    }
}

/// Formats a time as RFC 3339 UTC with seconds, for pages and exports.
pub fn format_utc(at: UnixMillis) -> String {
    let Ok(t) = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(at) * 1_000_000) else {
        return at.to_string();
    };
    let fmt = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    t.format(fmt).unwrap_or_else(|_| at.to_string())
}

/// Parses `YYYY-MM-DDTHH:MM` (an HTML `datetime-local` value, taken as UTC) or a full
/// RFC 3339 time.
pub fn parse_utc(raw: &str) -> Option<UnixMillis> {
    let raw = raw.trim();
    let local = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]");
    let local_s =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
    let parsed = time::PrimitiveDateTime::parse(raw, local)
        .or_else(|_| time::PrimitiveDateTime::parse(raw, local_s))
        .map(|p| p.assume_utc())
        .or_else(|_| {
            time::OffsetDateTime::parse(raw, &time::format_description::well_known::Rfc3339)
        })
        .ok()?;
    i64::try_from(parsed.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_round_trip() {
        let at = parse_utc("2026-12-02T09:30").unwrap();
        assert_eq!(format_utc(at), "2026-12-02T09:30:00Z");
        assert_eq!(parse_utc("2026-12-02T09:30:00Z"), Some(at));
        assert_eq!(parse_utc("yesterday"), None);
    }
}
