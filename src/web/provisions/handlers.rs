//! Provision page handlers: parse, call one operation, render.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};

use super::forms::{ApproveForm, RejectForm, RequestForm};
use super::views::{self, path_of, ApproveDraft, FormChoices};
use crate::auth::Principal;
use crate::domain::FieldErrors;
use crate::error::OpError;
use crate::provisioning::{requests, runner, NewRequest};
use crate::state::AppState;
use crate::web::components::count_of;
use crate::web::errors::WebError;
use crate::web::layout::{fragment, respond, wants_partial, Frame};
use crate::web::reply::{submitted, Reply, Shown};
use crate::web::{paths, see_other};

/// Query of the request form: a fleet to preselect.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct NewQuery {
    pub fleet: String,
}

async fn choices(state: &AppState, principal: &Principal) -> Result<FormChoices, WebError> {
    let caller = principal.caller();
    let fleets = crate::fleets::list(&state.ctx, &caller).await?;
    let configs = crate::machine_setup::configs::names(&state.ctx, &caller).await?;
    let templates = crate::machine_setup::templates::list(&state.ctx, &caller).await?;
    Ok(FormChoices {
        fleets: fleets
            .into_iter()
            .map(|f| {
                (
                    f.spec.name().to_string(),
                    f.spec.restore_machine_config().to_string(),
                )
            })
            .collect(),
        configs,
        templates: templates
            .into_iter()
            .map(|t| t.name.as_str().to_owned())
            .collect(),
    })
}

/// The request form, `shown` fresh or with its errors.
async fn form_page(
    reply: &Reply,
    form: &RequestForm,
    shown: Shown<'_>,
) -> Result<HttpResponse, WebError> {
    let errors = shown.errors();
    let choices = choices(&reply.state, &reply.principal).await?;
    let body = || views::form_page(&reply.principal, form, errors, &choices);
    Ok(reply
        .page(shown.status(), "Request machines", "provisions", body)
        .await)
}

/// The form as the operations' input: an empty machine config becomes the fleet's restore
/// config. An unknown fleet is left for the operation to name.
async fn to_request(
    state: &AppState,
    principal: &Principal,
    form: &RequestForm,
) -> Result<NewRequest, WebError> {
    let restore = if form.machine_config.trim().is_empty() && !form.fleet.trim().is_empty() {
        match crate::fleets::get(&state.ctx, &principal.caller(), form.fleet.trim()).await {
            Ok(f) => Some(f.spec.restore_machine_config().to_string()),
            Err(OpError::NotFound(_) | OpError::Invalid(_)) => None,
            Err(e) => return Err(e.into()),
        }
    } else {
        None
    };
    Ok(form.to_request(restore.as_deref()))
}

/// GET /provisions/new
pub async fn new(reply: Reply, query: web::Query<NewQuery>) -> Result<HttpResponse, WebError> {
    let form = RequestForm::blank(&query.fleet);
    form_page(&reply, &form, Shown::Fresh).await
}

/// POST /provisions/plan: the live plan under the form (nothing stored).
pub async fn plan(reply: Reply, form: web::Form<RequestForm>) -> Result<HttpResponse, WebError> {
    let req = to_request(&reply.state, &reply.principal, &form).await?;
    // Problems the plan can name are shown in its own pane, not as a whole error page.
    match requests::plan(reply.ctx(), &reply.caller(), &req).await {
        Ok(draft) => Ok(fragment(StatusCode::OK, views::plan_preview(&draft))),
        Err(OpError::Invalid(errors)) => Ok(fragment(
            StatusCode::UNPROCESSABLE_ENTITY,
            views::plan_problem(&errors),
        )),
        Err(OpError::NotFound(what)) => {
            let mut errors = FieldErrors::default();
            errors.push("plan", format!("{what} not found"));
            Ok(fragment(
                StatusCode::UNPROCESSABLE_ENTITY,
                views::plan_problem(&errors),
            ))
        }
        Err(e) => Err(e.into()),
    }
}

/// POST /provisions: files the request and sends the requester to its page.
pub async fn create(reply: Reply, form: web::Form<RequestForm>) -> Result<HttpResponse, WebError> {
    let req = to_request(&reply.state, &reply.principal, &form).await?;
    submitted(
        requests::create(reply.ctx(), &reply.caller(), &req).await,
        async |p| {
            let (id, needed) = (p.id, p.approvals_required);
            let msg = format!(
                "Request #{id} filed: it waits for {}.",
                count_of(needed, "approval", "approvals")
            );
            reply
                .done(&msg, see_other(&path_of(paths::PROVISION, id)))
                .await
        },
        async |errors| form_page(&reply, &form, Shown::Refused(&errors)).await,
    )
    .await
}

/// A request's page, `shown` fresh or with errors at the approve or reject form, the approve
/// form as `draft` says.
async fn detail_page(
    reply: &Reply,
    id: i64,
    shown: Shown<'_>,
    draft: &ApproveDraft,
) -> Result<HttpResponse, WebError> {
    let form_errors = shown.errors();
    let d = requests::get(&reply.state.ctx, &reply.principal.caller(), id).await?;
    let body = || views::detail(&reply.principal, &d, form_errors, draft);
    Ok(reply
        .page(
            shown.status(),
            format!("Provision #{id}"),
            "provisions",
            body,
        )
        .await)
}

