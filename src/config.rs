//! Settings: four layers of one partial type — defaults, the TOML file, `HEADROOM_*`
//! variables, flags — merged in that order and validated once into [`Settings`]. Every key is
//! declared once, in [`KEYS`]: its file key is its name, its variable `HEADROOM_` + the name in
//! capitals, and both reach the same parser. Secrets come only from the environment or files.
//!
//! This module imports only domain types (the deficit policy, declared secrets) and
//! `outbound`'s allow-list type, none of which import settings, so everything else may depend
//! on it without a cycle.

mod value;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::SecretString;

use value::Value;
pub use value::{Kind, Raw};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Limits of a pin pre-flight download.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinLimits {
    /// Largest download accepted.
    pub max_bytes: u64,
    /// Deadline for the whole download.
    pub timeout: Duration,
}

impl Default for PinLimits {
    fn default() -> Self {
        Self {
            max_bytes: 512 * 1024 * 1024,
            timeout: Duration::from_secs(120),
        }
    }
}

/// The smallest render output limit: Hetzner's 32 KiB user_data cap (the same number as
/// `cloud_init::MAX_PAYLOAD_BYTES`, kept here so settings need not import cloud_init; a test
/// holds them equal), so an oversized payload is still measured instead of cut off.
pub const MIN_RENDER_OUTPUT_BYTES: usize = 32_768;

/// Everything the console needs to start.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Listen address; port 0 picks a free port.
    pub bind: String,
    /// sqlx SQLite URL.
    pub database_url: String,
    /// HTTP worker threads (actix defaults to one per core; tests want one).
    pub workers: usize,
    /// Log line format.
    pub log_format: LogFormat,
    /// A session unused this long ends.
    pub session_idle: Duration,
    /// A session ends this long after login, however busy.
    pub session_absolute: Duration,
    /// Mark cookies `Secure` (set when served over TLS, directly or behind a proxy).
    pub cookie_secure: bool,
    /// Largest accepted request body.
    pub body_limit: usize,
    /// Deadline for a request's head, and again for its body once the head has arrived.
    pub client_timeout: Duration,
    /// Connections open at once across all workers (each worker takes its share).
    pub max_connections: usize,
    /// Login throttling.
    pub throttle: ThrottleSettings,
    /// Password hashes/verifications (argon2, ~19 MiB each) allowed at once in the process.
    pub password_hash_concurrency: usize,
    /// Hetzner Cloud API base URL.
    pub hetzner_api_url: String,
    /// Hetzner Cloud API token, from `HETZNER_API_TOKEN` or `HETZNER_API_TOKEN_FILE`.
    pub hetzner_api_token: Option<SecretString>,
    /// Reverse proxies whose `X-Forwarded-For` / `X-Forwarded-Proto` are believed.
    pub trusted_proxies: Vec<IpAddr>,
    /// Offer the simulated cloud (the demo; a mode of the command, not a key).
    pub simulated_provider: bool,
    /// One more CA (PEM) the pin client trusts: the demo's release server's, set by the demo
    /// alone (a mode of the command, not a key), so no other instance trusts a CA whose leaf
    /// key ships in the source.
    pub pin_extra_ca: Option<&'static [u8]>,
    /// cloud-init's JSON schema file; default: where Debian's cloud-init installs it.
    pub cloud_init_schema: Option<PathBuf>,
    /// Size and time limits of pin pre-flights.
    pub pin_limits: PinLimits,
    /// Hosts (`host` or `host:port`) that fetches may reach whatever their address.
    pub outbound_allow: crate::outbound::AllowList,
    /// Extra CA certificates (PEM) trusted by outbound https, e.g. for an allow-listed mirror.
    pub outbound_ca_file: Option<PathBuf>,
    /// Wall-clock limit of one template render.
    pub render_timeout: Duration,
    /// Bytes one template render may write.
    pub render_output_bytes: usize,
    /// The program render workers are started from; default: this executable.
    pub render_worker: Option<PathBuf>,
    /// A cached provider catalogue older than this is fetched again when next used.
    pub catalogue_max_age: Duration,
    /// This instance's name among those sharing the database (see `crate::leases`).
    pub instance_name: String,
    /// How long a claim holds without renewal (see `crate::leases`).
    pub lease: Duration,
    /// How often the provisioning runner looks for approved requests when nothing wakes it.
    pub runner_poll: Duration,
    /// The runner's first wait between two polls of a provider action (it doubles, to 8×).
    pub runner_action_poll: Duration,
    /// Where provision notifications are POSTed; `None` sends none.
    pub webhook_url: Option<url::Url>,
    /// Key of the notifications' HMAC signature, from `HEADROOM_WEBHOOK_SECRET` or
    /// `HEADROOM_WEBHOOK_SECRET_FILE`; always set when `webhook_url` is.
    pub webhook_secret: Option<SecretString>,
    /// Base of deep links in notifications, without a trailing `/`.
    pub public_url: String,
    /// Delivery attempts of one notification before it is marked failed.
    pub webhook_attempts: u32,
    /// Whether this instance scrapes fleets (off for a standby instance, and in tests that
    /// drive samples themselves).
    pub scrape_enabled: bool,
    /// Scrapes in flight at once, across every fleet.
    pub scrape_concurrency: usize,
    /// When a fleet enters and leaves a deficit.
    pub deficit: crate::domain::capacity::DeficitPolicy,
    /// How long after a fleet's restore proposal was superseded by recovery a new deficit
    /// waits before filing another (a flapping fleet files one per cool-down, not per cycle).
    pub proposal_cooldown: Duration,
    /// How long a created machine has to appear as a member of its fleet before its request
    /// fails; `None`: a request ends when its servers run (the join is not followed).
    pub join_timeout: Option<Duration>,
    /// Download and check a request's pin when it is filed, unless verified within a day.
    pub pin_check_on_request: bool,
    /// The plan checks whose warning refuses approval.
    pub plan_checks_blocking: crate::domain::plan_check_blocking::BlockingChecks,
    /// How long samples and their rollups are kept.
    pub retention: Retention,
    /// The render-time secrets fleets may refer to by name (names and sources; values are
    /// read only when a payload is rendered).
    pub secrets: crate::domain::secret::DeclaredSecrets,
}

