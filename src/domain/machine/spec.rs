//! `MachineSpec`, what a config version stores, and `MachineInput`, what is submitted; the
//! one `parse` between them checks every rule and the catalogue.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::FieldErrors;

use super::*;

/// What the provider offers, for checking choices (loaded from the catalogue cache).
#[derive(Debug, Clone, Default)]
pub struct CatalogueView {
    pub locations: Vec<String>,
    /// Server type name → (cores, memory GiB).
    pub server_types: BTreeMap<String, (u32, f64)>,
    pub images: Vec<String>,
}

/// A machine config version's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MachineSpec {
    #[schema(value_type = String)]
    pub name: ConfigName,
    pub provider: ProviderKind,
    pub location: String,
    pub server_type: String,
    pub image: String,
    pub region: String,
    pub zone: String,
    pub arch: Arch,
    #[schema(value_type = Vec<String>)]
    pub mesh_tags: Vec<MeshTag>,
    pub ssh_keys: Vec<u64>,
    #[schema(value_type = BTreeMap<String, String>)]
    pub labels: BTreeMap<LabelKey, LabelValue>,
    pub allocatable: Allocatable,
    #[schema(value_type = Vec<String>)]
    pub taints: Vec<Taint>,
    pub template: String,
    pub yubaba_channel: Channel,
    #[schema(value_type = String)]
    pub yubaba_url: HttpsUrl,
    #[schema(value_type = String)]
    pub yubaba_sha256: Sha256Pin,
}

/// A machine config as submitted (form or JSON). List fields accept arrays (JSON) and are
/// split from text by the form layer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MachineInput {
    pub name: String,
    pub provider: String,
    pub location: String,
    pub server_type: String,
    /// Defaults to debian-12.
    pub image: String,
    pub region: String,
    pub zone: String,
    /// Optional: derived from the server type; a mismatch is an error.
    pub arch: String,
    pub mesh_tags: Vec<String>,
    pub ssh_keys: Vec<serde_json::Value>,
    pub labels: BTreeMap<String, String>,
    pub allocatable: AllocatableInput,
    pub taints: Vec<String>,
    /// Defaults to the default template.
    pub template: String,
    pub yubaba_channel: String,
    pub yubaba_url: String,
    pub yubaba_sha256: String,
}

impl MachineInput {
    /// A typical Hetzner x86 spare with mesh tags, labels and a pinned tarball: the one sample
    /// that the golden render, the render benchmark and the rule tests start from.
    pub fn sample() -> Self {
        MachineInput {
            name: "spare-fsn1".into(),
            provider: "hetzner".into(),
            location: "fsn1".into(),
            server_type: "cx22".into(),
            region: "eu-central".into(),
            zone: "fsn1-dc14".into(),
            mesh_tags: vec!["tag:spare".into(), "tag:eu".into()],
            ssh_keys: vec![serde_json::json!(4711)],
            labels: [("team".to_owned(), "infra".to_owned())]
                .into_iter()
                .collect(),
            yubaba_url: "https://releases.example.com/yubaba/yubaba-1.4.2-x86_64.tar.gz".into(),
            yubaba_sha256: "4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10"
                .into(),
            ..MachineInput::default()
        }
    }
}

/// Allocatable as submitted.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AllocatableInput {
    pub memory_mb: Option<serde_json::Value>,
    pub cpu_millis: Option<serde_json::Value>,
}

fn bounded_u64(
    errors: &mut FieldErrors,
    field: &str,
    raw: &Option<serde_json::Value>,
    min: u64,
    max: u64,
) -> Option<u64> {
    let v = match raw {
        None | Some(serde_json::Value::Null) => return None,
        Some(serde_json::Value::String(s)) if s.trim().is_empty() => return None,
        Some(serde_json::Value::String(s)) => s.trim().parse::<u64>().ok(),
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        _ => None,
    };
    match v {
        Some(n) if (min..=max).contains(&n) => Some(n),
        _ => {
            errors.push(field, format!("must be a whole number from {min} to {max}"));
            None
        }
    }
}

fn text_field(errors: &mut FieldErrors, field: &str, raw: &str, max: usize) -> Option<String> {
    let v = raw.trim();
    if v.chars().count() > max {
        errors.push(field, format!("must be at most {max} characters"));
        return None;
    }
    if v.chars().any(char::is_control) {
        errors.push(field, "must not contain control characters");
        return None;
    }
    Some(v.to_owned())
}

