//! Planning a request: parse what a person asked for, render every machine's payload with the
//! fleet's secrets, price it from the cached catalogue and hash it. The plan hash covers every
//! shown payload's sha256 (stand-ins, never values: see `cloud_init::render`) and a keyed digest
//! of the secrets' values, so a rotated secret, a new config version or a new template version
//! yields a different plan — and voids approvals of the old one — while nothing published lets
//! anyone test a guess of a value.

use secrecy::SecretString;
use serde_json::json;

use super::cost::Amount;
use super::{NewRequest, Plan, PlanFinding, PlannedMachine, Provision};
use super::{COUNT_MAX, REASON_MAX};
use crate::auth::Caller;
use crate::cloud_init::{RenderRequest, Secrets};
use crate::context::Ctx;
use crate::db;
use crate::db::versions::{self, Family};
use crate::domain::digest::sha256_hex;
use crate::domain::field_error::reject_control_chars;
use crate::domain::fleet::FleetName;
use crate::domain::fleet::FleetSpec;
use crate::domain::machine::{ConfigName, MachineSpec, TemplateName};
use crate::domain::provision::PlanHash;
use crate::domain::{FieldError, FieldErrors, Role, UnixMillis};
use crate::error::OpError;
use crate::machine_setup::configs::ConfigVersion;

/// Longest prefix of a machine name taken from the config's name.
const NAME_PREFIX_MAX: usize = 50;
/// Random characters after the prefix.
const NAME_SUFFIX_LEN: usize = 6;

/// A plan as the request form previews it: nothing stored. It may carry error findings, in
/// which case it cannot be filed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DraftPlan {
    pub fleet: FleetName,
    pub machine_config: ConfigName,
    pub config_version: i64,
    /// Who wrote that config version (four-eyes: they may not approve).
    pub config_author: String,
    pub template: TemplateName,
    pub template_version: i64,
    /// Who wrote that template version (four-eyes: they may not approve).
    pub template_author: String,
    pub count: u32,
    /// The reason, trimmed.
    pub reason: String,
    /// Distinct approvals the fleet requires.
    pub approvals_required: u32,
    /// Hours the approval window (and, after approval, the run window) stays open.
    pub approval_ttl_hours: u32,
    pub plan: Plan,
    pub plan_hash: PlanHash,
    /// Each machine's payload as shown (`«secret:NAME»` where each value goes), in plan order.
    pub redacted_payloads: Vec<String>,
    /// The time the payloads were rendered at (offered to templates as `now`); the request
    /// keeps it as `created_at` so re-rendering later gives the same bytes.
    pub planned_at: UnixMillis,
}

impl DraftPlan {
    /// Findings of severity error, with the machine they belong to.
    pub fn errors(&self) -> Vec<(&str, &PlanFinding)> {
        self.plan
            .machines
            .iter()
            .flat_map(|m| {
                m.findings
                    .iter()
                    .filter(|f| f.is_error())
                    .map(move |f| (m.name.as_str(), f))
            })
            .collect()
    }

    /// Whether the plan may be filed (no error finding).
    pub fn can_be_filed(&self) -> bool {
        self.errors().is_empty()
    }

    /// The error findings as field errors on `template` (what refuses filing).
    pub fn error_fields(&self) -> FieldErrors {
        let mut errors = FieldErrors::default();
        for (machine, f) in self.errors() {
            let at = f.line.map(|l| format!(" (line {l})")).unwrap_or_default();
            errors.push(
                "template",
                format!("{machine}: {}{at}: {}", f.check, f.message),
            );
        }
        errors
    }
}

/// The request's own fields, parsed.
struct Parsed {
    fleet: FleetName,
    machine_config: ConfigName,
    template: Option<TemplateName>,
    count: u32,
    reason: String,
}

/// What a plan is made for: filing (every rule), or the form's live preview, which shows cost
/// and machines before the person has written why. An empty reason is a preview's only
/// relief: a reason typed is held to its rules either way (it is never filed from here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Filing,
    Preview,
}

