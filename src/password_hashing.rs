//! argon2id hashing and verification, run on the blocking pool behind one bound per console
//! (`Ctx::hashing`, sized by `password_hash_concurrency`). It imports nothing of ours, so the
//! context can hold it while `auth` (which uses the context) hashes through it.
//!
//! argon2id is deliberately slow and takes about 19 MiB per call. Unbounded, a burst of logins
//! runs as many at once as the blocking pool has threads (512 by default), and memory follows:
//! 150 parallel logins once ran 81 hashes at once and took the process from 118 MiB to 1.6 GiB.
//! So every hash and verify in the process (login, password change, user creation, the CLI)
//! goes through the context's [`Hashing`]: a few callers may wait briefly for a permit, the rest are turned
//! away at once with [`Busy`], which pages and the API answer with 503 and `Retry-After`.
//!
//! The bound alone is not enough: argon2's own `Vec` of blocks is freed after every call, and
//! glibc keeps freed 19 MiB chunks in per-thread arenas, so 19 checks spread over the blocking
//! pool's threads still peaked at 356 MiB. Each permit therefore reuses one block buffer from
//! a small pool (at most one buffer per permit), and memory stays at bound × 19 MiB.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::sync::Mutex;

use argon2::password_hash::{Output, ParamsString, PasswordHash, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many callers may wait for a permit, per permit; any more are turned away at once, so
/// a flood cannot build an unbounded queue of requests each holding a connection.
const WAITING_PER_PERMIT: usize = 4;

/// The longest a caller waits for a permit before it is turned away.
const MAX_WAIT: Duration = Duration::from_secs(2);

/// What `Retry-After` suggests when hashing is busy: a permit frees within a hash's time.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Every permit is taken and the waiting room is full (or the wait ran out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many password checks are running; try again in {} s", .retry_after.as_secs().max(1))]
pub struct Busy {
    /// When a retry is likely to find a free permit.
    pub retry_after: Duration,
}

/// Why a hash or a verification did not run to an answer.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// The bound is full: answer 503 with `Retry-After`.
    #[error(transparent)]
    Busy(#[from] Busy),
    /// A broken stored hash, no randomness, or a panicked blocking task.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// Counters of what the bound let through and turned away.
#[derive(Debug, Default)]
struct Stats {
    verifications: AtomicU64,
    hashes: AtomicU64,
    turned_away: AtomicU64,
}

/// argon2 working memory, kept between calls (see the module comment).
#[derive(Default)]
struct Buffers(Mutex<Vec<Vec<Block>>>);

impl std::fmt::Debug for Buffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |b| b.len());
        write!(f, "Buffers({n} kept)")
    }
}

impl Buffers {
    /// Runs `job` with a buffer of at least `blocks` blocks, then keeps the buffer. Only a
    /// permit holder calls this, so no more buffers exist than permits.
    fn with<T>(&self, blocks: usize, job: impl FnOnce(&mut [Block]) -> T) -> T {
        let mut buf = self
            .0
            .lock()
            .ok()
            .and_then(|mut b| b.pop())
            .unwrap_or_default();
        if buf.len() < blocks {
            buf.resize(blocks, Block::default());
        }
        let result = job(&mut buf);
        if let Ok(mut kept) = self.0.lock() {
            kept.push(buf);
        }
        result
    }
}

/// A bound on concurrent argon2 work plus counters of the work done.
#[derive(Debug)]
pub struct Hashing {
    bound: usize,
    running: Arc<Semaphore>,
    waiting: Semaphore,
    max_wait: Duration,
    stats: Arc<Stats>,
    buffers: Arc<Buffers>,
}

impl Hashing {
    /// At most `bound` (at least 1) hashes or verifications at once.
    pub fn new(bound: usize) -> Self {
        let bound = bound.max(1);
        Self::with_waiting(bound, bound.saturating_mul(WAITING_PER_PERMIT), MAX_WAIT)
    }