impl MachineSpec {
    /// Validates every field, collecting all errors. `templates` are the existing template
    /// names; `default_template` fills an empty choice.
    pub fn parse(
        input: &MachineInput,
        catalogue: &CatalogueView,
        templates: &[String],
        default_template: &str,
    ) -> Result<MachineSpec, FieldErrors> {
        let mut e = FieldErrors::default();
        let name = e.check(ConfigName::parse("name", &input.name));
        let provider = e.check(ProviderKind::parse_field("provider", &input.provider));

        let location = text_field(&mut e, "location", &input.location, 64).and_then(|l| {
            if l.is_empty() {
                e.push("location", "is required");
                None
            } else if catalogue.locations.is_empty() {
                e.push(
                    "location",
                    format!("{l:?} cannot be checked: the provider's catalogue is empty"),
                );
                None
            } else if !catalogue.locations.contains(&l) {
                e.push(
                    "location",
                    format!(
                        "{l:?} is not offered by the provider (choose one of: {})",
                        catalogue.locations.join(", ")
                    ),
                );
                None
            } else {
                Some(l)
            }
        });
        let server_type = text_field(&mut e, "server_type", &input.server_type, 64).and_then(|t| {
            if t.is_empty() {
                e.push("server_type", "is required");
                None
            } else if !catalogue.server_types.contains_key(&t) {
                e.push(
                    "server_type",
                    format!("{t:?} is not offered by the provider"),
                );
                None
            } else {
                Some(t)
            }
        });
        let image = text_field(&mut e, "image", &input.image, 64)
            .map(|i| {
                if i.is_empty() {
                    "debian-12".to_owned()
                } else {
                    i
                }
            })
            .and_then(|i| {
                if !catalogue.images.is_empty() && !catalogue.images.contains(&i) {
                    e.push(
                        "image",
                        format!("{i:?} is not a system image the provider offers"),
                    );
                    None
                } else {
                    Some(i)
                }
            });
        let region = e.check(rfc1123_label("region", &input.region));
        let zone = e.check(rfc1123_label("zone", &input.zone));

        let derived = server_type.as_deref().and_then(Arch::of_server_type);
        let arch = match (input.arch.trim(), derived) {
            (_, None) if server_type.is_some() => {
                e.push(
                    "server_type",
                    "has an unknown family: expected cx*, cpx*, ccx* (x86_64) or cax* (aarch64)",
                );
                None
            }
            ("", d) => d,
            (given, Some(d)) if given == d.as_str() => Some(d),
            (given, Some(d)) if given == "x86_64" || given == "aarch64" => {
                e.push(
                    "arch",
                    format!(
                        "{given} does not match server type {} ({d})",
                        server_type.as_deref().unwrap_or("")
                    ),
                );
                None
            }
            (_, _) => {
                e.push(
                    "arch",
                    "must be x86_64 or aarch64 (or empty to derive it from the server type)",
                );
                None
            }
        };

        let mut mesh_tags = Vec::new();
        for t in &input.mesh_tags {
            match MeshTag::parse(t.trim()) {
                Ok(t) if !mesh_tags.contains(&t) => mesh_tags.push(t),
                Ok(_) => {}
                Err(why) => e.push("mesh_tags", why),
            }
        }
        if mesh_tags.len() > 32 {
            e.push("mesh_tags", "at most 32 tags");
        }

        let mut ssh_keys = Vec::new();
        for k in &input.ssh_keys {
            let id = match k {
                serde_json::Value::Number(n) => n.as_u64(),
                serde_json::Value::String(s) => s.trim().parse::<u64>().ok(),
                _ => None,
            };
            match id {
                Some(id) if id > 0 => ssh_keys.push(id),
                _ => e.push(
                    "ssh_keys",
                    format!(
                        "{k} is not an ssh key id (a positive whole number, as Hetzner lists them)"
                    ),
                ),
            }
        }

        let mut labels = BTreeMap::new();
        for (k, v) in &input.labels {
            match LabelKey::parse(k).and_then(|k| LabelValue::parse(v).map(|v| (k, v))) {
                Ok((k, _)) if RESERVED_LABELS.contains(&k.as_str()) => {
                    e.push("labels", format!("key {k:?} is set by headroom itself"))
                }
                Ok((k, v)) => {
                    labels.insert(k, v);
                }
                Err(why) => e.push("labels", why),
            }
        }
        if labels.len() > 60 {
            e.push("labels", "at most 60 labels");
        }

        let memory_mb = bounded_u64(
            &mut e,
            "allocatable.memory_mb",
            &input.allocatable.memory_mb,
            256,
            4_194_304,
        );
        let cpu_millis = bounded_u64(
            &mut e,
            "allocatable.cpu_millis",
            &input.allocatable.cpu_millis,
            100,
            1_024_000,
        );
        if let Some((cores, mem_gib)) = server_type
            .as_ref()
            .and_then(|t| catalogue.server_types.get(t))
        {
            if memory_mb.is_some_and(|m| m as f64 > mem_gib * 1024.0) {
                e.push(
                    "allocatable.memory_mb",
                    format!("is more than the server type's {mem_gib} GiB"),
                );
            }
            if cpu_millis.is_some_and(|c| c > u64::from(*cores) * 1000) {
                e.push(
                    "allocatable.cpu_millis",
                    format!(
                        "is more than the server type's {cores} cores ({} millis)",
                        cores * 1000
                    ),
                );
            }
        }

        let mut taints = Vec::new();
        for t in &input.taints {
            match Taint::parse(t.trim()) {
                Ok(t) => taints.push(t),
                Err(why) => e.push("taints", why),
            }
        }

        let template = text_field(&mut e, "template", &input.template, 63)
            .map(|t| {
                if t.is_empty() {
                    default_template.to_owned()
                } else {
                    t
                }
            })
            .and_then(|t| {
                if templates.contains(&t) {
                    Some(t)
                } else {
                    e.push("template", format!("{t:?} is not a known template"));
                    None
                }
            });
        let yubaba_channel = match input.yubaba_channel.trim() {
            "" | "stable" => Some(Channel::Stable),
            "beta" => Some(Channel::Beta),
            _ => {
                e.push("yubaba_channel", "must be stable or beta");
                None
            }
        };
        let yubaba_url = e.check(HttpsUrl::parse("yubaba_url", &input.yubaba_url));
        let yubaba_sha256 = e.check(Sha256Pin::parse("yubaba_sha256", &input.yubaba_sha256));

        // Each field named once: `?` turns any field that failed into no spec at all.
        let assembled = || {
            Some(MachineSpec {
                name: name?,
                provider: provider?,
                location: location?,
                server_type: server_type?,
                image: image?,
                region: region?,
                zone: zone?,
                arch: arch?,
                mesh_tags,
                ssh_keys,
                labels,
                allocatable: Allocatable {
                    memory_mb,
                    cpu_millis,
                },
                taints,
                template: template?,
                yubaba_channel: yubaba_channel?,
                yubaba_url: yubaba_url?,
                yubaba_sha256: yubaba_sha256?,
            })
        };
        match assembled() {
            Some(spec) if e.is_empty() => Ok(spec),
            _ => Err(e),
        }
    }

    /// The spec as submitted input (to prefill an edit form or compare).
    pub fn to_input(&self) -> MachineInput {
        MachineInput {
            name: self.name.to_string(),
            provider: self.provider.as_str().into(),
            location: self.location.clone(),
            server_type: self.server_type.clone(),
            image: self.image.clone(),
            region: self.region.clone(),
            zone: self.zone.clone(),
            arch: self.arch.as_str().into(),
            mesh_tags: self.mesh_tags.iter().map(|t| t.to_string()).collect(),
            ssh_keys: self.ssh_keys.iter().map(|k| serde_json::json!(k)).collect(),
            labels: self
                .labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            allocatable: AllocatableInput {
                memory_mb: self.allocatable.memory_mb.map(|m| serde_json::json!(m)),
                cpu_millis: self.allocatable.cpu_millis.map(|c| serde_json::json!(c)),
            },
            taints: self.taints.iter().map(|t| t.to_string()).collect(),
            template: self.template.clone(),
            yubaba_channel: self.yubaba_channel.as_str().into(),
            yubaba_url: self.yubaba_url.to_string(),
            yubaba_sha256: self.yubaba_sha256.to_string(),
        }
    }
}
