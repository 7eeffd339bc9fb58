//! Settings: every key the loader reads can be given by the file or by its variable, with the
//! same effective value and the same rules; the background loops stop with the server.

use std::path::Path;
use std::time::Duration;

use headroom::config::{self, Kind, Loaded, PartialSettings, Source, KEYS};

use crate::secrets::Server;

/// The key's example as the TOML file writes it, encoded here rather than by the code under
/// test. A JSON string literal of these plain values is also a TOML basic string.
fn toml_literal(kind: Kind, example: &str) -> String {
    let quoted = |s: &str| serde_json::to_string(s).unwrap();
    match kind {
        Kind::Integer | Kind::Boolean => example.to_owned(),
        Kind::Text => quoted(example),
        Kind::List => format!(
            "[{}]",
            example
                .split(',')
                .map(quoted)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Kind::Table => format!(
            "{{ {} }}",
            example
                .split(',')
                .map(|e| {
                    let (k, v) = e.split_once('=').unwrap();
                    format!("{} = {}", quoted(k), quoted(v))
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The environment every load sees: the webhook secret, without which `webhook_url`'s
/// example would be refused (a URL needs its secret).
fn base_env(k: &str) -> Option<String> {
    (k == config::WEBHOOK_SECRET_VARIABLES[0]).then(|| "test-webhook-secret".to_owned())
}

fn load_file(dir: &Path, name: &str, text: &str) -> Result<Loaded, config::SettingsError> {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, text).unwrap();
    config::load(
        PartialSettings::defaults(),
        Some(&file),
        &base_env,
        PartialSettings::default(),
    )
}

fn load_env(name: &str, value: &str) -> Result<Loaded, config::SettingsError> {
    config::load(
        PartialSettings::defaults(),
        None,
        &|k| {
            (k == name)
                .then(|| value.to_owned())
                .or_else(|| base_env(k))
        },
        PartialSettings::default(),
    )
}

fn line<'a>(loaded: &'a Loaded, key: &str) -> &'a config::Effective {
    loaded
        .effective
        .iter()
        .find(|e| e.key == key)
        .unwrap_or_else(|| panic!("{key} is not listed"))
}

#[test]
fn every_key_gives_the_same_effective_value_from_the_file_and_from_its_variable() {
    let dir = tempfile::tempdir().unwrap();
    let defaults = load_env("NOTHING", "").unwrap();
    let default_settings = format!("{:?}", defaults.settings);
    for key in KEYS {
        let name = key.name();
        assert_eq!(key.env(), format!("HEADROOM_{}", name.to_uppercase()));
        let text = format!("{name} = {}\n", toml_literal(key.kind(), key.example()));
        let from_file = load_file(dir.path(), name, &text)
            .unwrap_or_else(|e| panic!("{name} from the file: {e}"));
        let from_env = load_env(&key.env(), key.example())
            .unwrap_or_else(|e| panic!("{} from the environment: {e}", key.env()));

        let file_settings = format!("{:?}", from_file.settings);
        assert_eq!(
            file_settings,
            format!("{:?}", from_env.settings),
            "{name}: the file and the variable disagree"
        );
        assert_ne!(
            file_settings, default_settings,
            "{name}: its example changes nothing the console runs with"
        );
        assert_eq!(line(&from_file, name).value, key.example(), "{name}");
        assert_eq!(line(&from_env, name).value, key.example(), "{name}");
        assert_eq!(line(&from_file, name).source, Source::File, "{name}");
        assert_eq!(line(&from_env, name).source, Source::Env, "{name}");
        assert!(
            from_file
                .effective
                .iter()
                .filter(|e| e.key != name && !config::SECRETS.contains(&e.key))
                .all(|e| e.source == Source::Default),
            "{name}: setting it moved another key"
        );
    }
    // Every key is listed once by `headroom settings`, and the secret after them.
    let names: Vec<_> = defaults.effective.iter().map(|e| e.key).collect();
    let mut expected: Vec<_> = KEYS.iter().map(|k| k.name()).collect();
    expected.extend(config::SECRETS);
    assert_eq!(names, expected);
    assert!(KEYS.len() >= 24, "{} keys", KEYS.len());
}

#[test]
fn every_number_key_refuses_zero_from_the_file_and_its_variable_with_the_same_rule() {
    // Every whole-number key has a lower bound of at least one; the file must not clamp
    // where the variable refuses (as `workers` once did), nor the other way round.
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for key in KEYS.iter().filter(|k| k.kind() == Kind::Integer) {
        let name = key.name();
        let file_err = load_file(dir.path(), name, &format!("{name} = 0\n"))
            .expect_err(name)
            .to_string();
        let env_err = load_env(&key.env(), "0").expect_err(name).to_string();
        let rule = |e: &str| e.split(" (set by ").next().unwrap().to_owned();
        assert_eq!(rule(&file_err), rule(&env_err), "{name}");
        assert!(rule(&file_err).starts_with(name), "{file_err}");
        assert!(env_err.ends_with(&format!("(set by environment variable {})", key.env())));
        checked += 1;
    }
    assert!(checked >= 15, "{checked} number keys");
}

#[test]
fn settings_defaults_agree_with_the_parts_that_use_them() {
    let s = headroom::config::Settings::default();
    let render = headroom::cloud_init::RenderLimits::default();
    assert_eq!(s.render_timeout, render.timeout);
    assert_eq!(s.render_output_bytes, render.output_bytes);
    assert_eq!(
        config::MIN_RENDER_OUTPUT_BYTES,
        headroom::cloud_init::MAX_PAYLOAD_BYTES
    );
}

#[tokio::test]
async fn serve_stops_its_background_loops_and_exits_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("stop.db").display());
    let server = Server::start(dir.path(), &db, "serve").await;
    let pid = server.pid().to_string();
    // The purge loop sleeps ten minutes between runs: a prompt exit means it was stopped.
    let Ok((status, log)) = tokio::time::timeout(Duration::from_secs(20), server.stop()).await
    else {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status();
        panic!("serve did not exit within 20 s of SIGTERM");
    };
    let log = String::from_utf8_lossy(&log);
    assert!(status.success(), "{status}: {log}");
    let stopped = log
        .find("session purge stopped")
        .expect("the purge loop stopped");
    let done = log.find("headroom stopped").expect("serve returned");
    assert!(stopped < done, "{log}");
}

/// Every loop `start_background_loops` starts ends once shutdown is signalled: with scraping
/// on (six loops) each handle completes within a bound that only a loop ignoring the signal
/// would miss.
#[tokio::test]
async fn the_started_background_loops_all_end_when_shutdown_is_signalled() {
    let app = crate::helpers::TestApp::spawn_with(|s| s.scrape_enabled = true).await;
    let loops = headroom::startup::start_background_loops(&app.state);
    assert_eq!(loops.handles.len(), 6, "every loop, the scraper included");
    // Let each loop reach its wait, so the signal finds it running rather than starting.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let long_lived = loops.handles.iter().filter(|h| !h.is_finished()).count();
    assert!(
        long_lived >= 5,
        "only {long_lived} loops still run before the signal"
    );
    loops.shutdown.send(true).expect("the loops listen");
    for (i, handle) in loops.handles.into_iter().enumerate() {
        tokio::time::timeout(Duration::from_secs(30), handle)
            .await
            .unwrap_or_else(|_| panic!("loop {i} still runs after shutdown"))
            .unwrap_or_else(|e| panic!("loop {i} ended abnormally: {e}"));
    }
}
