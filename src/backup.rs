//! `headroom backup FILE`: an online, consistent copy of the embedded SQLite database, taken
//! while the server runs, checked, and only then given its name.
//!
//! The copy is written to a hidden file beside `FILE`, created empty with mode 0600 first (the
//! database holds password and token hashes), flushed to disk, opened read-only and checked:
//! SQLite's integrity and foreign-key checks, and the audit chain walked from its first entry.
//! Then it is linked to `FILE`, which fails rather than overwrite anything that appeared
//! meanwhile, and the taking is recorded in the source's audit log. A copy that fails a check
//! is deleted and never named.
//! The source is opened as it is (`db::open_existing`): a backup never creates a database, and
//! never migrates one, so a backup taken with a newer binary before an upgrade is the old
//! state.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::Connection;

use crate::audit::{self, Action, NewEntry};
use crate::context::Ctx;
use crate::db;
use crate::domain::{Caller, FieldError, Role};
use crate::error::OpError;

/// What a finished backup holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The backup's absolute path.
    pub path: PathBuf,
    /// Its size on disk.
    pub bytes: u64,
    /// Entries in the copy's audit chain, all verified.
    pub audit_entries: u64,
    /// The newest migration the copy carries (a restore needs a binary at least this new).
    pub schema_version: i64,
    /// Whether the taking is in the source's audit log (not when the database is at another
    /// schema version than this binary's).
    pub recorded: bool,
    /// What went wrong after the backup was written and named: it is whole, but these need a
    /// person's attention (the audit record or the folder's flush failed).
    pub warnings: Vec<String>,
    /// From start to named.
    pub took: Duration,
}