/// Parses a request's fields, every broken rule named by its field.
fn parse(req: &NewRequest, purpose: Purpose) -> Result<Parsed, FieldErrors> {
    let mut errors = FieldErrors::default();
    // The same types the fleet and machine-config operations parse names into, so a page, the
    // API and storage all hold one rule per name.
    let fleet = errors.check(FleetName::parse("fleet", &req.fleet));
    let machine_config = errors.check(ConfigName::parse("machine_config", &req.machine_config));
    let template = match req.template.as_deref().map(str::trim) {
        None | Some("") => Some(None),
        Some(t) => errors.check(TemplateName::parse("template", t)).map(Some),
    };
    let count = match u32::try_from(req.count) {
        Ok(c) if (1..=COUNT_MAX).contains(&c) => Some(c),
        _ => {
            errors.push("count", format!("must be between 1 and {COUNT_MAX}"));
            None
        }
    };
    let reason = req.reason.trim();
    // Limits count the text as sent, like the API document's maxLength; it is stored trimmed.
    let reason_len = req.reason.chars().count();
    if reason.is_empty() {
        if purpose == Purpose::Filing {
            errors.push("reason", "is required: say why these machines are needed");
        }
    } else if reason_len > REASON_MAX {
        errors.push(
            "reason",
            format!("must be at most {REASON_MAX} characters (it has {reason_len})"),
        );
    } else {
        errors.check(reject_control_chars("reason", &req.reason));
    }
    match (fleet, machine_config, template, count) {
        (Some(fleet), Some(machine_config), Some(template), Some(count)) if errors.is_empty() => {
            Ok(Parsed {
                fleet,
                machine_config,
                template,
                count,
                reason: reason.to_owned(),
            })
        }
        _ => Err(errors),
    }
}

/// A fleet's spec through the fleets operations; `None` when there is no such fleet.
pub async fn fleet_spec(
    ctx: &Ctx,
    caller: &Caller,
    name: &str,
) -> Result<Option<FleetSpec>, OpError> {
    use crate::error::OpError;
    match crate::fleets::get(ctx, caller, name).await {
        Ok(f) => Ok(Some(f.spec)),
        Err(OpError::NotFound(_)) => Ok(None),
        Err(e @ OpError::Forbidden(_)) => Err(e),
        Err(e) => Err(OpError::Internal(anyhow::anyhow!("{e}"))),
    }
}

/// Reads the fleet's secrets now, naming the secret and its source (never the value) when
/// one cannot be read.
fn secrets_for(ctx: &Ctx, fleet: &FleetSpec) -> Result<Secrets, FieldError> {
    crate::fleets::secrets::resolve(fleet, &ctx.settings.secrets).map_err(|e| {
        FieldError::new(
            "fleet",
            format!(
                "fleet {}: a render-time secret cannot be read: {e}",
                fleet.name()
            ),
        )
    })
}

pub(super) fn config_version(v: versions::Version) -> Result<ConfigVersion, OpError> {
    ConfigVersion::try_from(v).map_err(|e| OpError::Internal(anyhow::anyhow!("{e}")))
}

/// The one machine's prices at the config's location, from the cached catalogue.
async fn prices(
    ctx: &Ctx,
    caller: &Caller,
    spec: &MachineSpec,
) -> Result<Result<(String, String), FieldError>, OpError> {
    let (catalogue, _) = crate::machine_setup::catalogue::cached(ctx, caller, spec.provider)
        .await
        .map_err(|e| OpError::Internal(anyhow::anyhow!("{e}")))?;
    let missing = || {
        FieldError::new(
            "machine_config",
            format!(
                "machine config {} has no price for {} at {} in the {} catalogue; refresh the catalogue",
                spec.name.as_str(),
                spec.server_type,
                spec.location,
                spec.provider
            ),
        )
    };
    let Some(t) = catalogue
        .server_types
        .iter()
        .find(|t| t.name == spec.server_type)
    else {
        return Ok(Err(missing()));
    };
    let at = |list: &[(String, String)]| {
        list.iter()
            .find(|(loc, _)| *loc == spec.location)
            .map(|(_, p)| p.clone())
    };
    match (at(&t.hourly_price), at(&t.monthly_price)) {
        (Some(h), Some(m)) => Ok(Ok((h, m))),
        _ => Ok(Err(missing())),
    }
}

