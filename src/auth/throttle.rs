//! Failed-login throttling per account and per client address: after a number of failures
//! each further one locks the key for a doubling delay, capped; failures older than the window
//! are forgotten.

use std::time::Duration;

use sqlx::SqliteConnection;

use crate::config::ThrottleSettings;
use crate::db::throttle::{self as rows, ThrottleRow};
use crate::domain::UnixMillis;

/// Throttle key for an account name.
pub fn account_key(username: &str) -> String {
    format!("user:{username}")
}

/// Throttle key for a client address.
pub fn address_key(addr: &str) -> String {
    format!("addr:{addr}")
}

/// How long `key` is still locked, if it is.
pub async fn locked_for(
    conn: &mut SqliteConnection,
    key: &str,
    now: UnixMillis,
) -> sqlx::Result<Option<Duration>> {
    Ok(rows::get(conn, key)
        .await?
        .filter(|r| r.locked_until > now)
        .map(|r| Duration::from_millis(u64::try_from(r.locked_until - now).unwrap_or(0))))
}

/// Counts a failure against `key`; locks it once `threshold` failures are reached.
pub async fn record_failure(
    conn: &mut SqliteConnection,
    key: &str,
    threshold: u32,
    cfg: &ThrottleSettings,
    now: UnixMillis,
) -> sqlx::Result<()> {
    let window = i64::try_from(cfg.window.as_millis()).unwrap_or(i64::MAX);
    let previous = rows::get(conn, key)
        .await?
        .filter(|r| now - r.last_failure_at <= window)
        .map_or(0, |r| r.failures);
    let failures = previous + 1;
    let locked_until = lock_delay(failures, threshold, cfg).map_or(0, |d| {
        now + i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
    });
    rows::put(
        conn,
        key,
        ThrottleRow {
            failures,
            last_failure_at: now,
            locked_until,
        },
    )
    .await
}

/// Forgets the failures of `key`.
pub async fn clear(conn: &mut SqliteConnection, key: &str) -> sqlx::Result<()> {
    rows::clear(conn, key).await
}

/// The lock after the `failures`-th failure: none below the threshold, then base, 2×base, 4×base…
pub fn lock_delay(failures: i64, threshold: u32, cfg: &ThrottleSettings) -> Option<Duration> {
    let over = failures - i64::from(threshold);
    if over < 0 {
        return None;
    }
    let factor = 1_u32
        .checked_shl(u32::try_from(over).unwrap_or(31).min(20))
        .unwrap_or(u32::MAX);
    Some(cfg.base_delay.saturating_mul(factor).min(cfg.max_lock))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_starts_at_threshold_doubles_and_caps() {
        let cfg = crate::config::Settings::default().throttle;
        assert_eq!(lock_delay(4, 5, &cfg), None);
        assert_eq!(lock_delay(5, 5, &cfg), Some(cfg.base_delay));
        assert_eq!(lock_delay(6, 5, &cfg), Some(cfg.base_delay * 2));
        assert_eq!(lock_delay(500, 5, &cfg), Some(cfg.max_lock));
    }
}
