//! Template rendering in a child process. A tera template is a small program: loops, string
//! building and deep nesting can take unbounded time, memory or stack, and neither can be
//! interrupted inside a thread. So jobs run in `headroom render-worker` processes with an empty
//! environment (nothing of the server's to read), limits on their address space and CPU time,
//! and a wall-clock deadline per job after which the parent kills the process. A template that
//! overruns any of these ends that process, never the server.
//!
//! Starting a process costs more than a render, so workers are started ahead and kept warm in
//! a pool (`pool`), each doing one job at a time. A worker builds a fresh engine for every job
//! (`sandbox::run_parsed`), so nothing of one template's render or its data is left for the
//! next; it keeps only the parse of the last few template texts (`sandbox::Parsed`).
//!
//! The protocol is framed, the same both ways: a big-endian `u32` length, then that many bytes
//! of JSON. The parent writes a `sandbox::Job`, the worker answers one `sandbox::Outcome`, and
//! so on until the parent closes the worker's stdin; the worker then exits. This module is the
//! worker's side and what both sides share; `pool` is the parent's.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use super::sandbox::{self, Job};

/// The argument that turns the binary into a render worker (checked before anything else
/// starts, so a worker costs a process start and nothing more).
pub const WORKER_ARG: &str = "render-worker";

/// Address space a worker may map: far more than any real template needs, little enough that
/// a string-doubling template fails inside the worker instead of pushing the host into swap.
const ADDRESS_SPACE_BYTES: u64 = 1024 * 1024 * 1024;

/// CPU seconds a worker may use in its whole life: a backstop should the parent die before a
/// deadline fires. The pool retires a worker once its jobs have taken half of it
/// (`pool::CPU_BUDGET`), so every job still has at least 5 s, what a process of its own had.
pub(super) const CPU_SECONDS: u64 = 10;

/// Largest job a worker reads (the template and its contexts are far smaller).
const MAX_JOB_BYTES: u32 = 8 * 1024 * 1024;

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

/// `json` as one frame: its length as a big-endian `u32`, then the bytes.
pub(super) fn frame(json: &[u8]) -> Vec<u8> {
    let len = u32::try_from(json.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(4 + json.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(json);
    out
}

/// The next frame's bytes, or `None` when the input ends between frames (the parent is done).
fn read_frame(input: &mut impl Read, max: u32) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0_u8; 4];
    match input.read_exact(&mut len) {
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        r => r?,
    }
    let len = u32::from_be_bytes(len);
    if len > max {
        return Err(std::io::Error::other(format!(
            "a job of {len} bytes is over the {max}-byte limit"
        )));
    }
    let mut bytes = vec![0; len as usize];
    input.read_exact(&mut bytes)?;
    Ok(Some(bytes))
}

/// The worker's side: limits itself, then answers jobs from stdin on stdout until stdin ends.
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
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    let mut parsed = sandbox::Parsed::default();
    loop {
        let bytes = match read_frame(&mut input, MAX_JOB_BYTES) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("render worker: reading a job: {e}");
                return ExitCode::FAILURE;
            }
        };
        let job: Job = match serde_json::from_slice(&bytes) {
            Ok(j) => j,
            Err(e) => {
                eprintln!("render worker: unreadable job: {e}");
                return ExitCode::FAILURE;
            }
        };
        // A fresh engine per job: `run_parsed` builds its own tera and drops it (only the
        // parse of a body seen before is kept, `sandbox::Parsed`).
        let outcome = sandbox::run_parsed(&job, &mut parsed);
        let written = serde_json::to_vec(&outcome)
            .map_err(std::io::Error::from)
            .and_then(|json| output.write_all(&frame(&json)))
            .and_then(|()| output.flush());
        if let Err(e) = written {
            eprintln!("render worker: writing the outcome: {e}");
            return ExitCode::FAILURE;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_read_back_as_written_and_end_cleanly_between_frames() {
        let mut stream = frame(b"{\"a\":1}");
        stream.extend(frame(b""));
        let mut input = stream.as_slice();
        assert_eq!(read_frame(&mut input, 100).unwrap().unwrap(), b"{\"a\":1}");
        assert_eq!(read_frame(&mut input, 100).unwrap().unwrap(), b"");
        assert_eq!(read_frame(&mut input, 100).unwrap(), None);
    }

    #[test]
    fn a_frame_over_the_limit_or_cut_short_is_an_error() {
        assert!(read_frame(&mut frame(&[b'x'; 101]).as_slice(), 100).is_err());
        let cut = frame(b"abcdef");
        assert!(read_frame(&mut &cut[..6], 100).is_err());
    }
}
