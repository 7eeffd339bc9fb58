//! How page handlers fail: the one mapping from an operation's [`OpError`] to an HTML answer.
//! Status is decided here, once; 5xx bodies are opaque while the cause goes to the log.

use actix_web::http::header::{HeaderValue, RETRY_AFTER};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};

use crate::domain::{FieldError, FieldErrors};
use crate::error::OpError;

/// A page handler's error: an operation's error, answered as an HTML error page.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct WebError(#[from] pub OpError);

impl From<anyhow::Error> for WebError {
    fn from(e: anyhow::Error) -> Self {
        WebError(OpError::Internal(e))
    }
}

impl From<FieldErrors> for WebError {
    fn from(e: FieldErrors) -> Self {
        WebError(OpError::Invalid(e))
    }
}

impl From<FieldError> for WebError {
    fn from(e: FieldError) -> Self {
        WebError(OpError::from(e))
    }
}

/// The status a page answers `e` with.
pub fn status_of(e: &OpError) -> StatusCode {
    match e {
        // A provider's refusal (bad token, unknown type) is shown like bad input: htmx swaps
        // 422, so the person sees the provider's message where they acted.
        OpError::Upstream(_) => StatusCode::UNPROCESSABLE_ENTITY,
        other => other.status(),
    }
}

/// Adds `Retry-After` when `e` asks to be retried later.
pub fn set_retry_after(res: &mut HttpResponse, e: &OpError) {
    if let Some(secs) = e.retry_after_secs() {
        res.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(secs));
    }
}

impl ResponseError for WebError {
    fn status_code(&self) -> StatusCode {
        status_of(&self.0)
    }

    fn error_response(&self) -> HttpResponse {
        let detail = match &self.0 {
            OpError::Internal(e) => {
                tracing::error!(error = ?e, "page handler failed");
                "Something went wrong on our side; it has been logged.".to_owned()
            }
            other => other.to_string(),
        };
        let mut res = crate::http::html_error(self.status_code(), &detail);
        set_retry_after(&mut res, &self.0);
        res
    }
}
