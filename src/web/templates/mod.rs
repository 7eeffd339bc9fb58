//! Cloud-init templates: list, create, show with history, the editor with live preview.
pub mod handlers;
pub mod views;
