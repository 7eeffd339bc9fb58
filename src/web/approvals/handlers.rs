//! Approvals handlers.

use actix_web::http::StatusCode;
use actix_web::HttpResponse;

use super::views;
use crate::capacity::board;
use crate::domain::{ProvisionState, Role};
use crate::provisioning::{requests, ProvisionFilter};
use crate::web::errors::WebError;
use crate::web::layout::fragment;
use crate::web::reply::Reply;

/// Requests the inbox shows at most (the oldest waiting ones expire first anyway).
const INBOX_LIMIT: u32 = 200;

/// GET /approvals
pub async fn inbox(reply: Reply) -> Result<HttpResponse, WebError> {
    let caller = reply.caller();
    let pending = if reply.principal.role.includes(Role::Approver) {
        let filter = ProvisionFilter {
            state: Some(ProvisionState::PendingApproval),
            ..ProvisionFilter::default()
        };
        let (mut items, _) =
            requests::list(reply.ctx(), &caller, &filter, None, INBOX_LIMIT).await?;
        // What they approved already is not waiting for them any more.
        items.retain(|p| !p.approvers.iter().any(|a| a == &reply.principal.username));
        items
    } else {
        Vec::new()
    };
    // Each fleet's state now sorts live restores first and is shown beside each request.
    let board = board::board(reply.ctx(), &caller).await?;
    let rows = views::triage(&pending, &board);
    let body = || views::inbox(reply.principal.role, &reply.principal.username, &rows);
    Ok(reply
        .page(StatusCode::OK, "Approvals", "approvals", body)
        .await)
}

/// GET /approvals/badge: the count partial the navigation loads and refreshes.
pub async fn badge(reply: Reply) -> Result<HttpResponse, WebError> {
    let count = requests::awaiting_approval_count(reply.ctx(), &reply.caller()).await?;
    Ok(fragment(StatusCode::OK, views::badge(count)))
}
