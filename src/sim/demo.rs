//! Everything `headroom demo` adds to a plain `serve`: its own database file, the simulated
//! cloud, a ready machine config, two simulated yubaba fleets on loopback (`demo`, native, and
//! `legacy`, derived) that drift into a deficit, and one account per role with fresh passwords
//! printed once.

use std::io::Write;
use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::yubaba::{SimFleet, SimFleetOptions};
use crate::auth::users::{self, NewUserInput};
use crate::auth::Caller;
use crate::config::{PartialSettings, Settings};
use crate::context::Ctx;
use crate::domain::fleet::{FleetInput, FleetSpec};
use crate::domain::Role;
use crate::error::OpError;
use crate::sim::release::ReleaseServer;
use crate::state::AppState;

/// The demo's accounts: one per role a newcomer wants to try.
pub const DEMO_USERS: [(&str, Role); 3] = [
    ("admin", Role::Admin),
    ("operator", Role::Operator),
    ("approver", Role::Approver),
];

/// Characters of generated passwords: letters and digits only, so a password can be pasted
/// into a shell command line or a login form without quoting (one starting with `-` once
/// read as an option).
const PASSWORD_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// Length of generated passwords: 20 of 36 symbols, about 103 bits.
const PASSWORD_LEN: usize = 20;

/// The demo's defaults layer: its own database file, so it never touches a production
/// database by accident. The file, variables and flags still apply over it.
pub fn default_settings() -> PartialSettings {
    PartialSettings {
        database_url: Some("sqlite:headroom-demo.db".into()),
        ..PartialSettings::defaults()
    }
}

/// The settings `headroom demo` runs with: the simulated cloud and no other. A Hetzner token
/// in the environment (or its file) is dropped, so no catalogue fetch, server or cost at a
/// real provider can come from trying the demo; the Hetzner URL is then never used. The
/// demo's release server (`release`) is allow-listed, that one address and port only, so its
/// tarball's pin can be checked; the pin client trusts its CA (`pin_extra_ca`), in the demo only.
pub fn simulated_only(mut settings: Settings, release: &ReleaseServer) -> anyhow::Result<Settings> {
    settings.simulated_provider = true;
    settings.hetzner_api_token = None;
    settings.pin_extra_ca = Some(crate::sim::release::CA_PEM);
    settings.outbound_allow = settings
        .outbound_allow
        .with(&release.allow_entry())
        .map_err(|e| anyhow::anyhow!(e))?;
    Ok(settings)
}

/// One seeded account and its new password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// Login name.
    pub username: &'static str,
    /// Its role.
    pub role: Role,
    /// The password, new on every start.
    pub password: String,
}

/// Starts the release server, seeds the machine config pinned to its tarball and checks
/// that pin (as `system`, like any request filed later would), starts the simulated fleets
/// and points the stored fleets at them, seeds the accounts, then prints the credentials and
/// what will happen to stdout once. Returns the loops, which end when `shutdown` turns true.
pub async fn seed(
    state: &AppState,
    address: &str,
    release: ReleaseServer,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let mut loops = vec![seed_release(state, release, shutdown.clone()).await?];
    let fleets = start_fleets(&state.ctx, &demo_fleets()).await?;
    let credentials = seed_users(&state.ctx).await?;
    let mut out = std::io::stdout().lock();
    print_credentials(&mut out, address, &credentials)?;
    print_timeline(&mut out, address)?;
    drop(out);
    let cloud = state.ctx.providers.simulated();
    if cloud.is_none() {
        tracing::warn!(
            "the simulated provider is off: restored servers will not join the demo fleets"
        );
    }
    loops.extend(
        fleets
            .into_iter()
            .map(|fleet| tokio::spawn(fleet.run_until_stopped(cloud.clone(), shutdown.clone()))),
    );
    Ok(loops)
}

