//! Server-side sessions with idle and absolute expiry.
//!
//! Reading a page writes nothing: a live session's activity is kept in memory
//! ([`Activity`]) and written back by the purge loop, just before it deletes what has
//! expired. Idle expiry reads the newer of the row and the memory, so it stays exact while
//! the process runs; after a restart only the row's (older) time is known, which can end a
//! session early, never keep one alive too long.
//!
//! Reading a page also queries nothing most of the time: the looked-up row is kept
//! ([`SessionRows`]) for at most [`ROW_TTL_MS`] of the clock and only while the
//! [`AuthEpoch`] is unchanged since it was loaded. Every write in this process that can
//! change a lookup's answer bumps the epoch after its commit, so it is seen at once; a
//! change made by another process (the CLI, another instance) is seen within [`ROW_TTL_MS`]. Expiry is still
//! judged on every request, from the row and the activity memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::AnyPool;

use super::principal::{Principal, Via};
use super::{csrf, secret_token, ACTIVITY_WRITE_EVERY_MS};
use crate::context::AuthEpoch;
use crate::db;
use crate::db::sessions::SessionRow;
use crate::domain::{millis, Role, UnixMillis};

/// Cookie carrying the session token when the browser did not reach us over TLS.
pub const COOKIE: &str = "headroom_session";
/// The same cookie over TLS: `__Host-` makes browsers keep it to this host, `Secure`,
/// `Path=/`, so a sibling subdomain cannot plant a session of its choosing.
pub const SECURE_COOKIE: &str = "__Host-headroom_session";

/// The session cookie's name for a request that did (`tls`) or did not reach us over TLS.
pub fn cookie_name(tls: bool) -> &'static str {
    if tls {
        SECURE_COOKIE
    } else {
        COOKIE
    }
}

/// Expiry rules.
#[derive(Debug, Clone, Copy)]
pub struct Lifetimes {
    pub idle: Duration,
    pub absolute: Duration,
}

/// Sessions whose activity memory holds at once. A session beyond it (only when this many
/// people are active between two purges) falls back to a throttled write per request, so
/// memory stays bounded and idle expiry stays correct either way.
pub const ACTIVITY_CAPACITY: usize = 50_000;

/// One session's activity held in memory. `created_at` tells a session apart from a later
/// one on the same row id: ids are never reused since migration 0013 (`AUTOINCREMENT`), and
/// the check stays as a second guard that costs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    created_at: UnixMillis,
    at: UnixMillis,
}

/// Live sessions' last activity, kept in memory between purges so page views write nothing,
/// and the session rows looked up lately, so page views mostly query nothing either.
#[derive(Debug)]
pub struct Activity {
    seen: Mutex<HashMap<i64, Seen>>,
    capacity: usize,
    rows: SessionRows,
}

impl Default for Activity {
    fn default() -> Self {
        Self::with_capacity(ACTIVITY_CAPACITY)
    }
}

impl Activity {
    /// Memory for at most `capacity` sessions.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            seen: Mutex::new(HashMap::new()),
            capacity,
            rows: SessionRows::with_capacity(ROW_CAPACITY),
        }
    }

    /// The cache of looked-up session rows.
    pub fn rows(&self) -> &SessionRows {
        &self.rows
    }

    /// Sessions whose activity is held now (not yet written back).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no activity is waiting to be written back.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Seen>> {
        // The map holds plain numbers: a panic elsewhere cannot leave it half-updated.
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The newest activity held for this session, if any.
    fn last_seen(&self, id: i64, created_at: UnixMillis) -> Option<UnixMillis> {
        self.lock()
            .get(&id)
            .filter(|s| s.created_at == created_at)
            .map(|s| s.at)
    }

    /// Holds activity at `at`; false when memory is full and the session is not held yet.
    fn note(&self, id: i64, created_at: UnixMillis, at: UnixMillis) -> bool {
        let mut seen = self.lock();
        let full = seen.len() >= self.capacity;
        match seen.entry(id) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                let s = e.get_mut();
                if s.created_at == created_at {
                    s.at = s.at.max(at);
                } else {
                    // Another session on this row id (see `Seen`): the old time is meaningless.
                    *s = Seen { created_at, at };
                }
                true
            }
            std::collections::hash_map::Entry::Vacant(_) if full => false,
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(Seen { created_at, at });
                true
            }
        }
    }

    fn forget(&self, id: i64) {
        self.lock().remove(&id);
    }

    fn snapshot(&self) -> Vec<(i64, Seen)> {
        self.lock().iter().map(|(id, s)| (*id, *s)).collect()
    }

    /// Drops an entry once its value is in the database, unless a request raised it
    /// meanwhile (then the next flush writes the newer value).
    fn settle(&self, id: i64, written: Seen) {
        let mut seen = self.lock();
        if seen.get(&id) == Some(&written) {
            seen.remove(&id);
        }
    }
}

