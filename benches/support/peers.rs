//! The real alternatives a benchmark measures headroom against, run as their own processes
//! on loopback: nginx serving the very bytes headroom answered, wrk as the load generator
//! for both, and Prometheus answering `query_range` over a TSDB that promtool built. Each is
//! Debian's package; a bench without them prints how to install them and exits 0 (nothing was
//! measured, so nothing was missed).

// Each bench includes this file and uses only its own peers.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Exits 0 with a message unless every program in `needed` (name, Debian package) is on PATH.
pub fn require(needed: &[(&str, &str)]) {
    let missing: Vec<&(&str, &str)> = needed
        .iter()
        .filter(|(program, _)| !on_path(program))
        .collect();
    if missing.is_empty() {
        return;
    }
    let mut packages: Vec<&str> = Vec::new();
    for (_, package) in &missing {
        // prometheus and promtool come in one package: name it once.
        if !packages.contains(package) {
            packages.push(package);
        }
    }
    println!(
        "skipped: {} not installed (apt-get install {})",
        missing
            .iter()
            .map(|(program, _)| *program)
            .collect::<Vec<_>>()
            .join(", "),
        packages.join(" ")
    );
    std::process::exit(0);
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| dir.join(program).is_file())
            || ["/usr/sbin", "/sbin"]
                .iter()
                .any(|dir| Path::new(dir).join(program).is_file())
    })
}

/// A loopback port free now (the OS's pick, released for the peer to bind).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("loopback port")
        .local_addr()
        .expect("address")
        .port()
}

/// nginx serving one file at `/`, stopped when dropped.
pub struct Nginx {
    child: Child,
    conf: PathBuf,
    prefix: PathBuf,
    pub port: u16,
}