/// Starts the release server, seeds the demo config pinned to its tarball and checks that
/// pin as `system`, so the first proposal's plan checks find it verified. Returns the
/// server's loop, which ends when `shutdown` turns true.
pub async fn seed_release(
    state: &AppState,
    release: ReleaseServer,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<JoinHandle<()>> {
    let (url, sha256) = (release.tarball_url(), ReleaseServer::tarball_sha256());
    let server = tokio::spawn(async move {
        if let Err(e) = release.run_until_stopped(shutdown).await {
            tracing::error!(error = %e, "the demo's release server stopped");
        }
    });
    seed_config_pinned(state, &url, &sha256).await?;
    let pin = crate::machine_setup::pins::check(&state.ctx, &Caller::system(), DEMO_CONFIG)
        .await
        .map_err(|e| anyhow::anyhow!("checking the demo tarball's pin: {e}"))?;
    if !pin.ok() {
        tracing::warn!(
            message = %pin.check.message,
            "the demo tarball's pin did not verify: approvals will be blocked"
        );
    }
    Ok(server)
}

/// The second demo fleet's name: a yubaba build without the `headroom` section.
pub const LEGACY_FLEET: &str = "legacy";

/// The third demo fleet's name: full nodes and one small spare, so yubaba's count says N+1
/// while absorption says losing a node leaves 2 GiB of workloads without room.
pub const TIGHT_FLEET: &str = "tight";

/// Seconds between two scrapes of a demo fleet (the shortest a fleet may have), so a
/// deficit is seen within seconds.
pub const DEMO_SCRAPE_INTERVAL_SECS: u32 = 5;

/// Seconds one scrape of a demo fleet may take (below the interval, as the fleet rules want).
pub const DEMO_SCRAPE_TIMEOUT_SECS: u32 = 2;

/// The demo's simulated fleets. `demo` and `legacy`: three busy voters and one spare each. A
/// tenant takes the spare of `demo` after a minute and of `legacy` half a minute later (so the
/// two proposals arrive one after the other), then one more every few minutes: tenants land on
/// spares only, so each fleet asks for one restore at a time and never floods the approvals
/// inbox. Once their spare is taken, yubaba's count says deficit while absorption says every
/// node's two tenants still fit elsewhere: the rules disagree one way. `tight` disagrees the
/// other way and stays so: six tenants on each voter and a 2 GiB spare, so the count says N+1
/// while losing a voter leaves two tenants without room (one restore machine would cover it).
pub fn demo_fleets() -> Vec<SimFleetOptions> {
    vec![
        SimFleetOptions {
            name: DEMO_FLEET.into(),
            native: true,
            first_tenant_after: Duration::from_secs(60),
            tenant_every: Some(Duration::from_secs(5 * 60)),
            ..SimFleetOptions::default()
        },
        SimFleetOptions {
            name: LEGACY_FLEET.into(),
            native: false,
            first_tenant_after: Duration::from_secs(90),
            tenant_every: Some(Duration::from_secs(7 * 60)),
            ..SimFleetOptions::default()
        },
        SimFleetOptions {
            name: TIGHT_FLEET.into(),
            native: true,
            tenants_per_voter: 6,
            spare_allocatable: Some((2048, 1000)),
            // No tenant arrives while the demo runs: the fleet stays as it started.
            first_tenant_after: Duration::from_secs(365 * 24 * 3600),
            tenant_every: None,
            ..SimFleetOptions::default()
        },
    ]
}

/// Starts each simulated fleet and points the stored fleet of the same name at its real
/// ports (new on every start), creating the fleet when it does not exist yet.
pub async fn start_fleets(ctx: &Ctx, options: &[SimFleetOptions]) -> anyhow::Result<Vec<SimFleet>> {
    let mut started = Vec::with_capacity(options.len());
    for o in options {
        let fleet = SimFleet::start(o.clone()).await?;
        point_fleet(ctx, fleet.name(), fleet.endpoints()).await?;
        started.push(fleet);
    }
    Ok(started)
}

/// Creates fleet `name` at `endpoints` (restored with `spare-fsn1` after one approval,
/// scraped every 5 s), or updates an existing one's endpoints and scrape pace through
/// `fleets::update`, keeping whatever else an operator changed.
pub async fn point_fleet(ctx: &Ctx, name: &str, endpoints: Vec<String>) -> anyhow::Result<()> {
    let caller = Caller::system();
    // Listed rather than fetched: on a first start the fleet is missing, which `get` would
    // log as an error.
    let current = crate::fleets::list(ctx, &caller)
        .await
        .map_err(|e| anyhow::anyhow!("listing fleets: {e}"))?
        .into_iter()
        .find(|f| f.spec.name() == name);
    let result = match current {
        Some(current) => {
            let input = FleetInput {
                endpoints,
                scrape_interval_secs: Some(json!(DEMO_SCRAPE_INTERVAL_SECS)),
                scrape_timeout_secs: Some(json!(DEMO_SCRAPE_TIMEOUT_SECS)),
                ..input_of(&current.spec)
            };
            crate::fleets::update(ctx, &caller, name, &input).await
        }
        None => {
            let input = FleetInput {
                name: name.into(),
                endpoints,
                restore_machine_config: "spare-fsn1".into(),
                approvals_required: Some(json!(1)),
                scrape_interval_secs: Some(json!(DEMO_SCRAPE_INTERVAL_SECS)),
                scrape_timeout_secs: Some(json!(DEMO_SCRAPE_TIMEOUT_SECS)),
                ..Default::default()
            };
            crate::fleets::create(ctx, &caller, &input).await
        }
    };
    result
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("pointing the demo fleet {name} at the simulated fleet: {e}"))
}