/// How long a looked-up session row may answer lookups, in milliseconds of the operations'
/// clock: the longest another process's change (`headroom user disable`) goes unseen.
pub const ROW_TTL_MS: i64 = 1_000;

/// Session rows the cache holds at once; when full, what is out of date is dropped, and if
/// that is not enough, everything (the next lookups query again).
pub const ROW_CAPACITY: usize = 10_000;

/// A cached lookup: the row and what it was valid under.
#[derive(Debug, Clone)]
struct CachedRow {
    row: SessionRow,
    epoch: u64,
    generation: u64,
    at: UnixMillis,
}

/// Session rows by token hash, each served for at most [`ROW_TTL_MS`] and only while both
/// the [`AuthEpoch`] (writes by operations) and this cache's own generation (writes by the
/// session code itself: activity written back, rows deleted) are what they were before the
/// row was read. Only found sessions are kept: unknown tokens cannot fill it.
#[derive(Debug)]
pub struct SessionRows {
    map: Mutex<HashMap<String, CachedRow>>,
    generation: std::sync::atomic::AtomicU64,
    capacity: usize,
}

impl SessionRows {
    /// An empty cache for at most `capacity` rows.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            generation: std::sync::atomic::AtomicU64::new(0),
            capacity,
        }
    }

    /// Rows held now (valid or not yet dropped).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no row is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CachedRow>> {
        // Entries are replaced whole: a panic elsewhere cannot leave one half-written.
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Marks every held row as out of date (after a write by the session code itself).
    fn invalidate(&self) {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// The row for `hash` when it was loaded under `epoch` and the current generation, at
    /// most [`ROW_TTL_MS`] before `now` (never "after" it: a clock that went back reloads).
    fn get(&self, hash: &str, epoch: u64, now: UnixMillis) -> Option<SessionRow> {
        let generation = self.generation();
        self.lock()
            .get(hash)
            .filter(|c| {
                c.epoch == epoch
                    && c.generation == generation
                    && now >= c.at
                    && now - c.at < ROW_TTL_MS
            })
            .map(|c| c.row.clone())
    }

    /// Keeps a row read after `epoch` and `generation` were loaded. When full, drops what is
    /// out of date first, then everything if that was not enough.
    fn put(&self, hash: String, row: SessionRow, epoch: u64, generation: u64, at: UnixMillis) {
        let mut map = self.lock();
        if map.len() >= self.capacity && !map.contains_key(&hash) {
            let current = self.generation();
            map.retain(|_, c| {
                c.generation == current && c.epoch == epoch && at >= c.at && at - c.at < ROW_TTL_MS
            });
            if map.len() >= self.capacity {
                map.clear();
            }
        }
        map.insert(
            hash,
            CachedRow {
                row,
                epoch,
                generation,
                at,
            },
        );
    }

    fn remove(&self, hash: &str) {
        self.lock().remove(hash);
    }
}

/// Writes held activity to the sessions' rows (never lowering a row's time) in one
/// transaction, then lets memory go of what was written; entries of deleted sessions are
/// dropped. Returns how many rows were brought up to date.
pub async fn flush_activity(pool: &AnyPool, activity: &Activity) -> sqlx::Result<u64> {
    let pending = activity.snapshot();
    if pending.is_empty() {
        return Ok(0);
    }
    let mut tx = pool.begin().await?;
    let mut updated = 0;
    for (id, seen) in &pending {
        if db::sessions::record_activity(&mut tx, *id, seen.created_at, seen.at).await? {
            updated += 1;
        }
    }
    tx.commit().await?;
    // Cached rows still carry the older times, which memory is about to let go of: they
    // must not serve once it has (an active session would look idle).
    activity.rows.invalidate();
    // Only after the commit: until then memory is the one place the newer times are.
    for (id, seen) in pending {
        activity.settle(id, seen);
    }
    Ok(updated)
}

