//! Refreshing and reading the cached provider catalogue. A cache that is empty or older than
//! `catalogue_max_age_hours` is fetched again when it is used, so nobody has to click Refresh
//! before an API client can create a machine config.

use serde_json::json;

use crate::audit::{self, Action};
use crate::auth::Caller;
use crate::context::Ctx;
use crate::db;
use crate::domain::machine::{CatalogueView, ProviderKind};
use crate::domain::{millis, FieldError, Role, UnixMillis};
use crate::error::OpError;
use crate::provider::{Catalogue, Image, Location, ServerType};

/// Asks the provider for its catalogue and replaces the cache (operator and up).
#[tracing::instrument(skip_all, fields(provider = %kind), err)]
pub async fn refresh(ctx: &Ctx, caller: &Caller, kind: ProviderKind) -> Result<Catalogue, OpError> {
    caller.require(Role::Operator)?;
    let provider = ctx.providers.get(kind).ok_or_else(|| {
        FieldError::new(
            "provider",
            match kind {
                ProviderKind::Hetzner => "hetzner is not configured (set HETZNER_API_TOKEN)",
                ProviderKind::Simulated => "the simulated provider exists only in the demo",
            },
        )
    })?;
    // Refreshes queue behind one another, and one that finds a fetch younger than the interval
    // answers from it: a burst of clicks or API calls costs the provider (and its rate limit,
    // shared with provisioning) one call, and the audit log one entry.
    let _one_at_a_time = ctx.catalogue_refresh.lock().await;
    let (cached, fetched_at) = cached_rows(&ctx.pool, kind).await?;
    if fetched_at.is_some_and(|t| ctx.now().saturating_sub(t) < MIN_REFRESH_INTERVAL_MS) {
        return Ok(cached);
    }
    fetch_and_store(ctx, caller, kind, provider.as_ref()).await
}

/// A refresh within this many milliseconds of the last fetch answers from the cache.
const MIN_REFRESH_INTERVAL_MS: i64 = 60_000;

/// Asks the provider and replaces the cache, audited as `caller`; the caller holds the lock.
async fn fetch_and_store(
    ctx: &Ctx,
    caller: &Caller,
    kind: ProviderKind,
    provider: &dyn crate::provider::MachineProvider,
) -> Result<Catalogue, OpError> {
    let catalogue = provider.catalogue().await?;
    tracing::info!(
        provider = provider.name(),
        locations = catalogue.locations.len(),
        server_types = catalogue.server_types.len(),
        images = catalogue.images.len(),
        "catalogue fetched"
    );
    let mut rows: Vec<(&str, String, String)> = Vec::new();
    rows.extend(
        catalogue
            .locations
            .iter()
            .map(|l| ("location", l.name.clone(), json!(l).to_string())),
    );
    rows.extend(
        catalogue
            .server_types
            .iter()
            .map(|t| ("server_type", t.name.clone(), json!(t).to_string())),
    );
    rows.extend(
        catalogue
            .images
            .iter()
            .map(|i| ("image", i.name.clone(), json!(i).to_string())),
    );
    let now = ctx.clock.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    db::catalogue::replace(&mut tx, kind.as_str(), &rows, now).await?;
    let details = json!({ "locations": catalogue.locations.len(), "server_types": catalogue.server_types.len(), "images": catalogue.images.len() });
    let action = Action::CatalogueRefreshed;
    audit::record(
        &mut tx,
        caller,
        now,
        action,
        "provider",
        kind.as_str(),
        details,
    )
    .await?;
    tx.commit().await?;
    Ok(catalogue)
}

/// The cached catalogue of a provider, and when it was refreshed (viewer and up).
pub async fn cached(
    ctx: &Ctx,
    caller: &Caller,
    kind: ProviderKind,
) -> Result<(Catalogue, Option<i64>), OpError> {
    caller.require(Role::Viewer)?;
    cached_rows(&ctx.pool, kind).await
}

/// The cache as stored; callers have checked the role.
async fn cached_rows(
    pool: &sqlx::AnyPool,
    kind: ProviderKind,
) -> Result<(Catalogue, Option<i64>), OpError> {
    let mut conn = pool.acquire().await?;
    let rows = db::catalogue::for_provider(&mut conn, kind.as_str()).await?;
    Ok(from_rows(rows))
}

/// The catalogue the cached rows hold, and when it was fetched (`None`: never). A row that no
/// longer reads back is skipped, as if the provider had not listed it.
pub fn from_rows(rows: Vec<db::catalogue::CatalogueRow>) -> (Catalogue, Option<i64>) {
    let mut c = Catalogue::default();
    let mut refreshed = None;
    for r in rows {
        refreshed = Some(refreshed.map_or(r.refreshed_at, |t: i64| t.max(r.refreshed_at)));
        match r.kind.as_str() {
            "location" => c
                .locations
                .extend(serde_json::from_str::<Location>(&r.details).ok()),
            "server_type" => c
                .server_types
                .extend(serde_json::from_str::<ServerType>(&r.details).ok()),
            "image" => c
                .images
                .extend(serde_json::from_str::<Image>(&r.details).ok()),
            _ => {}
        }
    }
    (c, refreshed)
}