/// What the plan hash covers, in its canonical order.
pub struct HashInput<'a> {
    pub fleet: &'a str,
    pub machine_config: &'a str,
    pub config_version: i64,
    pub template: &'a str,
    pub template_version: i64,
    pub provider: &'a str,
    pub location: &'a str,
    pub server_type: &'a str,
    pub image: &'a str,
    /// Each machine's name and the sha256 of its shown payload, in plan order.
    pub machines: &'a [(&'a str, &'a str)],
    /// [`Secrets::keyed_digest`] of the render's secrets.
    pub secrets_digest: &'a str,
}

/// sha256 hex of the canonical encoding: a JSON array (strings escaped, no whitespace, fixed
/// order) headed by a version tag, so no two different plans encode alike (a field cannot bleed
/// into the next as it could with plain concatenation).
pub fn plan_hash(h: &HashInput<'_>) -> String {
    let machines: Vec<[&str; 2]> = h.machines.iter().map(|(n, s)| [*n, *s]).collect();
    let canonical = json!([
        "headroom.plan.v2",
        h.fleet,
        h.machine_config,
        h.config_version,
        h.template,
        h.template_version,
        h.provider,
        h.location,
        h.server_type,
        h.image,
        h.machines.len(),
        machines,
        h.secrets_digest
    ]);
    sha256_hex(canonical.to_string().as_bytes())
}

/// A fresh machine name: `<config name cut to 50>-<6 random [a-z0-9]>` (an RFC 1123 label).
fn machine_name(config: &str) -> anyhow::Result<String> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let prefix: String = config.chars().take(NAME_PREFIX_MAX).collect();
    let prefix = prefix.trim_end_matches('-');
    let mut suffix = String::with_capacity(NAME_SUFFIX_LEN);
    while suffix.len() < NAME_SUFFIX_LEN {
        let mut b = [0_u8; 16];
        getrandom::getrandom(&mut b).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
        // Rejection sampling: 252 = 7 × 36, so each letter is equally likely.
        suffix.extend(
            b.iter()
                .filter(|&&x| x < 252)
                .map(|&x| char::from(ALPHABET[usize::from(x % 36)]))
                .take(NAME_SUFFIX_LEN - suffix.len()),
        );
    }
    Ok(format!("{prefix}-{suffix}"))
}

/// `count` names unused by any request and by each other.
async fn fresh_names(ctx: &Ctx, config: &str, count: u32) -> anyhow::Result<Vec<String>> {
    let mut conn = ctx.pool.acquire().await?;
    let mut names: Vec<String> = Vec::new();
    let mut attempts = 0;
    while names.len() < count as usize {
        attempts += 1;
        anyhow::ensure!(attempts < 1000, "cannot find unused machine names");
        let name = machine_name(config)?;
        if !names.contains(&name) && !db::provisions::machine_name_taken(&mut conn, &name).await? {
            names.push(name);
        }
    }
    Ok(names)
}

/// Everything a plan is rendered from.
struct Sources {
    fleet: FleetSpec,
    config: ConfigVersion,
    template: versions::Version,
}

/// One render per machine: (planned machine, shown payload, sent payload).
async fn render_all(
    ctx: &Ctx,
    src: &Sources,
    secrets: &Secrets,
    names: &[String],
    now: UnixMillis,
    requested_by: &str,
) -> Vec<(PlannedMachine, String, SecretString)> {
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let r = ctx
            .renderer
            .render(&RenderRequest {
                template_body: &src.template.content,
                spec: &src.config.spec,
                hostname: name,
                secrets,
                now,
                requested_by,
            })
            .await;
        out.push((
            PlannedMachine {
                name: name.clone(),
                sha256: r.sha256.clone(),
                size_bytes: r.size_bytes,
                findings: r.findings.iter().map(PlanFinding::from).collect(),
            },
            r.shown,
            r.payload,
        ));
    }
    out
}

