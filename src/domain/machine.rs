//! A machine config's fields and their rules. `MachineSpec` is what a version stores; it is
//! built only by `MachineSpec::parse` from raw input plus the provider catalogue, so holding one
//! proves every field is valid and consistent (arch matches server type, location exists, …).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{FieldError, FieldErrors};

/// Longest RFC 1123 label.
pub const LABEL_MAX: usize = 63;

/// Checks an RFC 1123 label: 1–63 of a-z, 0-9 and '-', alphanumeric at both ends.
pub fn rfc1123_label(field: &str, raw: &str) -> Result<String, FieldError> {
    let v = raw.trim();
    if v.is_empty() {
        return Err(FieldError::new(field, "is required"));
    }
    if v.len() > LABEL_MAX {
        return Err(FieldError::new(
            field,
            format!("must be at most {LABEL_MAX} characters (RFC 1123 label)"),
        ));
    }
    let ok_chars = v
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let ends = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !ok_chars || !ends(v.bytes().next()) || !ends(v.bytes().last()) {
        return Err(FieldError::new(field, "must be an RFC 1123 label: a-z, 0-9 and '-', starting and ending with a letter or digit"));
    }
    Ok(v.to_owned())
}

/// A name for a machine config or template: an RFC 1123 label other than `new` (which the
/// pages use for their creation forms).
pub fn document_name(field: &str, raw: &str) -> Result<String, FieldError> {
    let name = rfc1123_label(field, raw)?;
    if name == "new" {
        return Err(FieldError::new(
            field,
            "\"new\" is reserved; choose another name",
        ));
    }
    Ok(name)
}

/// Which cloud creates the machine.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    PartialOrd,
    Ord,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Hetzner Cloud.
    Hetzner,
    /// The demo's simulated cloud.
    Simulated,
}

impl ProviderKind {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Hetzner => "hetzner",
            ProviderKind::Simulated => "simulated",
        }
    }

    /// Parses a submitted provider.
    pub fn parse_field(field: &str, raw: &str) -> Result<Self, FieldError> {
        match raw.trim() {
            "hetzner" => Ok(ProviderKind::Hetzner),
            "simulated" => Ok(ProviderKind::Simulated),
            "" => Err(FieldError::new(field, "is required")),
            _ => Err(FieldError::new(field, "must be hetzner or simulated")),
        }
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// CPU architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    #[serde(rename = "x86_64")]
    X86_64,
    #[serde(rename = "aarch64")]
    Aarch64,
}

impl Arch {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }

    /// The arch a server type implies: `cax*` → aarch64, `cx*`/`cpx*`/`ccx*` → x86_64.
    pub fn of_server_type(server_type: &str) -> Option<Arch> {
        if server_type.starts_with("cax") {
            Some(Arch::Aarch64)
        } else if ["cx", "cpx", "ccx"]
            .iter()
            .any(|p| server_type.starts_with(p))
        {
            Some(Arch::X86_64)
        } else {
            None
        }
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// yubaba release channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    Stable,
    Beta,
}

impl Channel {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Stable => "stable",
            Channel::Beta => "beta",
        }
    }
}

/// Declared allocatable capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, utoipa::ToSchema)]
pub struct Allocatable {
    pub memory_mb: Option<u64>,
    pub cpu_millis: Option<u64>,
}

/// A Hetzner server label key: optional DNS-subdomain prefix and `/`, then a name of ≤ 63
/// alphanumerics, `-`, `_`, `.`, alphanumeric at both ends. `hetzner.cloud/` is reserved.
pub fn label_key(raw: &str) -> Result<String, String> {
    let (prefix, name) = match raw.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, raw),
    };
    if let Some(p) = prefix {
        if p.is_empty()
            || p.len() > 253
            || !p.split('.').all(|part| rfc1123_label("x", part).is_ok())
        {
            return Err(format!("key {raw:?}: the prefix must be a DNS subdomain"));
        }
        if p == "hetzner.cloud" || p.ends_with(".hetzner.cloud") {
            return Err(format!(
                "key {raw:?}: the hetzner.cloud/ prefix is reserved"
            ));
        }
    }
    label_word(name, false).map_err(|why| format!("key {raw:?}: {why}"))?;
    Ok(raw.to_owned())
}

/// A Hetzner label value: like a key's name part, and may be empty.
pub fn label_value(raw: &str) -> Result<String, String> {
    label_word(raw, true).map_err(|why| format!("value {raw:?}: {why}"))?;
    Ok(raw.to_owned())
}

