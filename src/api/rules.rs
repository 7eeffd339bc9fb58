//! The rules request properties obey, as OpenAPI schemas. Each is written once here, from the
//! domain's own limits where it has them, and the request types point at it with
//! `#[schema(value_type = …, inline)]`, so a client generating from the document sends only
//! what the server accepts. `tests/api/openapi.rs` checks every rule against the server.

use std::borrow::Cow;

use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::RefOr;

use crate::domain::machine::LABEL_MAX;
use crate::domain::{NewPassword, Username};

/// No C0/C1 control character anywhere (Rust's `char::is_control`).
const NO_CONTROLS: &str = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$";
/// An RFC 1123 label: a-z, 0-9 and '-', alphanumeric at both ends.
const RFC1123: &str = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$";
/// A config or template name: an RFC 1123 label other than `new`.
const DOCUMENT_NAME: &str = "^(?!new$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$";
/// A Hetzner label key: optional DNS-subdomain prefix (not hetzner.cloud) and `/`, then a name
/// of letters, digits, '-', '_' and '.', alphanumeric at both ends.
const LABEL_KEY: &str = "^(?!(.*\\.)?hetzner\\.cloud/)(?!headroom-(provision|fleet)$)((?=[^/]{1,253}/)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$";
/// A Hetzner label value: like a key's name, or empty.
const LABEL_VALUE: &str = "^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$";
/// A taint: `key[=value]:Effect`, its key a label key (so not under hetzner.cloud/).
const TAINT: &str = "^(?!(.*\\.)?hetzner\\.cloud/)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?(=([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?)?:(NoSchedule|PreferNoSchedule|NoExecute)$";
/// An https URL with a host and no credentials (the path may hold anything printable).
const HTTPS_URL: &str =
    "^https://[^\\s/?#@\\\\:\\[\\]<>^|%\\u0000-\\u001F\\u007F]+(:[0-9]{1,5})?([/?#][^\\s]*)?$";
/// Render-time secret values (`domain::secret::VALUE_RULE`): empty (absent) or 8 to 1024
/// characters that need no escaping in YAML or shell.
const SECRET: &str = "^([A-Za-z0-9+/=_.-]{8,1024})?$";
/// Some visible text, no control characters (token labels, catalogue names).
const VISIBLE_TEXT: &str =
    "^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u001F\\u007F-\\u009F]*$";

/// A monthly budget as text (`domain::fleet::MonthlyBudget::parse`, after trimming): empty,
/// or above 0 and at most 10000000 with at most 2 significant decimal places.
const MONTHLY_BUDGET: &str =
    "^(|0*([1-9][0-9]{0,6}(\\.[0-9]{1,2}0*)?|0\\.(0[1-9]|[1-9][0-9]?)0*|10000000(\\.0+)?))$";

fn string(pattern: &str, max: Option<usize>, description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::String))
        .pattern(Some(pattern))
        .max_length(max)
        .description(Some(description))
}

fn choice(values: &[&str], description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::String))
        .enum_values(Some(values.iter().copied()))
        .description(Some(description))
}

fn integer(min: u64, max: Option<u64>, nullable: bool, description: &str) -> ObjectBuilder {
    let ty = if nullable {
        SchemaType::from_iter([Type::Integer, Type::Null])
    } else {
        SchemaType::Type(Type::Integer)
    };
    ObjectBuilder::new()
        .schema_type(ty)
        .minimum(Some(min))
        .maximum(max)
        .description(Some(description))
}

/// Declares a zero-sized type whose OpenAPI schema is `$schema`.
macro_rules! rule {
    ($(#[$doc:meta])* $name:ident => $schema:expr) => {
        $(#[$doc])*
        pub struct $name;
        impl utoipa::PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                Schema::from($schema).into()
            }
        }
        impl utoipa::ToSchema for $name {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }
        }
    };
}

