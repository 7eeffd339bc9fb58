//! Fleets: list, create, show (headroom now, chart, samples, time to restore, settings), edit,
//! delete; the chart partial.
pub mod capacity;
pub mod chart;
pub mod forms;
pub mod handlers;
pub mod views;
pub mod window;
