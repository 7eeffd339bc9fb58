//! How page handlers fail. Status is decided here, once; 5xx bodies are opaque while the cause
//! goes to the log.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};

use crate::auth::AccountError;

/// A page handler's error.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    /// The target's state forbids the operation (already approved, expired, superseded).
    #[error("{0}")]
    Conflict(String),
    /// Refused for now (429 throttled, 503 busy); the page carries `Retry-After`.
    #[error("{message}")]
    RetryLater {
        status: StatusCode,
        retry_after: std::time::Duration,
        message: String,
    },
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

impl From<sqlx::Error> for WebError {
    fn from(e: sqlx::Error) -> Self {
        WebError::Internal(e.into())
    }
}

impl From<AccountError> for WebError {
    fn from(e: AccountError) -> Self {
        match e {
            AccountError::Forbidden(f) => WebError::Forbidden(f.to_string()),
            AccountError::NotFound(what) => WebError::NotFound(format!("{what} not found")),
            AccountError::Invalid(errors) => WebError::BadRequest(errors.to_string()),
            e @ AccountError::Throttled(wait) => WebError::RetryLater {
                status: StatusCode::TOO_MANY_REQUESTS,
                retry_after: wait,
                message: e.to_string(),
            },
            e @ AccountError::Busy(wait) => WebError::RetryLater {
                status: StatusCode::SERVICE_UNAVAILABLE,
                retry_after: wait,
                message: e.to_string(),
            },
            AccountError::Internal(e) => WebError::Internal(e),
        }
    }
}

impl From<crate::provisioning::ProvisioningError> for WebError {
    fn from(e: crate::provisioning::ProvisioningError) -> Self {
        use crate::provisioning::ProvisioningError as E;
        match e {
            E::Forbidden(f) => WebError::Forbidden(f.to_string()),
            // The message names the rule ("four-eyes: …").
            E::NotAllowed(rule) => WebError::Forbidden(rule),
            E::Invalid(errors) => WebError::BadRequest(errors.to_string()),
            e @ E::NotFound(_) => WebError::NotFound(e.to_string()),
            E::Conflict(why) => WebError::Conflict(why),
            E::Internal(e) => WebError::Internal(e),
        }
    }
}

impl ResponseError for WebError {
    fn status_code(&self) -> StatusCode {
        match self {
            WebError::Forbidden(_) => StatusCode::FORBIDDEN,
            WebError::NotFound(_) => StatusCode::NOT_FOUND,
            WebError::BadRequest(_) => StatusCode::UNPROCESSABLE_ENTITY,
            WebError::Conflict(_) => StatusCode::CONFLICT,
            WebError::RetryLater { status, .. } => *status,
            WebError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        let detail = match self {
            WebError::Internal(e) => {
                tracing::error!(error = ?e, "page handler failed");
                "Something went wrong on our side; it has been logged.".to_owned()
            }
            other => other.to_string(),
        };
        let mut res = crate::http::html_error(status, &detail);
        if let WebError::RetryLater { retry_after, .. } = self {
            res.headers_mut().insert(
                actix_web::http::header::RETRY_AFTER,
                actix_web::http::header::HeaderValue::from(retry_after.as_secs().max(1)),
            );
        }
        res
    }
}

impl From<crate::machines::MachinesError> for WebError {
    fn from(e: crate::machines::MachinesError) -> Self {
        use crate::machines::MachinesError as C;
        match e {
            C::Forbidden(f) => WebError::Forbidden(f.to_string()),
            C::NotFound(what) => WebError::NotFound(format!("{what} not found")),
            C::Invalid(errors) => WebError::BadRequest(errors.to_string()),
            C::Provider(p) => WebError::BadRequest(p.to_string()),
            C::Internal(e) => WebError::Internal(e),
        }
    }
}

impl From<crate::audit::AuditError> for WebError {
    fn from(e: crate::audit::AuditError) -> Self {
        match e {
            crate::audit::AuditError::Forbidden => WebError::Forbidden(e.to_string()),
            crate::audit::AuditError::Busy => WebError::RetryLater {
                status: StatusCode::TOO_MANY_REQUESTS,
                retry_after: std::time::Duration::from_secs(5),
                message: e.to_string(),
            },
            crate::audit::AuditError::Internal(e) => WebError::Internal(e.into()),
        }
    }
}

impl From<crate::fleets::FleetsError> for WebError {
    fn from(e: crate::fleets::FleetsError) -> Self {
        use crate::fleets::FleetsError as F;
        match e {
            F::Forbidden(f) => WebError::Forbidden(f.to_string()),
            F::NotFound(what) => WebError::NotFound(format!("{what} not found")),
            F::Invalid(errors) => WebError::BadRequest(errors.to_string()),
            F::Conflict(why) => WebError::Conflict(why),
            F::Internal(e) => WebError::Internal(e),
        }
    }
}