rule!(
    /// A username.
    UsernameRule => string(
        "^[a-z0-9][a-z0-9._-]*$",
        Some(Username::MAX_LEN),
        "A lowercase letter or digit, then a-z, 0-9, '.', '_' and '-'.",
    )
);
rule!(
    /// A role.
    RoleRule => choice(&["viewer", "operator", "approver", "admin"], "Each role includes the ones before it.")
);
rule!(
    /// A new password.
    PasswordRule => string(NO_CONTROLS, Some(NewPassword::MAX_LEN), "12 to 1,024 characters, no control characters.")
        .min_length(Some(NewPassword::MIN_LEN))
);
rule!(
    /// A token label.
    TokenLabelRule => string(VISIBLE_TEXT, Some(100), "What the token is for: at most 100 characters, no control characters.")
        .min_length(Some(1))
);
rule!(
    /// A machine config or template name.
    DocumentNameRule => string(DOCUMENT_NAME, Some(LABEL_MAX), "An RFC 1123 label (a-z, 0-9, '-'; at most 63) other than \"new\".")
);
rule!(
    /// An optional template name: empty means the config's own (or the default) template.
    TemplateChoiceRule => string(
        "^((?!new$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)?$",
        Some(LABEL_MAX),
        "An existing template's name; empty means the default.",
    )
);
rule!(
    /// An RFC 1123 label (region, zone).
    Rfc1123Rule => string(RFC1123, Some(LABEL_MAX), "An RFC 1123 label: a-z, 0-9 and '-', at most 63.")
);
rule!(
    /// A cloud provider.
    ProviderRule => choice(&["hetzner", "simulated"], "`simulated` exists only in the demo.")
);
rule!(
    /// A location.
    LocationRule => string(
        VISIBLE_TEXT,
        Some(64),
        "A location from the provider's catalogue (GET /api/v1/catalogue).",
    )
);
rule!(
    /// An image, or empty for debian-12.
    ImageRule => string(
        NO_CONTROLS,
        Some(64),
        "A system image from the provider's catalogue; empty means debian-12.",
    )
);
rule!(
    /// A server type.
    ServerTypeRule => string(
        "^(cx|cpx|ccx|cax)[^\\u0000-\\u001F\\u007F-\\u009F]*$",
        Some(64),
        "A server type from the catalogue: cx*, cpx*, ccx* (x86_64) or cax* (aarch64).",
    )
);
rule!(
    /// A CPU architecture, or empty to derive it from the server type.
    ArchRule => choice(&["", "x86_64", "aarch64"], "Must match the server type; empty derives it.")
);
rule!(
    /// A yubaba release channel.
    ChannelRule => choice(&["", "stable", "beta"], "Empty means stable.")
);
rule!(
    /// The yubaba tarball URL.
    HttpsUrlRule => string(HTTPS_URL, Some(2048), "An https URL with a host and no credentials, at most 2,048 characters.")
);
rule!(
    /// A sha256 pin.
    Sha256Rule => string("^[0-9a-f]{64}$", None, "Exactly 64 lowercase hex characters.")
);
rule!(
    /// Mesh ACL tags.
    MeshTagsRule => ArrayBuilder::new()
        .items(string("^tag:[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", Some(LABEL_MAX + 4), "tag: and an RFC 1123 label."))
        .max_items(Some(32))
        .description(Some("At most 32 distinct tags."))
);
rule!(
    /// Hetzner ssh key ids.
    SshKeysRule => ArrayBuilder::new()
        .items(integer(1, None, false, "A positive ssh key id, as Hetzner lists them."))
);
rule!(
    /// Hetzner labels.
    LabelsRule => ObjectBuilder::new()
        .property_names(Some(string(LABEL_KEY, None, "A Hetzner label key (a prefix of at most 253 and a name of at most 63); headroom-provision and headroom-fleet are headroom's own.")))
        .additional_properties(Some(string(LABEL_VALUE, Some(LABEL_MAX), "A Hetzner label value.")))
        .max_properties(Some(60))
        .description(Some("At most 60 Hetzner labels."))
);
rule!(
    /// Kubernetes-style taints.
    TaintsRule => ArrayBuilder::new()
        .items(string(TAINT, None, "key[=value]:NoSchedule|PreferNoSchedule|NoExecute."))
);
rule!(
    /// Declared allocatable memory.
    MemoryMbRule => integer(256, Some(4_194_304), true, "MiB; at most the server type's memory.")
);
rule!(
    /// Declared allocatable CPU.
    CpuMillisRule => integer(100, Some(1_024_000), true, "Millicores; at most the server type's cores × 1000.")
);
rule!(
    /// A render-time secret.
    SecretRule => string(SECRET, Some(1024), "8 to 1024 characters of A-Z a-z 0-9 + / = _ . - (base64, hex and tskey-… tokens fit); empty or null means none. Shown in the payload as «secret:<field>».")
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
);
rule!(
    /// A template body.
    TemplateBodyRule => string(
        "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$",
        Some(crate::machine_setup::templates::MAX_TEMPLATE_CHARS),
        "A tera document (at most 131,072 characters, no NUL) that the sandbox accepts.",
    )
);