/// What validation needs from a catalogue.
pub fn view(c: &Catalogue) -> CatalogueView {
    CatalogueView {
        locations: c.locations.iter().map(|l| l.name.clone()).collect(),
        server_types: c
            .server_types
            .iter()
            .map(|t| (t.name.clone(), (t.cores, t.memory_gb)))
            .collect(),
        images: c.images.iter().map(|i| i.name.clone()).collect(),
    }
}

/// A provider's catalogue as the cache holds it after the refresh-on-use check (`current`) looked at it.
#[derive(Debug, Clone)]
pub struct CurrentCatalogue {
    pub provider: ProviderKind,
    pub catalogue: Catalogue,
    /// When the cache was last filled; `None` when it never was.
    pub fetched_at: Option<UnixMillis>,
    /// Why fetching it again failed, when it had to be fetched and could not.
    pub fetch_error: Option<String>,
}

impl CurrentCatalogue {
    /// The message validation shows when there is nothing to check a choice against.
    pub fn unavailable_message(&self) -> Option<String> {
        let reason = self.fetch_error.as_deref()?;
        self.catalogue.locations.is_empty().then(|| {
            format!(
                "the {} catalogue could not be fetched: {reason}; refresh it on /catalogue",
                self.provider
            )
        })
    }
}

fn is_stale(ctx: &Ctx, fetched_at: Option<UnixMillis>) -> bool {
    let max_age = millis(ctx.settings.catalogue_max_age);
    fetched_at.is_none_or(|t| ctx.clock.now().saturating_sub(t) > max_age)
}

/// The cached catalogue of an enabled provider, fetched again (as `system`, audited) first when
/// it is empty or older than the setting. A failed fetch keeps the old cache and says why.
#[tracing::instrument(skip_all, fields(provider = %kind))]
pub(super) async fn current(ctx: &Ctx, kind: ProviderKind) -> Result<CurrentCatalogue, OpError> {
    let (catalogue, fetched_at) = cached_rows(&ctx.pool, kind).await?;
    if ctx.providers.get(kind).is_none() || !is_stale(ctx, fetched_at) {
        return Ok(CurrentCatalogue {
            provider: kind,
            catalogue,
            fetched_at,
            fetch_error: None,
        });
    }
    let _one_at_a_time = ctx.catalogue_refresh.lock().await;
    // Someone else may have fetched it while this request waited.
    let (catalogue, fetched_at) = cached_rows(&ctx.pool, kind).await?;
    if !is_stale(ctx, fetched_at) {
        return Ok(CurrentCatalogue {
            provider: kind,
            catalogue,
            fetched_at,
            fetch_error: None,
        });
    }
    // Of several instances sharing the cache, the one holding the refresh lease fetches; the
    // others serve what is cached meanwhile (an empty cache is fetched by whoever needs it).
    // A lease that cannot be asked about counts as held: a second fetch of a public
    // catalogue costs less than serving a stale one.
    let refresher = fetched_at.is_none()
        || crate::leases::hold(ctx, &crate::leases::catalogue(kind), ctx.settings.lease)
            .await
            .unwrap_or(true);
    let Some(provider) = ctx.providers.get(kind).filter(|_| refresher) else {
        return Ok(CurrentCatalogue {
            provider: kind,
            catalogue,
            fetched_at,
            fetch_error: None,
        });
    };
    match fetch_and_store(ctx, &Caller::system(), kind, provider.as_ref()).await {
        Ok(fresh) => Ok(CurrentCatalogue {
            provider: kind,
            catalogue: fresh,
            fetched_at: Some(ctx.clock.now()),
            fetch_error: None,
        }),
        Err(OpError::Upstream(e)) => {
            tracing::warn!(error = %e, "catalogue refresh on use failed; keeping the cache");
            Ok(CurrentCatalogue {
                provider: kind,
                catalogue,
                fetched_at,
                fetch_error: Some(e.to_string()),
            })
        }
        Err(e) => Err(e),
    }
}

/// Every enabled provider's current catalogue (viewer and up).
pub async fn list(ctx: &Ctx, caller: &Caller) -> Result<Vec<CurrentCatalogue>, OpError> {
    caller.require(Role::Viewer)?;
    let mut all = Vec::new();
    for kind in ctx.providers.enabled() {
        all.push(current(ctx, kind).await?);
    }
    Ok(all)
}

/// Fetches the catalogue of every configured provider whose cache is empty, so the first API
/// client finds it filled (started beside the server: start-up does not wait for a provider).
pub async fn fetch_missing_once(ctx: &Ctx) {
    for kind in ctx.providers.enabled() {
        match cached_rows(&ctx.pool, kind).await {
            Ok((_, None)) => {
                if let Err(e) = current(ctx, kind).await {
                    tracing::warn!(provider = %kind, error = %e, "start-up catalogue fetch failed");
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(provider = %kind, error = %e, "cannot read the catalogue cache")
            }
        }
    }
}

/// [`fetch_missing_once`] as a background task that gives up when `shutdown` turns true.
pub async fn fetch_missing_until_stopped(
    ctx: Ctx,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    tokio::select! {
        () = fetch_missing_once(&ctx) => {}
        () = crate::shutdown::requested(&mut shutdown) => {}
    }
}