/// How long each resolution of headroom history is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Raw samples (one per scrape tick).
    pub raw: Duration,
    /// Per-minute rollups.
    pub minute: Duration,
    /// Per-hour rollups.
    pub hour: Duration,
}

/// When failed logins slow down and lock.
#[derive(Debug, Clone, Copy)]
pub struct ThrottleSettings {
    /// Failures per account before delays start.
    pub account_failures: u32,
    /// Failures per client address before delays start.
    pub address_failures: u32,
    /// First delay; each further failure doubles it.
    pub base_delay: Duration,
    /// Longest lock.
    pub max_lock: Duration,
    /// Failures older than this are forgotten.
    pub window: Duration,
}

/// One settings key: a file key, a variable and a parser shared by both.
pub struct Key {
    name: &'static str,
    kind: Kind,
    example: &'static str,
    set: fn(&mut PartialSettings, Raw) -> Result<(), String>,
    show: fn(&PartialSettings) -> Option<String>,
}

impl Key {
    /// The file key (and the name `headroom settings` prints).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The environment variable: `HEADROOM_` and the name in capitals.
    pub fn env(&self) -> String {
        format!("HEADROOM_{}", self.name.to_ascii_uppercase())
    }

    /// How the value is written in the file.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// A valid value other than the default, written as the variable takes it.
    pub fn example(&self) -> &'static str {
        self.example
    }

    /// Parses `raw` into `layer`.
    fn apply(&self, layer: &mut PartialSettings, raw: Raw) -> Result<(), String> {
        (self.set)(layer, raw).map_err(|m| format!("{} {m}", self.name))
    }
}

