//! The machine-config form as submitted: text fields that become a `MachineInput`.

use serde::Deserialize;

use crate::domain::machine::{AllocatableInput, MachineInput};
use crate::domain::FieldErrors;
use crate::machine_setup::configs::{parse_labels, split_list};

/// Raw form fields; list fields are comma- or newline-separated text.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct MachineForm {
    pub name: String,
    pub provider: String,
    pub location: String,
    pub server_type: String,
    pub image: String,
    pub region: String,
    pub zone: String,
    pub arch: String,
    pub mesh_tags: String,
    pub ssh_keys: String,
    pub labels: String,
    #[serde(rename = "allocatable.memory_mb")]
    pub memory_mb: String,
    #[serde(rename = "allocatable.cpu_millis")]
    pub cpu_millis: String,
    pub taints: String,
    pub template: String,
    pub yubaba_channel: String,
    pub yubaba_url: String,
    pub yubaba_sha256: String,
}

impl MachineForm {
    /// The form filled from a stored config.
    pub fn from_input(i: &MachineInput) -> Self {
        let num = |v: &Option<serde_json::Value>| {
            v.as_ref()
                .map(|v| v.to_string().trim_matches('"').to_owned())
                .unwrap_or_default()
        };
        MachineForm {
            name: i.name.clone(),
            provider: i.provider.clone(),
            location: i.location.clone(),
            server_type: i.server_type.clone(),
            image: i.image.clone(),
            region: i.region.clone(),
            zone: i.zone.clone(),
            arch: i.arch.clone(),
            mesh_tags: i.mesh_tags.join(", "),
            ssh_keys: i
                .ssh_keys
                .iter()
                .map(|k| k.to_string().trim_matches('"').to_owned())
                .collect::<Vec<_>>()
                .join(", "),
            labels: i
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("\n"),
            memory_mb: num(&i.allocatable.memory_mb),
            cpu_millis: num(&i.allocatable.cpu_millis),
            taints: i.taints.join("\n"),
            template: i.template.clone(),
            yubaba_channel: i.yubaba_channel.clone(),
            yubaba_url: i.yubaba_url.clone(),
            yubaba_sha256: i.yubaba_sha256.clone(),
        }
    }
}

impl TryFrom<&MachineForm> for MachineInput {
    type Error = FieldErrors;

    fn try_from(f: &MachineForm) -> Result<Self, FieldErrors> {
        let labels = parse_labels(&f.labels)?;
        let opt = |s: &str| {
            (!s.trim().is_empty()).then(|| serde_json::Value::String(s.trim().to_owned()))
        };
        Ok(MachineInput {
            name: f.name.clone(),
            provider: f.provider.clone(),
            location: f.location.clone(),
            server_type: f.server_type.clone(),
            image: f.image.clone(),
            region: f.region.clone(),
            zone: f.zone.clone(),
            arch: f.arch.clone(),
            mesh_tags: split_list(&f.mesh_tags),
            ssh_keys: split_list(&f.ssh_keys)
                .into_iter()
                .map(serde_json::Value::String)
                .collect(),
            labels,
            allocatable: AllocatableInput {
                memory_mb: opt(&f.memory_mb),
                cpu_millis: opt(&f.cpu_millis),
            },
            taints: f
                .taints
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect(),
            template: f.template.clone(),
            yubaba_channel: f.yubaba_channel.clone(),
            yubaba_url: f.yubaba_url.clone(),
            yubaba_sha256: f.yubaba_sha256.clone(),
        })
    }
}
