//! The parent's side of the render workers (`worker`): a pool of warm worker processes, one
//! job at a time each, so a render costs a round trip over two pipes instead of a process
//! start.
//!
//! - **Size**: as many idle workers as the pool was given (the renderer gives one per core,
//!   like its permits). Probing the pool starts them all; a job that finds none idle starts
//!   one itself, and a worker handed back to a full pool is ended.
//! - **Failure**: a worker that passes its deadline, dies, answers garbage or more than the
//!   output cap allows, or breaks the framing is killed, and a replacement is started in the
//!   background so the next job finds a warm one. The job gets the failure, as it did when
//!   each job had a process of its own.
//! - **Retirement**: a worker is replaced after [`JOBS_PER_WORKER`] jobs, which bounds whatever
//!   a long-lived process might accumulate, and once its jobs have taken [`CPU_BUDGET`], half
//!   its lifetime CPU limit, so that limit keeps its meaning for a long-lived process.
//! - **Shutdown**: workers are `kill_on_drop`, and a worker exits when its stdin ends, which
//!   also happens when the server dies without dropping anything.
//!
//! Every job runs as a task on the runtime that built the pool (the server's main one), so the
//! workers' pipes belong to one runtime, and a caller that gives up (a closed connection) does
//! not cut a job in half: the job ends by its answer or its deadline and the worker goes back.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use super::sandbox::{Job, Outcome};
use super::worker::{self, WorkerFailure, CPU_SECONDS, WORKER_ARG};

/// Jobs one worker does before it is replaced: enough that its start is a rounding error
/// (about 2 ms per 1,000 renders), few enough that a slow leak in the engine or the allocator
/// never grows far.
pub const JOBS_PER_WORKER: u32 = 1000;

/// The wall-clock time a worker may spend on jobs, summed, before it is replaced: half its
/// lifetime CPU limit. A worker is single-threaded and idle between jobs, so its CPU time is at
/// most the wall-clock time of its jobs (plus its start of a few milliseconds). So any job
/// starts with at least half the limit (5 s, what a process of its own had) left: the CPU
/// limit never ends a worker for the work of earlier jobs, yet still stops a template that runs
/// away while nobody is watching (the server gone before its deadline fired).
pub const CPU_BUDGET: Duration = Duration::from_secs(CPU_SECONDS / 2);

/// Warm render workers started from one program.
#[derive(Debug)]
pub struct Pool {
    program: PathBuf,
    size: usize,
    idle: Mutex<Vec<Worker>>,
    /// Where jobs and worker starts run: the runtime that built the pool, when there was one.
    home: Option<tokio::runtime::Handle>,
}

/// One worker process and what it has done so far.
#[derive(Debug)]
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    stderr: ChildStderr,
    jobs: u32,
    busy: Duration,
}

/// Why an exchange with a worker did not bring an answer back.
enum Fault {
    /// The pipes closed or broke: the worker is gone or going.
    Closed,
    /// The answer's announced length is over what any render can produce.
    TooLarge,
}

impl Pool {
    /// A pool of up to `size` (at least 1) idle workers started from `program`. Nothing is
    /// started until the first job or [`Pool::probe`].
    pub fn new(program: PathBuf, size: usize) -> Arc<Self> {
        Arc::new(Self {
            program,
            size: size.max(1),
            idle: Mutex::default(),
            home: tokio::runtime::Handle::try_current().ok(),
        })
    }

    /// Fills the pool and renders a known template on one of its workers, so a program that is
    /// not a render worker fails loudly at start-up instead of as a finding on every render.
    pub async fn probe(self: &Arc<Self>) -> anyhow::Result<()> {
        let pool = self.clone();
        let filled = self
            .spawn(async move {
                while pool.idle_len() < pool.size {
                    let worker = Worker::start(&pool.program)?;
                    pool.lock().push(worker);
                }
                Ok(())
            })
            .await
            .unwrap_or_else(|e| Err(WorkerFailure::Unavailable(e.to_string())));
        if let Err(e) = filled {
            anyhow::bail!("render worker {}: {e}", self.program.display());
        }
        let job = Job {
            owner: "start-up probe".into(),
            body: "{{ hostname | yaml }}".into(),
            contexts: vec![serde_json::json!({"hostname": "ok"})],
            limits: super::sandbox::EngineLimits::default(),
        };
        match self.run(&job, Duration::from_secs(10)).await {
            Ok(Outcome::Rendered(r)) if r == [Ok("\"ok\"".to_owned())] => Ok(()),
            Ok(other) => anyhow::bail!(
                "render worker {} answered unexpectedly: {other:?}",
                self.program.display()
            ),
            Err(e) => anyhow::bail!("render worker {}: {e}", self.program.display()),
        }
    }

