//! All integration tests in one binary (one link, shared helpers).

mod helpers;

mod api;
mod attack8;
mod audit;
mod browser;
mod cli;
mod cloud_init;
mod configs;
mod crash;
mod csrf;
mod docs;
mod fake_hetzner;
mod fleets;
mod headers;
mod hetzner;
mod history;
mod hostile;
mod layers;
mod login;
mod openapi;
mod operations;
mod outbound;
mod provision_pages;
mod provisions;
mod roles;
mod runner;
mod sandbox;
mod secrets;
mod sessions;
mod settings;
mod telemetry;
mod throttle;
mod tokens;
mod users;
mod webhooks;
