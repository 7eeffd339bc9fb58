//! Machine configs: list, create, show with history and diffs, edit, pin pre-flight.
pub mod forms;
pub mod handlers;
pub mod views;
