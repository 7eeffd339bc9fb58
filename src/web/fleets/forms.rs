//! The fleet form as submitted: text fields that become a `FleetInput`.

use serde::Deserialize;

use crate::domain::fleet::{FleetInput, SecretName};

/// Raw form fields; endpoints are one URL per line (a comma may belong to a URL's path).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct FleetForm {
    pub name: String,
    pub endpoints: String,
    pub restore_machine_config: String,
    pub approvals_required: String,
    pub approval_ttl_hours: String,
    pub scrape_interval_secs: String,
    pub scrape_timeout_secs: String,
    pub required_override: String,
    pub max_restore_machines: String,
    pub monthly_budget: String,
    pub headroom_rule: String,
    #[serde(rename = "secrets.mesh_preauth_key")]
    pub mesh_preauth_key: String,
    #[serde(rename = "secrets.tunnel_token")]
    pub tunnel_token: String,
}

impl FleetForm {
    /// The form a new fleet starts with: the defaults written out.
    pub fn defaults() -> Self {
        use crate::domain::fleet::*;
        FleetForm {
            approvals_required: APPROVALS_DEFAULT.to_string(),
            approval_ttl_hours: APPROVAL_TTL_HOURS_DEFAULT.to_string(),
            scrape_interval_secs: SCRAPE_INTERVAL_SECS_DEFAULT.to_string(),
            scrape_timeout_secs: SCRAPE_TIMEOUT_SECS_DEFAULT.to_string(),
            max_restore_machines: MAX_RESTORE_MACHINES_DEFAULT.to_string(),
            headroom_rule: HeadroomRule::default().as_str().to_string(),
            ..FleetForm::default()
        }
    }

    /// The form filled from a stored fleet.
    pub fn from_input(i: &FleetInput) -> Self {
        let num = |v: &Option<serde_json::Value>| {
            v.as_ref()
                .map(|v| v.to_string().trim_matches('"').to_owned())
                .unwrap_or_default()
        };
        let secret = |n: SecretName| i.secrets.get(n.as_str()).cloned().unwrap_or_default();
        FleetForm {
            name: i.name.clone(),
            endpoints: i.endpoints.join("\n"),
            restore_machine_config: i.restore_machine_config.clone(),
            approvals_required: num(&i.approvals_required),
            approval_ttl_hours: num(&i.approval_ttl_hours),
            scrape_interval_secs: num(&i.scrape_interval_secs),
            scrape_timeout_secs: num(&i.scrape_timeout_secs),
            required_override: num(&i.required_override),
            max_restore_machines: num(&i.max_restore_machines),
            monthly_budget: num(&i.monthly_budget),
            headroom_rule: num(&i.headroom_rule),
            mesh_preauth_key: secret(SecretName::MeshPreauthKey),
            tunnel_token: secret(SecretName::TunnelToken),
        }
    }
}

impl From<&FleetForm> for FleetInput {
    fn from(f: &FleetForm) -> Self {
        let opt = |s: &str| {
            (!s.trim().is_empty()).then(|| serde_json::Value::String(s.trim().to_owned()))
        };
        FleetInput {
            name: f.name.clone(),
            endpoints: f
                .endpoints
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect(),
            restore_machine_config: f.restore_machine_config.clone(),
            approvals_required: opt(&f.approvals_required),
            approval_ttl_hours: opt(&f.approval_ttl_hours),
            scrape_interval_secs: opt(&f.scrape_interval_secs),
            scrape_timeout_secs: opt(&f.scrape_timeout_secs),
            required_override: opt(&f.required_override),
            max_restore_machines: opt(&f.max_restore_machines),
            monthly_budget: opt(&f.monthly_budget),
            headroom_rule: opt(&f.headroom_rule),
            secrets: [
                (SecretName::MeshPreauthKey, &f.mesh_preauth_key),
                (SecretName::TunnelToken, &f.tunnel_token),
            ]
            .into_iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
            .collect(),
        }
    }
}
