//! What a new machine is set up from: machine configs, cloud-init templates, the provider
//! catalogue, pin pre-flights and previews. Each operation pages and the API call checks the
//! caller's role, validates, and writes its change and audit entry in one transaction.

pub mod catalogue;
pub mod configs;
pub mod pins;
pub mod preview;
pub mod templates;

use crate::error::OpError;
use crate::provider::ProviderError;

/// The provider's failure, kept as its message: pages and the API say it as the provider did.
impl From<ProviderError> for OpError {
    fn from(e: ProviderError) -> Self {
        OpError::Upstream(e.to_string())
    }
}
