//! What the console tells its operators about requests: `/metrics` series stay a closed set
//! whatever is sent, and the logs name the real client, never one a header claims.

use std::collections::BTreeSet;

use crate::helpers::{cookie_value, input_value, TestApp};
use crate::secrets::{cli, Server};

/// A small seeded generator, so a failing run can be replayed from the printed seed.
struct XorShift(u64);

impl XorShift {
    fn seeded() -> Self {
        let mut seed = [0_u8; 8];
        getrandom::getrandom(&mut seed).unwrap();
        let seed = u64::from_le_bytes(seed) | 1;
        eprintln!("random requests seeded with {seed}");
        XorShift(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn word(&mut self, alphabet: &[u8], min: usize, max: usize) -> String {
        let len = min + self.below(max - min + 1);
        (0..len)
            .map(|_| alphabet[self.below(alphabet.len())] as char)
            .collect()
    }
}

const STANDARD_METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// A method as a client may send it: mostly made-up tokens, sometimes a standard one.
fn random_method(rng: &mut XorShift) -> String {
    if rng.below(4) == 0 {
        return STANDARD_METHODS[rng.below(STANDARD_METHODS.len())].to_owned();
    }
    loop {
        let m = rng.word(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ_-", 1, 12);
        if !STANDARD_METHODS.contains(&m.as_str()) && m != "CONNECT" && m != "TRACE" {
            return m;
        }
    }
}

/// A path no route serves: under the root, the API or the static files, with a query.
fn random_path(rng: &mut XorShift) -> String {
    let segment = |rng: &mut XorShift| rng.word(b"abcdefghijklmnopqrstuvwxyz0123456789-._~", 6, 16);
    let prefix = ["", "/api/v1", "/static"][rng.below(3)];
    let depth = if prefix == "/static" {
        1
    } else {
        1 + rng.below(3)
    };
    let mut path = prefix.to_owned();
    for _ in 0..depth {
        path.push('/');
        path.push_str(&segment(rng));
    }
    format!("{path}?q={}", segment(rng))
}

/// The label sets of every series in the exposition (values left out).
async fn series(app: &TestApp) -> BTreeSet<String> {
    let text = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.rsplit_once(' ').map_or(l, |(name, _)| name).to_owned())
        .collect()
}

async fn send(app: &TestApp, method: &str, path: &str) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    app.client
        .request(method, app.url(path))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_hundred_requests_with_random_methods_and_paths_add_no_series_to_metrics() {
    let app = TestApp::spawn().await;
    let mut rng = XorShift::seeded();
    // One request per method class and path kind first: the closed set of label values these
    // requests can land on (each standard method, `other`; `unmatched`, `/static/{file}`).
    for method in STANDARD_METHODS.iter().copied().chain(["MADEUP"]) {
        for path in ["/warm-up/x", "/api/v1/warm-up", "/static/warm-up.js"] {
            send(&app, method, path).await;
        }
    }
    // The scrape itself is a series too.
    series(&app).await;
    let before = series(&app).await;

    let mut sent = Vec::new();
    for _ in 0..100 {
        let (method, path) = (random_method(&mut rng), random_path(&mut rng));
        send(&app, &method, &path).await;
        sent.push((method, path));
    }
    let after = series(&app).await;

    let added: Vec<_> = after.difference(&before).collect();
    assert!(added.is_empty(), "new series: {added:?}");
    assert!(
        after
            .iter()
            .any(|s| s.contains("method=\"other\",route=\"unmatched\"")),
        "made-up methods on unknown paths are counted as other/unmatched: {after:?}"
    );
    for (method, path) in &sent {
        let path = path.split('?').next().unwrap();
        assert!(
            !after
                .iter()
                .any(|s| (!STANDARD_METHODS.contains(&method.as_str())
                    && s.contains(&format!("\"{method}\"")))
                    || s.contains(path)),
            "{method} {path} shows in a label"
        );
    }
}

/// The log lines of a run, parsed.
fn json_lines(log: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(log)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Every `http.client_ip` a log line carries, in its current span or any parent span.
fn client_ips(line: &serde_json::Value) -> Vec<String> {
    let mut spans: Vec<&serde_json::Value> = vec![&line["span"]];
    if let Some(all) = line["spans"].as_array() {
        spans.extend(all);
    }
    spans
        .into_iter()
        .filter_map(|s| s["http.client_ip"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_forged_x_forwarded_for_from_an_untrusted_peer_appears_nowhere_in_the_logs() {
    const FORGED: &str = "6.6.6.6";
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("h.db").display());
    let added = cli(
        &db,
        &[
            "user",
            "add",
            "alice",
            "--role",
            "admin",
            "--password-stdin",
        ],
        Some("a perfectly fine password\n"),
    );
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    // No trusted_proxies: the loopback peer is the client, whatever the headers say.
    let server = Server::start(dir.path(), &db, "serve").await;
    let base = server.base.clone();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let forged = |rb: reqwest::RequestBuilder| {
        rb.header("X-Forwarded-For", FORGED)
            .header(
                "Forwarded",
                format!("for={FORGED};proto=https;host=evil.example"),
            )
            .header("X-Real-IP", FORGED)
            .header("X-Forwarded-Host", "evil.example")
            .header("X-Forwarded-Proto", "https")
    };

    let res = forged(http.get(format!("{base}/login")))
        .send()
        .await
        .unwrap();
    let cookie = cookie_value(res.headers(), "headroom_login_csrf").unwrap();
    let token = input_value(&res.text().await.unwrap(), "csrf_token").unwrap();
    // A failed and a successful sign-in (the audited, throttled path), a refused CSRF check,
    // a page, a 404 and a probe.
    for password in ["a wrong password", "a perfectly fine password"] {
        let res = forged(http.post(format!("{base}/login")))
            .header("Cookie", format!("headroom_login_csrf={cookie}"))
            .form(&[
                ("username", "alice"),
                ("password", password),
                ("csrf_token", &token),
            ])
            .send()
            .await
            .unwrap();
        assert!(
            [401, 303].contains(&res.status().as_u16()),
            "{}",
            res.status()
        );
    }
    let res = forged(http.post(format!("{base}/login")))
        .form(&[("username", "alice"), ("password", "x")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    for path in ["/", "/no/such/page", "/healthz"] {
        forged(http.get(format!("{base}{path}")))
            .send()
            .await
            .unwrap();
    }

    let (_, log) = server.stop().await;
    let lines = json_lines(&log);
    let text = String::from_utf8_lossy(&log);
    assert!(
        !text.contains(FORGED),
        "the forged address is in the logs:\n{}",
        text.lines()
            .filter(|l| l.contains(FORGED))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        !text.contains("evil.example"),
        "a forged host is in the logs"
    );
    let ips: Vec<String> = lines.iter().flat_map(client_ips).collect();
    assert!(
        ips.len() >= 5,
        "request spans carry http.client_ip (found {} lines with it)",
        ips.len()
    );
    assert!(
        ips.iter().all(|ip| ip == "127.0.0.1"),
        "every request names the real peer: {ips:?}"
    );
    // The audit entries name the same client as the logs.
    let pool = headroom::db::connect(&db).await.unwrap();
    let details: Vec<String> = sqlx::query_scalar(
        "SELECT details FROM audit_log WHERE action LIKE 'auth.login_%' ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(details.len() >= 2, "{details:?}");
    for d in &details {
        let v: serde_json::Value = serde_json::from_str(d).unwrap();
        assert_eq!(v["client_addr"], "127.0.0.1", "{d}");
    }
}
