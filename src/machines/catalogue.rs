//! Refreshing and reading the cached provider catalogue.

use serde_json::json;

use super::MachinesError;
use crate::audit::{self, NewEntry};
use crate::auth::Caller;
use crate::db;
use crate::domain::machine::{CatalogueView, ProviderKind};
use crate::domain::{FieldError, Role};
use crate::provider::{Catalogue, Image, Location, ServerType};
use crate::state::AppState;

/// Asks the provider for its catalogue and replaces the cache (operator and up).
#[tracing::instrument(skip_all, fields(provider = %kind), err)]
pub async fn refresh(
    state: &AppState,
    caller: &Caller,
    kind: ProviderKind,
) -> Result<Catalogue, MachinesError> {
    caller.require(Role::Operator)?;
    let provider = state.providers.get(kind).ok_or_else(|| {
        FieldError::new(
            "provider",
            match kind {
                ProviderKind::Hetzner => "hetzner is not configured (set HETZNER_API_TOKEN)",
                ProviderKind::Simulated => "the simulated provider exists only in the demo",
            },
        )
    })?;
    let catalogue = provider.catalogue().await?;
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
    let now = state.clock.now();
    let mut tx = db::begin_write(&state.pool).await?;
    db::catalogue::replace(&mut tx, kind.as_str(), &rows, now).await?;
    audit::append(&mut tx, now, NewEntry {
        actor: &caller.actor,
        action: "catalogue.refreshed",
        target_kind: "provider",
        target_id: kind.as_str(),
        details: json!({ "locations": catalogue.locations.len(), "server_types": catalogue.server_types.len(), "images": catalogue.images.len() }),
    })
    .await?;
    tx.commit().await?;
    Ok(catalogue)
}

/// The cached catalogue of a provider, and when it was refreshed.
pub async fn cached(
    pool: &sqlx::SqlitePool,
    kind: ProviderKind,
) -> Result<(Catalogue, Option<i64>), MachinesError> {
    let mut conn = pool.acquire().await?;
    let rows = db::catalogue::for_provider(&mut conn, kind.as_str()).await?;
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
    Ok((c, refreshed))
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
