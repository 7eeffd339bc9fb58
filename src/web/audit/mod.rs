//! The audit log: filters, cursor paging, export.
pub mod forms;
pub mod handlers;
pub mod views;
