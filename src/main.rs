//! headroom's entry point: parse the command line, load settings, dispatch.

use std::process::ExitCode;

use clap::Parser;
use headroom::cli::{Cli, Command};
use headroom::config::{Overrides, Settings};
use headroom::{commands, db, telemetry};

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
