//! GET /api/v1/catalogue and POST /api/v1/catalogue/{provider}/refresh.

use actix_web::web::{self, Json};
use serde::Serialize;

use super::errors::ApiError;
use crate::auth::Principal;
use crate::domain::clock::format_utc;
use crate::domain::machine::ProviderKind;
use crate::machine_setup::catalogue::{self, CurrentCatalogue};
use crate::provider::{Image, Location, ServerType};
use crate::state::AppState;

/// A location.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LocationJson {
    pub name: String,
    pub description: String,
    pub city: String,
    pub country: String,
    pub network_zone: String,
}

/// A price at one location, as the provider states it (gross, text to keep precision).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PriceJson {
    pub location: String,
    pub monthly: String,
}

/// A server type with its size and prices.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ServerTypeJson {
    pub name: String,
    pub description: String,
    pub cores: u32,
    pub memory_gb: f64,
    pub disk_gb: u64,
    /// `x86_64` or `aarch64`.
    pub arch: String,
    pub deprecated: bool,
    pub prices: Vec<PriceJson>,
}

/// A system image.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ImageJson {
    pub name: String,
    pub description: String,
    pub archs: Vec<String>,
}

/// One provider's catalogue and when it was fetched.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProviderCatalogueJson {
    /// `hetzner` or `simulated`.
    pub provider: String,
    /// RFC 3339, UTC; null when it was never fetched.
    pub fetched_at: Option<String>,
    /// Why the last fetch failed, when it was due and failed (the older cache is shown).
    pub fetch_error: Option<String>,
    pub locations: Vec<LocationJson>,
    pub server_types: Vec<ServerTypeJson>,
    pub images: Vec<ImageJson>,
}

/// Every enabled provider's catalogue.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CatalogueJson {
    pub items: Vec<ProviderCatalogueJson>,
}

fn location(l: &Location) -> LocationJson {
    LocationJson {
        name: l.name.clone(),
        description: l.description.clone(),
        city: l.city.clone(),
        country: l.country.clone(),
        network_zone: l.network_zone.clone(),
    }
}

fn server_type(t: &ServerType) -> ServerTypeJson {
    ServerTypeJson {
        name: t.name.clone(),
        description: t.description.clone(),
        cores: t.cores,
        memory_gb: t.memory_gb,
        disk_gb: t.disk_gb,
        arch: t.arch.clone(),
        deprecated: t.deprecated,
        prices: t
            .monthly_price
            .iter()
            .map(|(location, monthly)| PriceJson {
                location: location.clone(),
                monthly: monthly.clone(),
            })
            .collect(),
    }
}

fn image(i: &Image) -> ImageJson {
    ImageJson {
        name: i.name.clone(),
        description: i.description.clone(),
        archs: i.archs.clone(),
    }
}

impl From<&CurrentCatalogue> for ProviderCatalogueJson {
    fn from(c: &CurrentCatalogue) -> Self {
        Self {
            provider: c.provider.as_str().to_owned(),
            fetched_at: c.fetched_at.map(format_utc),
            fetch_error: c.fetch_error.clone(),
            locations: c.catalogue.locations.iter().map(location).collect(),
            server_types: c.catalogue.server_types.iter().map(server_type).collect(),
            images: c.catalogue.images.iter().map(image).collect(),
        }
    }
}

/// Every enabled provider's locations, server types (with prices) and images (viewer and up);
/// a cache older than `catalogue_max_age_hours` is fetched again first.
#[utoipa::path(get, path = "/api/v1/catalogue", tag = "catalogue",
    responses((status = 200, body = CatalogueJson)))]
pub async fn show(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<Json<CatalogueJson>, ApiError> {
    let all = catalogue::list(&state.ctx, &principal.caller()).await?;
    Ok(Json(CatalogueJson {
        items: all.iter().map(ProviderCatalogueJson::from).collect(),
    }))
}

/// Asks the provider for its catalogue now and replaces the cache (operator).
#[utoipa::path(post, path = "/api/v1/catalogue/{provider}/refresh", tag = "catalogue",
    params(("provider" = String, Path, description = "An enabled provider: hetzner or simulated (demo)", pattern = "^(hetzner|simulated)$")),
    responses((status = 200, body = ProviderCatalogueJson),
              (status = 403, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 422, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 502, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn refresh(
    state: web::Data<AppState>,
    principal: Principal,
    provider: web::Path<String>,
) -> Result<Json<ProviderCatalogueJson>, ApiError> {
    let kind = ProviderKind::parse_field("provider", &provider)
        .map_err(|e| ApiError::invalid(e.into()))?;
    let fresh = catalogue::refresh(&state.ctx, &principal.caller(), kind).await?;
    Ok(Json(ProviderCatalogueJson::from(&CurrentCatalogue {
        provider: kind,
        catalogue: fresh,
        fetched_at: Some(state.ctx.clock.now()),
        fetch_error: None,
    })))
}