    /// Runs `job` on a warm worker (or a fresh one when none is idle), which is killed and
    /// replaced should it pass `deadline` or misbehave in any way.
    pub async fn run(
        self: &Arc<Self>,
        job: &Job,
        deadline: Duration,
    ) -> Result<Outcome, WorkerFailure> {
        self.run_holding(job, deadline, ()).await.0
    }

    /// Runs `job` as [`Pool::run`] does; `hold` (the caller's permit and per-person slot) is
    /// kept by the job's task until the worker is done and handed back with the outcome, so a
    /// caller that goes away frees neither while its worker still runs.
    #[tracing::instrument(skip_all, fields(render.contexts = job.contexts.len()))]
    pub async fn run_holding<H: Send + 'static>(
        self: &Arc<Self>,
        job: &Job,
        deadline: Duration,
        hold: H,
    ) -> (Result<Outcome, WorkerFailure>, Option<H>) {
        let json = match serde_json::to_vec(job) {
            Ok(json) => json,
            Err(e) => return (Err(WorkerFailure::Unavailable(e.to_string())), Some(hold)),
        };
        let input = worker::frame(&json);
        // JSON escaping can grow output several times over; anything beyond this is not ours.
        let max_answer =
            8 * (job.limits.output_bytes as u64) * (job.contexts.len() as u64 + 1) + 65_536;
        let pool = self.clone();
        self.spawn(async move {
            let outcome = pool.run_here(&input, max_answer, deadline).await;
            (outcome, hold)
        })
        .await
        .map_or_else(
            // The task panicked or its runtime is gone: `hold` went with it.
            |e| (Err(WorkerFailure::Unavailable(e.to_string())), None),
            |(outcome, hold)| (outcome, Some(hold)),
        )
    }

    /// The process ids of the idle workers (for tests and diagnostics).
    pub fn idle_workers(&self) -> Vec<u32> {
        self.lock().iter().filter_map(|w| w.child.id()).collect()
    }

    async fn run_here(
        self: &Arc<Self>,
        input: &[u8],
        max_answer: u64,
        deadline: Duration,
    ) -> Result<Outcome, WorkerFailure> {
        let mut worker = self.take()?;
        let started = Instant::now();
        let answer = tokio::time::timeout(deadline, worker.answer(input, max_answer)).await;
        worker.jobs += 1;
        worker.busy += started.elapsed();
        match answer {
            Ok(Ok(outcome)) => {
                self.give_back(worker);
                Ok(outcome)
            }
            Ok(Err(failure)) => {
                self.replace(worker);
                Err(failure)
            }
            Err(_) => {
                self.replace(worker);
                Err(WorkerFailure::TimedOut(deadline))
            }
        }
    }

    /// An idle worker, or a fresh one when none is.
    fn take(self: &Arc<Self>) -> Result<Worker, WorkerFailure> {
        loop {
            let Some(mut worker) = self.lock().pop() else {
                return Worker::start(&self.program);
            };
            // One that exited while idle (killed from outside) is not this job's failure.
            if matches!(worker.child.try_wait(), Ok(None)) {
                return Ok(worker);
            }
            self.replace(worker);
        }
    }

    /// Puts a worker that answered well back, unless it has done its share or the pool is full.
    fn give_back(self: &Arc<Self>, worker: Worker) {
        if worker.jobs >= JOBS_PER_WORKER || worker.busy >= CPU_BUDGET {
            self.replace(worker);
            return;
        }
        let mut idle = self.lock();
        if idle.len() < self.size {
            idle.push(worker);
        } else {
            drop(idle);
            worker.end();
        }
    }

    /// Ends `worker` and starts another in the background, so the next job finds it warm.
    fn replace(self: &Arc<Self>, worker: Worker) {
        worker.end();
        let pool = self.clone();
        self.spawn(async move {
            match Worker::start(&pool.program) {
                Ok(fresh) => pool.give_back(fresh),
                Err(e) => tracing::warn!(error = %e, "starting a render worker"),
            }
        });
    }

    fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.home {
            Some(home) => home.spawn(task),
            None => tokio::spawn(task),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Worker>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn idle_len(&self) -> usize {
        self.lock().len()
    }
}

