//! Template rendering in a child process. A tera template is a small program: loops, string
//! building and deep nesting can take unbounded time, memory or stack, and neither can be
//! interrupted inside a thread. So each job runs in a fresh `headroom render-worker` process
//! with an empty environment (nothing of the server's to read), limits on its address space
//! and CPU time, and a wall-clock deadline after which the parent kills it. A template that
//! overruns any of these ends that process, never the server.
//!
//! The protocol is one JSON `sandbox::Job` on stdin and one JSON `sandbox::Outcome` on stdout.

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::sandbox::{self, Job, Outcome};

/// The argument that turns the binary into a render worker (checked before anything else
/// starts, so a worker costs a process start and nothing more).
pub const WORKER_ARG: &str = "render-worker";

/// Address space a worker may map: far more than any real template needs, little enough that
/// a string-doubling template fails inside the worker instead of pushing the host into swap.
const ADDRESS_SPACE_BYTES: u64 = 1024 * 1024 * 1024;

/// CPU seconds a worker may use: a backstop should the parent die before its deadline fires.
const CPU_SECONDS: u64 = 5;

/// Largest job a worker reads (the template and its contexts are far smaller).
const MAX_JOB_BYTES: u64 = 8 * 1024 * 1024;

/// Why a job produced no outcome.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerFailure {
    /// The deadline passed; the worker was killed.
    #[error("the template took longer than {} ms to render and was stopped", .0.as_millis())]
    TimedOut(Duration),
    /// The worker died: out of memory, out of stack, or out of CPU time.
    #[error("the renderer stopped before finishing ({0}); the template needs more memory, stack or time than allowed")]
    Died(String),
    /// The worker could not be started or answered something unreadable.
    #[error("the renderer could not be run: {0}")]
    Unavailable(String),
}

/// Runs `job` in a fresh worker process started from `program`, killed after `timeout`.
#[tracing::instrument(skip_all, fields(render.contexts = job.contexts.len()), err(level = "info"))]
pub async fn run_job(
    program: &Path,
    job: &Job,
    timeout: Duration,
) -> Result<Outcome, WorkerFailure> {
    let input = serde_json::to_vec(job).map_err(|e| WorkerFailure::Unavailable(e.to_string()))?;
    // JSON escaping can grow output several times over; anything beyond this is not ours.
    let max_answer =
        8 * (job.limits.output_bytes as u64) * (job.contexts.len() as u64 + 1) + 65_536;
    let mut child = tokio::process::Command::new(program)
        .arg(WORKER_ARG)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| WorkerFailure::Unavailable(format!("{}: {e}", program.display())))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");

    let exchange = async {
        // Write and read at once: a worker that answers early must not block on a full pipe.
        let write = async {
            let r = stdin.write_all(&input).await;
            drop(stdin);
            r
        };
        let mut answer = Vec::new();
        let mut diagnostics = Vec::new();
        let mut stdout = (&mut stdout).take(max_answer + 1);
        let read = stdout.read_to_end(&mut answer);
        let (w, r) = tokio::join!(write, read);
        if answer.len() as u64 > max_answer {
            // Reading stopped at the cap; the worker would wait on a full pipe until the
            // deadline. It has said too much already: end it now.
            let _ = child.start_kill();
        }
        // The worker writes a line or two to stderr at most, and only before it exits.
        let _ = (&mut stderr).take(4096).read_to_end(&mut diagnostics).await;
        let status = child.wait().await;
        (w, r, status, answer, diagnostics)
    };
    let finished = tokio::time::timeout(timeout, exchange).await;
    let (written, read, status, answer, diagnostics) = match finished {
        Ok(done) => done,
        Err(_) => {
            // `exchange` is gone with its borrow of `child`: kill and reap the worker here.
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(WorkerFailure::TimedOut(timeout));
        }
    };
    let status = status.map_err(|e| WorkerFailure::Unavailable(e.to_string()))?;
    if answer.len() as u64 > max_answer {
        return Err(WorkerFailure::Unavailable(
            "the worker's answer was larger than any render can be".into(),
        ));
    }
    if !status.success() {
        let why = match status.signal() {
            Some(sig) => format!("signal {sig}"),
            None => format!("exit status {}", status.code().unwrap_or(-1)),
        };
        let first_line = String::from_utf8_lossy(&diagnostics)
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(200)
            .collect::<String>();
        tracing::warn!(render.worker_status = %why, render.worker_said = %first_line, "render worker died");
        return Err(WorkerFailure::Died(why));
    }
    if written.is_err() || read.is_err() || answer.len() as u64 > max_answer {
        return Err(WorkerFailure::Unavailable(
            "the worker's answer was cut short or too large".into(),
        ));
    }
    serde_json::from_slice(&answer)
        .map_err(|e| WorkerFailure::Unavailable(format!("unreadable answer: {e}")))
}

/// Checks at start-up that `program` really is a render worker, so a misconfigured path fails
/// loudly once instead of as a finding on every render.
pub async fn probe(program: &Path) -> anyhow::Result<()> {
    let job = Job {
        body: "{{ hostname | yaml }}".into(),
        contexts: vec![serde_json::json!({"hostname": "ok"})],
        limits: sandbox::EngineLimits::default(),
    };
    match run_job(program, &job, Duration::from_secs(10)).await {
        Ok(Outcome::Rendered(r)) if r == [Ok("\"ok\"".to_owned())] => Ok(()),
        Ok(other) => anyhow::bail!(
            "render worker {} answered unexpectedly: {other:?}",
            program.display()
        ),
        Err(e) => anyhow::bail!("render worker {}: {e}", program.display()),
    }
}

/// The program to start workers from: the configured one, or this very executable. On Linux
/// that is `/proc/self/exe`, which stays the running binary even after an upgrade replaces the
/// file on disk, so a worker always speaks the server's protocol.
pub fn default_program(configured: Option<&Path>) -> anyhow::Result<PathBuf> {
    match configured {
        Some(p) => Ok(p.to_owned()),
        None if Path::new("/proc/self/exe").exists() => Ok(PathBuf::from("/proc/self/exe")),
        None => std::env::current_exe().map_err(|e| anyhow::anyhow!("locating headroom: {e}")),
    }
}

/// The worker's side: limits itself, reads one job from stdin, writes its outcome to stdout.
pub fn serve_stdio() -> ExitCode {
    // Failing to set a limit is not fatal for correctness, but is worth knowing about.
    if let Err(e) = rlimit::setrlimit(
        rlimit::Resource::AS,
        ADDRESS_SPACE_BYTES,
        ADDRESS_SPACE_BYTES,
    )
    .and_then(|()| rlimit::setrlimit(rlimit::Resource::CPU, CPU_SECONDS, CPU_SECONDS))
    {
        eprintln!("render worker: cannot set resource limits: {e}");
        return ExitCode::FAILURE;
    }
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().take(MAX_JOB_BYTES).read_to_end(&mut input) {
        eprintln!("render worker: reading the job: {e}");
        return ExitCode::FAILURE;
    }
    let job: Job = match serde_json::from_slice(&input) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("render worker: unreadable job: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = sandbox::run(&job);
    let mut out = std::io::stdout().lock();
    let written = serde_json::to_writer(&mut out, &outcome)
        .map_err(std::io::Error::from)
        .and_then(|()| out.flush());
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("render worker: writing the outcome: {e}");
            ExitCode::FAILURE
        }
    }
}
