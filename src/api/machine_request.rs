//! The machine config request body as the API takes it, with every rule declared for the
//! OpenAPI document. It decodes exactly like the domain's `MachineInput` (same field types,
//! defaults and unknown-field refusal) and becomes one before parsing.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use utoipa::openapi::{RefOr, Schema};

use super::rules;
use crate::domain::machine::{AllocatableInput, MachineInput};

/// A machine config to create. Omitted fields take their defaults (`image` debian-12, `arch`
/// from the server type, the default template, channel stable).
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct MachineConfigRequest {
    #[schema(value_type = rules::DocumentNameRule, inline)]
    pub name: String,
    #[schema(value_type = rules::ProviderRule, inline)]
    pub provider: String,
    #[schema(value_type = rules::LocationRule, inline)]
    pub location: String,
    #[schema(value_type = rules::ServerTypeRule, inline)]
    pub server_type: String,
    #[schema(value_type = rules::ImageRule, inline)]
    pub image: String,
    #[schema(value_type = rules::Rfc1123Rule, inline)]
    pub region: String,
    #[schema(value_type = rules::Rfc1123Rule, inline)]
    pub zone: String,
    #[schema(value_type = rules::ArchRule, inline)]
    pub arch: String,
    #[schema(value_type = rules::MeshTagsRule, inline)]
    pub mesh_tags: Vec<String>,
    #[schema(value_type = rules::SshKeysRule, inline)]
    pub ssh_keys: Vec<serde_json::Value>,
    #[schema(value_type = rules::LabelsRule, inline)]
    pub labels: BTreeMap<String, String>,
    #[schema(inline)]
    pub allocatable: AllocatableRequest,
    #[schema(value_type = rules::TaintsRule, inline)]
    pub taints: Vec<String>,
    #[schema(value_type = rules::TemplateChoiceRule, inline)]
    pub template: String,
    #[schema(value_type = rules::ChannelRule, inline)]
    pub yubaba_channel: String,
    #[schema(value_type = rules::HttpsUrlRule, inline)]
    pub yubaba_url: String,
    #[schema(value_type = rules::Sha256Rule, inline)]
    pub yubaba_sha256: String,
}

/// Declared allocatable capacity; each may be null (undeclared).
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct AllocatableRequest {
    #[schema(value_type = rules::MemoryMbRule, inline)]
    pub memory_mb: Option<serde_json::Value>,
    #[schema(value_type = rules::CpuMillisRule, inline)]
    pub cpu_millis: Option<serde_json::Value>,
}

impl From<MachineConfigRequest> for MachineInput {
    fn from(r: MachineConfigRequest) -> Self {
        MachineInput {
            name: r.name,
            provider: r.provider,
            location: r.location,
            server_type: r.server_type,
            image: r.image,
            region: r.region,
            zone: r.zone,
            arch: r.arch,
            mesh_tags: r.mesh_tags,
            ssh_keys: r.ssh_keys,
            labels: r.labels,
            allocatable: AllocatableInput {
                memory_mb: r.allocatable.memory_mb,
                cpu_millis: r.allocatable.cpu_millis,
            },
            taints: r.taints,
            template: r.template,
            yubaba_channel: r.yubaba_channel,
            yubaba_url: r.yubaba_url,
            yubaba_sha256: r.yubaba_sha256,
        }
    }
}

/// The body of `PUT /api/v1/machine-configs/{name}`: a create body without `name`, which the
/// path decides. (A `name` equal to the path is still accepted, for clients that send back
/// what they read.)
pub struct MachineConfigUpdate;

impl utoipa::PartialSchema for MachineConfigUpdate {
    fn schema() -> RefOr<Schema> {
        without_name(<MachineConfigRequest as utoipa::PartialSchema>::schema())
    }
}

impl utoipa::ToSchema for MachineConfigUpdate {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("MachineConfigUpdate")
    }
}

/// An object schema without its `name` property: for update bodies, whose name is the path's.
pub fn without_name(schema: RefOr<Schema>) -> RefOr<Schema> {
    match schema {
        RefOr::T(Schema::Object(mut o)) => {
            o.properties.remove("name");
            o.required.retain(|r| r != "name");
            RefOr::T(Schema::Object(o))
        }
        other => other,
    }
}