/// Declares every key once: the partial type's field, its entry in [`KEYS`] and its merge.
macro_rules! keys {
    ($( $(#[doc = $doc:literal])+ $name:ident: $ty:ty = $example:literal; )+) => {
        /// One layer of settings (defaults, the file, the environment or flags): every key
        /// optional, in the units the file uses.
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct PartialSettings {
            $( $(#[doc = $doc])+ pub $name: Option<$ty>, )+
        }

        /// Every key, in the order `headroom settings` prints them. The loader reads the file
        /// and the environment through this list and nothing else.
        pub const KEYS: &[Key] = &[$(
            Key {
                name: stringify!($name),
                kind: <$ty as Value>::KIND,
                example: $example,
                set: |layer, raw| {
                    layer.$name = Some(<$ty as Value>::parse(raw)?);
                    Ok(())
                },
                show: |layer| layer.$name.as_ref().map(<$ty as Value>::show),
            },
        )+];

        impl PartialSettings {
            /// This layer with `over`'s values wherever `over` has one.
            fn overlaid(self, over: PartialSettings) -> Self {
                Self { $( $name: over.$name.or(self.$name), )+ }
            }
        }
    };
}

keys! {
    /// Listen address.
    bind: String = "127.0.0.1:9090";
    /// `sqlite:FILE`, or `postgres://…` (no password in it: PGPASSFILE or a socket's peer
    /// authentication).
    database_url: String = "sqlite:example.db";
    /// This instance among several on one database: unique per instance, the same across its
    /// restarts (1–64 of ASCII letters, digits and `-._:`; default: host name and bind port).
    instance_name: String = "eu-central-a";
    /// Seconds a claim (a request's execution, a fleet's scrape, a periodic job) holds without
    /// renewal; another instance takes it over when it runs out (3–600).
    lease_seconds: u64 = "20";
    /// HTTP worker threads (1–256).
    workers: usize = "3";
    /// `text` or `json`.
    log_format: LogFormat = "json";
    /// Minutes a session may sit unused (1–43200).
    session_idle_minutes: u64 = "45";
    /// Hours a session lasts at most (1–8760).
    session_absolute_hours: u64 = "8";
    /// Mark cookies `Secure`.
    cookie_secure: bool = "true";
    /// Largest request body in bytes (4096–268435456).
    body_limit_bytes: usize = "524288";
    /// Seconds a client has to send a request's head, and again its body (1–300).
    client_timeout_seconds: u64 = "20";
    /// Connections open at once, across all workers (at least `workers`, at most 65536).
    max_connections: usize = "512";
    /// Failed logins per account before delays start (1–1000).
    throttle_account_failures: u32 = "7";
    /// Failed logins per client address before delays start (1–100000).
    throttle_address_failures: u32 = "40";
    /// First delay in seconds; each further failure doubles it (1–3600).
    throttle_base_delay_seconds: u64 = "3";
    /// Longest lock in seconds (at least the first delay, at most 86400).
    throttle_max_lock_seconds: u64 = "1800";
    /// Seconds after which a failure is forgotten (1–604800).
    throttle_window_seconds: u64 = "600";
    /// Password hashes allowed at once (1–256).
    password_hash_concurrency: usize = "97";
    /// Hetzner Cloud API base URL (http or https).
    hetzner_api_url: String = "http://127.0.0.1:9/v1";
    /// Reverse proxies whose forwarded headers are believed.
    trusted_proxies: Vec<IpAddr> = "10.0.0.2,10.0.0.3";
    /// cloud-init's JSON schema file.
    cloud_init_schema: PathBuf = "/etc/headroom/cloud-init-schema.json";
    /// Largest pin pre-flight download in bytes (1–17179869184).
    pin_max_bytes: u64 = "1048576";
    /// Pin pre-flight deadline in seconds (1–3600).
    pin_timeout_seconds: u64 = "30";
    /// Hosts fetches may reach whatever their address.
    outbound_allow: Vec<String> = "mirror.internal:8443,10.0.0.5";
    /// Extra CA certificates (PEM) for outbound https.
    outbound_ca_file: PathBuf = "/etc/headroom/mirror-ca.pem";
    /// Render time limit in milliseconds (10–60000).
    render_timeout_ms: u64 = "350";
    /// Render output limit in bytes (32768–16777216).
    render_output_bytes: usize = "65536";
    /// Program render workers start from.
    render_worker: PathBuf = "/usr/local/bin/headroom";
    /// Hours before a cached provider catalogue is fetched again on use (1–8760).
    catalogue_max_age_hours: u64 = "6";
    /// Milliseconds between the provisioning runner's looks for approved requests (10–3600000).
    runner_poll_ms: u64 = "2000";
    /// Milliseconds before the runner's first poll of a provider action (10–60000).
    runner_action_poll_ms: u64 = "500";
    /// Provision notifications receiver (http or https; needs the webhook secret).
    webhook_url: String = "https://hooks.example.com/headroom";
    /// Base URL of deep links (default: `http://` + bind).
    public_url: String = "https://headroom.example.com";
    /// Delivery attempts per notification (1–100).
    webhook_attempts: u32 = "5";
    /// Scrape fleets (`false` on a standby instance).
    scrape_enabled: bool = "false";
    /// Scrapes in flight at once, across every fleet (1–4096).
    scrape_concurrency: usize = "32";
    /// Consecutive samples below required that enter a deficit (1–1000).
    deficit_enter_samples: u32 = "4";
    /// Consecutive samples at or above required that leave a deficit (1–1000).
    deficit_leave_samples: u32 = "5";
    /// Minutes after a proposal was superseded by recovery before a new deficit files another
    /// (1–1440).
    deficit_cooldown_minutes: u64 = "10";
    /// Follow each created machine until it joins its fleet (`false`: a request ends when the
    /// provider says its servers run).
    follow_joins: bool = "false";
    /// Minutes a created machine has to join its fleet before its request fails (1–1440).
    join_timeout_minutes: u64 = "30";
    /// Check a new request's tarball pin at once (`false`: only a person's check on the
    /// config page counts).
    pin_check_on_request: bool = "false";
    /// Plan checks whose warning refuses approval (names: pin, max_restore_machines,
    /// ssh_keys, server_type, image, monthly_budget, firewall; empty: none).
    plan_checks_blocking: crate::domain::plan_check_blocking::BlockingChecks = "firewall,pin,ssh_keys";
    /// Hours raw samples are kept (1–8760).
    samples_raw_hours: u64 = "24";
    /// Days per-minute rollups are kept (1–3650).
    rollups_minute_days: u64 = "7";
    /// Days per-hour rollups are kept (1–36500).
    rollups_hour_days: u64 = "365";
    /// Render-time secrets fleets may name: `NAME = "env:VARIABLE"` or `"file:/path"`.
    secrets: crate::domain::secret::DeclaredSecrets = "mesh-fsn=env:YUBABA_MESH_KEY_FSN,tunnel-prod=file:/etc/headroom/tunnel-prod";
}

impl PartialSettings {
    /// The defaults layer.
    pub fn defaults() -> Self {
        let throttle_window = 15 * 60;
        Self {
            bind: Some("127.0.0.1:8080".into()),
            database_url: Some("sqlite:headroom.db".into()),
            workers: Some(2),
            instance_name: None,
            lease_seconds: Some(15),
            log_format: Some(LogFormat::Text),
            session_idle_minutes: Some(30),
            session_absolute_hours: Some(12),
            cookie_secure: Some(false),
            body_limit_bytes: Some(256 * 1024),
            secrets: Some(crate::domain::secret::DeclaredSecrets::default()),
            // A browser on a slow link sends a form in well under a second; ten is generous
            // and still frees a stalled client's descriptor quickly.
            client_timeout_seconds: Some(10),
            // Well under the usual 1024 descriptors a process may hold, leaving room for the
            // database, render workers and outbound fetches.
            max_connections: Some(256),
            throttle_account_failures: Some(5),
            throttle_address_failures: Some(20),
            throttle_base_delay_seconds: Some(2),
            throttle_max_lock_seconds: Some(15 * 60),
            throttle_window_seconds: Some(throttle_window),
            // One per core, at most four (each permit keeps a 19 MiB argon2 buffer for good).
            password_hash_concurrency: Some(
                std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
            ),
            hetzner_api_url: Some("https://api.hetzner.cloud/v1".into()),
            trusted_proxies: Some(Vec::new()),
            cloud_init_schema: None,
            pin_max_bytes: Some(PinLimits::default().max_bytes),
            pin_timeout_seconds: Some(PinLimits::default().timeout.as_secs()),
            outbound_allow: Some(Vec::new()),
            outbound_ca_file: None,
            render_timeout_ms: Some(200),
            // Four times the cap, as the render engine's own default.
            render_output_bytes: Some(4 * MIN_RENDER_OUTPUT_BYTES),
            render_worker: None,
            catalogue_max_age_hours: Some(24),
            // An approval wakes the runner at once; the poll only catches what a wake missed.
            runner_poll_ms: Some(5_000),
            // Hetzner's create action takes seconds; a second's wait rarely needs a second poll.
            runner_action_poll_ms: Some(1_000),
            webhook_url: None,
            public_url: None,
            webhook_attempts: Some(8),
            // Enough for a thousand fleets at 15 s with slow answers; each scrape is one socket.
            scrape_enabled: Some(true),
            scrape_concurrency: Some(64),
            // Three samples (45 s at the default interval) before a proposal; a fleet must stay
            // healthy as long before its deficit is over.
            deficit_enter_samples: Some(3),
            deficit_leave_samples: Some(3),
            // Half an hour: a fleet flapping around its threshold files two proposals an hour
            // at most, while a deficit that lasts still gets its restore within the half hour.
            deficit_cooldown_minutes: Some(30),
            // A booted node joins within a few minutes; cloud-init that broke never does.
            follow_joins: Some(true),
            join_timeout_minutes: Some(15),
            // Approving a machine that will download something nobody compared with its pin
            // is approving blind; every other warning is the approver's to weigh.
            plan_checks_blocking: Some(Default::default()),
            // So the approver finds a verdict beside Approve rather than "not checked".
            pin_check_on_request: Some(true),
            // Raw ticks for two days (the 1 h … 24 h charts read them or the minute rollups),
            // minutes for two weeks (the 7 d chart), hours for 400 days (30 d, 90 d, a year).
            samples_raw_hours: Some(48),
            rollups_minute_days: Some(14),
            rollups_hour_days: Some(400),
        }
    }
}

/// Where an effective value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Built in.
    Default,
    /// The TOML file.
    File,
    /// An environment variable.
    Env,
    /// A command-line flag.
    Flag,
}

impl Source {
    /// The word `headroom settings` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::File => "file",
            Source::Env => "env",
            Source::Flag => "flag",
        }
    }
}

/// One line of `headroom settings`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    /// The file key.
    pub key: &'static str,
    /// The value as a variable would give it; secrets only `set` or `unset`.
    pub value: String,
    /// The layer it came from.
    pub source: Source,
}