/// Looks up the session behind a cookie token; `None` when there is none or it has ended.
/// A live session's activity goes to `activity`, not the database. An expired session's row
/// is deleted here (ending it is a write a viewer's cookie may cause; the page is not read).
/// The row comes from the cache of [`SessionRows`] while it is valid under `epoch` (see the
/// module docs); expiry is judged here on every call either way.
#[tracing::instrument(skip_all, err)]
pub async fn resolve(
    pool: &AnyPool,
    epoch: &AuthEpoch,
    activity: &Activity,
    token: &str,
    now: UnixMillis,
    life: Lifetimes,
) -> sqlx::Result<Option<Principal>> {
    let hash = secret_token::digest(token);
    // Loaded BEFORE the read: a write committed after it leaves the row out of date at once.
    let (loaded_epoch, generation) = (epoch.current(), activity.rows.generation());
    let row = match activity.rows.get(&hash, loaded_epoch, now) {
        Some(row) => row,
        None => {
            let mut conn = pool.acquire().await?;
            let Some(row) = db::sessions::by_token_hash(&mut conn, &hash).await? else {
                return Ok(None);
            };
            activity
                .rows
                .put(hash.clone(), row.clone(), loaded_epoch, generation, now);
            row
        }
    };
    let last_seen = activity
        .last_seen(row.id, row.created_at)
        .map_or(row.last_seen_at, |held| held.max(row.last_seen_at));
    let idle_expired = now - last_seen > millis(life.idle);
    let absolute_expired = now - row.created_at > millis(life.absolute);
    if idle_expired || absolute_expired || row.disabled {
        activity.forget(row.id);
        activity.rows.remove(&hash);
        let mut conn = pool.acquire().await?;
        db::sessions::delete(&mut conn, row.id).await?;
        // A lookup that read the row before the delete must not keep it afterwards.
        activity.rows.invalidate();
        return Ok(None);
    }
    if !activity.note(row.id, row.created_at, now)
        && now - row.last_seen_at > ACTIVITY_WRITE_EVERY_MS
    {
        // Memory is full: the old way, one write a minute at most for this session.
        let mut conn = pool.acquire().await?;
        db::sessions::touch(&mut conn, row.id, now).await?;
        // The row's time is the only record of this activity: cached older times must go.
        activity.rows.invalidate();
    }
    Ok(Some(Principal {
        user_id: row.user_id,
        username: row.username,
        role: row.role.parse().unwrap_or(Role::Viewer),
        via: Via::Session {
            session_id: row.id,
            csrf_token: csrf::for_session(token),
            has_flash: row.has_flash,
        },
    }))
}

/// How often the purge loop runs: lookups already expire sessions lazily, so this only
/// keeps rows of people who never came back from piling up.
pub const PURGE_EVERY: Duration = Duration::from_secs(600);

/// What the session purge loop needs.
#[derive(Clone)]
pub struct PurgeDeps {
    /// The database.
    pub pool: AnyPool,
    /// The source of "now".
    pub clock: std::sync::Arc<dyn crate::domain::Clock>,
    /// The expiry rules.
    pub life: Lifetimes,
    /// Time between purges.
    pub every: Duration,
    /// Activity held in memory, written back before each purge.
    pub activity: Arc<Activity>,
}

/// Writes back held activity, then removes every session expired by the clock's now;
/// returns how many were removed. The order matters: a session active only in memory must
/// not be purged for the older time in its row.
#[tracing::instrument(skip_all, err)]
pub async fn purge_expired_once(deps: &PurgeDeps) -> sqlx::Result<u64> {
    flush_activity(&deps.pool, &deps.activity).await?;
    let now = deps.clock.now();
    let mut conn = deps.pool.acquire().await?;
    // Idle by the rows plus one purge period: another instance writes the activity it holds
    // back only at its own purge, so a row may be that much older than the session's last
    // use; lookups still judge expiry by the exact idle time.
    let purged = db::sessions::delete_expired(
        &mut conn,
        now - millis(deps.life.idle) - millis(deps.every),
        now - millis(deps.life.absolute),
    )
    .await?;
    if purged > 0 {
        // Lookups judge expiry themselves, but a deleted row must not outlive its delete.
        deps.activity.rows.invalidate();
    }
    Ok(purged)
}

