//! Settings: defaults in code, then an optional TOML file, then `HEADROOM_*` environment
//! variables, then command-line flags. Secrets come only from the environment or files.

use std::path::Path;
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

use crate::cli::LogFormat;

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
    /// Login throttling.
    pub throttle: ThrottleSettings,
    /// Password hashes/verifications (argon2, ~19 MiB each) allowed at once in the process.
    pub password_hash_concurrency: usize,
    /// Hetzner Cloud API base URL.
    pub hetzner_api_url: String,
    /// Hetzner Cloud API token, from `HETZNER_API_TOKEN` or `HETZNER_API_TOKEN_FILE`.
    pub hetzner_api_token: Option<SecretString>,
    /// Reverse proxies whose `X-Forwarded-For` / `X-Forwarded-Proto` are believed.
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Offer the simulated cloud (the demo).
    pub simulated_provider: bool,
    /// cloud-init's JSON schema file; default: where Debian's cloud-init installs it.
    pub cloud_init_schema: Option<std::path::PathBuf>,
    /// Size and time limits of pin pre-flights.
    pub pin_limits: crate::cloud_init::pin::PinLimits,
    /// Hosts (`host` or `host:port`) that fetches may reach whatever their address.
    pub outbound_allow: crate::outbound::AllowList,
    /// Extra CA certificates (PEM) trusted by outbound https, e.g. for an allow-listed mirror.
    pub outbound_ca_file: Option<std::path::PathBuf>,
    /// Time and output limits of one template render.
    pub render_limits: crate::cloud_init::RenderLimits,
    /// The program render workers are started from; default: this executable.
    pub render_worker: Option<std::path::PathBuf>,
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

impl Default for Settings {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:8080".into(),
            database_url: "sqlite:headroom.db".into(),
            workers: 2,
            log_format: LogFormat::Text,
            session_idle: Duration::from_secs(30 * 60),
            session_absolute: Duration::from_secs(12 * 3600),
            cookie_secure: false,
            body_limit: 256 * 1024,
            throttle: ThrottleSettings {
                account_failures: 5,
                address_failures: 20,
                base_delay: Duration::from_secs(2),
                max_lock: Duration::from_secs(15 * 60),
                window: Duration::from_secs(15 * 60),
            },
            password_hash_concurrency: crate::auth::password::default_bound(),
            hetzner_api_url: "https://api.hetzner.cloud/v1".into(),
            hetzner_api_token: None,
            trusted_proxies: Vec::new(),
            simulated_provider: false,
            cloud_init_schema: None,
            pin_limits: crate::cloud_init::pin::PinLimits::default(),
            outbound_allow: crate::outbound::AllowList::default(),
            outbound_ca_file: None,
            render_limits: crate::cloud_init::RenderLimits::default(),
            render_worker: None,
        }
    }
}

/// The TOML file's shape: every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSettings {
    bind: Option<String>,
    database_url: Option<String>,
    workers: Option<usize>,
    log_format: Option<LogFormat>,
    session_idle_minutes: Option<u64>,
    session_absolute_hours: Option<u64>,
    cookie_secure: Option<bool>,
    body_limit_bytes: Option<usize>,
    password_hash_concurrency: Option<usize>,
    hetzner_api_url: Option<String>,
    cloud_init_schema: Option<std::path::PathBuf>,
    trusted_proxies: Option<Vec<std::net::IpAddr>>,
    pin_max_bytes: Option<u64>,
    pin_timeout_seconds: Option<u64>,
    outbound_allow: Option<Vec<String>>,
    outbound_ca_file: Option<std::path::PathBuf>,
    render_timeout_ms: Option<u64>,
    render_output_bytes: Option<usize>,
    render_worker: Option<std::path::PathBuf>,
}

/// Why settings could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("environment variable {name}: {message}")]
    Env { name: String, message: String },
}

/// Flag values that beat everything else.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub bind: Option<String>,
    pub database_url: Option<String>,
    pub log_format: Option<LogFormat>,
}

