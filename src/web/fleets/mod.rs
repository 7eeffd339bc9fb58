//! Fleets: list, create, show (with a link to the fleet's provisions), edit, delete.
pub mod forms;
pub mod handlers;
pub mod views;
