//! API token administration (admin).
pub mod handlers;
pub mod views;
