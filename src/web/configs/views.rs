//! Machine-config views.

use maud::{html, Markup};

use super::forms::MachineForm;
use crate::auth::Principal;
use crate::domain::machine::FieldChange;
use crate::domain::{FieldErrors, Role};
use crate::machine_setup::configs::ConfigVersion;
use crate::machine_setup::pins::PinCheck;
use crate::web::components::{csrf_field, error_summary, list_heading, time};
use crate::web::paths;

pub use crate::machine_setup::configs::FormChoices;

/// The list of configs.
pub fn list(configs: &[ConfigVersion], can_edit: bool) -> Markup {
    html! {
        (list_heading("Machine configs", can_edit.then_some((paths::MACHINE_CONFIG_NEW, "New config"))))
        section.card {
            table.data {
                thead { tr { th { "Name" } th { "Provider" } th { "Location" } th { "Server type" } th { "Arch" } th { "Region / zone" } th { "Version" } th { "Saved" } } }
                tbody {
                    @for c in configs {
                        tr {
                            td { a href=(paths::fill(paths::MACHINE_CONFIG, &[("name", &c.spec.name)])) { strong { (c.spec.name) } } }
                            td { (c.spec.provider) }
                            td { (c.spec.location) }
                            td { (c.spec.server_type) }
                            td { (c.spec.arch) }
                            td { (c.spec.region) " / " (c.spec.zone) }
                            td { "v" (c.version) }
                            td { (time(c.created_at)) " by " (c.author) }
                        }
                    }
                    @if configs.is_empty() { tr { td colspan="8" .muted { "No machine configs yet." } } }
                }
            }
        }
    }
}

fn spec_rows(c: &ConfigVersion) -> Markup {
    let s = &c.spec;
    let rows: Vec<(&str, String)> = vec![
        ("provider", s.provider.to_string()),
        ("location", s.location.clone()),
        ("server_type", s.server_type.clone()),
        ("arch", s.arch.to_string()),
        ("image", s.image.clone()),
        ("region", s.region.clone()),
        ("zone", s.zone.clone()),
        ("mesh_tags", s.mesh_tags.join(", ")),
        (
            "ssh_keys",
            s.ssh_keys
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        ),
        (
            "labels",
            s.labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        (
            "allocatable",
            format!(
                "{} MiB, {} millicores",
                s.allocatable
                    .memory_mb
                    .map_or("—".into(), |m| m.to_string()),
                s.allocatable
                    .cpu_millis
                    .map_or("—".into(), |c| c.to_string())
            ),
        ),
        ("taints", s.taints.join(", ")),
        ("template", s.template.clone()),
        ("yubaba_channel", s.yubaba_channel.as_str().to_owned()),
        ("yubaba_url", s.yubaba_url.to_string()),
        ("yubaba_sha256", s.yubaba_sha256.to_string()),
    ];
    html! {
        dl.spec { @for (k, v) in rows { dt { (k) } dd { @if v.is_empty() { span.muted { "—" } } @else { code { (v) } } } } }
    }
}

/// Field-level changes of one version.
pub fn changes(list: &[FieldChange]) -> Markup {
    html! {
        @if list.is_empty() { span.muted { "no field changed" } }
        @else {
            table.diff {
                @for c in list {
                    tr {
                        th { (c.field) }
                        td.removed { @if let Some(b) = &c.before { del { (b) } } @else { span.muted { "(new)" } } }
                        td.added { @if let Some(a) = &c.after { ins { (a) } } }
                    }
                }
            }
        }
    }
}

/// One config: current spec, pin verdict, history.
pub fn show(
    principal: &Principal,
    history: &[(ConfigVersion, Vec<FieldChange>)],
    pin: Option<&PinCheck>,
) -> Markup {
    let current = &history[0].0;
    let name = current.spec.name.as_str();
    let can_edit = principal.role.includes(Role::Operator);
    let csrf = principal.csrf_token().unwrap_or("");
    html! {
        div.heading {
            h1 { (name) " " span.muted { "v" (current.version) } }
            @if can_edit {
                a.button href=(paths::fill(paths::MACHINE_CONFIG_EDIT, &[("name", name)])) { "Edit" }
                a.button href={ (paths::fill(paths::TEMPLATE_EDIT, &[("name", &current.spec.template)])) "?config=" (name) } { "Preview payload" }
            }
        }
        section.card { (spec_rows(current)) }
        section.card #pin {
            h2 { "Tarball pin" }
            @match pin {
                Some(p) => {
                    p { span class={ "badge " (if p.verdict == "verified" { "good" } else { "bad" }) } { (p.verdict) } " " (p.message) }
                    p.muted { "Checked " (time(p.checked_at)) " by " (p.checked_by) "." }
                }
                None => p.muted { "Not checked yet for this URL and sha256." },
            }
            @if can_edit {
                form method="post" action=(paths::fill(paths::MACHINE_CONFIG_PIN, &[("name", name)])) {
                    (csrf_field(csrf))
                    button type="submit" { "Download and check now" }
                }
            }
        }
        section.card #history {
            h2 #history-heading { "History" }
            // A wide diff scrolls inside its own pane, which the keyboard can reach.
            div.scroll-pane tabindex="0" role="region" aria-labelledby="history-heading" {
                table.data {
                    thead { tr { th { "Version" } th { "Saved" } th { "Changes against the version before" } } }
                    tbody {
                        @for (v, diff) in history {
                            tr { td { "v" (v.version) } td { (time(v.created_at)) " by " (v.author) } td { (changes(diff)) } }
                        }
                    }
                }
            }
        }
    }
}