/// Takes a backup of the database into `dest`, which must not exist yet (admin only; the
/// command line acts as the system).
#[tracing::instrument(skip_all, fields(backup.path = %dest.display()), err)]
pub async fn take(ctx: &Ctx, caller: &Caller, dest: &Path) -> Result<Taken, OpError> {
    caller.require(Role::Admin)?;
    let started = Instant::now();
    let dest = checked_destination(dest)?;
    let folder = dest.parent().unwrap_or(Path::new("/")).to_path_buf();
    let partial = Partial::create(&folder)?;
    {
        let mut conn = ctx.pool.acquire().await?;
        db::backup::vacuum_into(&mut conn, &partial.utf8).await?;
    }
    File::open(&partial.path)
        .and_then(|f| f.sync_all())
        .map_err(|e| anyhow::anyhow!("flushing {}: {e}", partial.path.display()))?;
    let (audit_entries, schema_version) = check_copy(&partial.path).await?;
    let bytes = std::fs::metadata(&partial.path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", partial.path.display()))?
        .len();
    partial.name_as(&dest)?;

    // Named: the backup is whole. What fails from here is reported, not fatal, so a timer
    // neither takes a second copy nor reads a good one as missing.
    let mut warnings = Vec::new();
    if let Err(e) = File::open(&folder).and_then(|f| f.sync_all()) {
        warnings.push(format!(
            "flushing the folder {} failed ({e}): the name may not survive a power cut",
            folder.display()
        ));
    }
    let recorded = schema_version == db::latest_migration();
    if recorded {
        if let Err(e) = record(ctx, caller, &dest, bytes, audit_entries, schema_version).await {
            warnings.push(format!("recording the backup in the audit log failed: {e}"));
        }
    }
    Ok(Taken {
        path: dest,
        bytes,
        audit_entries,
        schema_version,
        recorded,
        warnings,
        took: started.elapsed(),
    })
}

/// The taking, in the source's audit log. Only on a database at this binary's schema: one
/// it has not migrated yet (a backup before an upgrade) is left exactly as it was.
async fn record(
    ctx: &Ctx,
    caller: &Caller,
    dest: &Path,
    bytes: u64,
    audit_entries: u64,
    schema_version: i64,
) -> Result<(), OpError> {
    let mut tx = db::begin_write(&ctx.pool).await?;
    audit::append(
        &mut tx,
        ctx.clock.now(),
        NewEntry {
            actor: &caller.actor,
            action: Action::DatabaseBackedUp,
            target_kind: "backup",
            target_id: &dest.display().to_string(),
            details: json!({
                "bytes": bytes,
                "audit_entries": audit_entries,
                "schema_version": schema_version,
            }),
        },
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// `dest` made absolute, when it names a new file in an existing folder that only its owner
/// (this user or root) can change: in a folder others may rename files in, another user could
/// swap the copy while it is written and checked, and read it or plant their own. Public so
/// the command line checks it before it opens the database.
pub fn checked_destination(dest: &Path) -> Result<PathBuf, OpError> {
    let invalid = |rule: String| OpError::from(FieldError::new("file", rule));
    let text = dest
        .to_str()
        .ok_or_else(|| invalid("must be valid UTF-8".into()))?;
    let name = match dest.file_name() {
        Some(n) if !text.ends_with('/') => n.to_string_lossy(),
        _ => return Err(invalid("must name a file, not a folder".into())),
    };
    if text.chars().any(char::is_control) {
        return Err(invalid("must not contain control characters".into()));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(invalid(format!(
            "its name must be at most {MAX_NAME_BYTES} bytes"
        )));
    }
    if ["-journal", "-wal", "-shm"]
        .iter()
        .any(|s| name.ends_with(s))
    {
        return Err(invalid(
            "must not end in -journal, -wal or -shm: SQLite takes such a file for part of a \
             database and deletes it"
                .into(),
        ));
    }
    let dest =
        std::path::absolute(dest).map_err(|e| invalid(format!("cannot be made absolute ({e})")))?;
    // `symlink_metadata`: a dangling link is something there too. Only "not found" is free.
    match std::fs::symlink_metadata(&dest) {
        Ok(_) => {
            return Err(invalid(
                "already exists; a backup never overwrites a file".into(),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(invalid(format!("cannot be checked ({e})"))),
    }
    let folder = dest.parent().unwrap_or(Path::new("/"));
    let meta = std::fs::metadata(folder)
        .ok()
        .filter(std::fs::Metadata::is_dir)
        .ok_or_else(|| invalid("its folder does not exist or is not a folder".into()))?;
    if let Some(rule) = folder_rule_broken(meta.mode(), meta.uid(), effective_uid()?) {
        return Err(invalid(rule.into()));
    }
    Ok(dest)
}

/// A backup file's name fits in one path component with room for nothing else.
const MAX_NAME_BYTES: usize = 255;

/// Which rule a destination folder with permission bits `mode`, owned by `owner`, breaks for
/// user `me`, if any: others must not be able to rename what is in it (group or world
/// writable needs the sticky bit), and it must be `me`'s or root's (who else could loosen it).
fn folder_rule_broken(mode: u32, owner: u32, me: u32) -> Option<&'static str> {
    const STICKY: u32 = 0o1000;
    if mode & 0o022 != 0 && mode & STICKY == 0 {
        return Some(
            "its folder can be changed by other users (group or world writable without the \
             sticky bit); use a folder only you can write to",
        );
    }
    if owner != me && owner != 0 {
        return Some("its folder belongs to another user; use a folder of your own");
    }
    None
}

/// This process's effective user id: the owner of its own `/proc/self` (no libc call needed).
fn effective_uid() -> Result<u32, OpError> {
    Ok(std::fs::metadata("/proc/self")
        .map_err(|e| anyhow::anyhow!("reading /proc/self: {e}"))?
        .uid())
}

/// Opens the copy read-only and checks it: SQLite's integrity and foreign-key checks, then
/// the audit chain. Returns the chain's length and the copy's schema version.
async fn check_copy(path: &Path) -> Result<(u64, i64), OpError> {
    let mut copy = db::backup::open_copy(path).await?;
    let problems = db::backup::problems(&mut copy).await?;
    if !problems.is_empty() {
        return Err(anyhow::anyhow!("the copy is not sound: {}", problems.join("; ")).into());
    }
    let schema_version = db::backup::schema_version(&mut copy).await?;
    let verified = audit::verify_connection(&mut copy)
        .await?
        .map_err(|broken| anyhow::anyhow!("the copy's audit chain is broken: {broken}"))?;
    copy.close().await?;
    Ok((verified.entries, schema_version))
}

/// The copy while it is written and checked: `copy.db` in a private folder made for it
/// (`.headroom-backup-<random>`, mode 0700) inside the destination's folder, so SQLite's
/// journal beside it and the copy itself are out of every other user's reach, whatever they
/// may create in the destination folder. Removed unless it was named. A backup killed outright
/// (SIGKILL, power cut) leaves the private folder behind; `headroom backup` removes it on
/// SIGINT and SIGTERM.
struct Partial {
    folder: PathBuf,
    path: PathBuf,
    /// The same path as text, for SQLite (the destination was checked to be UTF-8).
    utf8: String,
    named: bool,
}

impl Partial {
    /// Makes the private folder, and in it the copy's file, empty and readable by its owner
    /// only, before SQLite writes into it.
    fn create(folder: &Path) -> Result<Self, OpError> {
        let cannot = |e: std::io::Error| {
            OpError::from(FieldError::new(
                "file",
                format!("cannot create a file in its folder ({e})"),
            ))
        };
        let private = folder.join(format!(".headroom-backup-{}", random_suffix()?));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&private)
            .map_err(cannot)?;
        let path = private.join("copy.db");
        let partial = Self {
            folder: private,
            utf8: path.to_string_lossy().into_owned(),
            path,
            named: false,
        };
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial.path)
            .map_err(cannot)?;
        Ok(partial)
    }

    /// Links the checked copy to `dest`, refused if `dest` appeared meanwhile (a rename
    /// would replace it). Needs a file system with hard links (not FAT).
    fn name_as(mut self, dest: &Path) -> Result<(), OpError> {
        std::fs::hard_link(&self.path, dest).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                OpError::from(FieldError::new(
                    "file",
                    "already exists; a backup never overwrites a file",
                ))
            } else {
                anyhow::anyhow!("naming the backup {}: {e}", dest.display()).into()
            }
        })?;
        self.named = true;
        self.remove();
        Ok(())
    }

    fn remove(&self) {
        db::backup::remove_copy(&self.path);
        let _ = std::fs::remove_dir(&self.folder);
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.named {
            self.remove();
        }
    }
}

/// Twelve random `[a-z0-9]`, to name a partial copy nobody can guess ahead.
fn random_suffix() -> anyhow::Result<String> {
    let mut b = [0_u8; 12];
    getrandom::getrandom(&mut b).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    Ok(b.iter()
        .map(|x| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[usize::from(x % 36)]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_others_can_rename_in_or_that_another_user_owns_is_refused() {
        let me = 1000;
        // Only its owner writes: fine, whoever of the two owns it.
        assert_eq!(folder_rule_broken(0o40700, me, me), None);
        assert_eq!(folder_rule_broken(0o40755, 0, me), None);
        // Others may write, but the sticky bit keeps them off what is not theirs.
        assert_eq!(folder_rule_broken(0o41777, 0, me), None);
        assert_eq!(folder_rule_broken(0o41770, me, me), None);
        // Group or world writable without it: refused.
        for mode in [0o40777, 0o40770, 0o40775, 0o40757, 0o40722] {
            let rule = folder_rule_broken(mode, me, me).unwrap();
            assert!(rule.contains("other users"), "{mode:o}: {rule}");
        }
        // Someone else's, even private: they could open it up at any moment.
        assert!(folder_rule_broken(0o40700, 1001, me)
            .unwrap()
            .contains("another user"));
    }
}