impl Settings {
    /// Layers file, environment (`env` is passed in so tests need not touch the process) and
    /// flags over the defaults.
    pub fn load(
        base: Settings,
        file: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
        flags: &Overrides,
    ) -> Result<Self, SettingsError> {
        let mut s = base;
        if let Some(path) = file {
            let shown = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
                path: shown.clone(),
                source,
            })?;
            let f: FileSettings = toml::from_str(&text).map_err(|e| SettingsError::Parse {
                path: shown,
                message: e.to_string(),
            })?;
            s.apply_file(f).map_err(|message| SettingsError::Parse {
                path: path.display().to_string(),
                message,
            })?;
        }
        s.apply_env(env)?;
        if let Some(v) = &flags.bind {
            s.bind.clone_from(v);
        }
        if let Some(v) = &flags.database_url {
            s.database_url.clone_from(v);
        }
        if let Some(v) = flags.log_format {
            s.log_format = v;
        }
        Ok(s)
    }

    fn apply_file(&mut self, f: FileSettings) -> Result<(), String> {
        if let Some(v) = f.render_timeout_ms {
            self.render_limits.timeout =
                render_timeout(v).map_err(|m| format!("render_timeout_ms {m}"))?;
        }
        if let Some(v) = f.render_output_bytes {
            self.render_limits.output_bytes =
                render_output(v).map_err(|m| format!("render_output_bytes {m}"))?;
        }
        if let Some(v) = f.render_worker {
            self.render_worker = Some(v);
        }
        if let Some(v) = f.bind {
            self.bind = v;
        }
        if let Some(v) = f.database_url {
            self.database_url = v;
        }
        if let Some(v) = f.workers {
            self.workers = v.max(1);
        }
        if let Some(v) = f.log_format {
            self.log_format = v;
        }
        if let Some(v) = f.session_idle_minutes {
            self.session_idle = Duration::from_secs(v * 60);
        }
        if let Some(v) = f.session_absolute_hours {
            self.session_absolute = Duration::from_secs(v * 3600);
        }
        if let Some(v) = f.cookie_secure {
            self.cookie_secure = v;
        }
        if let Some(v) = f.body_limit_bytes {
            self.body_limit = v;
        }
        if let Some(v) = f.password_hash_concurrency {
            self.password_hash_concurrency =
                hash_concurrency(v).map_err(|m| format!("password_hash_concurrency {m}"))?;
        }
        if let Some(v) = f.hetzner_api_url {
            self.hetzner_api_url = v;
        }
        if let Some(v) = f.trusted_proxies {
            self.trusted_proxies = v;
        }
        if let Some(v) = f.cloud_init_schema {
            self.cloud_init_schema = Some(v);
        }
        if let Some(v) = f.pin_max_bytes {
            self.pin_limits.max_bytes = v;
        }
        if let Some(v) = f.pin_timeout_seconds {
            self.pin_limits.timeout = Duration::from_secs(v);
        }
        if let Some(v) = f.outbound_allow {
            self.outbound_allow = crate::outbound::AllowList::parse(&v)?;
        }
        if let Some(v) = f.outbound_ca_file {
            self.outbound_ca_file = Some(v);
        }
        Ok(())
    }

    fn apply_env(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), SettingsError> {
        if let Some(v) = env("HEADROOM_BIND") {
            self.bind = v;
        }
        if let Some(v) = env("HEADROOM_DATABASE_URL") {
            self.database_url = v;
        }
        if let Some(v) = env("HEADROOM_WORKERS") {
            self.workers = parse_env("HEADROOM_WORKERS", &v)?;
        }
        if let Some(v) = env("HEADROOM_LOG_FORMAT") {
            self.log_format = match v.as_str() {
                "json" => LogFormat::Json,
                "text" => LogFormat::Text,
                _ => {
                    return Err(SettingsError::Env {
                        name: "HEADROOM_LOG_FORMAT".into(),
                        message: "must be text or json".into(),
                    })
                }
            };
        }
        if let Some(v) = env("HEADROOM_PASSWORD_HASH_CONCURRENCY") {
            let n = parse_env("HEADROOM_PASSWORD_HASH_CONCURRENCY", &v)?;
            self.password_hash_concurrency =
                hash_concurrency(n).map_err(|message| SettingsError::Env {
                    name: "HEADROOM_PASSWORD_HASH_CONCURRENCY".into(),
                    message,
                })?;
        }
        if let Some(v) = env("HEADROOM_COOKIE_SECURE") {
            self.cookie_secure = parse_env("HEADROOM_COOKIE_SECURE", &v)?;
        }
        if let Some(v) = env("HEADROOM_TRUSTED_PROXIES") {
            self.trusted_proxies = v
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(|a| parse_env("HEADROOM_TRUSTED_PROXIES", a))
                .collect::<Result<_, _>>()?;
        }
        if let Some(v) = env("HEADROOM_CLOUD_INIT_SCHEMA") {
            self.cloud_init_schema = Some(v.into());
        }
        if let Some(v) = env("HEADROOM_RENDER_TIMEOUT_MS") {
            let ms = parse_env("HEADROOM_RENDER_TIMEOUT_MS", &v)?;
            self.render_limits.timeout =
                render_timeout(ms).map_err(|message| SettingsError::Env {
                    name: "HEADROOM_RENDER_TIMEOUT_MS".into(),
                    message,
                })?;
        }
        if let Some(v) = env("HEADROOM_RENDER_OUTPUT_BYTES") {
            let bytes = parse_env("HEADROOM_RENDER_OUTPUT_BYTES", &v)?;
            self.render_limits.output_bytes =
                render_output(bytes).map_err(|message| SettingsError::Env {
                    name: "HEADROOM_RENDER_OUTPUT_BYTES".into(),
                    message,
                })?;
        }
        if let Some(v) = env("HEADROOM_RENDER_WORKER") {
            self.render_worker = Some(v.into());
        }
        if let Some(v) = env("HEADROOM_OUTBOUND_ALLOW") {
            let entries: Vec<&str> = v
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .collect();
            self.outbound_allow =
                crate::outbound::AllowList::parse(&entries).map_err(|message| {
                    SettingsError::Env {
                        name: "HEADROOM_OUTBOUND_ALLOW".into(),
                        message,
                    }
                })?;
        }
        if let Some(v) = env("HEADROOM_OUTBOUND_CA_FILE") {
            self.outbound_ca_file = Some(v.into());
        }
        if let Some(v) = env("HEADROOM_HETZNER_API_URL") {
            self.hetzner_api_url = v;
        }
        if let Some(v) = env("HETZNER_API_TOKEN") {
            self.hetzner_api_token = Some(SecretString::from(v));
        } else if let Some(path) = env("HETZNER_API_TOKEN_FILE") {
            let token = std::fs::read_to_string(&path).map_err(|e| SettingsError::Env {
                name: "HETZNER_API_TOKEN_FILE".into(),
                message: format!("cannot read {path}: {e}"),
            })?;
            self.hetzner_api_token = Some(SecretString::from(token.trim().to_owned()));
        }
        Ok(())
    }
}