/// The effective settings and where each came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// What the console runs with.
    pub settings: Settings,
    /// Every key (and the secret) with its value and source, in [`KEYS`] order.
    pub effective: Vec<Effective>,
}

/// Why settings could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The file named by `--config` cannot be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// The file is not TOML, names an unknown key or holds a value of the wrong type.
    #[error("config file {path}: {message}")]
    Parse { path: String, message: String },
    /// A variable's value cannot be parsed, or the token file cannot be read.
    #[error("environment variable {name}: {message}")]
    Env { name: String, message: String },
    /// The effective value breaks its key's rule.
    #[error("{message} (set by {origin})")]
    Invalid { origin: String, message: String },
}

/// The variables holding the provider token (never a file key).
pub const SECRET_VARIABLES: [&str; 2] = ["HETZNER_API_TOKEN", "HETZNER_API_TOKEN_FILE"];

/// The variables holding the webhook signing secret (never a file key).
pub const WEBHOOK_SECRET_VARIABLES: [&str; 2] =
    ["HEADROOM_WEBHOOK_SECRET", "HEADROOM_WEBHOOK_SECRET_FILE"];

/// The secrets `headroom settings` lists after [`KEYS`], in order, shown only as `set`/`unset`.
pub const SECRETS: [&str; 2] = ["hetzner_api_token", "webhook_secret"];

/// The first variable headroom reads whose value is not UTF-8, if any: reading it as unset
/// would quietly put the default in its place (a database URL, a token).
pub fn variable_not_utf8(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Option<String> {
    let read: Vec<String> = KEYS
        .iter()
        .map(|k| k.env())
        .chain(SECRET_VARIABLES.iter().map(|v| (*v).to_owned()))
        .chain(WEBHOOK_SECRET_VARIABLES.iter().map(|v| (*v).to_owned()))
        .collect();
    vars.filter(|(_, value)| value.to_str().is_none())
        .filter_map(|(name, _)| name.into_string().ok())
        .find(|name| read.contains(name))
}

/// Loads the layers in order — `defaults`, the file, the environment (`env` is passed in so
/// tests need not touch the process), `flags` — and validates the result once. `serve`,
/// `demo` and `headroom settings` all come through here.
pub fn load(
    defaults: PartialSettings,
    file: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    flags: PartialSettings,
) -> Result<Loaded, SettingsError> {
    let mut layers = vec![(Source::Default, defaults)];
    if let Some(path) = file {
        layers.push((Source::File, read_file(path)?));
    }
    layers.push((Source::Env, read_env(env)?));
    layers.push((Source::Flag, flags));

    let mut sources: HashMap<&'static str, Source> = HashMap::new();
    let mut merged = PartialSettings::default();
    for (source, layer) in layers {
        for key in KEYS {
            if (key.show)(&layer).is_some() {
                sources.insert(key.name, source);
            }
        }
        merged = merged.overlaid(layer);
    }
    let origin = |name: &'static str| match sources.get(name).copied() {
        Some(Source::File) => format!(
            "config file {}",
            file.map(|p| p.display().to_string()).unwrap_or_default()
        ),
        Some(Source::Env) => format!("environment variable HEADROOM_{}", name.to_uppercase()),
        Some(Source::Flag) => format!("flag --{}", name.replace('_', "-")),
        Some(Source::Default) | None => "the default".into(),
    };
    let (token, token_source) = read_secret(env, SECRET_VARIABLES)?;
    let (webhook_secret, webhook_secret_source) = read_secret(env, WEBHOOK_SECRET_VARIABLES)?;
    let settings = settle(&merged, token, webhook_secret, &origin)?;

    let mut effective: Vec<Effective> = KEYS
        .iter()
        .map(|key| Effective {
            key: key.name,
            value: (key.show)(&merged).unwrap_or_else(|| "(none)".into()),
            source: sources.get(key.name).copied().unwrap_or(Source::Default),
        })
        .collect();
    effective.push(Effective {
        key: "hetzner_api_token",
        value: if settings.hetzner_api_token.is_some() {
            "set".into()
        } else {
            "unset".into()
        },
        source: token_source,
    });
    effective.push(Effective {
        key: "webhook_secret",
        value: if settings.webhook_secret.is_some() {
            "set".into()
        } else {
            "unset".into()
        },
        source: webhook_secret_source,
    });
    Ok(Loaded {
        settings,
        effective,
    })
}

/// Where the file stops being TOML and why, without the line itself: toml's own message
/// quotes the line, which may be the one holding a database password.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim_end();
    match e.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("TOML error at line {line}, column {column}: {message}")
        }
        None => format!("TOML error: {message}"),
    }
}

fn read_file(path: &Path) -> Result<PartialSettings, SettingsError> {
    let shown = path.display().to_string();
    let parse_error = |message: String| SettingsError::Parse {
        path: shown.clone(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
        path: shown.clone(),
        source,
    })?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| parse_error(toml_error(&text, &e)))?;
    let mut layer = PartialSettings::default();
    for (name, value) in &table {
        let Some(key) = KEYS.iter().find(|k| k.name == name) else {
            let message = if name == "hetzner_api_token" {
                "hetzner_api_token is a secret and never read from the file: set \
                 HETZNER_API_TOKEN or HETZNER_API_TOKEN_FILE"
                    .to_owned()
            } else if name == "webhook_secret" {
                "webhook_secret is a secret and never read from the file: set \
                 HEADROOM_WEBHOOK_SECRET or HEADROOM_WEBHOOK_SECRET_FILE"
                    .to_owned()
            } else {
                format!("unknown key `{name}` (`headroom settings` lists every key)")
            };
            return Err(parse_error(message));
        };
        let raw =
            Raw::from_toml(key.kind, value).map_err(|m| parse_error(format!("{name} {m}")))?;
        key.apply(&mut layer, raw).map_err(parse_error)?;
    }
    Ok(layer)
}