fn text(name: &str, label: &str, value: &str, errors: &FieldErrors, hint: &str) -> Markup {
    let error = errors.for_field(name);
    html! {
        div.field.invalid[error.is_some()] {
            label for={ "f-" (name) } { (label) }
            input id={ "f-" (name) } name=(name) type="text" value=(value) placeholder=(hint) autocomplete="off";
            @if let Some(e) = error { p.field-error { (e) } }
        }
    }
}

fn area(name: &str, label: &str, value: &str, errors: &FieldErrors, hint: &str) -> Markup {
    let error = errors.for_field(name);
    html! {
        div.field.invalid[error.is_some()] {
            label for={ "f-" (name) } { (label) }
            textarea id={ "f-" (name) } name=(name) rows="3" placeholder=(hint) { (value) }
            @if let Some(e) = error { p.field-error { (e) } }
        }
    }
}

fn select(name: &str, label: &str, current: &str, errors: &FieldErrors, options: Markup) -> Markup {
    let error = errors.for_field(name);
    html! {
        div.field.invalid[error.is_some()] {
            label for={ "f-" (name) } { (label) }
            select id={ "f-" (name) } name=(name) data-current=(current) { (options) }
            @if let Some(e) = error { p.field-error { (e) } }
        }
    }
}

/// The create/edit form.
pub fn form_page(
    principal: &Principal,
    editing: Option<&str>,
    f: &MachineForm,
    errors: &FieldErrors,
    choices: &FormChoices,
) -> Markup {
    let csrf = principal.csrf_token().unwrap_or("");
    let action = editing.map_or_else(
        || paths::MACHINE_CONFIGS.to_owned(),
        |n| paths::fill(paths::MACHINE_CONFIG, &[("name", n)]),
    );
    let opt = |value: &str, label: String, current: &str| html! { option value=(value) selected[value == current] { (label) } };
    html! {
        h1 { @if let Some(n) = editing { "Edit " (n) } @else { "New machine config" } }
        @if editing.is_some() { p.muted { "Saving makes a new version; earlier versions stay as they were." } }
        (error_summary(errors))
        form.card.config-form method="post" action=(action) {
            (csrf_field(csrf))
            @if editing.is_none() { (text("name", "Name (RFC 1123 label, ≤ 63)", &f.name, errors, "spare-fsn1")) }
            (select("provider", "Provider", &f.provider, errors, html! {
                @for (k, _) in &choices.catalogues { (opt(k.as_str(), k.to_string(), &f.provider)) }
            }))
            (select("location", "Location", &f.location, errors, html! {
                option value="" { "— choose —" }
                @for (k, c) in &choices.catalogues { optgroup label=(k) { @for l in &c.locations { (opt(&l.name, format!("{} — {}", l.name, l.description), &f.location)) } } }
            }))
            (select("server_type", "Server type", &f.server_type, errors, html! {
                option value="" { "— choose —" }
                @for (k, c) in &choices.catalogues { optgroup label=(k) { @for t in c.server_types.iter().filter(|t| !t.deprecated) {
                    (opt(&t.name, format!("{} — {} vCPU, {} GB, {}{}", t.name, t.cores, t.memory_gb, t.arch, t.monthly_price.first().map(|(_, p)| format!(", €{p}/month")).unwrap_or_default()), &f.server_type))
                } } }
            }))
            (select("arch", "Architecture", &f.arch, errors, html! {
                (opt("", "derive from the server type".into(), &f.arch)) (opt("x86_64", "x86_64".into(), &f.arch)) (opt("aarch64", "aarch64".into(), &f.arch))
            }))
            (select("image", "Image", &f.image, errors, html! {
                @for (k, c) in &choices.catalogues { optgroup label=(k) { @for i in &c.images { (opt(&i.name, format!("{} — {}", i.name, i.description), &f.image)) } } }
            }))
            (text("region", "Region (geo label, used for N+2)", &f.region, errors, "eu-central"))
            (text("zone", "Zone (failure domain)", &f.zone, errors, "fsn1-dc14"))
            (text("mesh_tags", "Mesh tags (comma-separated)", &f.mesh_tags, errors, "tag:spare, tag:eu"))
            (text("ssh_keys", "Hetzner ssh key ids (comma-separated)", &f.ssh_keys, errors, "4711, 4712"))
            (area("labels", "Labels (key=value per line)", &f.labels, errors, "team=infra"))
            (text("allocatable.memory_mb", "Allocatable memory (MiB, optional)", &f.memory_mb, errors, "3584"))
            (text("allocatable.cpu_millis", "Allocatable CPU (millicores, optional)", &f.cpu_millis, errors, "2000"))
            (area("taints", "Taints (key=value:Effect per line)", &f.taints, errors, "dedicated=ops:NoSchedule"))
            (select("template", "Template", &f.template, errors, html! { @for t in &choices.templates { (opt(t, t.clone(), &f.template)) } }))
            (select("yubaba_channel", "yubaba channel", &f.yubaba_channel, errors, html! { (opt("stable", "stable".into(), &f.yubaba_channel)) (opt("beta", "beta".into(), &f.yubaba_channel)) }))
            (text("yubaba_url", "yubaba tarball URL (https)", &f.yubaba_url, errors, "https://…/yubaba-1.4.2-x86_64.tar.gz"))
            (text("yubaba_sha256", "Tarball sha256 (64 lowercase hex)", &f.yubaba_sha256, errors, ""))
            div.field.actions { button.primary type="submit" { @if editing.is_some() { "Save new version" } @else { "Create config" } } }
        }
    }
}
