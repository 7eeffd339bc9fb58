//! The approvals inbox and the navigation badge counting what the caller could approve now.

pub mod handlers;
pub mod views;