impl Nginx {
    /// Starts nginx with `workers` worker processes in `dir` (its prefix: config, pid, logs,
    /// temp paths) serving `body` as `/` with `content_type`; waits until it answers.
    pub fn serve(dir: &Path, body: &[u8], content_type: &str, workers: usize) -> Nginx {
        let www = dir.join("www");
        std::fs::create_dir_all(&www).expect("nginx www dir");
        std::fs::write(www.join("index.html"), body).expect("page for nginx");
        // Workers run as `nobody` when nginx starts as root: they must read the page.
        open_to_all(dir);
        open_to_all(&www);
        open_to_all(&www.join("index.html"));
        let port = free_port();
        let d = dir.display();
        // What a user serving a static page would write: sendfile, keep-alive, no access log.
        let conf = format!(
            "daemon off;\nworker_processes {workers};\npid {d}/nginx.pid;\n\
             error_log {d}/error.log warn;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  sendfile on;\n  tcp_nopush on;\n\
             client_body_temp_path {d}/client_body;\n  proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n\
             scgi_temp_path {d}/scgi;\n\
             server {{\n    listen 127.0.0.1:{port};\n    root {d}/www;\n\
             location = / {{ default_type \"{content_type}\"; try_files /index.html =404; }}\n  }}\n}}\n"
        );
        let conf_path = dir.join("nginx.conf");
        std::fs::write(&conf_path, conf).expect("nginx.conf");
        let child = Command::new("nginx")
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .spawn()
            .expect("nginx starts");
        let nginx = Nginx {
            child,
            conf: conf_path,
            prefix: dir.to_owned(),
            port,
        };
        wait_for(port, "nginx");
        nginx
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // `-s stop` has the master stop its workers too; killing the master alone would
        // leave them serving.
        let stopped = Command::new("nginx")
            .arg("-p")
            .arg(&self.prefix)
            .arg("-c")
            .arg(&self.conf)
            .args(["-s", "stop"])
            .status()
            .is_ok_and(|s| s.success());
        if !stopped {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

#[cfg(unix)]
fn open_to_all(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = if path.is_dir() { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Builds TSDB blocks in `out` from the OpenMetrics file `input` (`promtool tsdb
/// create-blocks-from openmetrics`), none longer than `max_block` (a Prometheus duration);
/// promtool's listing of the blocks goes to `<out>.promtool.log`.
pub fn promtool_blocks(input: &Path, out: &Path, max_block: &str) {
    std::fs::create_dir_all(out).expect("TSDB dir");
    let log_path = out.with_extension("promtool.log");
    let log = std::fs::File::create(&log_path).expect("promtool log");
    let status = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(format!("--max-block-duration={max_block}"))
        .arg(input)
        .arg(out)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log handle"))
        .stderr(log)
        .status()
        .expect("promtool runs");
    assert!(
        status.success(),
        "promtool failed ({status}): see {}",
        log_path.display()
    );
}

/// Prometheus serving the TSDB at `tsdb` on loopback with no scrape targets, killed when
/// dropped (a panicking bench leaves no server behind).
pub struct Prometheus {
    child: Child,
    pub port: u16,
    /// Its standard output and error.
    pub log: PathBuf,
}

impl Prometheus {
    /// Starts Prometheus over `tsdb` (config and log in `dir`) keeping `retention` of samples,
    /// and waits (two minutes at most) until `/-/ready` answers 200: the blocks are loaded.
    pub fn serve(dir: &Path, tsdb: &Path, retention: &str) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            "global:\n  scrape_interval: 15s\nscrape_configs: []\n",
        )
        .expect("prometheus.yml");
        let log = dir.join("prometheus.log");
        let out = std::fs::File::create(&log).expect("prometheus log");
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", tsdb.display()))
            .arg(format!("--storage.tsdb.retention.time={retention}"))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log handle"))
            .stderr(out)
            .spawn()
            .expect("prometheus starts");
        let mut prometheus = Prometheus { child, port, log };
        prometheus.until_ready();
        prometheus
    }

    fn until_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("prometheus exited ({status}): see {}", self.log.display());
            }
            if http_status(self.port, "/-/ready") == Some(200) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus not ready after 2 minutes: see {}",
                self.log.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // One process, a throwaway TSDB: nothing to shut down gracefully.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The status code of `GET path` on loopback `port` (one HTTP/1.0 request), `None` when
/// nothing answers.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut head = [0_u8; 12];
    stream.read_exact(&mut head).ok()?;
    // "HTTP/1.1 200"
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// Waits (10 s at most) until something accepts connections on loopback `port`.
pub fn wait_for(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} not listening on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What one wrk run measured.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub rps: f64,
    pub p50: Duration,
    pub p99: Duration,
    pub requests: u64,
    /// Non-2xx/3xx answers and socket errors together.
    pub errors: u64,
}

/// Runs wrk (2 threads, `connections` keep-alive connections, `seconds`) against `url` with
/// `headers`, and reads its report.
pub fn wrk(url: &str, headers: &[String], connections: usize, seconds: u64) -> Load {
    let mut cmd = Command::new("wrk");
    cmd.args(["-t2", "--latency"])
        .arg(format!("-c{connections}"))
        .arg(format!("-d{seconds}s"));
    for h in headers {
        cmd.arg("-H").arg(h);
    }
    let out = cmd.arg(url).output().expect("wrk runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "wrk failed: {text}");
    parse_wrk(&text).unwrap_or_else(|| panic!("unreadable wrk report:\n{text}"))
}

fn parse_wrk(text: &str) -> Option<Load> {
    let mut rps = None;
    let mut p50 = None;
    let mut p99 = None;
    let mut requests = None;
    let mut errors = 0;
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Requests/sec:", v] => rps = v.parse().ok(),
            ["50%", v] => p50 = duration(v),
            ["99%", v] => p99 = duration(v),
            [n, "requests", "in", ..] => requests = n.parse().ok(),
            ["Non-2xx", "or", "3xx", "responses:", n] => errors += n.parse::<u64>().ok()?,
            ["Socket", "errors:", rest @ ..] => {
                // "connect 0, read 0, write 0, timeout 0"
                errors += rest
                    .iter()
                    .filter_map(|w| w.trim_end_matches(',').parse::<u64>().ok())
                    .sum::<u64>();
            }
            _ => {}
        }
    }
    Some(Load {
        rps: rps?,
        p50: p50?,
        p99: p99?,
        requests: requests?,
        errors,
    })
}

/// wrk's `7.30ms`, `812.00us`, `1.02s`.
fn duration(v: &str) -> Option<Duration> {
    let (number, scale) = if let Some(n) = v.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1.0)
    } else {
        return None;
    };
    Some(Duration::from_secs_f64(number.parse::<f64>().ok()? * scale))
}
