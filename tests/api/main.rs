//! All integration tests in one binary (one link, shared helpers).

mod helpers;

mod api;
mod audit;
mod browser;
mod cli;
mod cloud_init;
mod configs;
mod csrf;
mod docs;
mod headers;
mod hostile;
mod layers;
mod login;
mod openapi;
mod operations;
mod outbound;
mod roles;
mod sandbox;
mod secrets;
mod sessions;
mod settings;
mod telemetry;
mod throttle;
mod tokens;
mod users;
