//! headroom's entry point: parse the command line, load settings, dispatch.

use std::process::ExitCode;

use clap::Parser;
use headroom::cli::{Cli, Command};
use headroom::config::{self, PartialSettings};
use headroom::domain::database_url::Store;
use headroom::scraper::text::clean;
use headroom::{commands, db, sim, telemetry};

/// Characters of a failure's message printed at most: enough for any chain of ours, not for
/// megabytes a server might send.
const ERROR_CAP_CHARS: usize = 2000;

fn main() -> ExitCode {
    // A render worker is a child this binary starts for each template render: it must not
    // parse flags, read settings or start a runtime, so it is dispatched before all of that.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == headroom::cloud_init::worker::WORKER_ARG)
    {
        return headroom::cloud_init::worker::serve_stdio();
    }
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            // An error may carry text a remote server chose (a database's message): cleaned
            // like every fleet-supplied string, so it cannot move the cursor, forge a line or
            // reorder what the reader sees.
            eprintln!("error: {}", clean(&format!("{e:#}"), ERROR_CAP_CHARS));
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let demo = matches!(cli.command, Command::Demo(_));
    let bind = match &cli.command {
        Command::Serve(a) | Command::Demo(a) => a.bind.clone(),
        _ => None,
    };
    let flags = PartialSettings {
        bind,
        database_url: cli.database_url.clone(),
        log_format: cli.log_format,
        ..PartialSettings::default()
    };
    let defaults = if demo {
        sim::demo::default_settings()
    } else {
        PartialSettings::defaults()
    };
    if let Some(name) = config::variable_not_utf8(std::env::vars_os()) {
        anyhow::bail!("environment variable {name}: its value is not valid UTF-8");
    }
    let env = |k: &str| std::env::var(k).ok();
    // One loader for every command, so `settings` prints exactly what `serve` would use.
    let loaded = config::load(defaults, cli.config.as_deref(), &env, flags)?;
    if matches!(cli.command, Command::Settings) {
        commands::settings(&loaded, &mut std::io::stdout().lock())?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut settings = loaded.settings;
    settings.simulated_provider = demo;
    telemetry::init(settings.log_format);
    // A backup opens the database itself, as it is: it neither creates nor migrates one.
    if let Command::Backup { file } = &cli.command {
        if Store::of(&settings.database_url) == Ok(Store::Postgres) {
            anyhow::bail!(
                "headroom backup copies a SQLite database; back PostgreSQL up with pg_dump or \
                 its server's own backups (docs/operating.md)"
            );
        }
        return commands::backup(settings, file).await;
    }
    let pool = db::connect(&settings.database_url).await?;

    Ok(match cli.command {
        Command::Serve(_) => {
            commands::serve(settings, pool, false).await?;
            ExitCode::SUCCESS
        }
        Command::Demo(_) => {
            commands::serve(settings, pool, true).await?;
            ExitCode::SUCCESS
        }
        Command::Migrate => {
            println!("database {} is migrated", settings.database_url);
            ExitCode::SUCCESS
        }
        Command::User(cmd) => commands::user(&cli_ctx(settings, pool)?, cmd).await?,
        Command::Token(cmd) => commands::token(&cli_ctx(settings, pool)?, cmd).await?,
        Command::Audit(cmd) => commands::audit(&cli_ctx(settings, pool)?, cmd).await?,
        Command::Settings | Command::Backup { .. } => {
            unreachable!("answered before the database is opened")
        }
    })
}

/// The operations' context for a CLI command: the same as the server's, on the real clock.
fn cli_ctx(
    settings: headroom::config::Settings,
    pool: sqlx::AnyPool,
) -> anyhow::Result<headroom::context::Ctx> {
    headroom::context::Ctx::build(
        settings,
        pool,
        std::sync::Arc::new(headroom::domain::SystemClock),
    )
}