fn label_word(w: &str, may_be_empty: bool) -> Result<(), &'static str> {
    if w.is_empty() {
        return if may_be_empty {
            Ok(())
        } else {
            Err("must not be empty")
        };
    }
    if w.len() > LABEL_MAX {
        return Err("must be at most 63 characters");
    }
    let inner = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    let bytes = w.as_bytes();
    if !bytes.iter().all(|b| inner(*b))
        || !bytes[0].is_ascii_alphanumeric()
        || !bytes[bytes.len() - 1].is_ascii_alphanumeric()
    {
        return Err("may use only letters, digits, '-', '_' and '.', and must start and end with a letter or digit");
    }
    Ok(())
}

/// Keys headroom sets itself on every server it creates.
pub const RESERVED_LABELS: [&str; 2] = ["headroom-provision", "headroom-fleet"];

/// A taint: `key[=value]:Effect`, Effect one of NoSchedule, PreferNoSchedule, NoExecute.
pub fn taint(raw: &str) -> Result<String, String> {
    let (kv, effect) = raw
        .rsplit_once(':')
        .ok_or_else(|| format!("{raw:?} must look like key=value:NoSchedule"))?;
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        return Err(format!(
            "{raw:?}: effect must be NoSchedule, PreferNoSchedule or NoExecute"
        ));
    }
    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
    label_key(k)
        .and_then(|_| label_value(v))
        .map_err(|e| format!("{raw:?}: {e}"))?;
    Ok(raw.to_owned())
}

/// A mesh (tailscale) ACL tag: `tag:` followed by an RFC 1123 label.
pub fn mesh_tag(raw: &str) -> Result<String, String> {
    let name = raw
        .strip_prefix("tag:")
        .ok_or_else(|| format!("{raw:?} must start with tag:"))?;
    rfc1123_label("x", name)
        .map_err(|_| format!("{raw:?}: after tag: comes an RFC 1123 label (a-z, 0-9, '-')"))?;
    Ok(raw.to_owned())
}

/// A sha256 pin: exactly 64 lowercase hex characters.
pub fn sha256_pin(field: &str, raw: &str) -> Result<String, FieldError> {
    let v = raw.trim();
    if v.len() != 64
        || !v
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(FieldError::new(
            field,
            "must be a sha256: exactly 64 lowercase hex characters",
        ));
    }
    Ok(v.to_owned())
}

