//! API failures: the one mapping from an operation's [`OpError`] to problem+json.

use actix_web::http::header::{HeaderValue, RETRY_AFTER};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};

use crate::domain::{FieldError, FieldErrors};
use crate::error::OpError;
use crate::http::Problem;

/// An API handler's error: an operation's error, answered as problem+json.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ApiError(#[from] pub OpError);

impl ApiError {
    /// A 422 naming every invalid field.
    pub fn invalid(errors: FieldErrors) -> Self {
        ApiError(OpError::Invalid(errors))
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        ApiError(OpError::Internal(e))
    }
}

impl From<FieldErrors> for ApiError {
    fn from(e: FieldErrors) -> Self {
        ApiError(OpError::Invalid(e))
    }
}

impl From<FieldError> for ApiError {
    fn from(e: FieldError) -> Self {
        ApiError(OpError::from(e))
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.0.status()
    }

    fn error_response(&self) -> HttpResponse {
        let mut res = match &self.0 {
            OpError::Invalid(errors) => Problem::invalid(errors).response(),
            OpError::Internal(e) => {
                tracing::error!(error = ?e, "API handler failed");
                Problem::new(self.status_code(), "internal error; it has been logged").response()
            }
            other => Problem::new(self.status_code(), other.to_string()).response(),
        };
        if let Some(secs) = self.0.retry_after_secs() {
            res.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        res
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