/// `instance_keys.purpose` of the key secret digests are made with.
const SECRET_DIGEST_KEY: &str = "secret_digest";

/// The instance's key for secret digests, created from the OS random source the first time.
/// Start-up calls this, so planning only reads it.
pub async fn secret_digest_key(pool: &sqlx::AnyPool, now: UnixMillis) -> anyhow::Result<Vec<u8>> {
    let mut conn = pool.acquire().await?;
    if let Some(key) = db::instance_keys::get(&mut conn, SECRET_DIGEST_KEY).await? {
        return Ok(key);
    }
    let mut fresh = [0_u8; 32];
    getrandom::getrandom(&mut fresh).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    Ok(db::instance_keys::get_or_insert(&mut conn, SECRET_DIGEST_KEY, &fresh, now).await?)
}

/// The keyed digest of `secrets`' values, with the instance's key.
async fn secrets_digest(ctx: &Ctx, secrets: &Secrets) -> anyhow::Result<String> {
    let key = secret_digest_key(&ctx.pool, ctx.clock.now()).await?;
    Ok(secrets.keyed_digest(&key))
}

fn hash_of(
    src: &Sources,
    machines: &[PlannedMachine],
    secrets_digest: &str,
) -> Result<PlanHash, OpError> {
    let pairs: Vec<(&str, &str)> = machines
        .iter()
        .map(|m| (m.name.as_str(), m.sha256.as_str()))
        .collect();
    let spec = &src.config.spec;
    let hex = plan_hash(&HashInput {
        fleet: src.fleet.name(),
        machine_config: spec.name.as_str(),
        config_version: src.config.version,
        template: &src.template.name,
        template_version: src.template.version,
        provider: spec.provider.as_str(),
        location: &spec.location,
        server_type: &spec.server_type,
        image: &spec.image,
        machines: &pairs,
        secrets_digest,
    });
    // sha256 hex always reads back as a plan hash; the parse keeps `PlanHash` made one way.
    PlanHash::try_from(hex).map_err(|e| OpError::Internal(anyhow::anyhow!("plan hash: {e}")))
}

/// Plans a request without storing anything (operator and up: it renders with the fleet's
/// secrets), by every rule a filing is held to. Field errors come back as `Invalid`; error
/// findings stay in the plan.
pub async fn plan(ctx: &Ctx, caller: &Caller, req: &NewRequest) -> Result<DraftPlan, OpError> {
    plan_for(ctx, caller, req, Purpose::Filing).await
}