fn read_env(env: &dyn Fn(&str) -> Option<String>) -> Result<PartialSettings, SettingsError> {
    let mut layer = PartialSettings::default();
    for key in KEYS {
        let name = key.env();
        if let Some(text) = env(&name) {
            key.apply(&mut layer, Raw::from_env(key.kind, &text))
                .map_err(|message| SettingsError::Env { name, message })?;
        }
    }
    Ok(layer)
}

/// A secret from its variable, or else from the file its `_FILE` variable names.
fn read_secret(
    env: &dyn Fn(&str) -> Option<String>,
    [direct, from_file]: [&str; 2],
) -> Result<(Option<SecretString>, Source), SettingsError> {
    if let Some(v) = env(direct) {
        return Ok((Some(SecretString::from(v)), Source::Env));
    }
    let Some(path) = env(from_file) else {
        return Ok((None, Source::Default));
    };
    let token = std::fs::read_to_string(&path).map_err(|e| SettingsError::Env {
        name: from_file.into(),
        message: format!("cannot read {path}: {e}"),
    })?;
    Ok((
        Some(SecretString::from(token.trim().to_owned())),
        Source::Env,
    ))
}

/// This machine's host name (Linux), for the default instance name; empty when unreadable.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

/// Validates the merged layers once, each rule naming its key and where the value came from.
fn settle(
    p: &PartialSettings,
    hetzner_api_token: Option<SecretString>,
    webhook_secret: Option<SecretString>,
    origin: &dyn Fn(&'static str) -> String,
) -> Result<Settings, SettingsError> {
    let rules = Rules { origin };
    let webhook_url = p
        .webhook_url
        .as_deref()
        .map(|raw| rules.http_url("webhook_url", raw))
        .transpose()?;
    if webhook_url.is_some() && webhook_secret.is_none() {
        // An unsigned notification could be forged by anyone who can reach the receiver.
        return Err(rules.broken(
            "webhook_url",
            "webhook_url needs webhook_secret (set HEADROOM_WEBHOOK_SECRET or \
             HEADROOM_WEBHOOK_SECRET_FILE) to sign notifications"
                .into(),
        ));
    }
    let public_url = match p.public_url.as_deref() {
        Some(raw) => rules.http_url("public_url", raw)?.as_str().to_owned(),
        None => format!("http://{}", rules.required(p.bind.clone(), "bind")?),
    };
    let base_delay = rules.range(
        p.throttle_base_delay_seconds,
        "throttle_base_delay_seconds",
        1,
        3600,
        "seconds",
    )?;
    let max_lock = rules.range(
        p.throttle_max_lock_seconds,
        "throttle_max_lock_seconds",
        1,
        86_400,
        "seconds",
    )?;
    if max_lock < base_delay {
        return Err(rules.broken(
            "throttle_max_lock_seconds",
            format!("throttle_max_lock_seconds must be at least throttle_base_delay_seconds ({base_delay})"),
        ));
    }
    let hetzner_api_url = rules.required(p.hetzner_api_url.clone(), "hetzner_api_url")?;
    if !url::Url::parse(&hetzner_api_url).is_ok_and(|u| matches!(u.scheme(), "http" | "https")) {
        return Err(rules.broken(
            "hetzner_api_url",
            format!("hetzner_api_url must be an http or https URL, not {hetzner_api_url:?}"),
        ));
    }
    // Each worker takes an equal share, so fewer connections than workers would leave one
    // with none.
    let workers = rules.range(p.workers, "workers", 1, 256, "threads")?;
    let max_connections = rules.range(
        p.max_connections,
        "max_connections",
        1,
        65_536,
        "connections",
    )?;
    if max_connections < workers {
        return Err(rules.broken(
            "max_connections",
            format!("max_connections must be at least workers ({workers}), not {max_connections}"),
        ));
    }
    let outbound_allow = crate::outbound::AllowList::parse(
        &rules.required(p.outbound_allow.clone(), "outbound_allow")?,
    )
    .map_err(|m| rules.broken("outbound_allow", m))?;
    Ok(Settings {
        bind: rules.required(p.bind.clone(), "bind")?,
        database_url: rules.database_url(p.database_url.clone())?,
        workers: rules.range(p.workers, "workers", 1, 256, "threads")?,
        log_format: rules.required(p.log_format, "log_format")?,
        session_idle: Duration::from_secs(
            60 * rules.range(
                p.session_idle_minutes,
                "session_idle_minutes",
                1,
                43_200,
                "minutes",
            )?,
        ),
        session_absolute: Duration::from_secs(
            3600 * rules.range(
                p.session_absolute_hours,
                "session_absolute_hours",
                1,
                8_760,
                "hours",
            )?,
        ),
        cookie_secure: rules.required(p.cookie_secure, "cookie_secure")?,
        body_limit: rules.range(
            p.body_limit_bytes,
            "body_limit_bytes",
            4_096,
            268_435_456,
            "bytes",
        )?,
        client_timeout: Duration::from_secs(rules.range(
            p.client_timeout_seconds,
            "client_timeout_seconds",
            1,
            300,
            "seconds",
        )?),
        max_connections,
        throttle: ThrottleSettings {
            account_failures: rules.range(
                p.throttle_account_failures,
                "throttle_account_failures",
                1,
                1_000,
                "failures",
            )?,
            address_failures: rules.range(
                p.throttle_address_failures,
                "throttle_address_failures",
                1,
                100_000,
                "failures",
            )?,
            base_delay: Duration::from_secs(base_delay),
            max_lock: Duration::from_secs(max_lock),
            window: Duration::from_secs(rules.range(
                p.throttle_window_seconds,
                "throttle_window_seconds",
                1,
                604_800,
                "seconds",
            )?),
        },
        // At least one (zero would refuse every login), and small enough that the bound
        // still bounds memory (each argon2 call takes about 19 MiB).
        password_hash_concurrency: rules.range(
            p.password_hash_concurrency,
            "password_hash_concurrency",
            1,
            256,
            "hashes",
        )?,
        hetzner_api_url,
        hetzner_api_token,
        trusted_proxies: rules.required(p.trusted_proxies.clone(), "trusted_proxies")?,
        simulated_provider: false,
        pin_extra_ca: None,
        cloud_init_schema: p.cloud_init_schema.clone(),
        pin_limits: PinLimits {
            max_bytes: rules.range(p.pin_max_bytes, "pin_max_bytes", 1, 16 << 30, "bytes")?,
            timeout: Duration::from_secs(rules.range(
                p.pin_timeout_seconds,
                "pin_timeout_seconds",
                1,
                3600,
                "seconds",
            )?),
        },
        outbound_allow,
        outbound_ca_file: p.outbound_ca_file.clone(),
        // Long enough for a real template, short enough that a runaway one cannot hold a
        // render permit for long.
        render_timeout: Duration::from_millis(rules.range(
            p.render_timeout_ms,
            "render_timeout_ms",
            10,
            60_000,
            "milliseconds",
        )?),
        render_output_bytes: rules.range(
            p.render_output_bytes,
            "render_output_bytes",
            MIN_RENDER_OUTPUT_BYTES,
            16 << 20,
            "bytes",
        )?,
        render_worker: p.render_worker.clone(),
        catalogue_max_age: Duration::from_secs(
            3600 * rules.range(
                p.catalogue_max_age_hours,
                "catalogue_max_age_hours",
                1,
                8_760,
                "hours",
            )?,
        ),
        instance_name: match p.instance_name.as_deref() {
            Some(raw) => rules.instance_name(raw)?,
            None => crate::domain::lease::default_instance_name(
                &host_name(),
                &rules.required(p.bind.clone(), "bind")?,
            ),
        },
        lease: Duration::from_secs(rules.range(
            p.lease_seconds,
            "lease_seconds",
            3,
            600,
            "seconds",
        )?),
        runner_poll: Duration::from_millis(rules.range(
            p.runner_poll_ms,
            "runner_poll_ms",
            10,
            3_600_000,
            "milliseconds",
        )?),
        runner_action_poll: Duration::from_millis(rules.range(
            p.runner_action_poll_ms,
            "runner_action_poll_ms",
            10,
            60_000,
            "milliseconds",
        )?),
        webhook_url,
        webhook_secret,
        public_url: public_url.trim_end_matches('/').to_owned(),
        webhook_attempts: rules.range(
            p.webhook_attempts,
            "webhook_attempts",
            1,
            100,
            "attempts",
        )?,
        scrape_enabled: rules.required(p.scrape_enabled, "scrape_enabled")?,
        scrape_concurrency: rules.range(
            p.scrape_concurrency,
            "scrape_concurrency",
            1,
            4096,
            "scrapes",
        )?,
        deficit: crate::domain::capacity::DeficitPolicy {
            enter_after: rules.range(
                p.deficit_enter_samples,
                "deficit_enter_samples",
                1,
                1000,
                "samples",
            )?,
            leave_after: rules.range(
                p.deficit_leave_samples,
                "deficit_leave_samples",
                1,
                1000,
                "samples",
            )?,
        },
        proposal_cooldown: Duration::from_secs(
            60 * rules.range(
                p.deficit_cooldown_minutes,
                "deficit_cooldown_minutes",
                1,
                1_440,
                "minutes",
            )?,
        ),
        join_timeout: {
            let minutes = rules.range(
                p.join_timeout_minutes,
                "join_timeout_minutes",
                1,
                1_440,
                "minutes",
            )?;
            rules
                .required(p.follow_joins, "follow_joins")?
                .then(|| Duration::from_secs(60 * minutes))
        },
        pin_check_on_request: rules.required(p.pin_check_on_request, "pin_check_on_request")?,
        plan_checks_blocking: rules
            .required(p.plan_checks_blocking.clone(), "plan_checks_blocking")?,
        retention: Retention {
            raw: Duration::from_secs(
                3600 * rules.range(p.samples_raw_hours, "samples_raw_hours", 1, 8_760, "hours")?,
            ),
            minute: Duration::from_secs(
                86_400
                    * rules.range(
                        p.rollups_minute_days,
                        "rollups_minute_days",
                        1,
                        3_650,
                        "days",
                    )?,
            ),
            hour: Duration::from_secs(
                86_400
                    * rules.range(p.rollups_hour_days, "rollups_hour_days", 1, 36_500, "days")?,
            ),
        },
        secrets: p.secrets.clone().unwrap_or_default(),
    })
}

/// The one place rules are checked, so every message has the same shape.
struct Rules<'a> {
    origin: &'a dyn Fn(&'static str) -> String,
}