/// A render time limit: long enough for a real template, short enough that a runaway one
/// cannot hold a render permit for long.
fn render_timeout(ms: u64) -> Result<Duration, String> {
    if (10..=60_000).contains(&ms) {
        Ok(Duration::from_millis(ms))
    } else {
        Err("must be between 10 and 60000 (milliseconds)".into())
    }
}

/// A render output limit: at least the 32 KiB cap, so an oversized payload is still measured
/// and reported by the size check instead of being cut off.
fn render_output(bytes: usize) -> Result<usize, String> {
    let min = crate::cloud_init::MAX_PAYLOAD_BYTES;
    if (min..=16 * 1024 * 1024).contains(&bytes) {
        Ok(bytes)
    } else {
        Err(format!("must be between {min} and 16777216 (bytes)"))
    }
}

/// A hashing bound: at least one (zero would refuse every login), and small enough that the
/// bound still bounds memory (each argon2 call takes about 19 MiB).
fn hash_concurrency(n: usize) -> Result<usize, String> {
    if (1..=256).contains(&n) {
        Ok(n)
    } else {
        Err("must be between 1 and 256".into())
    }
}

fn parse_env<T: std::str::FromStr>(name: &str, raw: &str) -> Result<T, SettingsError> {
    raw.trim().parse().map_err(|_| SettingsError::Env {
        name: name.into(),
        message: format!("cannot parse {raw:?}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_beat_env_beat_file_beat_defaults() {
        let dir = std::env::temp_dir().join(format!("headroom-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("h.toml");
        std::fs::write(
            &file,
            "bind = \"127.0.0.1:1\"\ndatabase_url = \"sqlite:file.db\"\nworkers = 3\n",
        )
        .unwrap();
        let env = |k: &str| match k {
            "HEADROOM_DATABASE_URL" => Some("sqlite:env.db".to_string()),
            _ => None,
        };
        let flags = Overrides {
            bind: Some("127.0.0.1:2".into()),
            ..Overrides::default()
        };
        let s = Settings::load(Settings::default(), Some(&file), &env, &flags).unwrap();
        assert_eq!(s.bind, "127.0.0.1:2");
        assert_eq!(s.database_url, "sqlite:env.db");
        assert_eq!(s.workers, 3);
        assert_eq!(s.session_idle, Settings::default().session_idle);
    }

    #[test]
    fn render_limits_come_from_file_or_env_alike_and_are_range_checked() {
        let dir = std::env::temp_dir().join(format!("headroom-cfg3-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("h.toml");
        std::fs::write(
            &file,
            "render_timeout_ms = 350\nrender_output_bytes = 65536\n",
        )
        .unwrap();
        let from_file = Settings::load(
            Settings::default(),
            Some(&file),
            &|_| None,
            &Overrides::default(),
        )
        .unwrap();
        let env = |k: &str| match k {
            "HEADROOM_RENDER_TIMEOUT_MS" => Some("350".to_string()),
            "HEADROOM_RENDER_OUTPUT_BYTES" => Some("65536".to_string()),
            _ => None,
        };
        let from_env =
            Settings::load(Settings::default(), None, &env, &Overrides::default()).unwrap();
        assert_eq!(from_file.render_limits, from_env.render_limits);
        assert_eq!(from_file.render_limits.timeout, Duration::from_millis(350));
        assert_eq!(from_file.render_limits.output_bytes, 65536);

        std::fs::write(&file, "render_timeout_ms = 0\n").unwrap();
        let err = Settings::load(
            Settings::default(),
            Some(&file),
            &|_| None,
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("render_timeout_ms must be between"),
            "{err}"
        );
        let env = |k: &str| (k == "HEADROOM_RENDER_OUTPUT_BYTES").then(|| "100".to_string());
        let err =
            Settings::load(Settings::default(), None, &env, &Overrides::default()).unwrap_err();
        assert!(
            err.to_string().contains("HEADROOM_RENDER_OUTPUT_BYTES"),
            "{err}"
        );
    }

    #[test]
    fn unknown_file_keys_are_errors() {
        let dir = std::env::temp_dir().join(format!("headroom-cfg2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("h.toml");
        std::fs::write(&file, "bnd = \"x\"\n").unwrap();
        let err = Settings::load(
            Settings::default(),
            Some(&file),
            &|_| None,
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("bnd"), "{err}");
    }

    #[test]
    fn password_hash_concurrency_comes_from_file_or_env_and_must_be_at_least_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("h.toml");
        std::fs::write(&file, "password_hash_concurrency = 3\n").unwrap();
        let none = |_: &str| None;
        let s = Settings::load(
            Settings::default(),
            Some(&file),
            &none,
            &Overrides::default(),
        );
        assert_eq!(s.unwrap().password_hash_concurrency, 3);
        let env = |k: &str| (k == "HEADROOM_PASSWORD_HASH_CONCURRENCY").then(|| "1".to_owned());
        let s = Settings::load(
            Settings::default(),
            Some(&file),
            &env,
            &Overrides::default(),
        );
        assert_eq!(s.unwrap().password_hash_concurrency, 1);
        let zero = |k: &str| (k == "HEADROOM_PASSWORD_HASH_CONCURRENCY").then(|| "0".to_owned());
        let err = Settings::load(Settings::default(), None, &zero, &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("HEADROOM_PASSWORD_HASH_CONCURRENCY") && err.contains("between 1 and"),
            "{err}"
        );
        std::fs::write(&file, "password_hash_concurrency = 0\n").unwrap();
        let err = Settings::load(
            Settings::default(),
            Some(&file),
            &none,
            &Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("password_hash_concurrency must be between 1"),
            "{err}"
        );
    }

    #[test]
    fn outbound_allow_comes_from_the_file_or_a_comma_separated_variable() {
        use crate::outbound::AllowList;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("h.toml");
        std::fs::write(&file, "outbound_allow = [\"mirror.internal:8443\"]\n").unwrap();
        let none = |_: &str| None;
        let s = Settings::load(
            Settings::default(),
            Some(&file),
            &none,
            &Overrides::default(),
        );
        assert_eq!(
            s.unwrap().outbound_allow,
            AllowList::parse(&["mirror.internal:8443"]).unwrap()
        );
        let env = |k: &str| {
            (k == "HEADROOM_OUTBOUND_ALLOW").then(|| " 127.0.0.1:9443, [::1] ,".to_owned())
        };
        let s = Settings::load(
            Settings::default(),
            Some(&file),
            &env,
            &Overrides::default(),
        );
        assert_eq!(
            s.unwrap().outbound_allow,
            AllowList::parse(&["127.0.0.1:9443", "[::1]"]).unwrap()
        );
        let bad = |k: &str| (k == "HEADROOM_OUTBOUND_ALLOW").then(|| "https://x".to_owned());
        let err = Settings::load(Settings::default(), None, &bad, &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("HEADROOM_OUTBOUND_ALLOW") && err.contains("not a URL"),
            "{err}"
        );
        std::fs::write(&file, "outbound_allow = [\"*.example.com\"]\n").unwrap();
        let err = Settings::load(
            Settings::default(),
            Some(&file),
            &none,
            &Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("outbound_allow entry") && err.contains("wildcards"),
            "{err}"
        );
    }
}
