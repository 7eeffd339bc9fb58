//! Exact decimal arithmetic for money: the catalogue states prices as decimal text (Hetzner
//! sends ten places, `"0.0080000000"`), a plan's cost must equal count × price to the cent
//! and beyond, and a fleet's `monthly_budget` is compared with sums of them, so amounts are
//! fixed-point integers, never `f64`.

use std::fmt;

/// Decimal places kept internally: Hetzner's ten, with room to spare.
const SCALE_PLACES: u32 = 12;
const SCALE: i128 = 10_i128.pow(SCALE_PLACES);
/// Decimal places a cost is shown with.
pub const SHOWN_PLACES: u32 = 4;

/// A non-negative amount with `SCALE_PLACES` fixed decimal places.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Amount(i128);

/// Why a price's text is not a decimal amount.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a price (digits with an optional decimal point, at most 12 places)")]
pub struct BadPrice(pub String);

impl Amount {
    /// Nothing.
    pub const ZERO: Amount = Amount(0);

    /// Parses decimal text such as `12`, `0.0072` or `3.5700000000` (no sign, no exponent).
    pub fn parse(raw: &str) -> Result<Amount, BadPrice> {
        let bad = || BadPrice(raw.to_owned());
        let (int, frac) = raw.split_once('.').unwrap_or((raw, ""));
        let frac = frac.trim_end_matches('0');
        if int.is_empty()
            || int.len() > 18
            || !int.bytes().all(|b| b.is_ascii_digit())
            || !frac.bytes().all(|b| b.is_ascii_digit())
            || frac.len() > SCALE_PLACES as usize
            || (raw.contains('.') && raw.ends_with('.'))
        {
            return Err(bad());
        }
        let int: i128 = int.parse().map_err(|_| bad())?;
        let mut frac_value: i128 = 0;
        for (i, d) in frac.bytes().enumerate() {
            frac_value += i128::from(d - b'0') * 10_i128.pow(SCALE_PLACES - 1 - i as u32);
        }
        Ok(Amount(int * SCALE + frac_value))
    }

    /// This amount `count` times (exact: 18 integer digits × 20 fit an `i128` easily).
    pub fn times(self, count: u32) -> Amount {
        Amount(self.0 * i128::from(count))
    }

    /// The sum of two amounts, `None` past the largest (`i128` holds 10^26 units of 10^-12:
    /// sums of catalogue prices never get near it).
    pub fn plus(self, other: Amount) -> Option<Amount> {
        self.0.checked_add(other.0).map(Amount)
    }

    /// `self − other`; `None` when it would be negative (amounts are never).
    pub fn minus(self, other: Amount) -> Option<Amount> {
        (self >= other).then(|| Amount(self.0 - other.0))
    }

    /// Decimal text rounded half-up to `places` (≤ 12) decimal places.
    pub fn to_places(self, places: u32) -> String {
        let places = places.min(SCALE_PLACES);
        let unit = 10_i128.pow(SCALE_PLACES - places);
        let rounded = (self.0 + unit / 2) / unit;
        let div = 10_i128.pow(places);
        if places == 0 {
            return rounded.to_string();
        }
        format!(
            "{}.{:0width$}",
            rounded / div,
            rounded % div,
            width = places as usize
        )
    }
}

impl fmt::Display for Amount {
    /// The amount as a cost is shown: `SHOWN_PLACES` places.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_places(SHOWN_PLACES))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_times_hetzners_cx22_price_is_exact() {
        let hourly = Amount::parse("0.0080000000").unwrap();
        assert_eq!(hourly.times(3).to_string(), "0.0240");
        let monthly = Amount::parse("4.5100000000").unwrap();
        assert_eq!(monthly.times(3).to_string(), "13.5300");
    }

    #[test]
    fn binary_floats_would_get_this_wrong() {
        // 0.1 × 3 in f64 is 0.30000000000000004; the fixed point keeps it exact.
        let a = Amount::parse("0.1").unwrap().times(3);
        assert_eq!(a, Amount::parse("0.3").unwrap());
        assert_eq!(a.to_places(12), "0.300000000000");
    }

    #[test]
    fn rounding_to_four_places_is_half_up() {
        assert_eq!(Amount::parse("0.00005").unwrap().to_string(), "0.0001");
        assert_eq!(Amount::parse("0.00004999").unwrap().to_string(), "0.0000");
        assert_eq!(Amount::parse("1.99995").unwrap().to_string(), "2.0000");
        assert_eq!(Amount::parse("12").unwrap().to_string(), "12.0000");
    }

    #[test]
    fn twenty_machines_of_the_largest_price_do_not_overflow() {
        let a = Amount::parse("999999999999999999.999999999999").unwrap();
        assert_eq!(
            a.times(20).to_places(12),
            "19999999999999999999.999999999980"
        );
    }

    #[test]
    fn sums_and_differences_are_exact_and_never_negative() {
        let a = Amount::parse("249.50").unwrap();
        let b = Amount::parse("0.0072").unwrap();
        assert_eq!(a.plus(b).unwrap().to_places(4), "249.5072");
        assert_eq!(Amount::ZERO.plus(a), Some(a));
        assert_eq!(Amount(i128::MAX).plus(b), None);
        assert_eq!(a.minus(b).unwrap().to_places(4), "249.4928");
        assert_eq!(b.minus(a), None);
        assert_eq!(a.minus(a), Some(Amount::ZERO));
    }

    #[test]
    fn text_that_is_not_a_plain_decimal_is_refused() {
        for raw in [
            "",
            ".5",
            "5.",
            "-1",
            "+1",
            "1e3",
            "1,5",
            " 1",
            "NaN",
            "0.0000000000001",
            "1.2.3",
            "١",
        ] {
            assert!(Amount::parse(raw).is_err(), "{raw:?}");
        }
        // Trailing zeros beyond the scale are only zeros.
        assert!(Amount::parse("0.50000000000000000000").is_ok());
    }
}
