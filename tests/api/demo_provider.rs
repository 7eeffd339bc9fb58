//! `headroom demo` offers the simulated cloud only: a Hetzner token in its environment (and a
//! Hetzner URL) must not make it contact any provider. The real binary runs as a child with
//! exactly the variables given here; "Hetzner" is a wiremock on loopback that records every
//! request it receives.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use wiremock::MockServer;

const BIN: &str = env!("CARGO_BIN_EXE_headroom");

/// The child, killed when the test ends however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Lines of a child's stream, read on a thread so the test can wait with a deadline.
fn lines_of(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for the first line containing `needle`, returning it and every line read.
fn wait_for(rx: &mpsc::Receiver<String>, needle: &str, seen: &mut Vec<String>) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                seen.push(line.clone());
                if line.contains(needle) {
                    return line;
                }
            }
            Err(_) => panic!("no line with {needle:?}; read:\n{}", seen.join("\n")),
        }
    }
}

#[tokio::test]
async fn the_demo_ignores_a_hetzner_token_and_contacts_no_provider() {
    let hetzner = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("demo.db").display());
    let api_url = format!("{}/v1", hetzner.uri());
    let env = [
        ("HEADROOM_HETZNER_API_URL", api_url.as_str()),
        ("HETZNER_API_TOKEN", "demo-must-not-use-this"),
        ("HEADROOM_WORKERS", "1"),
        ("HEADROOM_SCRAPE_ENABLED", "false"),
    ];
    let mut child = Command::new(BIN)
        .args(["--database-url", &db, "demo", "--bind", "127.0.0.1:0"])
        .env_clear()
        .envs(env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = lines_of(child.stdout.take().unwrap());
    let stderr = lines_of(child.stderr.take().unwrap());
    let _running = Running(child);

    let mut log = Vec::new();
    let started = wait_for(&stderr, "headroom is listening", &mut log);
    let mut out = Vec::new();
    let sign_in = wait_for(&stdout, "/login", &mut out);
    let address = sign_in
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .and_then(|w| w.strip_suffix("/login"))
        .unwrap_or_else(|| panic!("no address in {sign_in:?}"))
        .to_owned();

    // An operator's token, made by the CLI against the demo's database.
    let token = Command::new(BIN)
        .args(["--database-url", &db, "token", "create", "operator"])
        .env_clear()
        .env("HEADROOM_HETZNER_API_URL", &api_url)
        .output()
        .unwrap();
    assert!(
        token.status.success(),
        "{}",
        String::from_utf8_lossy(&token.stderr)
    );
    let token = String::from_utf8(token.stdout).unwrap().trim().to_owned();

    let client = reqwest::Client::new();
    let refresh = |provider: &str| {
        client
            .post(format!(
                "http://{address}/api/v1/catalogue/{provider}/refresh"
            ))
            .bearer_auth(&token)
            .send()
    };
    let hetzner_refresh = refresh("hetzner").await.unwrap();
    let hetzner_status = hetzner_refresh.status();
    let hetzner_body = hetzner_refresh.text().await.unwrap();
    let simulated_status = refresh("simulated").await.unwrap().status();
    // The start-up fetch of a configured provider's missing catalogue runs in the
    // background: give it time to show up if it were going to.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let received = hetzner.received_requests().await.unwrap();
    assert!(
        received.is_empty(),
        "the demo contacted the provider: {:?}",
        received
            .iter()
            .map(|r| format!("{} {}", r.method, r.url.path()))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        hetzner_status, 422,
        "hetzner is not offered: {hetzner_body}"
    );
    assert!(
        hetzner_body.contains("hetzner"),
        "the refusal names the provider: {hetzner_body}"
    );
    assert_eq!(simulated_status, 200);
    assert!(
        started.contains("simulated provider only"),
        "the start-up line says which provider the demo offers: {started}"
    );
}
