//! headroom: a self-hosted console that keeps yubaba fleets' warm-spare headroom restored.

pub mod api;
pub mod audit;
pub mod auth;
pub mod capacity;
pub mod cli;
pub mod cloud_init;
pub mod commands;
pub mod config;
pub mod context;
pub mod db;
pub mod domain;
pub mod error;
pub mod export;
pub mod fleets;
pub mod http;
pub mod machine_setup;
pub mod outbound;
pub mod password_hashing;
pub mod provider;
pub mod provisioning;
pub mod scraper;
pub mod sim;
pub mod startup;
pub mod state;
pub mod telemetry;
pub mod web;