impl Worker {
    /// Starts a worker: empty environment, cwd `/`; it sets its own rlimits before reading.
    fn start(program: &std::path::Path) -> Result<Worker, WorkerFailure> {
        let mut child = Command::new(program)
            .arg(WORKER_ARG)
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| WorkerFailure::Unavailable(format!("{}: {e}", program.display())))?;
        Ok(Worker {
            stdin: child.stdin.take().expect("piped stdin"),
            stdout: child.stdout.take().expect("piped stdout"),
            stderr: child.stderr.take().expect("piped stderr"),
            child,
            jobs: 0,
            busy: Duration::ZERO,
        })
    }

    /// Sends one job frame and reads the outcome; `Err` means this worker must go.
    async fn answer(&mut self, input: &[u8], max_answer: u64) -> Result<Outcome, WorkerFailure> {
        match self.exchange(input, max_answer).await {
            Ok(answer) => serde_json::from_slice(&answer)
                .map_err(|e| WorkerFailure::Unavailable(format!("unreadable answer: {e}"))),
            Err(Fault::TooLarge) => Err(WorkerFailure::Unavailable(
                "the worker's answer was larger than any render can be".into(),
            )),
            Err(Fault::Closed) => Err(self.cause_of_death().await),
        }
    }

    async fn exchange(&mut self, input: &[u8], max_answer: u64) -> Result<Vec<u8>, Fault> {
        let Worker { stdin, stdout, .. } = self;
        // Write and read at once: a worker that answers early must not block on a full pipe.
        let write = async {
            stdin.write_all(input).await.map_err(|_| Fault::Closed)?;
            stdin.flush().await.map_err(|_| Fault::Closed)
        };
        let read = async {
            let len = stdout.read_u32().await.map_err(|_| Fault::Closed)?;
            if u64::from(len) > max_answer {
                return Err(Fault::TooLarge);
            }
            let mut answer = vec![0; len as usize];
            stdout
                .read_exact(&mut answer)
                .await
                .map_err(|_| Fault::Closed)?;
            Ok(answer)
        };
        let ((), answer) = tokio::try_join!(write, read)?;
        Ok(answer)
    }

    /// What ended a worker whose pipes closed: its exit status and first line of stderr.
    async fn cause_of_death(&mut self) -> WorkerFailure {
        let status = match self.child.wait().await {
            Ok(s) => s,
            Err(e) => return WorkerFailure::Unavailable(e.to_string()),
        };
        let why = match status.signal() {
            Some(sig) => format!("signal {sig}"),
            None => format!("exit status {}", status.code().unwrap_or(-1)),
        };
        // The worker writes a line or two to stderr at most, and only before it exits.
        let mut said = Vec::new();
        let _ = (&mut self.stderr).take(4096).read_to_end(&mut said).await;
        let first_line: String = String::from_utf8_lossy(&said)
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(200)
            .collect();
        tracing::warn!(render.worker_status = %why, render.worker_said = %first_line, "render worker died");
        if status.success() {
            WorkerFailure::Unavailable("the worker stopped without answering".into())
        } else {
            WorkerFailure::Died(why)
        }
    }

    /// Kills the worker and reaps it in the background.
    fn end(mut self) {
        let _ = self.child.start_kill();
        tokio::spawn(async move {
            let _ = self.child.wait().await;
        });
    }
}
