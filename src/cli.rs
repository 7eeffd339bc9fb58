//! Command-line definitions (the commands README.md shows under "Running for real").

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// headroom: keep yubaba fleets' warm-spare headroom restored.
#[derive(Debug, Parser)]
#[command(name = "headroom", version, about)]
pub struct Cli {
    /// TOML settings file.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Database URL: sqlite:headroom.db, or postgres://… for `migrate` so far (beats
    /// HEADROOM_DATABASE_URL).
    #[arg(long, global = true, value_name = "URL")]
    pub database_url: Option<String>,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum)]
    pub log_format: Option<LogFormat>,
    #[command(subcommand)]
    pub command: Command,
}

/// Log formats live with the settings they are one of; the flag re-uses them.
pub use crate::config::LogFormat;

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the console (production).
    Serve(ServeArgs),
    /// Run the console with seeded users and simulated parts, for a first look.
    Demo(ServeArgs),
    /// Apply database migrations and exit.
    Migrate,
    /// Manage users.
    #[command(subcommand)]
    User(UserCommand),
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Check or export the audit log.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Write a checked copy of the database to FILE while the server runs (FILE must not
    /// exist; it is readable by its owner only).
    Backup {
        /// Where the copy goes, e.g. /var/backups/headroom-2026-12-07.db.
        file: std::path::PathBuf,
    },
    /// Print every effective setting, its value and where it came from.
    Settings,
}

/// Options of `serve` and `demo`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (beats HEADROOM_BIND).
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
}

/// `headroom user …`
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user; the password is read from standard input.
    Add {
        /// Login name.
        name: String,
        /// viewer, operator, approver or admin.
        #[arg(long)]
        role: String,
        /// Read the password from standard input (required: never on the command line).
        #[arg(long, required = true)]
        password_stdin: bool,
    },
    /// List users.
    List,
    /// Change a user's role.
    SetRole {
        /// Login name.
        name: String,
        /// viewer, operator, approver or admin.
        role: String,
    },
    /// Disable a user (their sessions end and their tokens stop working).
    Disable {
        /// Login name.
        name: String,
    },
}

/// `headroom token …`
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create an API token for a user and print it once.
    Create {
        /// The user the token acts as.
        name: String,
        /// What the token is for.
        #[arg(long, default_value = "cli")]
        label: String,
    },
}

/// `headroom audit …`
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Walk the hash chain; exit 0 only when it is intact.
    Verify,
    /// Write the whole log to standard output.
    Export {
        /// jsonl or csv.
        #[arg(long, value_enum, default_value = "jsonl")]
        format: ExportFormat,
    },
}

/// Export encodings of the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// One JSON object per line.
    Jsonl,
    /// RFC 4180 CSV with a header row.
    Csv,
}
