//! Catalogue handlers.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};

use super::views;
use crate::domain::machine::ProviderKind;
use crate::error::OpError;
use crate::machine_setup::catalogue;
use crate::web::errors::WebError;
use crate::web::reply::Reply;
use crate::web::{paths, see_other};

/// GET /catalogue
pub async fn show(reply: Reply) -> Result<HttpResponse, WebError> {
    // The same operation the API uses: a cache that is empty or stale is fetched on the way.
    let all: Vec<_> = catalogue::list(reply.ctx(), &reply.caller())
        .await?
        .into_iter()
        .map(|c| (c.provider, c.catalogue, c.fetched_at))
        .collect();
    let body = || views::show(&reply.principal, &all);
    Ok(reply
        .page(StatusCode::OK, "Provider catalogue", "catalogue", body)
        .await)
}

/// POST /catalogue/{provider}/refresh
pub async fn refresh(reply: Reply, provider: web::Path<String>) -> Result<HttpResponse, WebError> {
    let kind = ProviderKind::parse_field("provider", &provider).map_err(|_| {
        OpError::NotFound(format!(
            "provider {:?}",
            provider.chars().take(40).collect::<String>()
        ))
    })?;
    let c = catalogue::refresh(reply.ctx(), &reply.caller(), kind).await?;
    reply
        .done(
            &format!(
                "{kind} catalogue refreshed: {} locations, {} server types, {} images.",
                c.locations.len(),
                c.server_types.len(),
                c.images.len()
            ),
            see_other(paths::CATALOGUE),
        )
        .await
}
