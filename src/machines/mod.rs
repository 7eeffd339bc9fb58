//! Machine configs, templates, the provider catalogue, pin pre-flights and previews: the
//! operations pages and API call. Each checks the caller's role, validates, and writes its
//! change and audit entry in one transaction.

pub mod catalogue;
pub mod machine_configs;
pub mod pins;
pub mod preview;
pub mod templates;

use crate::auth::principal::Forbidden;
use crate::domain::{FieldError, FieldErrors};
use crate::provider::ProviderError;

/// Why an operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum MachinesError {
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    #[error("{0}")]
    Invalid(FieldErrors),
    #[error("{0} not found")]
    NotFound(String),
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<sqlx::Error> for MachinesError {
    fn from(e: sqlx::Error) -> Self {
        MachinesError::Internal(e.into())
    }
}

impl From<FieldError> for MachinesError {
    fn from(e: FieldError) -> Self {
        MachinesError::Invalid(e.into())
    }
}

impl From<FieldErrors> for MachinesError {
    fn from(e: FieldErrors) -> Self {
        MachinesError::Invalid(e)
    }
}
