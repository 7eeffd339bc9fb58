//! What a new machine boots with: sandboxed tera rendering (in a pool of warm worker
//! processes, under time and output limits) with the project's escaping filters, the blocking
//! validation of every payload, the raw-insertion lint for templates, cloud-init's own JSON
//! schema, and the tarball pin pre-flight.

pub mod filters;
pub mod firewall;
pub mod identifiers;
pub mod known_keys;
pub mod lint;
pub mod pin;
pub mod pool;
pub mod render;
pub mod sample;
pub mod sandbox;
pub mod schema;
pub mod secret_use;
pub mod stand_in;
pub mod validate;
pub mod worker;

pub use render::{RenderLimits, RenderRequest, Rendered, Renderer, Secrets};
pub use validate::{Finding, Severity};

/// Hetzner's `user_data` cap.
pub const MAX_PAYLOAD_BYTES: usize = 32_768;

/// Name of the template loaded from `templates/` on first start.
pub const DEFAULT_TEMPLATE: &str = "yubaba-node";

/// Its text, compiled in so the binary needs nothing beside it.
pub const DEFAULT_TEMPLATE_BODY: &str = include_str!("../../templates/yubaba-node.yaml.tera");