/// [`plan`] for `purpose`: a preview plans without a reason.
pub async fn plan_for(
    ctx: &Ctx,
    caller: &Caller,
    req: &NewRequest,
    purpose: Purpose,
) -> Result<DraftPlan, OpError> {
    caller.require(Role::Operator)?;
    let parsed = parse(req, purpose)?;
    let mut errors = FieldErrors::default();
    let fleet = fleet_spec(ctx, caller, &parsed.fleet).await?;
    if fleet.is_none() {
        errors.push("fleet", format!("no fleet is named {}", parsed.fleet));
    }
    let mut conn = ctx.pool.acquire().await?;
    let config = versions::one(
        &mut conn,
        Family::MachineConfig,
        &parsed.machine_config,
        versions::Pick::Latest,
    )
    .await?
    .map(config_version)
    .transpose()?;
    let template = match &config {
        None => {
            errors.push(
                "machine_config",
                format!("no machine config is named {}", parsed.machine_config),
            );
            None
        }
        Some(c) => {
            let name = parsed.template.as_deref().unwrap_or(&c.spec.template);
            let t =
                versions::one(&mut conn, Family::Template, name, versions::Pick::Latest).await?;
            if t.is_none() {
                errors.push("template", format!("no template is named {name}"));
            }
            t
        }
    };
    drop(conn);
    let secrets = fleet
        .as_ref()
        .and_then(|f| errors.check(secrets_for(ctx, f)));
    let prices = match &config {
        Some(c) => prices(ctx, caller, &c.spec)
            .await?
            .map_err(|e| errors.0.push(e))
            .ok(),
        None => None,
    };
    let (Some(fleet), Some(config), Some(template), Some(secrets), Some((hourly, monthly))) =
        (fleet, config, template, secrets, prices)
    else {
        return Err(errors.into());
    };
    let cost = |price: &str| {
        Amount::parse(price)
            .map(|a| a.times(parsed.count).to_string())
            .map_err(|e| OpError::Internal(anyhow::anyhow!("catalogue price: {e}")))
    };
    let (hourly_cost, monthly_cost) = (cost(&hourly)?, cost(&monthly)?);
    let src = Sources {
        fleet,
        config,
        template,
    };
    let names = fresh_names(ctx, src.config.spec.name.as_str(), parsed.count).await?;
    let now = ctx.clock.now();
    let rendered = render_all(ctx, &src, &secrets, &names, now, caller.actor.name()).await;
    let (machines, redacted): (Vec<PlannedMachine>, Vec<String>) =
        rendered.into_iter().map(|(m, r, _)| (m, r)).unzip();
    let plan_hash = hash_of(&src, &machines, &secrets_digest(ctx, &secrets).await?)?;
    let spec = &src.config.spec;
    // The stored template's own name, parsed like every name a request holds.
    let template_name = TemplateName::parse("template", &src.template.name)
        .map_err(|e| OpError::Internal(anyhow::anyhow!("stored template name: {e}")))?;
    Ok(DraftPlan {
        fleet: src.fleet.name().clone(),
        machine_config: spec.name.clone(),
        config_version: src.config.version,
        config_author: src.config.author.clone(),
        template: template_name,
        template_version: src.template.version,
        template_author: src.template.author.clone(),
        count: parsed.count,
        reason: parsed.reason,
        approvals_required: u32::from(src.fleet.approvals_required()),
        approval_ttl_hours: src.fleet.approval_ttl_hours(),
        plan: Plan {
            provider: spec.provider.as_str().to_owned(),
            location: spec.location.clone(),
            server_type: spec.server_type.clone(),
            image: spec.image.clone(),
            machines,
            hourly_price: hourly,
            monthly_price: monthly,
            hourly_cost,
            monthly_cost,
            currency: crate::provider::CURRENCY.to_owned(),
        },
        plan_hash,
        redacted_payloads: redacted,
        planned_at: now,
    })
}

/// A stored request's payloads rendered again from the exact versions it names, the fleet's
/// current secrets and its machine names: what the runner sends, and the hash to compare.
pub struct Rerendered {
    /// The hash of the plan these payloads make; differs from the request's when anything
    /// (a secret, most likely) changed.
    pub plan_hash: PlanHash,
    /// The real payloads, in machine order. Never log or store them.
    pub payloads: Vec<SecretString>,
    /// Whether every render passed validation.
    pub ok: bool,
}

/// Why a stored request no longer matches what would be planned now, if it does not.
pub enum Currency {
    /// Nothing changed: here are the payloads to send.
    Current(Rerendered),
    /// It must not run: why (for `state_reason`).
    Superseded(String),
}

