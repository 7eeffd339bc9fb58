//! The demo's simulated cloud: a fixed catalogue shaped like Hetzner's.

use super::{Created, ProviderAction, Server, ServerSpec, BoxFuture, Catalogue, Image, Location, MachineProvider, ProviderError, ServerType};

/// The simulated provider.
#[derive(Debug, Default, Clone)]
pub struct Simulated {}

fn location(name: &str, description: &str, city: &str, country: &str, zone: &str) -> Location {
    Location {
        name: name.into(),
        description: description.into(),
        city: city.into(),
        country: country.into(),
        network_zone: zone.into(),
    }
}

fn server_type(
    name: &str,
    cores: u32,
    memory_gb: f64,
    disk_gb: u64,
    arch: &str,
    price: &str,
) -> ServerType {
    let hourly = price
        .parse::<f64>()
        .map(|m| format!("{:.4}", (m / 730.0 * 10_000.0).ceil() / 10_000.0))
        .unwrap_or_default();
    ServerType {
        name: name.into(),
        description: name.to_uppercase(),
        cores,
        memory_gb,
        disk_gb,
        arch: arch.into(),
        deprecated: false,
        monthly_price: ["fsn1", "nbg1", "hel1"]
            .iter()
            .map(|l| ((*l).to_owned(), price.to_owned()))
            .collect(),
        // Hetzner's hourly price is the monthly one over about 730 hours, rounded up.
        hourly_price: ["fsn1", "nbg1", "hel1"]
            .iter()
            .map(|l| ((*l).to_owned(), hourly.clone()))
            .collect(),
    }
}

/// The built-in catalogue.
pub fn builtin_catalogue() -> Catalogue {
    Catalogue {
        locations: vec![
            location(
                "fsn1",
                "Falkenstein DC Park 1",
                "Falkenstein",
                "DE",
                "eu-central",
            ),
            location(
                "nbg1",
                "Nuremberg DC Park 1",
                "Nuremberg",
                "DE",
                "eu-central",
            ),
            location("hel1", "Helsinki DC Park 1", "Helsinki", "FI", "eu-central"),
            location("ash", "Ashburn, VA", "Ashburn, VA", "US", "us-east"),
            location("hil", "Hillsboro, OR", "Hillsboro, OR", "US", "us-west"),
        ],
        server_types: vec![
            server_type("cx22", 2, 4.0, 40, "x86_64", "4.5900"),
            server_type("cx32", 4, 8.0, 80, "x86_64", "7.9900"),
            server_type("cpx31", 4, 8.0, 160, "x86_64", "16.4900"),
            server_type("ccx13", 2, 8.0, 80, "x86_64", "14.8600"),
            server_type("cax11", 2, 4.0, 40, "aarch64", "4.5900"),
            server_type("cax21", 4, 8.0, 80, "aarch64", "7.9900"),
        ],
        images: vec![
            Image {
                name: "debian-12".into(),
                description: "Debian 12".into(),
                archs: vec!["x86_64".into(), "aarch64".into()],
            },
            Image {
                name: "debian-13".into(),
                description: "Debian 13".into(),
                archs: vec!["x86_64".into(), "aarch64".into()],
            },
            Image {
                name: "ubuntu-24.04".into(),
                description: "Ubuntu 24.04".into(),
                archs: vec!["x86_64".into(), "aarch64".into()],
            },
        ],
    }
}

impl MachineProvider for Simulated {
    fn name(&self) -> &'static str {
        "simulated"
    }

    fn catalogue(&self) -> BoxFuture<'_, Result<Catalogue, ProviderError>> {
        Box::pin(async { Ok(builtin_catalogue()) })
    }

    fn create_server<'a>(
        &'a self,
        _spec: &'a ServerSpec,
    ) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(async { Err(ProviderError::other("PENDING: create_server")) })
    }

    fn find_by_label<'a>(
        &'a self,
        _key: &'a str,
        _value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Server>, ProviderError>> {
        Box::pin(async { Err(ProviderError::other("PENDING: find_by_label")) })
    }

    fn find_by_name<'a>(
        &'a self,
        _name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Server>, ProviderError>> {
        Box::pin(async { Err(ProviderError::other("PENDING: find_by_name")) })
    }

    fn server(&self, _id: i64) -> BoxFuture<'_, Result<Option<Server>, ProviderError>> {
        Box::pin(async { Err(ProviderError::other("PENDING: server")) })
    }

    fn action(&self, _id: i64) -> BoxFuture<'_, Result<ProviderAction, ProviderError>> {
        Box::pin(async { Err(ProviderError::other("PENDING: action")) })
    }

    fn destroy(&self, _id: i64) -> BoxFuture<'_, Result<(), ProviderError>> {
        Box::pin(async { Err(ProviderError::other("PENDING: destroy")) })
    }
}