/// GET /provisions/{id}
pub async fn show(reply: Reply, id: web::Path<i64>) -> Result<HttpResponse, WebError> {
    detail_page(&reply, *id, Shown::Fresh, &ApproveDraft::default()).await
}

/// GET /provisions/{id}/progress: the polled partial (opened directly, the whole page).
pub async fn progress(reply: Reply, id: web::Path<i64>) -> Result<HttpResponse, WebError> {
    let d = requests::get(reply.ctx(), &reply.caller(), *id).await?;
    let title = format!("Provision #{id}");
    // A poll must not consume the flash message meant for the next full page.
    let frame = if wants_partial(&reply.htmx) {
        Frame {
            title,
            principal: Some(reply.principal.clone()),
            flash: None,
            section: "provisions",
        }
    } else {
        Frame::load(&reply.state, &reply.principal, title, "provisions").await
    };
    let full = || {
        views::detail(
            &reply.principal,
            &d,
            &FieldErrors::default(),
            &ApproveDraft::default(),
        )
    };
    let partial = || views::progress(&reply.principal, &d);
    Ok(respond(&reply.htmx, StatusCode::OK, frame, full, partial))
}

/// POST /provisions/{id}/approve, in two steps. The first submit (plan hash and optional
/// comment) is reviewed by every rule the approval applies, without writing, and brings the
/// page back with a confirmation repeating the count and the cost; only its submit
/// (`confirm=yes`, the same plan hash and comment) approves. A plan hash or comment that
/// breaks its rule brings the page back (422) with the message at the approve form.
pub async fn approve(
    reply: Reply,
    id: web::Path<i64>,
    form: web::Form<ApproveForm>,
) -> Result<HttpResponse, WebError> {
    let id = *id;
    let typed = ApproveDraft {
        comment: form.comment.clone(),
        confirming: false,
    };
    let seen = match form.seen_plan_hash() {
        Ok(seen) => seen,
        Err(e) => {
            let errors = FieldErrors::from(e);
            return detail_page(&reply, id, Shown::Refused(&errors), &typed).await;
        }
    };
    let approval = requests::Approval {
        seen_plan_hash: seen.as_ref(),
        comment: &form.comment,
    };
    if !form.confirmed() {
        return match requests::review_approval(reply.ctx(), &reply.caller(), id, &approval).await {
            Ok((_, comment)) => {
                let confirm = ApproveDraft {
                    comment: comment.unwrap_or_default(),
                    confirming: true,
                };
                detail_page(&reply, id, Shown::Fresh, &confirm).await
            }
            Err(OpError::Invalid(errors)) => {
                detail_page(&reply, id, Shown::Refused(&errors), &typed).await
            }
            Err(e) => Err(e.into()),
        };
    }
    submitted(
        requests::approve_with(reply.ctx(), &reply.caller(), id, &approval).await,
        async |p| {
            let msg = format!(
                "Approved request #{} ({} of {} approvals); it is now {}.",
                p.id,
                p.approvers.len(),
                p.approvals_required,
                p.state
            );
            reply
                .done(&msg, see_other(&path_of(paths::PROVISION, p.id)))
                .await
        },
        async |errors| detail_page(&reply, id, Shown::Refused(&errors), &typed).await,
    )
    .await
}

/// POST /provisions/{id}/reject: a reason is required; without one the page comes back with
/// the message at the reason box.
pub async fn reject(
    reply: Reply,
    id: web::Path<i64>,
    form: web::Form<RejectForm>,
) -> Result<HttpResponse, WebError> {
    submitted(
        requests::reject(reply.ctx(), &reply.caller(), *id, &form.reason).await,
        async |p| {
            let msg = format!("Rejected request #{}.", p.id);
            reply
                .done(&msg, see_other(&path_of(paths::PROVISION, p.id)))
                .await
        },
        async |errors| {
            detail_page(
                &reply,
                *id,
                Shown::Refused(&errors),
                &ApproveDraft::default(),
            )
            .await
        },
    )
    .await
}

/// POST /provisions/{id}/cancel
pub async fn cancel(reply: Reply, id: web::Path<i64>) -> Result<HttpResponse, WebError> {
    let p = requests::cancel(reply.ctx(), &reply.caller(), *id).await?;
    reply
        .done(
            &format!("Cancelled request #{}.", p.id),
            see_other(&path_of(paths::PROVISION, p.id)),
        )
        .await
}

/// POST /provisions/{id}/machines/{idx}/destroy: an approver destroys a failed machine's
/// server. From htmx the progress partial comes back; otherwise the page, after a redirect.
pub async fn destroy(reply: Reply, path: web::Path<(i64, u32)>) -> Result<HttpResponse, WebError> {
    let (id, idx) = *path;
    runner::destroy_machine(reply.ctx(), &reply.caller(), id, idx).await?;
    if wants_partial(&reply.htmx) {
        let d = requests::get(reply.ctx(), &reply.caller(), id).await?;
        return Ok(fragment(
            StatusCode::OK,
            views::progress(&reply.principal, &d),
        ));
    }
    reply
        .done(
            &format!("Destroyed the server of machine {idx} of request #{id}."),
            see_other(&path_of(paths::PROVISION, id)),
        )
        .await
}
