//! What each CLI subcommand does (main.rs only dispatches).

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;

use sqlx::AnyPool;

use crate::audit;
use crate::auth::tokens::{self, NewTokenInput};
use crate::auth::users::{self, NewUserInput};
use crate::auth::Caller;
use crate::cli::{AuditCommand, ExportFormat, TokenCommand, UserCommand};
use crate::config::{Loaded, Settings};
use crate::context::Ctx;
use crate::domain::{Clock, SystemClock};
use crate::error::OpError;
use crate::startup::Application;

fn report(e: OpError) -> ExitCode {
    match e {
        OpError::Invalid(errors) => {
            for err in &errors.0 {
                eprintln!("error: {}: {}", err.field, err.message);
            }
            ExitCode::from(2)
        }
        other => {
            eprintln!("error: {other:#}");
            ExitCode::FAILURE
        }
    }
}

/// `headroom serve` (and the server half of `demo`): runs until SIGINT/SIGTERM; the
/// application starts and stops its own background loops.
pub async fn serve(settings: Settings, pool: AnyPool, demo: bool) -> anyhow::Result<()> {
    // The demo's release server is bound first: the clients built with the application
    // allow-list exactly its address.
    let release = if demo {
        Some(crate::sim::release::ReleaseServer::bind().await?)
    } else {
        None
    };
    let settings = match &release {
        Some(release) => crate::sim::demo::simulated_only(settings, release)?,
        None => settings,
    };
    // Before any loop starts to take leases.
    crate::leases::check_clock(&pool, settings.lease).await?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let mut app = Application::bind(settings, pool, clock).await?;
    if let Some(release) = release {
        app.seed_demo(release).await?;
        tracing::info!(
            port = app.port(),
            "headroom is listening (demo: simulated provider only; HETZNER_API_TOKEN and \
             HETZNER_API_TOKEN_FILE are ignored)"
        );
    } else {
        tracing::info!(port = app.port(), "headroom is listening");
    }
    app.run_until_stopped().await?;
    tracing::info!("headroom stopped");
    Ok(())
}

/// `headroom settings`: every key, where its value came from and the value (secrets only
/// `set`/`unset`), one line each, aligned for reading and splittable on whitespace.
pub fn settings(loaded: &Loaded, out: &mut dyn Write) -> std::io::Result<()> {
    let width = loaded
        .effective
        .iter()
        .map(|e| e.key.len())
        .max()
        .unwrap_or(0);
    writeln!(out, "{:<width$}  {:<7}  value", "key", "source")?;
    for e in &loaded.effective {
        writeln!(
            out,
            "{:<width$}  {:<7}  {}",
            e.key,
            e.source.as_str(),
            e.value
        )?;
    }
    out.flush()
}

/// `headroom user …`
pub async fn user(ctx: &Ctx, cmd: UserCommand) -> anyhow::Result<ExitCode> {
    let caller = Caller::system();
    let result = match cmd {
        UserCommand::Add {
            name,
            role,
            password_stdin: _,
        } => {
            let mut password = String::new();
            std::io::stdin().lock().read_line(&mut password)?;
            let password = password.trim_end_matches(['\n', '\r']).to_owned();
            users::create_user(
                ctx,
                &caller,
                &NewUserInput {
                    username: name,
                    role,
                    password,
                },
            )
            .await
            .map(|u| println!("created {} ({})", u.username, u.role))
        }
        UserCommand::List => users::list_users(ctx, &caller).await.map(|users| {
            println!("{:<24} {:<9} {:<8} created", "user", "role", "state");
            for u in users {
                let state = if u.disabled { "disabled" } else { "active" };
                println!(
                    "{:<24} {:<9} {:<8} {}",
                    u.username,
                    u.role,
                    state,
                    crate::domain::clock::format_utc(u.created_at)
                );
            }
        }),
        UserCommand::SetRole { name, role } => users::set_role(ctx, &caller, &name, &role)
            .await
            .map(|u| println!("{} is now {}", u.username, u.role)),
        UserCommand::Disable { name } => users::set_disabled(ctx, &caller, &name, true)
            .await
            .map(|u| println!("{} disabled", u.username)),
    };
    Ok(result.map_or_else(report, |()| ExitCode::SUCCESS))
}

/// `headroom token create`
pub async fn token(ctx: &Ctx, cmd: TokenCommand) -> anyhow::Result<ExitCode> {
    let TokenCommand::Create { name, label } = cmd;
    let input = NewTokenInput {
        username: name,
        label,
    };
    match tokens::create_token(ctx, &Caller::system(), &input).await {
        Ok((token, row)) => {
            eprintln!(
                "token {} for {} created; it is shown only once:",
                row.id, row.username
            );
            println!("{token}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(report(e)),
    }
}

/// `headroom backup FILE`: the destination is checked before the database is even opened
/// (a refusal touches nothing), then the backup runs until done or until SIGINT/SIGTERM, which
/// drop it so its private folder is removed. One line says what the copy holds, or why there
/// is none.
pub async fn backup(settings: Settings, file: &std::path::Path) -> anyhow::Result<ExitCode> {
    if let Err(e) = crate::backup::checked_destination(file) {
        return Ok(report(e));
    }
    let pool = crate::db::open_existing(&settings.database_url).await?;
    let ctx = Ctx::build(settings, pool, Arc::new(SystemClock))?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let system = Caller::system();
    let taken = tokio::select! {
        taken = crate::backup::take(&ctx, &system, file) => taken,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("backup interrupted: nothing was written");
            return Ok(ExitCode::from(130));
        }
        _ = terminate.recv() => {
            eprintln!("backup stopped: nothing was written");
            return Ok(ExitCode::from(143));
        }
    };
    match taken {
        Ok(t) => {
            println!(
                "backup {}: {} bytes, schema version {}, audit chain intact ({} entries), \
                 integrity ok, in {:.1} s",
                t.path.display(),
                t.bytes,
                t.schema_version,
                t.audit_entries,
                t.took.as_secs_f64()
            );
            if !t.recorded {
                println!(
                    "not recorded in its audit log: the database is at schema version {}, this \
                     binary's is {} (the binary that serves it records its backups)",
                    t.schema_version,
                    crate::db::latest_migration()
                );
            }
            for w in &t.warnings {
                eprintln!("warning: {w}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(report(e)),
    }
}

/// `headroom audit …`
pub async fn audit(ctx: &Ctx, cmd: AuditCommand) -> anyhow::Result<ExitCode> {
    let caller = Caller::system();
    match cmd {
        AuditCommand::Verify => match audit::verify(ctx, &caller).await? {
            Ok(v) => {
                println!("audit chain intact: {} entries", v.entries);
                Ok(ExitCode::SUCCESS)
            }
            Err(broken) => {
                eprintln!("audit chain BROKEN: {broken}");
                Ok(ExitCode::FAILURE)
            }
        },
        AuditCommand::Export { format } => {
            let format = match format {
                ExportFormat::Jsonl => crate::export::ExportFormat::Jsonl,
                ExportFormat::Csv => crate::export::ExportFormat::Csv,
            };
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let mut failure = None;
            audit::export(
                ctx,
                &caller,
                &audit::Filter::default(),
                format,
                async |chunk: String| match out.write_all(chunk.as_bytes()) {
                    Ok(()) => true,
                    Err(e) => {
                        failure = Some(e);
                        false
                    }
                },
            )
            .await?;
            if let Some(e) = failure {
                return Err(e.into());
            }
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
