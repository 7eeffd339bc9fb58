use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// Milliseconds since the unix epoch, UTC.
pub type UnixMillis = i64;

/// A length of time in whole milliseconds, the unit times are stored in; one too long for an
/// `i64` (only ever meaning "never") becomes `i64::MAX` rather than wrapping.
pub fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

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
        millis(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default(),
        )
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
        self.0.fetch_add(millis(by), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> UnixMillis {
        self.0.load(Ordering::SeqCst)
    }
}

/// Formats a time as RFC 3339 UTC with seconds, for pages and exports.
pub fn format_utc(at: UnixMillis) -> String {
    let mut out = String::with_capacity(20);
    if write_utc(&mut out, at, 'T') {
        out.push('Z');
        out
    } else {
        format_with_time_crate(at)
    }
}

/// Appends `YYYY-MM-DD` `sep` `HH:MM:SS` (UTC, the second `at` falls in) to `out`; `false`,
/// with nothing written, outside years 0 to 9999. Worked out by hand (Howard Hinnant's
/// days-to-civil algorithm) because charts and tables format one or two times per row and the
/// `time` crate's general formatter was a tenth of a chart's render; `format_utc` is checked
/// against it over generated instants.
pub fn write_utc(out: &mut String, at: UnixMillis, sep: char) -> bool {
    let secs = at.div_euclid(1000);
    let (days, of_day) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153; // 0 is March
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    if !(0..=9999).contains(&year) {
        return false;
    }
    let digits = |out: &mut String, v: i64, width: u32| {
        for place in (0..width).rev() {
            out.push(char::from(b'0' + (v / 10_i64.pow(place) % 10) as u8));
        }
    };
    digits(out, year, 4);
    out.push('-');
    digits(out, month, 2);
    out.push('-');
    digits(out, day, 2);
    out.push(sep);
    digits(out, of_day / 3600, 2);
    out.push(':');
    digits(out, of_day / 60 % 60, 2);
    out.push(':');
    digits(out, of_day % 60, 2);
    true
}

/// The general formatter, for years `write_utc` does not cover (and its oracle in tests).
fn format_with_time_crate(at: UnixMillis) -> String {
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
    fn millis_truncates_to_whole_milliseconds_and_saturates_instead_of_wrapping() {
        use std::time::Duration;
        assert_eq!(millis(Duration::from_micros(1_999)), 1);
        assert_eq!(millis(Duration::from_secs(90)), 90_000);
        // u64::MAX seconds is far past i64::MAX milliseconds: an `as` cast would wrap negative.
        assert_eq!(millis(Duration::MAX), i64::MAX);
        assert_eq!(millis(Duration::from_millis(u64::MAX)), i64::MAX);
    }

    #[test]
    fn formats_and_parses_round_trip() {
        let at = parse_utc("2026-12-02T09:30").unwrap();
        assert_eq!(format_utc(at), "2026-12-02T09:30:00Z");
        assert_eq!(parse_utc("2026-12-02T09:30:00Z"), Some(at));
        assert_eq!(parse_utc("yesterday"), None);
    }

    proptest::proptest! {
        /// The hand-written formatter says what the `time` crate says, to the second, for any
        /// instant from before year 0 to past year 9999 (where it hands over to the crate).
        #[test]
        fn the_fast_formatter_agrees_with_the_time_crate(
            at in -63_000_000_000_000_i64..254_000_000_000_000_i64,
        ) {
            proptest::prop_assert_eq!(format_utc(at), format_with_time_crate(at));
        }
    }

    #[test]
    fn the_edges_of_days_years_and_leap_days_are_formatted_as_the_time_crate_does() {
        for at in [
            0,
            -1,
            999,
            1000,
            951_782_399_999,     // 2000-02-28T23:59:59.999
            951_782_400_000,     // 2000-02-29
            4_107_542_399_000,   // 2100-02-28T23:59:59
            4_107_542_400_000,   // 2100-03-01 (no leap day)
            -62_167_219_200_000, // 0000-01-01
            -62_167_219_200_001,
            253_402_300_799_999, // 9999-12-31T23:59:59.999
            253_402_300_800_000,
        ] {
            assert_eq!(format_utc(at), format_with_time_crate(at), "{at}");
        }
    }
}
