//! Password-attempt throttling per account, per client address and per account's
//! password-change form.
//!
//! An attempt is counted *before* its password is checked, in the same write transaction as
//! the lock check. Checking first and recording the failure after argon2 (in another
//! transaction) let 40 parallel guesses all pass the check before any failure was written.
//! Counted this way, once a key has had its `threshold` attempts every further one is refused
//! until the lock expires, however many arrive at once. Each attempt from the threshold on
//! locks the key for a doubling delay, capped; attempts older than the window are forgotten.
//! An attempt that turns out legitimate (or never reached argon2) is taken back.

use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

use sqlx::{AnyConnection, AnyPool};

use crate::config::ThrottleSettings;
use crate::db;
use crate::db::throttle::{self as rows, ThrottleRow};
use crate::domain::{millis, UnixMillis};

/// Throttle key for an account name (login).
pub fn account_key(username: &str) -> String {
    format!("user:{username}")
}

/// Throttle key for a client address (login). An IPv6 client is keyed by its /64: that is
/// the block one subscriber is handed, so keyed by full address anyone holding a /64 would
/// have 2^64 fresh keys. IPv4 clients, and IPv4-mapped IPv6 ones (the same client seen through
/// a dual-stack socket), are keyed by the full IPv4 address. Anything that is not an address
/// (`unknown`) is kept as it is.
pub fn address_key(addr: &str) -> String {
    match addr.parse::<IpAddr>().map(|a| a.to_canonical()) {
        Ok(IpAddr::V4(v4)) => format!("addr:{v4}"),
        Ok(IpAddr::V6(v6)) => {
            let [a, b, c, d, ..] = v6.segments();
            format!("addr:{}/64", Ipv6Addr::new(a, b, c, d, 0, 0, 0, 0))
        }
        Err(_) => format!("addr:{addr}"),
    }
}

/// Throttle key for an account's password-change form. Apart from the login key on purpose:
/// a stolen session guessing at the form must not lock the owner out of signing in, and
/// signing in must not reset the form's count.
pub fn password_change_key(username: &str) -> String {
    format!("password_change:{username}")
}

/// A throttle key and how many attempts it allows before locking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// The `login_throttle` key.
    pub key: String,
    /// Attempts counted before the key locks.
    pub threshold: u32,
}

impl Limit {
    /// Login attempts against an account.
    pub fn account(username: &str, cfg: &ThrottleSettings) -> Self {
        Self {
            key: account_key(username),
            threshold: cfg.account_failures,
        }
    }

    /// Login attempts from a client address.
    pub fn address(addr: &str, cfg: &ThrottleSettings) -> Self {
        Self {
            key: address_key(addr),
            threshold: cfg.address_failures,
        }
    }

    /// Current-password attempts on an account's password-change form.
    pub fn password_change(username: &str, cfg: &ThrottleSettings) -> Self {
        Self {
            key: password_change_key(username),
            threshold: cfg.account_failures,
        }
    }
}

/// What became of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Counted against every key: go on and check the password.
    Counted,
    /// A key is locked for this long (rounded up to whole seconds, the unit of
    /// `Retry-After`, so a client that waits that long finds the lock gone); nothing was
    /// counted.
    Locked(Duration),
}

/// Checks the locks of `limits` and, when none holds, counts one attempt against each, in
/// one write transaction (`BEGIN IMMEDIATE`).
pub async fn admit(
    pool: &AnyPool,
    limits: &[Limit],
    cfg: &ThrottleSettings,
    now: UnixMillis,
) -> sqlx::Result<Admission> {
    // A plain read first: during a flood against a locked key the refusals then take no write
    // lock. It only ever refuses early; the decision to count is made under the write lock.
    {
        let mut conn = pool.acquire().await?;
        if let Some(wait) = longest_lock(&mut conn, limits, now).await? {
            return Ok(Admission::Locked(wait));
        }
    }
    let mut tx = db::begin_write(pool).await?;
    let admission = check_and_count(&mut tx, limits, cfg, now).await?;
    tx.commit().await?;
    Ok(admission)
}

/// [`admit`]'s decision inside a write transaction the caller holds.
pub async fn check_and_count(
    conn: &mut AnyConnection,
    limits: &[Limit],
    cfg: &ThrottleSettings,
    now: UnixMillis,
) -> sqlx::Result<Admission> {
    if let Some(wait) = longest_lock(conn, limits, now).await? {
        return Ok(Admission::Locked(wait));
    }
    for limit in limits {
        count(conn, &limit.key, limit.threshold, cfg, now).await?;
    }
    Ok(Admission::Counted)
}