impl Rules<'_> {
    fn broken(&self, key: &'static str, message: String) -> SettingsError {
        SettingsError::Invalid {
            origin: (self.origin)(key),
            message,
        }
    }

    /// Every key but the optional paths has a default, so `None` here is a missing default.
    fn required<T>(&self, value: Option<T>, key: &'static str) -> Result<T, SettingsError> {
        value.ok_or_else(|| self.broken(key, format!("{key} has no value")))
    }

    /// A URL naming a store headroom knows, with no password in it.
    fn database_url(&self, value: Option<String>) -> Result<String, SettingsError> {
        let url = self.required(value, "database_url")?;
        // The message never repeats the URL: it may be the one carrying a password.
        crate::domain::database_url::Store::of(&url)
            .map_err(|m| self.broken("database_url", m.to_owned()))?;
        Ok(url)
    }

    /// A name other instances' leases can tell apart (`crate::domain::lease::instance_name`).
    fn instance_name(&self, raw: &str) -> Result<String, SettingsError> {
        crate::domain::lease::instance_name(raw)
            .map_err(|rule| self.broken("instance_name", format!("instance_name {rule}")))
    }

    /// An absolute http or https URL with a host and no credentials in it.
    fn http_url(&self, key: &'static str, raw: &str) -> Result<url::Url, SettingsError> {
        match url::Url::parse(raw.trim()) {
            Ok(u)
                if matches!(u.scheme(), "http" | "https")
                    && u.host().is_some()
                    && u.username().is_empty()
                    && u.password().is_none() =>
            {
                Ok(u)
            }
            _ => Err(self.broken(
                key,
                format!("{key} must be an http or https URL with a host and no credentials, not {raw:?}"),
            )),
        }
    }

    fn range<T>(
        &self,
        value: Option<T>,
        key: &'static str,
        min: T,
        max: T,
        unit: &str,
    ) -> Result<T, SettingsError>
    where
        T: PartialOrd + std::fmt::Display + Copy,
    {
        let v = self.required(value, key)?;
        if !(min..=max).contains(&v) {
            return Err(self.broken(
                key,
                format!("{key} must be between {min} and {max} ({unit}), not {v}"),
            ));
        }
        Ok(v)
    }
}