/// A stored spec as the input that stores it again unchanged.
fn input_of(spec: &FleetSpec) -> FleetInput {
    FleetInput {
        name: spec.name().to_string(),
        endpoints: spec.endpoints().to_vec(),
        restore_machine_config: spec.restore_machine_config().to_string(),
        approvals_required: Some(json!(spec.approvals_required())),
        approval_ttl_hours: Some(json!(spec.approval_ttl_hours())),
        scrape_interval_secs: Some(json!(spec.scrape_interval_secs())),
        scrape_timeout_secs: Some(json!(spec.scrape_timeout_secs())),
        required_override: spec.required_override().map(|n| json!(n)),
        secrets: spec
            .secrets()
            .iter()
            .map(|(name, source)| (name.as_str().to_owned(), source.to_string()))
            .collect(),
        max_restore_machines: Some(json!(spec.max_restore_machines())),
        monthly_budget: spec.monthly_budget().map(|b| json!(b.to_string())),
        headroom_rule: Some(json!(spec.headroom_rule().as_str())),
    }
}

/// The one paragraph that says what the demo will show, and where.
pub fn print_timeline(out: &mut dyn Write, address: &str) -> std::io::Result<()> {
    writeln!(
        out,
        "Three simulated yubaba fleets are running on loopback, `demo` (native headroom), \
         `legacy` (derived from /node) and `tight`: a tenant takes the only spare of `demo` \
         and `legacy` after about 1 and 1.5 minutes, the dashboard http://{address}/ turns \
         to deficit and a restore proposal appears in http://{address}/approvals; approve it \
         as `approver` and the simulated cloud's new server joins as a spare about 10 s later, \
         the chart on http://{address}/fleets/demo recovering. `tight` reads healthy by \
         yubaba's count while absorption says losing a node would leave workloads without \
         room; set its headroom rule to absorption to have it propose the machine that \
         covers it.\n"
    )?;
    out.flush()
}

/// The demo's ready machine config (simulated provider), created once, pinned to a tarball
/// nobody can download (`.invalid`): for tests that never check its pin. `headroom demo`
/// pins its own release server's tarball instead ([`seed_config_pinned`]).
pub async fn seed_config(state: &AppState) -> anyhow::Result<()> {
    seed_config_pinned(
        state,
        "https://releases.yubaba.invalid/yubaba-1.4.2-x86_64.tar.gz",
        "4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10",
    )
    .await
}

