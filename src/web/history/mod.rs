//! Provision history: the filtered, cursor-paged list of every request and its exports.
pub mod handlers;
pub mod views;