    fn with_waiting(bound: usize, waiting: usize, max_wait: Duration) -> Self {
        Self {
            bound,
            running: Arc::new(Semaphore::new(bound)),
            waiting: Semaphore::new(waiting),
            max_wait,
            stats: Arc::default(),
            buffers: Arc::default(),
        }
    }

    /// The number of permits.
    pub fn bound(&self) -> usize {
        self.bound
    }

    /// Password verifications actually run (not requests: a throttled or turned-away login
    /// verifies nothing).
    pub fn verifications(&self) -> u64 {
        self.stats.verifications.load(Ordering::Relaxed)
    }

    /// Password hashes actually computed.
    pub fn hashes(&self) -> u64 {
        self.stats.hashes.load(Ordering::Relaxed)
    }

    /// Callers answered with [`Busy`].
    pub fn turned_away(&self) -> u64 {
        self.stats.turned_away.load(Ordering::Relaxed)
    }

    /// A permit, owned so it can travel into the blocking task: if the request is dropped
    /// (client gone) while argon2 runs, the permit stays taken until argon2 really ends.
    async fn permit(&self) -> Result<OwnedSemaphorePermit, Busy> {
        if let Ok(p) = Arc::clone(&self.running).try_acquire_owned() {
            return Ok(p);
        }
        let busy = || {
            self.stats.turned_away.fetch_add(1, Ordering::Relaxed);
            Busy {
                retry_after: RETRY_AFTER,
            }
        };
        let Ok(_seat) = self.waiting.try_acquire() else {
            return Err(busy());
        };
        match tokio::time::timeout(self.max_wait, Arc::clone(&self.running).acquire_owned()).await {
            Ok(Ok(p)) => Ok(p),
            // Timed out, or the semaphore was closed (never done, but not a reason to panic).
            _ => Err(busy()),
        }
    }

    /// Hashes a password with argon2id and a random salt (PHC string).
    pub async fn hash(&self, password: String) -> Result<String, PasswordError> {
        let permit = self.permit().await?;
        let (stats, buffers) = (Arc::clone(&self.stats), Arc::clone(&self.buffers));
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            stats.hashes.fetch_add(1, Ordering::Relaxed);
            hash_with(&buffers, password.as_bytes())
        })
        .await
        .map_err(anyhow::Error::from)?
        .map_err(PasswordError::Internal)
    }

    /// Whether `password` matches `phc`. A missing user is checked against a fixed dummy hash
    /// so "no such user" and "wrong password" take the same time (and the same permit).
    pub async fn verify(
        &self,
        password: String,
        phc: Option<String>,
    ) -> Result<bool, PasswordError> {
        let permit = self.permit().await?;
        let (stats, buffers) = (Arc::clone(&self.stats), Arc::clone(&self.buffers));
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let stored = phc.as_deref().unwrap_or(DUMMY_HASH);
            stats.verifications.fetch_add(1, Ordering::Relaxed);
            let ok = verify_with(&buffers, password.as_bytes(), stored)?;
            Ok(ok && phc.is_some())
        })
        .await
        .map_err(anyhow::Error::from)?
        .map_err(PasswordError::Internal)
    }

    /// The counters in Prometheus text format.
    pub fn metrics_text(&self) -> String {
        format!(
            "# HELP headroom_password_verifications_total Password verifications run (argon2), not requests.\n\
             # TYPE headroom_password_verifications_total counter\n\
             headroom_password_verifications_total {}\n\
             # HELP headroom_password_hashes_total Password hashes computed (argon2).\n\
             # TYPE headroom_password_hashes_total counter\n\
             headroom_password_hashes_total {}\n\
             # HELP headroom_password_busy_total Password checks turned away because the hashing bound was full.\n\
             # TYPE headroom_password_busy_total counter\n\
             headroom_password_busy_total {}\n\
             # HELP headroom_password_hashing_bound Concurrent password hashes allowed.\n\
             # TYPE headroom_password_hashing_bound gauge\n\
             headroom_password_hashing_bound {}\n",
            self.verifications(),
            self.hashes(),
            self.turned_away(),
            self.bound,
        )
    }
}

