//! headroom's entry point: parse the command line, load settings, dispatch.

use std::process::ExitCode;

use clap::Parser;
use headroom::cli::{Cli, Command};
use headroom::config::{Overrides, Settings};
use headroom::{commands, db, telemetry};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let bind = match &cli.command {
        Command::Serve(a) | Command::Demo(a) => a.bind.clone(),
        _ => None,
    };
    let flags = Overrides {
        bind,
        database_url: cli.database_url.clone(),
        log_format: cli.log_format,
    };
    let mut base = Settings::default();
    if matches!(cli.command, Command::Demo(_)) {
        // The demo keeps its own file so it never touches a production database by accident.
        base.database_url = "sqlite:headroom-demo.db".into();
        base.simulated_provider = true;
    }
    let env = |k: &str| std::env::var(k).ok();
    let settings = Settings::load(base, cli.config.as_deref(), &env, &flags)?;
    telemetry::init(settings.log_format);
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
        Command::User(cmd) => commands::user(&pool, cmd).await?,
        Command::Token(cmd) => commands::token(&pool, cmd).await?,
        Command::Audit(cmd) => commands::audit(&pool, cmd).await?,
    })
}
