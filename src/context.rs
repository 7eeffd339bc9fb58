//! The context every operation works with: `op(ctx, caller, input)`. It holds what operations
//! need to do their work — storage, time, settings, providers, the template renderer, the
//! outbound clients, the password-hashing bound and the catalogue refresh lock — and nothing
//! of HTTP, so pages, the API, the CLI and background loops call the same operations the same
//! way (and two consoles in one process, as in tests, share none of it).

use std::sync::{Arc, PoisonError};

use sqlx::AnyPool;

use crate::cloud_init::Renderer;
use crate::config::Settings;
use crate::domain::{Clock, UnixMillis};
use crate::outbound::OutboundClient;
use crate::password_hashing::Hashing;
use crate::provider::Providers;

/// Audit exports that may run at once (the rest are refused as busy): each walks the log.
pub const MAX_EXPORTS: usize = 2;

/// Automatic pin checks (after a filing) of different pins downloading at once; more wait.
pub const PIN_CHECKS_AT_ONCE: usize = 2;

/// Shared by every operation; cheap to clone.
#[derive(Clone)]
pub struct Ctx {
    /// The database.
    pub pool: AnyPool,
    /// "Now", swappable in tests.
    pub clock: Arc<dyn Clock>,
    /// Loaded settings.
    pub settings: Arc<Settings>,
    /// Enabled cloud providers.
    pub providers: Providers,
    /// Renders and validates templates in the sandbox (with cloud-init's schema when found).
    pub renderer: Renderer,
    /// Client for pin pre-flights (tarball downloads), under the outbound policy for pins.
    pub pin_client: OutboundClient,
    /// Client for webhook deliveries, under the outbound policy for webhooks.
    pub webhook_client: OutboundClient,
    /// Client for fleet status scrapes, under the outbound policy for scraping (loopback and
    /// private addresses allowed, link-local refused); each scrape sets its fleet's timeout.
    pub scrape_client: OutboundClient,
    /// The bound every password hash and verify goes through (sized by
    /// `password_hash_concurrency`), so a burst of logins cannot take the memory.
    pub hashing: Arc<Hashing>,
    /// One catalogue refresh at a time, so a burst of requests against a stale cache asks the
    /// provider once, not once per request.
    pub catalogue_refresh: Arc<tokio::sync::Mutex<()>>,
    /// The (url, sha256) pairs an automatic pin check (after a filing) is downloading now:
    /// a burst of requests for one config downloads its tarball once.
    pub pin_checks_running: Arc<std::sync::Mutex<std::collections::HashSet<(String, String)>>>,
    /// Automatic pin checks of different pairs downloading at once: one slow host holds a
    /// slot, not every other config's check.
    pub pin_check_slots: Arc<tokio::sync::Semaphore>,
    /// Permits for audit exports running at once.
    pub exports: Arc<tokio::sync::Semaphore>,
    /// This process among the instances sharing the database: what its leases are held as.
    pub instance: Arc<crate::domain::lease::Instance>,
    /// Wakes the provisioning runner when a request becomes approved, so execution starts
    /// without waiting for the runner's next poll.
    pub jobs: Arc<tokio::sync::Notify>,
    /// Every fleet now, as the dashboard, its cards and `/metrics` read it: loaded at most
    /// once per `BOARD_TTL_MS`, and again at once after a sample, a fleet change or a request
    /// change invalidates it, so a room full of dashboards costs one query a second.
    pub board: Arc<ReadCache<Vec<crate::domain::capacity::FleetNow>>>,
    /// Bumped by every write that can change what a session lookup returns (logout, user
    /// disable/enable, role and password changes, flash messages): cached session rows
    /// loaded before a bump are never served after it.
    pub auth_epoch: Arc<AuthEpoch>,
}

/// A counter of writes that change what a session lookup returns. A reader loads it BEFORE
/// its database read and keeps what it read only while the counter is unchanged; a writer
/// bumps it AFTER its commit. So a row read before a write is never served once the write's
/// operation has returned. Only this process sees its bumps: another process's changes (the
/// CLI) are seen when the cached row's short validity runs out.
#[derive(Debug, Default)]
pub struct AuthEpoch(std::sync::atomic::AtomicU64);