/// An https URL with a host, no credentials, at most 2,048 characters.
pub fn https_url(field: &str, raw: &str) -> Result<String, FieldError> {
    let v = raw.trim();
    if v.is_empty() {
        return Err(FieldError::new(field, "is required"));
    }
    if v.len() > 2048 {
        return Err(FieldError::new(field, "must be at most 2048 characters"));
    }
    let url = url::Url::parse(v)
        .map_err(|e| FieldError::new(field, format!("is not a valid URL ({e})")))?;
    if url.scheme() != "https" {
        return Err(FieldError::new(field, "must use https (the tarball is fetched at first boot and must not be tampered with in transit)"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(FieldError::new(field, "must name a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(FieldError::new(field, "must not carry credentials"));
    }
    Ok(url.to_string())
}

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
    pub name: String,
    pub provider: ProviderKind,
    pub location: String,
    pub server_type: String,
    pub image: String,
    pub region: String,
    pub zone: String,
    pub arch: Arch,
    pub mesh_tags: Vec<String>,
    pub ssh_keys: Vec<u64>,
    pub labels: BTreeMap<String, String>,
    pub allocatable: Allocatable,
    pub taints: Vec<String>,
    pub template: String,
    pub yubaba_channel: Channel,
    pub yubaba_url: String,
    pub yubaba_sha256: String,
}

/// A machine config as submitted (form or JSON). List fields accept arrays (JSON) and are
/// split from text by the form layer.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
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

/// Allocatable as submitted.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
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
        let name = e.check(document_name("name", &input.name));
        let provider = e.check(ProviderKind::parse_field("provider", &input.provider));

        let location = text_field(&mut e, "location", &input.location, 64).and_then(|l| {
            if l.is_empty() {
                e.push("location", "is required");
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
            match mesh_tag(t.trim()) {
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
            match label_key(k).and_then(|k| label_value(v).map(|v| (k, v))) {
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
            match taint(t.trim()) {
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
        let yubaba_url = e.check(https_url("yubaba_url", &input.yubaba_url));
        let yubaba_sha256 = e.check(sha256_pin("yubaba_sha256", &input.yubaba_sha256));

        match (
            name,
            provider,
            location,
            server_type,
            image,
            region,
            zone,
            arch,
            template,
            yubaba_channel,
            yubaba_url,
            yubaba_sha256,
        ) {
            (
                Some(name),
                Some(provider),
                Some(location),
                Some(server_type),
                Some(image),
                Some(region),
                Some(zone),
                Some(arch),
                Some(template),
                Some(yubaba_channel),
                Some(yubaba_url),
                Some(yubaba_sha256),
            ) if e.is_empty() => Ok(MachineSpec {
                name,
                provider,
                location,
                server_type,
                image,
                region,
                zone,
                arch,
                mesh_tags,
                ssh_keys,
                labels,
                allocatable: Allocatable {
                    memory_mb,
                    cpu_millis,
                },
                taints,
                template,
                yubaba_channel,
                yubaba_url,
                yubaba_sha256,
            }),
            _ => Err(e),
        }
    }

    /// The spec as submitted input (to prefill an edit form or compare).
    pub fn to_input(&self) -> MachineInput {
        MachineInput {
            name: self.name.clone(),
            provider: self.provider.as_str().into(),
            location: self.location.clone(),
            server_type: self.server_type.clone(),
            image: self.image.clone(),
            region: self.region.clone(),
            zone: self.zone.clone(),
            arch: self.arch.as_str().into(),
            mesh_tags: self.mesh_tags.clone(),
            ssh_keys: self.ssh_keys.iter().map(|k| serde_json::json!(k)).collect(),
            labels: self.labels.clone(),
            allocatable: AllocatableInput {
                memory_mb: self.allocatable.memory_mb.map(|m| serde_json::json!(m)),
                cpu_millis: self.allocatable.cpu_millis.map(|c| serde_json::json!(c)),
            },
            taints: self.taints.clone(),
            template: self.template.clone(),
            yubaba_channel: self.yubaba_channel.as_str().into(),
            yubaba_url: self.yubaba_url.clone(),
            yubaba_sha256: self.yubaba_sha256.clone(),
        }
    }
}

/// One changed field between two versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldChange {
    pub field: String,
    /// `None` when the field was absent.
    pub before: Option<String>,
    pub after: Option<String>,
}

/// Field-level differences, in field order, comparing the JSON encodings (nested objects such
/// as `allocatable` are compared per inner field).
pub fn diff_specs(before: Option<&MachineSpec>, after: &MachineSpec) -> Vec<FieldChange> {
    fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(m) if prefix == "allocatable" || prefix.is_empty() => {
                for (k, inner) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    flatten(&key, inner, out);
                }
            }
            serde_json::Value::String(s) => out.push((prefix.to_owned(), s.clone())),
            other => out.push((prefix.to_owned(), other.to_string())),
        }
    }
    let mut a = Vec::new();
    if let Some(b) = before {
        flatten("", &serde_json::to_value(b).unwrap_or_default(), &mut a);
    }
    let mut b = Vec::new();
    flatten("", &serde_json::to_value(after).unwrap_or_default(), &mut b);
    let old: BTreeMap<_, _> = a.into_iter().collect();
    let mut changes = Vec::new();
    for (k, v) in &b {
        if old.get(k) != Some(v) {
            changes.push(FieldChange {
                field: k.clone(),
                before: old.get(k).cloned(),
                after: Some(v.clone()),
            });
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn catalogue() -> CatalogueView {
        CatalogueView {
            locations: vec!["fsn1".into(), "hel1".into()],
            server_types: [
                ("cx22".to_owned(), (2, 4.0)),
                ("cax11".to_owned(), (2, 4.0)),
            ]
            .into_iter()
            .collect(),
            images: vec!["debian-12".into()],
        }
    }

    pub fn input() -> MachineInput {
        MachineInput {
            name: "spare-fsn1".into(),
            provider: "hetzner".into(),
            location: "fsn1".into(),
            server_type: "cx22".into(),
            region: "eu-central".into(),
            zone: "fsn1-dc14".into(),
            yubaba_url: "https://releases.example.com/yubaba-1.2.3.tar.gz".into(),
            yubaba_sha256: "a".repeat(64),
            mesh_tags: vec!["tag:spare".into()],
            ssh_keys: vec![serde_json::json!(42)],
            labels: [("team".to_owned(), "infra".to_owned())]
                .into_iter()
                .collect(),
            ..MachineInput::default()
        }
    }

    fn err_fields(i: &MachineInput) -> Vec<String> {
        MachineSpec::parse(i, &catalogue(), &["yubaba-node".into()], "yubaba-node")
            .unwrap_err()
            .0
            .into_iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn a_complete_input_parses_with_defaults_and_derived_arch() {
        let s = MachineSpec::parse(
            &input(),
            &catalogue(),
            &["yubaba-node".into()],
            "yubaba-node",
        )
        .unwrap();
        assert_eq!(s.arch, Arch::X86_64);
        assert_eq!(s.image, "debian-12");
        assert_eq!(s.template, "yubaba-node");
        assert_eq!(s.yubaba_channel, Channel::Stable);
    }

    #[test]
    fn each_rule_names_its_field() {
        type Mutation = fn(&mut MachineInput);
        let cases: Vec<(Mutation, &str)> = vec![
            (|i| i.name = "Bad_Name".into(), "name"),
            (|i| i.name = "a".repeat(64), "name"),
            (|i| i.name = "-lead".into(), "name"),
            (|i| i.provider = "aws".into(), "provider"),
            (|i| i.location = "mars1".into(), "location"),
            (|i| i.server_type = "t3.micro".into(), "server_type"),
            (|i| i.arch = "aarch64".into(), "arch"),
            (|i| i.region = "EU".into(), "region"),
            (|i| i.mesh_tags = vec!["spare".into()], "mesh_tags"),
            (|i| i.ssh_keys = vec![serde_json::json!("abc")], "ssh_keys"),
            (|i| i.ssh_keys = vec![serde_json::json!(0)], "ssh_keys"),
            (
                |i| {
                    i.labels.insert("hetzner.cloud/x".into(), "y".into());
                },
                "labels",
            ),
            (
                |i| {
                    i.labels.insert("k".into(), "bad value!".into());
                },
                "labels",
            ),
            (
                |i| {
                    i.labels.insert("headroom-fleet".into(), "x".into());
                },
                "labels",
            ),
            (
                |i| i.allocatable.memory_mb = Some(serde_json::json!(10)),
                "allocatable.memory_mb",
            ),
            (
                |i| i.allocatable.memory_mb = Some(serde_json::json!(8192)),
                "allocatable.memory_mb",
            ),
            (
                |i| i.allocatable.cpu_millis = Some(serde_json::json!(4000)),
                "allocatable.cpu_millis",
            ),
            (|i| i.taints = vec!["dedicated=ops".into()], "taints"),
            (|i| i.template = "nope".into(), "template"),
            (|i| i.yubaba_channel = "nightly".into(), "yubaba_channel"),
            (
                |i| i.yubaba_url = "http://releases.example.com/x.tar.gz".into(),
                "yubaba_url",
            ),
            (
                |i| i.yubaba_url = "https://user:pw@example.com/x".into(),
                "yubaba_url",
            ),
            (|i| i.yubaba_sha256 = "A".repeat(64), "yubaba_sha256"),
            (|i| i.yubaba_sha256 = "a".repeat(63), "yubaba_sha256"),
        ];
        for (mutate, field) in cases {
            let mut i = input();
            mutate(&mut i);
            assert_eq!(err_fields(&i), vec![field.to_owned()], "{i:?}");
        }
    }

    #[test]
    fn arm_server_types_derive_aarch64() {
        let mut i = input();
        i.server_type = "cax11".into();
        i.arch = "aarch64".into();
        let s =
            MachineSpec::parse(&i, &catalogue(), &["yubaba-node".into()], "yubaba-node").unwrap();
        assert_eq!(s.arch, Arch::Aarch64);
    }

    #[test]
    fn diff_lists_changed_fields_only() {
        let a = MachineSpec::parse(
            &input(),
            &catalogue(),
            &["yubaba-node".into()],
            "yubaba-node",
        )
        .unwrap();
        let mut b = a.clone();
        b.location = "hel1".into();
        b.allocatable.memory_mb = Some(2048);
        let d = diff_specs(Some(&a), &b);
        let fields: Vec<&str> = d.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["allocatable.memory_mb", "location"]);
        assert_eq!(d[1].before.as_deref(), Some("fsn1"));
    }
}
