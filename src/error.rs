//! The one error every operation returns. Pages (`web::errors`) and the API (`api::errors`)
//! each turn it into an answer in one place; operations only say what went wrong.
//!
//! It sits beside `domain` at the bottom of the import graph (it names only domain types), so
//! every operation module can return it without importing another. The status table lives
//! here too, so pages and the API cannot drift apart on it.

use std::time::Duration;

use actix_web::http::StatusCode;

use crate::domain::{FieldError, FieldErrors, Forbidden, StoredValueError};

/// Why an operation did not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The caller may not do this: the role it lacks, or the rule it breaks ("four-eyes: …").
    #[error("{0}")]
    Forbidden(String),
    /// Bad input, by field; nothing was written.
    #[error("{0}")]
    Invalid(FieldErrors),
    /// What was asked for does not exist (`fleet eu-prod`, `provision 7`).
    #[error("{0} not found")]
    NotFound(String),
    /// The target's state forbids the operation (already approved, expired, open requests).
    #[error("{0}")]
    Conflict(String),
    /// Refused for now; the answer carries `Retry-After`.
    #[error("{message}")]
    RetryLater {
        /// Whether the caller asked too much (429) or headroom lacks capacity (503).
        pressure: Pressure,
        retry_after: Duration,
        message: String,
    },
    /// The machine provider failed or refused (its message); not the caller's input.
    #[error("{0}")]
    Upstream(String),
    /// Anything else: a storage failure, a broken stored value. Shown opaquely, logged whole.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// Why an operation asks to be retried later; it decides between 429 and 503.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pressure {
    /// Too many attempts or too many of one kind at once (wrong passwords, exports): 429.
    Throttled,
    /// headroom itself is short of capacity (the password-hashing bound): 503.
    Busy,
}

impl OpError {
    /// A 429-style refusal: the caller should wait `retry_after`.
    pub fn throttled(retry_after: Duration, message: impl Into<String>) -> Self {
        OpError::RetryLater {
            pressure: Pressure::Throttled,
            retry_after,
            message: message.into(),
        }
    }

    /// A 503-style refusal: headroom is busy for `retry_after`.
    pub fn busy(retry_after: Duration, message: impl Into<String>) -> Self {
        OpError::RetryLater {
            pressure: Pressure::Busy,
            retry_after,
            message: message.into(),
        }
    }
}

impl OpError {
    /// The HTTP status that says this error, for pages and the API alike (pages show an
    /// `Upstream` refusal as 422, see `web::errors`).
    pub fn status(&self) -> StatusCode {
        match self {
            OpError::Forbidden(_) => StatusCode::FORBIDDEN,
            OpError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            OpError::NotFound(_) => StatusCode::NOT_FOUND,
            OpError::Conflict(_) => StatusCode::CONFLICT,
            OpError::RetryLater { pressure, .. } => match pressure {
                Pressure::Throttled => StatusCode::TOO_MANY_REQUESTS,
                Pressure::Busy => StatusCode::SERVICE_UNAVAILABLE,
            },
            OpError::Upstream(_) => StatusCode::BAD_GATEWAY,
            OpError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The `Retry-After` value in whole seconds (at least one), when the error asks for one.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            OpError::RetryLater { retry_after, .. } => Some(retry_after.as_secs().max(1)),
            _ => None,
        }
    }
}

impl From<Forbidden> for OpError {
    fn from(e: Forbidden) -> Self {
        OpError::Forbidden(e.to_string())
    }
}

impl From<FieldError> for OpError {
    fn from(e: FieldError) -> Self {
        OpError::Invalid(e.into())
    }
}

impl From<FieldErrors> for OpError {
    fn from(e: FieldErrors) -> Self {
        OpError::Invalid(e)
    }
}

impl From<sqlx::Error> for OpError {
    fn from(e: sqlx::Error) -> Self {
        OpError::Internal(e.into())
    }
}

/// A stored value that no longer parses is headroom's fault, shown opaquely and logged whole.
impl From<StoredValueError> for OpError {
    fn from(e: StoredValueError) -> Self {
        OpError::Internal(e.into())
    }
}
