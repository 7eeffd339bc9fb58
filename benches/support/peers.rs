//! The real alternatives a benchmark measures headroom against, run as their own processes
//! on loopback: nginx serving the very bytes headroom answered, and wrk as the load generator
//! for both. Each is Debian's package; a bench without them prints how to install them and
//! exits 0 (nothing was measured, so nothing was missed).

use std::path::Path;
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
    let packages: Vec<&str> = missing.iter().map(|(_, package)| *package).collect();
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
    conf: std::path::PathBuf,
    prefix: std::path::PathBuf,
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
