//! All integration tests in one binary (one link, shared helpers).

mod helpers;

mod api;
mod audit;
mod browser;
mod cli;
mod cloud_init;
mod configs;
mod csrf;
mod hostile;
mod login;
mod operations;
mod roles;
mod secrets;
mod sessions;
mod tokens;
mod users;