/// The purge loop: purges at once (rows may have expired while the server was down), then
/// every `deps.every`, until `shutdown` turns true or its sender is dropped.
pub async fn run_until_stopped(deps: PurgeDeps, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(deps.every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            // A stop wins over a due tick, so shutdown never waits for one more purge.
            biased;
            () = crate::shutdown::requested(&mut shutdown) => {
                // A clean stop keeps what memory held, so a restart ends no session early.
                if let Err(e) = flush_activity(&deps.pool, &deps.activity).await {
                    tracing::warn!(error = %e, "session activity not written back at stop");
                }
                break;
            }
            _ = tick.tick() => match purge_expired_once(&deps).await {
                Ok(n) if n > 0 => tracing::info!(sessions.purged = n, "expired sessions removed"),
                Ok(_) => {}
                // The next tick tries again; a failed purge only delays housekeeping.
                Err(e) => tracing::warn!(error = %e, "session purge failed"),
            },
        }
    }
    tracing::debug!("session purge stopped");
}

/// Keeps a message for this session's next full page (after a redirect). Best effort: a
/// message that cannot be stored is logged, never an error for the change it reports.
pub async fn set_flash(ctx: &crate::context::Ctx, principal: &Principal, message: &str) {
    let Via::Session { session_id, .. } = principal.via else {
        return;
    };
    let stored = async {
        let mut conn = ctx.pool.acquire().await?;
        db::sessions::set_flash(&mut conn, session_id, message).await
    };
    if let Err(e) = stored.await {
        tracing::warn!(error = %e, "cannot keep a flash message");
    }
    // Cached rows say "no flash": the next page must look again to show this one.
    ctx.auth_epoch.bump();
}

/// Takes (reads and clears) this session's flash message, if it has one. A cached row may
/// still say it has one after it was taken: that costs one query finding none, nothing more.
pub async fn take_flash(ctx: &crate::context::Ctx, principal: &Principal) -> Option<String> {
    let Via::Session {
        session_id,
        has_flash: true,
        ..
    } = principal.via
    else {
        return None;
    };
    let mut conn = ctx.pool.acquire().await.ok()?;
    db::sessions::take_flash(&mut conn, session_id)
        .await
        .ok()
        .flatten()
}

#[cfg(test)]
mod purge_tests {
    use std::sync::Arc;

    use super::*;
    use crate::domain::{ManualClock, Username};

    const START: UnixMillis = 1_796_000_000_000;

