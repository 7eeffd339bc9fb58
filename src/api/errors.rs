//! API failures, all answered as problem+json.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};

use crate::auth::AccountError;
use crate::domain::FieldErrors;
use crate::http::Problem;

/// An API handler's error.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(FieldErrors),
    /// The target's state forbids the operation (already approved, expired, superseded).
    #[error("{0}")]
    Conflict(String),
    /// The provider failed; not the caller's fault.
    #[error("{0}")]
    Upstream(String),
    /// Refused for now (429 throttled, 503 busy); the answer carries `Retry-After`.
    #[error("{message}")]
    RetryLater {
        status: StatusCode,
        retry_after: std::time::Duration,
        message: String,
    },
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

impl From<AccountError> for ApiError {
    fn from(e: AccountError) -> Self {
        match e {
            AccountError::Forbidden(f) => ApiError::Forbidden(f.to_string()),
            AccountError::NotFound(what) => ApiError::NotFound(format!("{what} not found")),
            AccountError::Invalid(errors) => ApiError::Invalid(errors),
            e @ AccountError::Throttled(wait) => ApiError::RetryLater {
                status: StatusCode::TOO_MANY_REQUESTS,
                retry_after: wait,
                message: e.to_string(),
            },
            e @ AccountError::Busy(wait) => ApiError::RetryLater {
                status: StatusCode::SERVICE_UNAVAILABLE,
                retry_after: wait,
                message: e.to_string(),
            },
            AccountError::Internal(e) => ApiError::Internal(e),
        }
    }
}

impl From<crate::provisioning::ProvisioningError> for ApiError {
    fn from(e: crate::provisioning::ProvisioningError) -> Self {
        use crate::provisioning::ProvisioningError as E;
        match e {
            E::Forbidden(f) => ApiError::Forbidden(f.to_string()),
            // The message names the rule ("four-eyes: …").
            E::NotAllowed(rule) => ApiError::Forbidden(rule),
            E::Invalid(errors) => ApiError::Invalid(errors),
            e @ E::NotFound(_) => ApiError::NotFound(e.to_string()),
            E::Conflict(why) => ApiError::Conflict(why),
            E::Internal(e) => ApiError::Internal(e),
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Upstream(_) => StatusCode::BAD_GATEWAY,
            ApiError::RetryLater { status, .. } => *status,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        match self {
            ApiError::Invalid(errors) => Problem::invalid(errors).response(),
            ApiError::RetryLater {
                status,
                retry_after,
                message,
            } => {
                let mut res = Problem::new(*status, message.as_str()).response();
                res.headers_mut().insert(
                    actix_web::http::header::RETRY_AFTER,
                    actix_web::http::header::HeaderValue::from(retry_after.as_secs().max(1)),
                );
                res
            }
            ApiError::Internal(e) => {
                tracing::error!(error = ?e, "API handler failed");
                Problem::new(self.status_code(), "internal error; it has been logged").response()
            }
            other => Problem::new(other.status_code(), other.to_string()).response(),
        }
    }
}

/// JSON body errors (malformed, wrong types, too large) as problem+json naming what broke.
pub fn json_error(
    err: actix_web::error::JsonPayloadError,
    _req: &actix_web::HttpRequest,
) -> actix_web::Error {
    use actix_web::error::JsonPayloadError as E;
    let (status, detail) = match &err {
        E::Overflow { limit } | E::OverflowKnownLength { limit, .. } => (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("body: larger than the {limit}-byte limit"),
        ),
        E::ContentType => (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "body: Content-Type must be application/json".to_owned(),
        ),
        E::Deserialize(e) => (StatusCode::BAD_REQUEST, format!("body: invalid JSON ({e})")),
        other => (StatusCode::BAD_REQUEST, format!("body: {other}")),
    };
    let res = Problem::new(status, detail).response();
    actix_web::error::InternalError::from_response(err, res).into()
}

impl From<crate::fleets::FleetsError> for ApiError {
    fn from(e: crate::fleets::FleetsError) -> Self {
        use crate::fleets::FleetsError as F;
        match e {
            F::Forbidden(f) => ApiError::Forbidden(f.to_string()),
            F::NotFound(what) => ApiError::NotFound(format!("{what} not found")),
            F::Invalid(errors) => ApiError::Invalid(errors),
            F::Conflict(why) => ApiError::Conflict(why),
            F::Internal(e) => ApiError::Internal(e),
        }
    }
}
