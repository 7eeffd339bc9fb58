//! Approvals handlers.

use actix_htmx::Htmx;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};

use super::views;
use crate::auth::Principal;
use crate::domain::{ProvisionState, Role};
use crate::provisioning::{requests, ProvisionFilter};
use crate::state::AppState;
use crate::web::errors::WebError;
use crate::web::layout::fragment;
use crate::web::reply::Reply;

/// Requests the inbox shows at most (the oldest waiting ones expire first anyway).
const INBOX_LIMIT: u32 = 200;

/// GET /approvals
pub async fn inbox(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
) -> Result<HttpResponse, WebError> {
    let caller = principal.caller();
    let pending = if principal.role.includes(Role::Approver) {
        let filter = ProvisionFilter {
            state: Some(ProvisionState::PendingApproval),
            ..ProvisionFilter::default()
        };
        let (mut items, _) =
            requests::list(&state.ctx, &caller, &filter, None, INBOX_LIMIT).await?;
        // What they approved already is not waiting for them any more.
        items.retain(|p| !p.approvers.iter().any(|a| a == &principal.username));
        items
    } else {
        Vec::new()
    };
    let body = || views::inbox(principal.role, &principal.username, &pending);
    let reply = Reply::new(&state, &principal, &htmx);
    Ok(reply
        .page(StatusCode::OK, "Approvals", "approvals", body)
        .await)
}

/// GET /approvals/badge: the count partial the navigation loads and refreshes.
pub async fn badge(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, WebError> {
    let count = requests::awaiting_approval_count(&state.ctx, &principal.caller()).await?;
    Ok(fragment(StatusCode::OK, views::badge(count)))
}
