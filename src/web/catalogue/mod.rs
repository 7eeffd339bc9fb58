//! The provider catalogue: what can be chosen, and its refresh.
pub mod handlers;
pub mod views;