/// The demo config pinned to `url` and `sha256`: created once; on a later start (the demo's
/// database kept, its release server on a new port) only the pin moves to the new address,
/// so whatever else an operator changed is kept.
pub async fn seed_config_pinned(state: &AppState, url: &str, sha256: &str) -> anyhow::Result<()> {
    use crate::machine_setup::configs;
    let input = crate::domain::machine::MachineInput {
        name: DEMO_CONFIG.into(),
        provider: "simulated".into(),
        location: "fsn1".into(),
        server_type: "cx22".into(),
        image: "debian-12".into(),
        region: "eu-central".into(),
        zone: "fsn1-dc14".into(),
        mesh_tags: vec!["tag:spare".into()],
        labels: [("team".to_owned(), "infra".to_owned())]
            .into_iter()
            .collect(),
        yubaba_channel: "stable".into(),
        yubaba_url: url.into(),
        yubaba_sha256: sha256.into(),
        // What a new cx22 adds (absorption's machines-needed answer counts in these).
        allocatable: crate::domain::machine::AllocatableInput {
            memory_mb: Some(json!(3584)),
            cpu_millis: Some(json!(2000)),
        },
        ..Default::default()
    };
    let ctx = &state.ctx;
    let system = Caller::system();
    let seeded = match configs::create(ctx, &system, &input).await {
        Ok(_) => Ok(()),
        Err(OpError::Invalid(e)) if e.for_field("name") == Some("is already taken") => {
            let mut kept = configs::latest(ctx, &system, DEMO_CONFIG)
                .await?
                .spec
                .to_input();
            kept.yubaba_url = input.yubaba_url;
            kept.yubaba_sha256 = input.yubaba_sha256;
            // A demo database from before the config declared what a new machine adds gets
            // it, so absorption can say how many would cover a loss; an operator's own
            // values stay.
            if kept.allocatable.memory_mb.is_none() && kept.allocatable.cpu_millis.is_none() {
                kept.allocatable = input.allocatable;
            }
            configs::update(ctx, &system, DEMO_CONFIG, &kept)
                .await
                .map(|_| ())
        }
        Err(e) => Err(e),
    };
    seeded.map_err(|e| anyhow::anyhow!("seeding the demo machine config: {e}"))
}

/// The demo machine config's name.
pub const DEMO_CONFIG: &str = "spare-fsn1";

/// The demo fleet's name.
pub const DEMO_FLEET: &str = "demo";

/// The demo fleet `demo`, restored with `spare-fsn1` after one approval, created once (after
/// `seed_config`, whose config it names) at a fixed address with nothing behind it: for tests
/// that need a fleet to file requests on. `headroom demo` itself uses `start_fleets`, which
/// points the fleet at a running simulated fleet.
pub async fn seed_fleet(state: &AppState) -> anyhow::Result<()> {
    let input = crate::domain::fleet::FleetInput {
        name: DEMO_FLEET.into(),
        // Requests do not need the fleet to answer; a scraper sees a refused connection (a gap).
        endpoints: vec!["http://127.0.0.1:7480".into()],
        restore_machine_config: "spare-fsn1".into(),
        approvals_required: Some(serde_json::json!(1)),
        ..Default::default()
    };
    match crate::fleets::create(&state.ctx, &Caller::system(), &input).await {
        Ok(_) => Ok(()),
        Err(crate::error::OpError::Invalid(e)) if e.for_field("name").is_some() => Ok(()),
        Err(e) => Err(anyhow::anyhow!("seeding the demo fleet: {e}")),
    }
}

/// Creates the demo accounts, or re-enables them with their role and a fresh password.
pub async fn seed_users(ctx: &Ctx) -> anyhow::Result<Vec<Credential>> {
    let caller = Caller::system();
    let mut credentials = Vec::new();
    for (name, role) in DEMO_USERS {
        let password = random_password();
        let input = NewUserInput {
            username: name.into(),
            role: role.to_string(),
            password: password.clone(),
        };
        match users::create_user(ctx, &caller, &input).await {
            Ok(_) => {}
            Err(OpError::Invalid(e)) if e.for_field("username").is_some() => {
                users::set_disabled(ctx, &caller, name, false).await?;
                users::set_role(ctx, &caller, name, role.as_str()).await?;
                users::reset_password(ctx, &caller, name, &password).await?;
            }
            Err(e) => return Err(anyhow::anyhow!("seeding {name}: {e}")),
        }
        credentials.push(Credential {
            username: name,
            role,
            password,
        });
    }
    Ok(credentials)
}