/// Re-checks a stored request before it runs: newer config or template versions supersede it,
/// and so does a re-render (with the fleet's current secrets) whose hash differs from the plan's.
/// Renders as `system`; the caller decides what to do with a superseded request.
pub async fn recheck(ctx: &Ctx, p: &Provision) -> Result<Currency, OpError> {
    if let Some(why) = newer_version(ctx, p).await? {
        return Ok(Currency::Superseded(why));
    }
    let Some(fleet) = fleet_spec(ctx, &Caller::system(), &p.fleet).await? else {
        return Ok(Currency::Superseded(format!(
            "fleet {} no longer exists",
            p.fleet
        )));
    };
    let secrets = match secrets_for(ctx, &fleet) {
        Ok(s) => s,
        Err(e) => return Ok(Currency::Superseded(e.message)),
    };
    let mut conn = ctx.pool.acquire().await?;
    let config = versions::one(
        &mut conn,
        Family::MachineConfig,
        &p.machine_config,
        versions::Pick::Exact(p.config_version),
    )
    .await?
    .map(config_version)
    .transpose()?;
    let template = versions::one(
        &mut conn,
        Family::Template,
        &p.template,
        versions::Pick::Exact(p.template_version),
    )
    .await?;
    drop(conn);
    let (Some(config), Some(template)) = (config, template) else {
        return Ok(Currency::Superseded(
            "the plan's config or template version no longer exists".to_owned(),
        ));
    };
    let src = Sources {
        fleet,
        config,
        template,
    };
    let names: Vec<String> = p.plan.machines.iter().map(|m| m.name.clone()).collect();
    let rendered = render_all(ctx, &src, &secrets, &names, p.created_at, "system").await;
    let ok = rendered
        .iter()
        .all(|(m, _, _)| !m.findings.iter().any(PlanFinding::is_error));
    let machines: Vec<PlannedMachine> = rendered.iter().map(|(m, _, _)| m.clone()).collect();
    let plan_hash = hash_of(&src, &machines, &secrets_digest(ctx, &secrets).await?)?;
    if plan_hash != p.plan_hash {
        return Ok(Currency::Superseded(
            "the payloads rendered now differ from the approved plan (a secret or the fleet changed)"
                .to_owned(),
        ));
    }
    Ok(Currency::Current(Rerendered {
        plan_hash,
        payloads: rendered.into_iter().map(|(_, _, real)| real).collect(),
        ok,
    }))
}