impl AuthEpoch {
    /// The current value (read before loading what it guards).
    pub fn current(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Marks every session row loaded so far as out of date.
    pub fn bump(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// How long a loaded board serves readers when nothing invalidated it (clock milliseconds).
pub const BOARD_TTL_MS: i64 = 1_000;

/// A value read again at most once per `ttl` (measured on the clock operations use, so tests
/// with a manual clock see exactly the same rule), or sooner after [`ReadCache::invalidate`].
/// Concurrent misses load once: the others wait for that load and share its result.
pub struct ReadCache<T> {
    ttl: i64,
    generation: std::sync::atomic::AtomicU64,
    /// What was loaded last. A plain lock, held only to look or to swap an `Arc`: a hit (every
    /// dashboard request but one a second) waits, if at all, only for an `Arc` clone, and
    /// never goes through the async runtime.
    current: std::sync::Mutex<Option<Cached<T>>>,
    /// Held while loading, so concurrent misses load once.
    loading: tokio::sync::Mutex<()>,
}

struct Cached<T> {
    generation: u64,
    at: UnixMillis,
    value: Arc<T>,
}

impl<T> ReadCache<T> {
    /// An empty cache whose values serve for `ttl` milliseconds.
    pub fn new(ttl: i64) -> Self {
        Self {
            ttl,
            generation: std::sync::atomic::AtomicU64::new(0),
            current: std::sync::Mutex::new(None),
            loading: tokio::sync::Mutex::new(()),
        }
    }

    /// Marks what is cached as out of date: the next read loads again.
    pub fn invalidate(&self) {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// The cached value when it is younger than the ttl at `now` and nothing invalidated it
    /// since it was loaded; else the result of `load`, kept when it is `Ok`. An invalidation
    /// that arrives while `load` runs leaves the loaded value already out of date, so a write
    /// is never hidden behind a load that started before it.
    pub async fn get_or_load<E, F, Fut>(&self, now: UnixMillis, load: F) -> Result<Arc<T>, E>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        if let Some(value) = self.fresh(now) {
            return Ok(value);
        }
        let _loading = self.loading.lock().await;
        // Whoever held the load before us may have loaded what we need.
        if let Some(value) = self.fresh(now) {
            return Ok(value);
        }
        // Read before the load: an invalidation during it makes the result out of date.
        let generation = self.generation.load(std::sync::atomic::Ordering::SeqCst);
        let value = Arc::new(load().await?);
        let replaced = self
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(Cached {
                generation,
                at: now,
                value: value.clone(),
            });
        // Freed (perhaps a whole board) after the lock is let go, not under it.
        drop(replaced);
        Ok(value)
    }

    /// The value held, if nothing invalidated it and it is younger than the ttl at `now`.
    fn fresh(&self, now: UnixMillis) -> Option<Arc<T>> {
        let generation = self.generation.load(std::sync::atomic::Ordering::SeqCst);
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current
            .as_ref()
            .filter(|c| c.generation == generation && now >= c.at && now - c.at < self.ttl)
            .map(|c| c.value.clone())
    }
}

impl Ctx {
    /// Builds the context from settings: providers (Hetzner when a token is set), the renderer
    /// (with cloud-init's schema when found) and the outbound client for pins. Starts nothing
    /// and contacts nothing, so the CLI can build one as cheaply as the server.
    pub fn build(settings: Settings, pool: AnyPool, clock: Arc<dyn Clock>) -> anyhow::Result<Ctx> {
        let hetzner = settings.hetzner_api_token.clone().map(|token| {
            Arc::new(crate::provider::hetzner::Hetzner::new(
                &settings.hetzner_api_url,
                token,
            )) as Arc<dyn crate::provider::MachineProvider>
        });
        let schema = match crate::cloud_init::schema::locate(settings.cloud_init_schema.as_deref())
        {
            Some(path) => {
                let v = crate::cloud_init::schema::load(&path)?;
                tracing::info!(schema = %path.display(), "cloud-init schema check enabled");
                Some(Arc::new(v))
            }
            None => {
                tracing::warn!("cloud-init schema not found: payloads are checked without it (install Debian's cloud-init or set cloud_init_schema)");
                None
            }
        };
        let program =
            crate::cloud_init::worker::default_program(settings.render_worker.as_deref())?;
        let limits = crate::cloud_init::RenderLimits {
            timeout: settings.render_timeout,
            output_bytes: settings.render_output_bytes,
        };
        let renderer = Renderer::new(program, limits, schema);
        let mut pin = OutboundClient::builder(
            crate::outbound::Purpose::Pin,
            settings.outbound_allow.clone(),
        )
        .timeout(settings.pin_limits.timeout);
        if let Some(path) = &settings.outbound_ca_file {
            pin = pin.ca_file(path)?;
        }
        // The demo pins its own release server's tarball (https on loopback, allow-listed by
        // the demo alone); the demo hands its CA in through the settings, so this layer names
        // no simulator (`sim` builds on `context`).
        if let Some(pem) = settings.pin_extra_ca {
            pin = pin.ca_pem(pem)?;
        }
        // A receiver that hangs holds one delivery, never a provision: short limits keep the
        // outbox moving.
        let mut webhook = OutboundClient::builder(
            crate::outbound::Purpose::Webhook,
            settings.outbound_allow.clone(),
        )
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(std::time::Duration::from_secs(10));
        if let Some(path) = &settings.outbound_ca_file {
            webhook = webhook.ca_file(path)?;
        }
        // Fleets answer within their own scrape timeout (at most a minute); these bound a
        // scrape whose fleet asks for more than the client allows. No redirect is followed:
        // yubaba never redirects, and a node could otherwise send the scraper to any path of
        // any loopback or private host.
        let mut scrape = OutboundClient::builder(
            crate::outbound::Purpose::Scrape,
            settings.outbound_allow.clone(),
        )
        .no_redirects()
        .connect_timeout(std::time::Duration::from_secs(10))
        .timeout(std::time::Duration::from_secs(
            u64::from(crate::domain::fleet::SCRAPE_TIMEOUT_SECS_MAX) + 5,
        ));
        if let Some(path) = &settings.outbound_ca_file {
            scrape = scrape.ca_file(path)?;
        }
        let instance = Arc::new(crate::domain::lease::Instance::new(
            &settings.instance_name,
            &boot_id()?,
        ));
        Ok(Ctx {
            pool,
            instance,
            hashing: Arc::new(Hashing::new(settings.password_hash_concurrency)),
            catalogue_refresh: Arc::new(tokio::sync::Mutex::new(())),
            pin_checks_running: Arc::default(),
            pin_check_slots: Arc::new(tokio::sync::Semaphore::new(PIN_CHECKS_AT_ONCE)),
            scrape_client: scrape.build()?,
            webhook_client: webhook.build()?,
            clock,
            providers: Providers::new(hetzner, settings.simulated_provider),
            settings: Arc::new(settings),
            renderer,
            pin_client: pin.build()?,
            exports: Arc::new(tokio::sync::Semaphore::new(MAX_EXPORTS)),
            jobs: Arc::new(tokio::sync::Notify::new()),
            board: Arc::new(ReadCache::new(BOARD_TTL_MS)),
            auth_epoch: Arc::new(AuthEpoch::default()),
        })
    }

    /// A copy of this context as another process of the same instance name would be (a new
    /// boot id): what a restart after a crash looks like to the leases.
    pub fn rebooted(&self) -> anyhow::Result<Ctx> {
        let instance = crate::domain::lease::Instance::new(self.instance.name(), &boot_id()?);
        Ok(Ctx {
            instance: Arc::new(instance),
            ..self.clone()
        })
    }

    /// Whether the database answers (for `/readyz`).
    pub async fn database_ready(&self) -> bool {
        match self.pool.acquire().await {
            Ok(mut conn) => crate::db::ping(&mut conn).await.is_ok(),
            Err(_) => false,
        }
    }

    /// The current time.
    pub fn now(&self) -> UnixMillis {
        self.clock.now()
    }
}

/// A boot id: 64 random bits in hex, telling this process's leases from an earlier one's.
fn boot_id() -> anyhow::Result<String> {
    let mut b = [0u8; 8];
    getrandom::getrandom(&mut b).map_err(|e| anyhow::anyhow!("OS random source: {e}"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(
        cache: &ReadCache<u32>,
        now: UnixMillis,
        loads: &std::sync::atomic::AtomicU32,
    ) -> u32 {
        *cache
            .get_or_load(now, || async {
                Ok::<_, ()>(loads.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1)
            })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_cached_value_serves_until_its_ttl_or_an_invalidation() {
        let cache = ReadCache::new(1_000);
        let loads = std::sync::atomic::AtomicU32::new(0);
        assert_eq!(read(&cache, 10_000, &loads).await, 1);
        assert_eq!(read(&cache, 10_999, &loads).await, 1, "within the ttl");
        assert_eq!(read(&cache, 11_000, &loads).await, 2, "the ttl passed");
        cache.invalidate();
        assert_eq!(read(&cache, 11_001, &loads).await, 3, "invalidated");
        assert_eq!(
            read(&cache, 10_000, &loads).await,
            4,
            "a clock that went back"
        );
        let failed = cache
            .get_or_load(10_500, || async { Err::<u32, _>("down") })
            .await;
        assert_eq!(
            failed.map(|v| *v),
            Ok(4),
            "a valid value is served without loading"
        );
        cache.invalidate();
        let failed = cache
            .get_or_load(11_003, || async { Err::<u32, _>("down") })
            .await;
        assert_eq!(failed.unwrap_err(), "down");
        assert_eq!(
            read(&cache, 11_004, &loads).await,
            5,
            "an error is never kept"
        );
    }

    #[tokio::test]
    async fn an_invalidation_during_a_load_leaves_its_value_out_of_date() {
        let cache = ReadCache::new(1_000);
        let loaded = cache
            .get_or_load(5, || async {
                cache.invalidate();
                Ok::<_, ()>(1)
            })
            .await;
        assert_eq!(loaded.map(|v| *v), Ok(1), "the caller gets what it loaded");
        let next = cache.get_or_load(6, || async { Ok::<_, ()>(2) }).await;
        assert_eq!(next.map(|v| *v), Ok(2), "the next read loads again");
    }

    #[tokio::test]
    async fn readers_queued_behind_an_invalidated_load_load_again() {
        let cache = Arc::new(ReadCache::new(1_000));
        let loads = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let (started, start) = tokio::sync::oneshot::channel::<()>();
        let first = {
            let (cache, loads) = (cache.clone(), loads.clone());
            tokio::spawn(async move {
                *cache
                    .get_or_load(5, || async {
                        started.send(()).unwrap();
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        // A write lands while the first load runs.
                        cache.invalidate();
                        Ok::<_, ()>(loads.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
                    })
                    .await
                    .unwrap()
            })
        };
        start.await.unwrap();
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (cache, loads) = (cache.clone(), loads.clone());
                tokio::spawn(async move {
                    *cache
                        .get_or_load(5, || async {
                            Ok::<_, ()>(loads.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
                        })
                        .await
                        .unwrap()
                })
            })
            .collect();
        assert_eq!(first.await.unwrap(), 0);
        for w in waiters {
            assert_eq!(w.await.unwrap(), 1, "a waiter must not take the stale load");
        }
        assert_eq!(loads.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn concurrent_misses_load_once() {
        let cache = Arc::new(ReadCache::new(1_000));
        let loads = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let readers: Vec<_> = (0..16)
            .map(|_| {
                let (cache, loads) = (cache.clone(), loads.clone());
                tokio::spawn(async move {
                    *cache
                        .get_or_load(5, || async {
                            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                            Ok::<_, ()>(loads.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
                        })
                        .await
                        .unwrap()
                })
            })
            .collect();
        for r in readers {
            assert_eq!(r.await.unwrap(), 0);
        }
        assert_eq!(loads.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