/// A yubaba base URL: http or https, a host (a name or a bracketed IPv6 literal), an optional
/// port up to 65535, an optional path; no credentials, query, fragment, spaces or backslashes.
const ENDPOINT_URL: &str = "^https?://(\\[[0-9A-Fa-f:.]+\\]|[^\\s/?#@\\\\:\\[\\]<>^|%\\u0000-\\u001F\\u007F-\\u009F]+)(:(0*(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4}))?)?(/[^\\s?#\\\\\\u0000-\\u001F\\u007F-\\u009F]*)?$";
/// A secret source: `env:VARIABLE` or `file:/absolute/path` without a `..` component, or
/// empty (none).
/// A declared secret's name (`domain::secret::LABEL_RULE`), or empty for none.
const SECRET_LABEL: &str = "^([a-z0-9][a-z0-9_-]{0,62})?$";

rule!(
    /// A fleet's yubaba base URLs.
    EndpointsRule => ArrayBuilder::new()
        .items(string(ENDPOINT_URL, Some(crate::domain::fleet::ENDPOINT_MAX_CHARS), "An http(s) base URL with a host, no credentials, query or fragment; at most 2,048 characters. A trailing / is dropped."))
        .max_items(Some(crate::domain::fleet::ENDPOINTS_MAX))
        .description(Some("1 to 16 distinct yubaba base URLs (at least one is required)."))
);
rule!(
    /// Approvals a fleet's requests need.
    ApprovalsRequiredRule => integer(1, Some(u64::from(crate::domain::fleet::APPROVALS_MAX)), true, "Distinct approvers a request needs; null or absent means 1.")
);
rule!(
    /// Hours an approval window stays open.
    ApprovalTtlRule => integer(1, Some(u64::from(crate::domain::fleet::APPROVAL_TTL_HOURS_MAX)), true, "Hours a request may wait for approval; null or absent means 4.")
);
rule!(
    /// Seconds between scrapes.
    ScrapeIntervalRule => integer(u64::from(crate::domain::fleet::SCRAPE_INTERVAL_SECS_MIN), Some(u64::from(crate::domain::fleet::SCRAPE_INTERVAL_SECS_MAX)), true, "Seconds between scrapes; null or absent means 15.")
);
rule!(
    /// Seconds one scrape may take.
    ScrapeTimeoutRule => integer(1, Some(u64::from(crate::domain::fleet::SCRAPE_TIMEOUT_SECS_MAX)), true, "Seconds one scrape may take, below scrape_interval_secs; null or absent means 5.")
);
rule!(
    /// Spare nodes required, overriding N+1 / N+2.
    RequiredOverrideRule => integer(0, Some(u64::from(crate::domain::fleet::REQUIRED_OVERRIDE_MAX)), true, "Spare nodes required; null or absent derives N+1 or N+2 from the fleet's regions.")
);
rule!(
    /// Most machines one restore proposal asks for.
    MaxRestoreMachinesRule => integer(1, Some(u64::from(crate::domain::fleet::MAX_RESTORE_MACHINES_MAX)), true, "Most machines one restore proposal of headroom's asks for (1-20); null or absent means 2. A larger deficit gets follow-up proposals.")
);
rule!(
    /// A fleet's monthly budget: decimal text or a number.
    MonthlyBudgetRule => ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Number, Type::Null]))
        .pattern(Some(MONTHLY_BUDGET))
        .minimum(Some(0.01))
        .maximum(Some(crate::domain::fleet::MONTHLY_BUDGET_MAX))
        .description(Some("What the fleet's machines may cost a month, in the catalogue's currency: above 0, at most 10000000, at most 2 decimal places, as decimal text (\"249.50\") or a number. Empty, null or absent sets no budget. Answered as text with 2 places."))
);
rule!(
    /// Which answer decides a fleet's deficits and proposals.
    HeadroomRuleRule => ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some([
            serde_json::json!("spare_count"),
            serde_json::json!("absorption"),
            serde_json::json!(""),
            serde_json::Value::Null,
        ]))
        .description(Some("Which answer decides deficits and proposals: spare_count (yubaba's count, the default) or absorption (a deficit while losing the worst node, or region across two or more, would leave workloads without room; a proposal asks for the fewest restore machines that cover it, capped by max_restore_machines). Empty, null or absent means spare_count."))
);
rule!(
    /// Which declared secret a render-time secret is.
    SecretRefRule => string(SECRET_LABEL, Some(63), "The name of a secret the server declares (its `secrets` setting; GET /api/v1/secrets lists them). Raw env:/file: sources are refused. Empty or null means none.")
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
);
