//! Provision pages: the request form with its live plan, the detail page with approve, reject,
//! cancel and destroy, and the polled progress partial. The history list is `web::history`'s.

pub mod forms;
pub mod handlers;
pub mod views;

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};

use crate::fleets::FleetsError;
use crate::machines::MachinesError;
use crate::provisioning::ProvisioningError;
use crate::web::errors::WebError;

/// A provision page's error: the operation's refusal with its status (403 naming the
/// four-eyes rule, 409 naming the state), otherwise as every page fails.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// Refused by the request's state (already approved, expired, superseded).
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Web(#[from] WebError),
}

impl From<ProvisioningError> for PageError {
    fn from(e: ProvisioningError) -> Self {
        use ProvisioningError as P;
        match e {
            P::Forbidden(f) => WebError::Forbidden(f.to_string()).into(),
            P::NotAllowed(rule) => WebError::Forbidden(rule).into(),
            P::Invalid(errors) => WebError::BadRequest(errors.to_string()).into(),
            P::NotFound(what) => WebError::NotFound(format!("{what} not found")).into(),
            P::Conflict(why) => PageError::Conflict(why),
            P::Internal(e) => WebError::Internal(e).into(),
        }
    }
}

impl From<FleetsError> for PageError {
    fn from(e: FleetsError) -> Self {
        match e {
            FleetsError::Forbidden(f) => WebError::Forbidden(f.to_string()).into(),
            FleetsError::Invalid(errors) => WebError::BadRequest(errors.to_string()).into(),
            FleetsError::NotFound(what) => WebError::NotFound(format!("{what} not found")).into(),
            FleetsError::Conflict(why) => PageError::Conflict(why),
            FleetsError::Internal(e) => WebError::Internal(e).into(),
        }
    }
}

impl From<MachinesError> for PageError {
    fn from(e: MachinesError) -> Self {
        PageError::Web(e.into())
    }
}

impl ResponseError for PageError {
    fn status_code(&self) -> StatusCode {
        match self {
            PageError::Conflict(_) => StatusCode::CONFLICT,
            PageError::Web(w) => w.status_code(),
        }
    }

    fn error_response(&self) -> HttpResponse {
        match self {
            PageError::Conflict(why) => crate::http::html_error(StatusCode::CONFLICT, why),
            PageError::Web(w) => w.error_response(),
        }
    }
}
