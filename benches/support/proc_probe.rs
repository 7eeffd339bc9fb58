//! What a soak watches of a running process from outside, through `/proc` (Linux only): its
//! resident memory, open file descriptors, threads and children (the render workers), plus
//! the sizes of its SQLite database and write-ahead log.

use std::path::Path;

/// One look at a process and the files next to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Probe {
    /// `VmRSS` of the process itself, in KiB.
    pub rss_kib: u64,
    /// The part of it that is file-backed (`RssFile`), in KiB: mostly the binary's own code,
    /// paged in as paths are first taken. The rest is what the process allocated.
    pub rss_file_kib: u64,
    /// Entries of `/proc/PID/fd`.
    pub open_fds: u64,
    /// Entries of `/proc/PID/task`: glibc gives a new thread an arena of its own until it has
    /// eight per core, so a thread count that grows late is memory that grows late.
    pub threads: u64,
    /// Direct children alive now (render workers).
    pub children: u64,
    /// `VmRSS` of those children together, in KiB.
    pub children_rss_kib: u64,
    /// Bytes of the database's `-wal` file (0 while there is none).
    pub wal_bytes: u64,
    /// Bytes of the database file itself.
    pub db_bytes: u64,
}

/// Reads the process `pid` and the sizes of the database `db` and its `-wal` file; `None`
/// once the process is gone.
pub fn probe(pid: u32, db: &Path) -> Option<Probe> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kib = status_kib(&status, "VmRSS:")?;
    let rss_file_kib = status_kib(&status, "RssFile:").unwrap_or(0);
    let open_fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.count() as u64;
    let children = children(pid);
    let children_rss_kib = children.iter().filter_map(|c| rss_kib_of(*c)).sum();
    Some(Probe {
        rss_kib,
        rss_file_kib,
        open_fds,
        threads,
        children: children.len() as u64,
        children_rss_kib,
        wal_bytes: size(&db.with_extension("db-wal")),
        db_bytes: size(db),
    })
}

fn size(file: &Path) -> u64 {
    std::fs::metadata(file).map_or(0, |m| m.len())
}

/// `VmRSS` from `/proc/PID/status` (absent for a zombie, which holds no memory).
fn rss_kib_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status_kib(&status, "VmRSS:")
}

/// A `kB` field of `/proc/PID/status`.
fn status_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Children of every thread of `pid` (a child belongs to the thread that started it).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}
