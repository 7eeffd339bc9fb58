//! GET / (the dashboard) and GET /dashboard/cards (its refreshed cards).

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};

use super::views;
use crate::capacity::board;
use crate::domain::Role;
use crate::web::errors::WebError;
use crate::web::layout::fragment;
use crate::web::reply::Reply;

/// Longest `seen` token read; a longer one is ignored (it only drives announcements).
const SEEN_MAX: usize = 16_384;

/// The dashboard: a card per fleet and who you are. The latest activity lives on the audit
/// page: the dashboard is what every operator keeps open during an incident, so it reads the
/// (cached) board and nothing else.
pub async fn show(reply: Reply) -> Result<HttpResponse, WebError> {
    let fleets = board::board_shared(reply.ctx(), &reply.caller()).await?;
    let can_create = reply.principal.role.includes(Role::Operator);
    let now = reply.ctx().now();
    let cards = reply.state.cards.get(&fleets, now, can_create, || {
        views::cards(now, &fleets, can_create).into_string()
    });
    let body = || views::overview(&reply.principal, &cards);
    Ok(reply.page(StatusCode::OK, "Overview", "home", body).await)
}

/// `?seen=` of the cards partial: the statuses the refreshing cards show.
#[derive(Debug, serde::Deserialize)]
pub struct CardsQuery {
    seen: Option<String>,
}

/// GET /dashboard/cards: the fleet cards alone (polled by the dashboard), with a live-region
/// update when a status changed since `seen`.
pub async fn cards(reply: Reply, query: web::Query<CardsQuery>) -> Result<HttpResponse, WebError> {
    let fleets = board::board_shared(reply.ctx(), &reply.caller()).await?;
    let seen = query.seen.as_deref().filter(|s| s.len() <= SEEN_MAX);
    let changes = views::status_changes(seen, &fleets);
    let can_create = reply.principal.role.includes(Role::Operator);
    let now = reply.ctx().now();
    let cards = reply.state.cards.get(&fleets, now, can_create, || {
        views::cards(now, &fleets, can_create).into_string()
    });
    let body = maud::html! { (cards) (views::announcement(&changes)) };
    Ok(fragment(StatusCode::OK, body))
}
