//! The overview page: the fleet dashboard and the latest activity.
pub mod handlers;
pub mod views;