impl Default for Settings {
    /// The defaults layer alone, through the same validation as every load.
    fn default() -> Self {
        match load(
            PartialSettings::defaults(),
            None,
            &|_| None,
            PartialSettings::default(),
        ) {
            Ok(loaded) => loaded.settings,
            // The defaults are constants; a unit test loads them, so this cannot be reached
            // by any input.
            Err(e) => unreachable!("the built-in defaults are invalid: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<String> {
        None
    }

    fn from_file(text: &str) -> Result<Loaded, SettingsError> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("h.toml");
        std::fs::write(&file, text).unwrap();
        load(
            PartialSettings::defaults(),
            Some(&file),
            &none,
            PartialSettings::default(),
        )
    }

    fn from_env(name: &str, value: &str) -> Result<Loaded, SettingsError> {
        let env = |k: &str| (k == name).then(|| value.to_owned());
        load(
            PartialSettings::defaults(),
            None,
            &env,
            PartialSettings::default(),
        )
    }

    #[test]
    fn the_defaults_alone_are_valid_and_every_key_but_the_optional_paths_has_one() {
        let loaded = load(
            PartialSettings::defaults(),
            None,
            &none,
            PartialSettings::default(),
        )
        .unwrap();
        let unset: Vec<_> = loaded
            .effective
            .iter()
            .filter(|e| e.value == "(none)")
            .map(|e| e.key)
            .collect();
        // instance_name and public_url are derived from bind when unset.
        assert_eq!(
            unset,
            [
                "instance_name",
                "cloud_init_schema",
                "outbound_ca_file",
                "render_worker",
                "webhook_url",
                "public_url"
            ]
        );
        assert!(loaded.effective.iter().all(|e| e.source == Source::Default));
    }

    #[test]
    fn flags_beat_env_beat_file_beat_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("h.toml");
        std::fs::write(
            &file,
            "bind = \"127.0.0.1:1\"\ndatabase_url = \"sqlite:file.db\"\nworkers = 3\n",
        )
        .unwrap();
        let env = |k: &str| match k {
            "HEADROOM_DATABASE_URL" | "HEADROOM_BIND" => Some("sqlite:env.db".to_string()),
            _ => None,
        };
        let flags = PartialSettings {
            bind: Some("127.0.0.1:2".into()),
            ..PartialSettings::default()
        };
        let loaded = load(PartialSettings::defaults(), Some(&file), &env, flags).unwrap();
        let s = &loaded.settings;
        assert_eq!(s.bind, "127.0.0.1:2");
        assert_eq!(s.database_url, "sqlite:env.db");
        assert_eq!(s.workers, 3);
        assert_eq!(s.session_idle, Settings::default().session_idle);
        let source = |k: &str| loaded.effective.iter().find(|e| e.key == k).unwrap().source;
        assert_eq!(source("bind"), Source::Flag);
        assert_eq!(source("database_url"), Source::Env);
        assert_eq!(source("workers"), Source::File);
        assert_eq!(source("log_format"), Source::Default);
    }

    #[test]
    fn workers_zero_is_refused_from_the_file_and_the_environment_alike() {
        let file = from_file("workers = 0\n").unwrap_err().to_string();
        let env = from_env("HEADROOM_WORKERS", "0").unwrap_err().to_string();
        let rule = "workers must be between 1 and 256 (threads), not 0";
        assert!(
            file.starts_with(rule) && file.contains("(set by config file"),
            "{file}"
        );
        assert_eq!(
            env,
            format!("{rule} (set by environment variable HEADROOM_WORKERS)")
        );
    }

    #[test]
    fn only_the_effective_value_is_validated() {
        // A bad file value that the environment replaces does not stop the start.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("h.toml");
        std::fs::write(&file, "render_timeout_ms = 0\n").unwrap();
        let env = |k: &str| (k == "HEADROOM_RENDER_TIMEOUT_MS").then(|| "500".to_owned());
        let loaded = load(
            PartialSettings::defaults(),
            Some(&file),
            &env,
            PartialSettings::default(),
        )
        .unwrap();
        assert_eq!(loaded.settings.render_timeout, Duration::from_millis(500));
    }

    #[test]
    fn range_rules_name_the_key_and_the_bound() {
        for (text, expected) in [
            (
                "render_timeout_ms = 5",
                "render_timeout_ms must be between 10 and 60000",
            ),
            (
                "render_output_bytes = 100",
                "render_output_bytes must be between 32768",
            ),
            (
                "password_hash_concurrency = 0",
                "password_hash_concurrency must be between 1 and 256",
            ),
            (
                "session_idle_minutes = 0",
                "session_idle_minutes must be between 1",
            ),
            (
                "body_limit_bytes = 10",
                "body_limit_bytes must be between 4096",
            ),
            (
                "pin_timeout_seconds = 0",
                "pin_timeout_seconds must be between 1 and 3600",
            ),
            (
                "client_timeout_seconds = 0",
                "client_timeout_seconds must be between 1 and 300 (seconds), not 0",
            ),
            (
                "max_connections = 0",
                "max_connections must be between 1 and 65536 (connections), not 0",
            ),
            (
                "workers = 4\nmax_connections = 3",
                "max_connections must be at least workers (4), not 3",
            ),
            (
                "throttle_base_delay_seconds = 60\nthrottle_max_lock_seconds = 30",
                "throttle_max_lock_seconds must be at least throttle_base_delay_seconds (60)",
            ),
            (
                "hetzner_api_url = \"ftp://x\"",
                "hetzner_api_url must be an http or https URL",
            ),
            (
                "outbound_allow = [\"*.example.com\"]",
                "outbound_allow entry \"*.example.com\"",
            ),
            (
                "database_url = \"mysql://root@127.0.0.1/headroom\"",
                "database_url must start with sqlite: or postgres://",
            ),
            (
                "database_url = \"postgres://headroom:hunter2@127.0.0.1/headroom\"",
                "database_url must not carry a password",
            ),
        ] {
            let err = from_file(text).unwrap_err().to_string();
            assert!(err.starts_with(expected), "{text}: {err}");
        }
    }

