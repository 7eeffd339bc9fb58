//! Catalogue view.

use maud::{html, Markup};

use crate::auth::Principal;
use crate::domain::machine::ProviderKind;
use crate::domain::Role;
use crate::provider::Catalogue;
use crate::web::components::{csrf_field, time};
use crate::web::paths;

/// Every enabled provider's cached offering.
pub fn show(principal: &Principal, all: &[(ProviderKind, Catalogue, Option<i64>)]) -> Markup {
    let csrf = principal.csrf_token().unwrap_or("");
    html! {
        h1 { "Provider catalogue" }
        @if all.is_empty() { section.card { p { "No provider is enabled. Set HETZNER_API_TOKEN to use Hetzner Cloud." } } }
        @for (kind, c, refreshed) in all {
            section.card {
                div.heading {
                    h2 { (kind) }
                    span.muted { @if let Some(t) = refreshed { "refreshed " (time(*t)) } @else { "never refreshed" } }
                    @if principal.role.includes(Role::Operator) {
                        form method="post" action=(paths::fill(paths::CATALOGUE_REFRESH, &[("provider", kind.as_str())])) {
                            (csrf_field(csrf))
                            button type="submit" { "Refresh from " (kind) }
                        }
                    }
                }
                h3 { "Server types" }
                table.data {
                    thead { tr { th { "Name" } th { "Arch" } th { "vCPU" } th { "Memory" } th { "Disk" } th { "€/month" } } }
                    tbody { @for t in &c.server_types {
                        tr.disabled[t.deprecated] { td { (t.name) @if t.deprecated { " (deprecated)" } } td { (t.arch) } td { (t.cores) } td { (t.memory_gb) " GB" } td { (t.disk_gb) " GB" }
                            td { (t.monthly_price.first().map(|(_, p)| p.clone()).unwrap_or_default()) } }
                    } }
                }
                h3 { "Locations" }
                table.data {
                    thead { tr { th { "Name" } th { "Where" } th { "Network zone" } } }
                    tbody { @for l in &c.locations { tr { td { (l.name) } td { (l.description) ", " (l.country) } td { (l.network_zone) } } } }
                }
                h3 { "Images" }
                p { @for (i, img) in c.images.iter().enumerate() { @if i > 0 { ", " } code { (img.name) } " (" (img.archs.join("/")) ")" } }
            }
        }
    }
}