    async fn deps_with_sessions(created: &[UnixMillis]) -> (PurgeDeps, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("purge.db").display());
        let pool = crate::db::connect(&url).await.unwrap();
        let mut conn = pool.acquire().await.unwrap();
        let name = Username::parse("alice").unwrap();
        let user = db::users::insert(&mut conn, &name, Role::Viewer, "x", START)
            .await
            .unwrap()
            .unwrap();
        for (i, at) in created.iter().enumerate() {
            db::sessions::insert(&mut conn, &format!("hash-{i}"), user.id, *at)
                .await
                .unwrap();
        }
        let clock = ManualClock::new(START);
        let deps = PurgeDeps {
            pool: pool.clone(),
            clock: Arc::new(clock),
            life: Lifetimes {
                idle: Duration::from_secs(30 * 60),
                absolute: Duration::from_secs(12 * 3600),
            },
            every: PURGE_EVERY,
            activity: Arc::new(Activity::default()),
        };
        (deps, dir)
    }

    async fn remaining(deps: &PurgeDeps) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM sessions")
            .fetch_one(&deps.pool)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn purge_once_removes_only_sessions_idle_past_the_limit_and_a_purge_period() {
        let minute = 60_000;
        // Unused by their rows for 41 and 45 minutes (past 30 + 10), 31 minutes (expired for
        // lookups, but another instance may still hold its activity), 29 minutes and just now.
        let (deps, _dir) = deps_with_sessions(&[
            START - 41 * minute,
            START - 45 * minute,
            START - 31 * minute,
            START - 29 * minute,
            START,
        ])
        .await;
        assert_eq!(purge_expired_once(&deps).await.unwrap(), 2);
        assert_eq!(remaining(&deps).await, 3);
        assert_eq!(purge_expired_once(&deps).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn the_loop_purges_at_start_and_stops_on_shutdown() {
        let (deps, _dir) = deps_with_sessions(&[START - 3_600_000, START]).await;
        let (stop, shutdown) = tokio::sync::watch::channel(false);
        let probe = deps.clone();
        let task = tokio::spawn(run_until_stopped(deps, shutdown));
        // The first purge runs at once; wait for its effect rather than for time.
        tokio::time::timeout(Duration::from_secs(10), async {
            while remaining(&probe).await != 1 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the loop purged at start");
        stop.send(true).unwrap();
        // PURGE_EVERY is ten minutes: only the stop signal can end the task this soon.
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the loop stops on shutdown")
            .unwrap();
    }

    #[tokio::test]
    async fn the_loop_stops_when_the_signal_is_dropped() {
        let (deps, _dir) = deps_with_sessions(&[]).await;
        let (stop, shutdown) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(run_until_stopped(deps, shutdown));
        drop(stop);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the loop stops when its application is gone")
            .unwrap();
    }
}

#[cfg(test)]
mod row_cache_tests {
    use super::*;

    fn row(id: i64) -> SessionRow {
        SessionRow {
            id,
            user_id: 1,
            created_at: 0,
            last_seen_at: 0,
            username: "alice".into(),
            role: "viewer".into(),
            disabled: false,
            has_flash: false,
        }
    }

    #[test]
    fn a_row_serves_under_its_epoch_and_generation_for_less_than_the_ttl() {
        let rows = SessionRows::with_capacity(10);
        let epoch = AuthEpoch::default();
        let (e, g) = (epoch.current(), rows.generation());
        rows.put("h".into(), row(1), e, g, 10_000);
        assert_eq!(rows.get("h", e, 10_000).map(|r| r.id), Some(1));
        assert!(rows.get("h", e, 10_000 + ROW_TTL_MS - 1).is_some());
        assert!(
            rows.get("h", e, 10_000 + ROW_TTL_MS).is_none(),
            "ttl passed"
        );
        assert!(rows.get("h", e, 9_999).is_none(), "a clock that went back");
        assert!(rows.get("other", e, 10_000).is_none());
        epoch.bump();
        assert!(
            rows.get("h", epoch.current(), 10_000).is_none(),
            "an epoch bump"
        );
        rows.put("h".into(), row(1), epoch.current(), g, 10_000);
        rows.invalidate();
        assert!(
            rows.get("h", epoch.current(), 10_000).is_none(),
            "a write by the session code itself"
        );
    }

    #[test]
    fn a_row_read_before_a_bump_is_out_of_date_when_stored_after_it() {
        let rows = SessionRows::with_capacity(10);
        let epoch = AuthEpoch::default();
        let (e, g) = (epoch.current(), rows.generation());
        // The write commits and bumps while the read is in flight.
        epoch.bump();
        rows.put("h".into(), row(1), e, g, 10_000);
        assert!(rows.get("h", epoch.current(), 10_000).is_none());
    }

    #[test]
    fn a_full_cache_drops_what_is_out_of_date_then_everything() {
        let rows = SessionRows::with_capacity(4);
        let g = rows.generation();
        for i in 0..4 {
            rows.put(format!("old{i}"), row(i), 0, g, 0);
        }
        assert_eq!(rows.len(), 4);
        // At 5 s every held row is out of date: they go, the new one stays.
        rows.put("new".into(), row(9), 0, g, 5_000);
        assert_eq!(rows.len(), 1);
        for i in 0..3 {
            rows.put(format!("live{i}"), row(i), 0, g, 5_000);
        }
        assert_eq!(rows.len(), 4);
        // All valid and full: cleared, so the bound holds whatever the load.
        rows.put("more".into(), row(10), 0, g, 5_000);
        assert_eq!(rows.len(), 1);
        assert!(rows.get("more", 0, 5_000).is_some());
        for i in 0..1_000 {
            rows.put(format!("flood{i}"), row(i), 0, g, 5_000);
            assert!(rows.len() <= 4);
        }
        assert_eq!(ROW_CAPACITY, 10_000);
    }
}