    #[test]
    fn a_variable_headroom_reads_that_is_not_utf8_is_named() {
        use std::os::unix::ffi::OsStringExt;
        let bad = || std::ffi::OsString::from_vec(vec![b's', 0xff, b'x']);
        let var = |name: &str, value: std::ffi::OsString| (name.into(), value);
        let vars = vec![
            var("LANG", bad()),
            var("HEADROOM_BIND", "127.0.0.1:1".into()),
            var("HEADROOM_DATABASE_URL", bad()),
        ];
        assert_eq!(
            variable_not_utf8(vars.into_iter()).as_deref(),
            Some("HEADROOM_DATABASE_URL")
        );
        let token = vec![var("HETZNER_API_TOKEN_FILE", bad())];
        assert_eq!(
            variable_not_utf8(token.into_iter()).as_deref(),
            Some("HETZNER_API_TOKEN_FILE")
        );
        let fine = vec![var("LANG", bad()), var("HEADROOM_WORKERS", "3".into())];
        assert_eq!(variable_not_utf8(fine.into_iter()), None);
    }

    #[test]
    fn unknown_keys_wrong_types_and_secrets_in_the_file_are_errors() {
        let err = from_file("bnd = \"x\"\n").unwrap_err().to_string();
        assert!(err.contains("unknown key `bnd`"), "{err}");
        let err = from_file("workers = \"3\"\n").unwrap_err().to_string();
        assert!(
            err.ends_with("workers must be an integer, not a string"),
            "{err}"
        );
        let err = from_file("hetzner_api_token = \"t\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("never read from the file"), "{err}");
        let err = from_env("HEADROOM_COOKIE_SECURE", "yes")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "environment variable HEADROOM_COOKIE_SECURE: cookie_secure must be true or false, not \"yes\""
        );
    }

    #[test]
    fn the_token_is_shown_only_as_set_and_comes_from_a_variable_or_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, "s3cret-token\n").unwrap();
        let path = token_file.display().to_string();
        let loaded = from_env("HETZNER_API_TOKEN_FILE", &path).unwrap();
        let token_line = |l: &Loaded| {
            l.effective
                .iter()
                .find(|e| e.key == "hetzner_api_token")
                .cloned()
                .unwrap()
        };
        let line = token_line(&loaded);
        assert_eq!(
            (line.key, line.value.as_str(), line.source),
            ("hetzner_api_token", "set", Source::Env)
        );
        use secrecy::ExposeSecret;
        assert_eq!(
            loaded.settings.hetzner_api_token.unwrap().expose_secret(),
            "s3cret-token"
        );
        let loaded = from_env("UNRELATED", "x").unwrap();
        assert_eq!(token_line(&loaded).value, "unset");
        assert!(loaded.effective.iter().all(|e| !e.value.contains("s3cret")));
    }

    #[test]
    fn outbound_allow_comes_from_the_file_or_a_comma_separated_variable() {
        use crate::outbound::AllowList;
        let s = from_file("outbound_allow = [\"mirror.internal:8443\"]\n").unwrap();
        assert_eq!(
            s.settings.outbound_allow,
            AllowList::parse(&["mirror.internal:8443"]).unwrap()
        );
        let s = from_env("HEADROOM_OUTBOUND_ALLOW", " 127.0.0.1:9443, [::1] ,").unwrap();
        assert_eq!(
            s.settings.outbound_allow,
            AllowList::parse(&["127.0.0.1:9443", "[::1]"]).unwrap()
        );
        let err = from_env("HEADROOM_OUTBOUND_ALLOW", "https://x")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("HEADROOM_OUTBOUND_ALLOW") && err.contains("not a URL"),
            "{err}"
        );
    }

    #[test]
    fn the_webhook_secret_comes_only_from_its_variables_and_a_url_needs_it() {
        let err = from_file("webhook_url = \"https://hooks.example.com/h\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("webhook_url needs webhook_secret")
                && err.contains("HEADROOM_WEBHOOK_SECRET"),
            "{err}"
        );
        let err = from_file("webhook_secret = \"s\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("never read from the file"), "{err}");

        let dir = tempfile::tempdir().unwrap();
        let secret_file = dir.path().join("hook");
        std::fs::write(&secret_file, "hook-s3cret\n").unwrap();
        let path = secret_file.display().to_string();
        let env = |k: &str| match k {
            "HEADROOM_WEBHOOK_URL" => Some("http://127.0.0.1:9999/hook".to_owned()),
            "HEADROOM_WEBHOOK_SECRET_FILE" => Some(path.clone()),
            _ => None,
        };
        let loaded = load(
            PartialSettings::defaults(),
            None,
            &env,
            PartialSettings::default(),
        )
        .unwrap();
        use secrecy::ExposeSecret;
        assert_eq!(
            loaded
                .settings
                .webhook_secret
                .as_ref()
                .unwrap()
                .expose_secret(),
            "hook-s3cret"
        );
        let line = loaded.effective.last().unwrap();
        assert_eq!(
            (line.key, line.value.as_str(), line.source),
            ("webhook_secret", "set", Source::Env)
        );
        assert!(loaded.effective.iter().all(|e| !e.value.contains("s3cret")));
        assert_eq!(loaded.settings.webhook_attempts, 8);
    }

    #[test]
    fn webhook_and_public_urls_must_be_http_with_a_host_and_public_url_defaults_to_bind() {
        for (text, key) in [
            ("webhook_url = \"ftp://x/h\"", "webhook_url"),
            ("webhook_url = \"https://user:pw@x/h\"", "webhook_url"),
            ("public_url = \"not a url\"", "public_url"),
            ("webhook_attempts = 101", "webhook_attempts"),
        ] {
            let err = from_file(text).unwrap_err().to_string();
            assert!(err.starts_with(&format!("{key} must be")), "{text}: {err}");
        }
        let s = from_file("bind = \"127.0.0.1:7000\"\n").unwrap().settings;
        assert_eq!(s.public_url, "http://127.0.0.1:7000");
        let s = from_file("public_url = \"https://h.example.com/console/\"\n")
            .unwrap()
            .settings;
        assert_eq!(s.public_url, "https://h.example.com/console");
    }
}