/// The two versioned documents a plan is rendered from, each as (family, what people call
/// it, name, version used): what supersession and the four-eyes rule both walk.
pub(super) fn documents(p: &Provision) -> [(Family, &'static str, &str, i64); 2] {
    [
        (
            Family::MachineConfig,
            "machine config",
            p.machine_config.as_str(),
            p.config_version,
        ),
        (
            Family::Template,
            "template",
            p.template.as_str(),
            p.template_version,
        ),
    ]
}

/// Says which document has a version newer than the plan's, if one has.
pub async fn newer_version(ctx: &Ctx, p: &Provision) -> Result<Option<String>, OpError> {
    let mut conn = ctx.pool.acquire().await?;
    newer_version_in(&mut conn, p).await
}

/// [`newer_version`] on a given connection (inside a write transaction).
pub async fn newer_version_in(
    conn: &mut sqlx::AnyConnection,
    p: &Provision,
) -> Result<Option<String>, OpError> {
    for (family, what, name, planned) in documents(p) {
        let latest = versions::one(conn, family, name, versions::Pick::Latest).await?;
        if let Some(v) = latest.filter(|v| v.version > planned) {
            return Ok(Some(format!(
                "{what} {name} has version {} since the plan used version {planned}",
                v.version
            )));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::machine::rfc1123_label;

    fn input<'a>(machines: &'a [(&'a str, &'a str)]) -> HashInput<'a> {
        HashInput {
            fleet: "prod",
            machine_config: "spare-fsn1",
            config_version: 3,
            template: "yubaba-node",
            template_version: 2,
            provider: "hetzner",
            location: "fsn1",
            server_type: "cx22",
            image: "debian-12",
            machines,
            secrets_digest: "d1",
        }
    }

    #[test]
    fn the_plan_hash_changes_with_any_payload_and_any_version() {
        let base = plan_hash(&input(&[("a-000001", "aa"), ("a-000002", "bb")]));
        // Stable: the same plan hashes alike.
        assert_eq!(
            base,
            plan_hash(&input(&[("a-000001", "aa"), ("a-000002", "bb")]))
        );
        assert_eq!(base.len(), 64);
        // A changed payload changes the plan.
        assert_ne!(
            base,
            plan_hash(&input(&[("a-000001", "aa"), ("a-000002", "bc")]))
        );
        // A rotated secret changes the secrets' digest, not the shown payloads.
        let mut rotated = input(&[("a-000001", "aa"), ("a-000002", "bb")]);
        rotated.secrets_digest = "d2";
        assert_ne!(base, plan_hash(&rotated));
        // Order of machines is part of the plan.
        assert_ne!(
            base,
            plan_hash(&input(&[("a-000002", "bb"), ("a-000001", "aa")]))
        );
        let mut newer = input(&[("a-000001", "aa"), ("a-000002", "bb")]);
        newer.config_version = 4;
        assert_ne!(base, plan_hash(&newer));
        let mut newer = input(&[("a-000001", "aa"), ("a-000002", "bb")]);
        newer.template_version = 3;
        assert_ne!(base, plan_hash(&newer));
    }

    #[test]
    fn the_canonical_encoding_keeps_fields_apart() {
        // With concatenation, ("ab", "c") and ("a", "bc") would collide.
        let mut one = input(&[("x", "y")]);
        one.fleet = "ab";
        one.machine_config = "c";
        let mut two = input(&[("x", "y")]);
        two.fleet = "a";
        two.machine_config = "bc";
        assert_ne!(plan_hash(&one), plan_hash(&two));
        // A name holding a separator-like character cannot pose as two machines.
        let joined = plan_hash(&input(&[("m\",\"n", "s")]));
        let split = plan_hash(&input(&[("m", "n"), ("", "s")]));
        assert_ne!(joined, split);
    }

    #[test]
    fn machine_names_are_labels_with_a_six_character_suffix() {
        let long = "a".repeat(63);
        for config in [
            "spare-fsn1",
            long.as_str(),
            &format!("{}-b", "a".repeat(49)),
        ] {
            let name = machine_name(config).unwrap();
            assert!(
                name.len() <= NAME_PREFIX_MAX + 1 + NAME_SUFFIX_LEN,
                "{name}"
            );
            assert!(rfc1123_label("name", &name).is_ok(), "{name}");
            assert!(!name.contains("--"), "{name}");
            let suffix = name.rsplit('-').next().unwrap();
            assert_eq!(suffix.len(), NAME_SUFFIX_LEN);
            assert!(suffix
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
        }
        assert_ne!(machine_name("x").unwrap(), machine_name("x").unwrap());
    }

    #[test]
    fn every_broken_field_is_named() {
        let req = NewRequest {
            fleet: "Bad Fleet".into(),
            machine_config: String::new(),
            template: Some("../etc".into()),
            count: 21,
            reason: "a\nb".into(),
        };
        let errors = parse(&req, Purpose::Filing).err().unwrap();
        for field in ["fleet", "machine_config", "template", "count", "reason"] {
            assert!(errors.for_field(field).is_some(), "{field}: {errors}");
        }
        let long = NewRequest {
            reason: "x".repeat(REASON_MAX + 1),
            count: 0,
            ..req
        };
        let errors = parse(&long, Purpose::Preview).err().unwrap();
        assert!(errors.for_field("reason").unwrap().contains("at most 500"));
        assert!(errors.for_field("count").is_some());
    }

    #[test]
    fn only_a_preview_plans_without_a_reason() {
        let req = NewRequest {
            fleet: "prod".into(),
            machine_config: "spare-fsn1".into(),
            template: None,
            count: 1,
            reason: "  ".into(),
        };
        let errors = parse(&req, Purpose::Filing).err().unwrap();
        assert_eq!(
            errors.for_field("reason"),
            Some("is required: say why these machines are needed")
        );
        let parsed = parse(&req, Purpose::Preview).expect("a preview needs no reason");
        assert_eq!(parsed.reason, "");
        // A reason typed is held to its rules in a preview too.
        let bad = NewRequest {
            reason: "a\u{7}b".into(),
            ..req
        };
        assert!(parse(&bad, Purpose::Preview).is_err());
    }
}
