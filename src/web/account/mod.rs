//! The signed-in user's own account: password change.
pub mod handlers;
pub mod views;