/// Writes where to sign in and the credentials table.
pub fn print_credentials(
    out: &mut dyn Write,
    address: &str,
    credentials: &[Credential],
) -> std::io::Result<()> {
    writeln!(
        out,
        "\nheadroom demo — open http://{address}/login and sign in as one of:\n"
    )?;
    writeln!(out, "  user      role      password (new on every start)")?;
    for c in credentials {
        writeln!(out, "  {:<9} {:<9} {}", c.username, c.role, c.password)?;
    }
    writeln!(out)?;
    out.flush()
}

/// A fresh random password of `PASSWORD_LEN` characters from `PASSWORD_ALPHABET` (`[a-z0-9]`,
/// so it never starts with `-` and pastes into a shell as one word).
pub fn random_password() -> String {
    // Bytes at or above the largest multiple of the alphabet's size are drawn again, so
    // every symbol is equally likely.
    let n = PASSWORD_ALPHABET.len();
    let unbiased = 256 - 256 % n;
    let mut out = String::with_capacity(PASSWORD_LEN);
    while out.len() < PASSWORD_LEN {
        let mut bytes = [0_u8; 32];
        getrandom::getrandom(&mut bytes).expect("the OS random source is available");
        for b in bytes
            .iter()
            .map(|b| usize::from(*b))
            .filter(|b| *b < unbiased)
        {
            if out.len() < PASSWORD_LEN {
                out.push(char::from(PASSWORD_ALPHABET[b % n]));
            }
        }
    }
    out
}

/// Fills the simulated cloud's catalogue, which the demo's machine config is checked against.
pub async fn fill_simulated_catalogue(ctx: &Ctx) -> anyhow::Result<()> {
    crate::machine_setup::catalogue::refresh(
        ctx,
        &Caller::system(),
        crate::domain::machine::ProviderKind::Simulated,
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_passwords_use_only_lowercase_letters_and_digits() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..2_000 {
            let p = random_password();
            assert_eq!(p.len(), PASSWORD_LEN);
            assert!(
                p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()),
                "{p}"
            );
            seen.extend(p.bytes());
            assert!(
                crate::domain::password::NewPassword::parse_field("password", &p).is_ok(),
                "{p} is refused by the password rules"
            );
        }
        // Over 40,000 draws every symbol shows up, so none is unreachable.
        assert_eq!(seen.len(), PASSWORD_ALPHABET.len());
    }

    #[tokio::test]
    async fn the_demo_keeps_no_provider_token() {
        use crate::outbound::AllowList;
        let settings = Settings {
            hetzner_api_token: Some(secrecy::SecretString::from("t".to_owned())),
            ..Settings::default()
        };
        let release = ReleaseServer::bind().await.unwrap();
        let demo = simulated_only(settings, &release).unwrap();
        assert!(demo.hetzner_api_token.is_none() && demo.simulated_provider);
        assert_eq!(demo.pin_extra_ca, Some(crate::sim::release::CA_PEM));
        assert_eq!(
            demo.outbound_allow,
            AllowList::parse(&[release.allow_entry()]).unwrap(),
            "the release server, that port only, is the one address added"
        );
    }

    #[tokio::test]
    async fn seeding_twice_gives_the_same_accounts_fresh_passwords() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("demo.db").display());
        let pool = crate::db::connect(&url).await.unwrap();
        let ctx = Ctx::build(
            crate::config::Settings::default(),
            pool,
            std::sync::Arc::new(crate::domain::SystemClock),
        )
        .unwrap();
        let first = seed_users(&ctx).await.unwrap();
        let second = seed_users(&ctx).await.unwrap();
        let names = |c: &[Credential]| c.iter().map(|c| (c.username, c.role)).collect::<Vec<_>>();
        assert_eq!(names(&first), DEMO_USERS.to_vec());
        assert_eq!(names(&second), DEMO_USERS.to_vec());
        for (a, b) in first.iter().zip(&second) {
            assert_ne!(a.password, b.password);
        }
        let users = users::list_users(&ctx, &Caller::system()).await.unwrap();
        assert_eq!(users.len(), DEMO_USERS.len());
        let mut out = Vec::new();
        print_credentials(&mut out, "127.0.0.1:8080", &second).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("http://127.0.0.1:8080/login"), "{text}");
        for c in &second {
            assert!(text.contains(&c.password), "{text}");
        }
    }
}