/// argon2id with the default parameters and a random salt, in a kept buffer; the PHC string.
fn hash_with(buffers: &Buffers, password: &[u8]) -> anyhow::Result<String> {
    let params = Params::default();
    let mut salt_bytes = [0_u8; 16];
    getrandom::getrandom(&mut salt_bytes).map_err(|e| anyhow::anyhow!("random salt: {e}"))?;
    let salt = SaltString::encode_b64(&salt_bytes).map_err(|e| anyhow::anyhow!("salt: {e}"))?;
    let mut out = [0_u8; Params::DEFAULT_OUTPUT_LEN];
    let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone());
    buffers
        .with(params.block_count(), |blocks| {
            argon.hash_password_into_with_memory(password, &salt_bytes, &mut out, blocks)
        })
        .map_err(|e| anyhow::anyhow!("hashing password: {e}"))?;
    let phc = PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(&params).map_err(|e| anyhow::anyhow!("params: {e}"))?,
        salt: Some(salt.as_salt()),
        hash: Some(Output::new(&out).map_err(|e| anyhow::anyhow!("output: {e}"))?),
    };
    Ok(phc.to_string())
}

/// Recomputes `stored`'s hash of `password` with its own algorithm, version and parameters in
/// a kept buffer, and compares in constant time (`Output`'s equality).
fn verify_with(buffers: &Buffers, password: &[u8], stored: &str) -> anyhow::Result<bool> {
    let bad = |what: &str| anyhow::anyhow!("stored hash: {what}");
    let parsed = PasswordHash::new(stored).map_err(|e| bad(&e.to_string()))?;
    let algorithm = Algorithm::try_from(parsed.algorithm).map_err(|e| bad(&e.to_string()))?;
    let version = match parsed.version {
        Some(v) => Version::try_from(v).map_err(|e| bad(&e.to_string()))?,
        None => Version::default(),
    };
    let params = Params::try_from(&parsed).map_err(|e| bad(&e.to_string()))?;
    let expected = parsed.hash.ok_or_else(|| bad("no hash"))?;
    let mut salt_buf = [0_u8; 64];
    let salt = parsed
        .salt
        .ok_or_else(|| bad("no salt"))?
        .decode_b64(&mut salt_buf)
        .map_err(|e| bad(&e.to_string()))?;
    let mut out = vec![0_u8; expected.len()];
    let argon = Argon2::new(algorithm, version, params.clone());
    buffers
        .with(params.block_count(), |blocks| {
            argon.hash_password_into_with_memory(password, salt, &mut out, blocks)
        })
        .map_err(|e| anyhow::anyhow!("verifying password: {e}"))?;
    Ok(Output::new(&out).map_err(|e| bad(&e.to_string()))? == expected)
}