async fn longest_lock(
    conn: &mut AnyConnection,
    limits: &[Limit],
    now: UnixMillis,
) -> sqlx::Result<Option<Duration>> {
    let mut longest = None;
    for limit in limits {
        longest = longest.max(locked_for(conn, &limit.key, now).await?);
    }
    Ok(longest.map(|d| Duration::from_secs(d.as_secs() + u64::from(d.subsec_nanos() > 0))))
}

/// How long `key` is still locked, if it is.
pub async fn locked_for(
    conn: &mut AnyConnection,
    key: &str,
    now: UnixMillis,
) -> sqlx::Result<Option<Duration>> {
    Ok(rows::get(conn, key)
        .await?
        .filter(|r| r.locked_until > now)
        .map(|r| Duration::from_millis(u64::try_from(r.locked_until - now).unwrap_or(0))))
}

/// Counts an attempt against `key`; from the `threshold`-th on, each one locks the key.
async fn count(
    conn: &mut AnyConnection,
    key: &str,
    threshold: u32,
    cfg: &ThrottleSettings,
    now: UnixMillis,
) -> sqlx::Result<()> {
    let window = millis(cfg.window);
    let previous = rows::get(conn, key)
        .await?
        .filter(|r| now - r.last_failure_at <= window)
        .map_or(0, |r| r.failures);
    let failures = previous + 1;
    let locked_until = lock_delay(failures, threshold, cfg).map_or(0, |d| now + millis(d));
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

/// Un-counts an attempt that was not a guess after all: a legitimate login from an address,
/// or one that never reached argon2 because hashing was busy.
pub async fn take_back(conn: &mut AnyConnection, limit: &Limit) -> sqlx::Result<()> {
    rows::take_back(conn, &limit.key, limit.threshold).await
}

/// Forgets every attempt of `key`.
pub async fn clear(conn: &mut AnyConnection, key: &str) -> sqlx::Result<()> {
    rows::clear(conn, key).await
}

/// The lock after the `failures`-th attempt: none below the threshold, then base, 2×base,
/// 4×base… up to the cap.
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

    fn cfg() -> ThrottleSettings {
        crate::config::Settings::default().throttle
    }

    /// A fresh migrated database in a temp file (a pool over `:memory:` would give each
    /// connection its own empty database).
    async fn pool() -> (AnyPool, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("t.db").display());
        (db::connect(&url).await.unwrap(), dir)
    }

    async fn row(pool: &AnyPool, key: &str) -> Option<ThrottleRow> {
        rows::get(&mut pool.acquire().await.unwrap(), key)
            .await
            .unwrap()
    }

    #[test]
    fn ipv6_clients_share_a_key_per_64_and_ipv4_clients_keep_theirs() {
        let one_64 = [
            "2001:db8:1:2::1",
            "2001:db8:1:2:ffff:ffff:ffff:ffff",
            "2001:0DB8:0001:0002:dead:beef:0:7",
            "2001:db8:1:2::",
        ];
        for addr in one_64 {
            assert_eq!(address_key(addr), "addr:2001:db8:1:2::/64", "{addr}");
        }
        // The neighbouring /64s, on either side of the boundary, are other clients.
        assert_eq!(address_key("2001:db8:1:3::1"), "addr:2001:db8:1:3::/64");
        assert_eq!(
            address_key("2001:db8:1:1:ffff::1"),
            "addr:2001:db8:1:1::/64"
        );
        assert_eq!(address_key("::1"), "addr:::/64");

        // IPv4: the full address, so neighbours on one /24 are counted apart.
        assert_eq!(address_key("192.0.2.1"), "addr:192.0.2.1");
        assert_ne!(address_key("192.0.2.1"), address_key("192.0.2.2"));
        // IPv4-mapped IPv6 is the same IPv4 client, not the ::ffff:0:0/64 block.
        assert_eq!(address_key("::ffff:192.0.2.1"), "addr:192.0.2.1");
        assert_ne!(
            address_key("::ffff:192.0.2.1"),
            address_key("::ffff:192.0.2.2")
        );
        // No address at all is one key of its own.
        assert_eq!(address_key("unknown"), "addr:unknown");
    }

    #[test]
    fn delay_starts_at_threshold_doubles_and_caps() {
        let cfg = cfg();
        assert_eq!(lock_delay(4, 5, &cfg), None);
        assert_eq!(lock_delay(5, 5, &cfg), Some(cfg.base_delay));
        assert_eq!(lock_delay(6, 5, &cfg), Some(cfg.base_delay * 2));
        assert_eq!(lock_delay(500, 5, &cfg), Some(cfg.max_lock));
    }

    #[tokio::test]
    async fn parallel_attempts_are_counted_up_to_the_threshold_and_no_further() {
        let (pool, _dir) = pool().await;
        let cfg = cfg();
        let limits = [Limit::account("alice", &cfg)];
        let attempts = (0..40).map(|_| {
            let (pool, limits) = (pool.clone(), limits.clone());
            tokio::spawn(async move { admit(&pool, &limits, &cfg, 1_000).await.unwrap() })
        });
        let mut counted = 0;
        for a in attempts {
            if a.await.unwrap() == Admission::Counted {
                counted += 1;
            }
        }
        assert_eq!(counted, cfg.account_failures);
        let r = row(&pool, "user:alice").await.unwrap();
        assert_eq!(r.failures, i64::from(cfg.account_failures));
        assert_eq!(
            r.locked_until,
            1_000 + 2_000,
            "the threshold-th attempt locks"
        );
    }

    #[tokio::test]
    async fn a_locked_key_refuses_without_counting_any_key() {
        let (pool, _dir) = pool().await;
        let cfg = ThrottleSettings {
            address_failures: 1,
            ..cfg()
        };
        let first = [
            Limit::address("192.0.2.1", &cfg),
            Limit::account("bob", &cfg),
        ];
        assert_eq!(
            admit(&pool, &first, &cfg, 0).await.unwrap(),
            Admission::Counted
        );
        let second = [
            Limit::address("192.0.2.1", &cfg),
            Limit::account("carol", &cfg),
        ];
        assert_eq!(
            admit(&pool, &second, &cfg, 500).await.unwrap(),
            Admission::Locked(Duration::from_secs(2)),
            "1.5 s left, rounded up to whole seconds"
        );
        assert!(
            row(&pool, "user:carol").await.is_none(),
            "carol's key untouched"
        );
        assert_eq!(row(&pool, "addr:192.0.2.1").await.unwrap().failures, 1);
    }

    #[tokio::test]
    async fn taking_back_below_the_threshold_lifts_the_lock_and_empty_records_go() {
        let (pool, _dir) = pool().await;
        let cfg = ThrottleSettings {
            address_failures: 2,
            ..cfg()
        };
        let limit = Limit::address("192.0.2.9", &cfg);
        for _ in 0..2 {
            admit(&pool, std::slice::from_ref(&limit), &cfg, 0)
                .await
                .unwrap();
        }
        assert!(row(&pool, &limit.key).await.unwrap().locked_until > 0);
        let mut conn = pool.acquire().await.unwrap();
        take_back(&mut conn, &limit).await.unwrap();
        let r = row(&pool, &limit.key).await.unwrap();
        assert_eq!((r.failures, r.locked_until), (1, 0));
        take_back(&mut conn, &limit).await.unwrap();
        assert!(row(&pool, &limit.key).await.is_none());
        // Taking back what was never counted changes nothing.
        take_back(&mut conn, &limit).await.unwrap();
        assert!(row(&pool, &limit.key).await.is_none());
    }

    #[tokio::test]
    async fn taking_back_at_or_over_the_threshold_keeps_the_lock() {
        let (pool, _dir) = pool().await;
        let cfg = ThrottleSettings {
            address_failures: 2,
            ..cfg()
        };
        let limit = Limit::address("192.0.2.10", &cfg);
        for now in [0, 0, 10_000] {
            admit(&pool, std::slice::from_ref(&limit), &cfg, now)
                .await
                .unwrap();
        }
        let before = row(&pool, &limit.key).await.unwrap();
        assert_eq!(before.failures, 3);
        take_back(&mut pool.acquire().await.unwrap(), &limit)
            .await
            .unwrap();
        let after = row(&pool, &limit.key).await.unwrap();
        assert_eq!(
            (after.failures, after.locked_until),
            (2, before.locked_until)
        );
    }

    #[tokio::test]
    async fn attempts_older_than_the_window_are_forgotten() {
        let (pool, _dir) = pool().await;
        let cfg = cfg();
        let limits = [Limit::account("dave", &cfg)];
        for _ in 0..cfg.account_failures - 1 {
            admit(&pool, &limits, &cfg, 0).await.unwrap();
        }
        let later = i64::try_from(cfg.window.as_millis()).unwrap() + 1;
        admit(&pool, &limits, &cfg, later).await.unwrap();
        let r = row(&pool, "user:dave").await.unwrap();
        assert_eq!((r.failures, r.locked_until), (1, 0));
    }
}
