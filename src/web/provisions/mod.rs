//! Provision pages: the request form with its live plan, the detail page with approve, reject,
//! cancel and destroy, and the polled progress partial. The history list is `web::history`'s.

pub mod forms;
pub mod handlers;
pub mod views;