// argon2id of a random string nobody knows, with the default parameters.
const DUMMY_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$Yq0i3HkqM2qvS0vJ2Xy7rC3dA0pR7F3c0qfQmY2bQ0o";

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn verifies_only_the_right_password() {
        let hashing = Hashing::new(1);
        let h = hashing.hash("correct horse battery".into()).await.unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(hashing
            .verify("correct horse battery".into(), Some(h.clone()))
            .await
            .unwrap());
        assert!(!hashing
            .verify("wrong horse battery".into(), Some(h))
            .await
            .unwrap());
        assert!(!hashing.verify("anything".into(), None).await.unwrap());
    }

    #[test]
    fn hashes_are_standard_phc_strings_both_ways() {
        use argon2::password_hash::{PasswordHasher, PasswordVerifier};
        let buffers = Buffers::default();
        // Ours verifies with the argon2 crate's own verifier…
        let ours = hash_with(&buffers, b"correct horse battery").unwrap();
        assert!(
            ours.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{ours}"
        );
        let parsed = PasswordHash::new(&ours).unwrap();
        assert!(Argon2::default()
            .verify_password(b"correct horse battery", &parsed)
            .is_ok());
        // …and hashes stored by earlier versions (the crate's hasher) verify with ours.
        let salt = SaltString::encode_b64(b"sixteen byte slt").unwrap();
        let theirs = Argon2::default()
            .hash_password(b"correct horse battery", &salt)
            .unwrap()
            .to_string();
        assert!(verify_with(&buffers, b"correct horse battery", &theirs).unwrap());
        assert!(!verify_with(&buffers, b"correct horse batterz", &theirs).unwrap());
        assert!(verify_with(&buffers, b"x", "not a phc string").is_err());
        assert_eq!(buffers.0.lock().unwrap().len(), 1, "one buffer, reused");
    }

    #[tokio::test]
    async fn a_full_bound_with_no_waiting_room_turns_callers_away_at_once() {
        let hashing = Hashing::with_waiting(1, 0, MAX_WAIT);
        let held = hashing.permit().await.unwrap();
        let err = hashing.verify("x".into(), None).await.unwrap_err();
        assert!(
            matches!(err, PasswordError::Busy(b) if b.retry_after == RETRY_AFTER),
            "{err:?}"
        );
        assert!(matches!(
            hashing.hash("x".into()).await,
            Err(PasswordError::Busy(_))
        ));
        assert_eq!(hashing.verifications(), 0, "nothing ran");
        assert_eq!(hashing.hashes(), 0);
        assert_eq!(hashing.turned_away(), 2);
        drop(held);
        assert!(!hashing.verify("x".into(), None).await.unwrap());
        assert_eq!(hashing.verifications(), 1);
    }

    #[tokio::test]
    async fn a_waiter_gets_the_permit_when_it_frees() {
        let hashing = Arc::new(Hashing::with_waiting(1, 1, Duration::from_secs(30)));
        let held = hashing.permit().await.unwrap();
        let waiter = {
            let hashing = Arc::clone(&hashing);
            tokio::spawn(async move { hashing.verify("x".into(), None).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The only seat in the waiting room is taken: the next caller is turned away.
        assert!(matches!(
            hashing.verify("y".into(), None).await,
            Err(PasswordError::Busy(_))
        ));
        drop(held);
        assert!(!waiter.await.unwrap().unwrap());
        assert_eq!(hashing.verifications(), 1);
    }

    #[tokio::test]
    async fn a_wait_longer_than_the_limit_ends_busy() {
        let hashing = Hashing::with_waiting(1, 4, Duration::from_millis(50));
        let _held = hashing.permit().await.unwrap();
        let started = std::time::Instant::now();
        assert!(matches!(
            hashing.verify("x".into(), None).await,
            Err(PasswordError::Busy(_))
        ));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn the_permit_is_held_until_argon2_ends_even_if_the_caller_gives_up() {
        let hashing = Arc::new(Hashing::with_waiting(1, 0, MAX_WAIT));
        let verifying = {
            let hashing = Arc::clone(&hashing);
            tokio::spawn(async move { hashing.verify("x".into(), None).await })
        };
        // Wait until the blocking task holds the permit, then abandon the request.
        while hashing.running.available_permits() == 1 {
            tokio::task::yield_now().await;
        }
        verifying.abort();
        assert!(matches!(
            hashing.verify("y".into(), None).await,
            Err(PasswordError::Busy(_))
        ));
        // argon2 finishes on its own, and only then is the permit back.
        while hashing.verifications() == 0 || hashing.running.available_permits() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(!hashing.verify("y".into(), None).await.unwrap());
    }

    #[test]
    fn metrics_name_the_verification_counter() {
        let hashing = Hashing::new(3);
        let text = hashing.metrics_text();
        assert!(text.contains("\nheadroom_password_verifications_total 0\n"));
        assert!(text.contains("\nheadroom_password_hashing_bound 3\n"));
    }
}
