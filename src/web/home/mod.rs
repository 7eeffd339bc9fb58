//! The overview page.
pub mod handlers;
pub mod views;
