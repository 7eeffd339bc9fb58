//! The overview page: the fleet dashboard.
pub mod handlers;
pub mod views;
