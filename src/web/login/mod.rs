//! Sign in and sign out.
pub mod forms;
pub mod handlers;
pub mod views;
