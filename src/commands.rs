//! What each CLI subcommand does (main.rs only dispatches).

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use sqlx::SqlitePool;

use crate::auth::accounts::{self, AccountError, NewTokenInput, NewUserInput};
use crate::auth::{sessions, Caller};
use crate::cli::{AuditCommand, ExportFormat, TokenCommand, UserCommand};
use crate::config::Settings;
use crate::domain::{Clock, Role, SystemClock};
use crate::startup::Application;
use crate::{audit, db};

fn report(e: AccountError) -> ExitCode {
    match e {
        AccountError::Invalid(errors) => {
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

/// `headroom serve` (and the server half of `demo`): runs until SIGINT/SIGTERM, purging
/// expired sessions in the background.
pub async fn serve(settings: Settings, pool: SqlitePool, demo: bool) -> anyhow::Result<()> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let app = Application::build(settings, pool.clone(), clock.clone()).await?;
    if demo {
        seed_demo_config(app.state()).await?;
        seed_demo(&pool, &app.state().settings.bind).await?;
    }
    let life = sessions::Lifetimes {
        idle: app.state().settings.session_idle,
        absolute: app.state().settings.session_absolute,
    };
    tracing::info!(port = app.port(), "headroom is listening");
    let purge = async move {
        loop {
            tokio::time::sleep(Duration::from_secs(600)).await;
            match sessions::purge_expired(&pool, clock.now(), life).await {
                Ok(n) if n > 0 => tracing::info!(sessions.purged = n, "expired sessions removed"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "session purge failed"),
            }
        }
    };
    tokio::select! {
        r = app.run_until_stopped() => r?,
        () = purge => {}
    }
    tracing::info!("headroom stopped");
    Ok(())
}

/// The demo's ready machine config (simulated provider), created once.
pub async fn seed_demo_config(state: &crate::state::AppState) -> anyhow::Result<()> {
    let input = crate::domain::machine::MachineInput {
        name: "spare-fsn1".into(),
        provider: "simulated".into(),
        location: "fsn1".into(),
        server_type: "cx22".into(),
        image: "debian-12".into(),
        region: "eu-central".into(),
        zone: "fsn1-dc14".into(),
        mesh_tags: vec!["tag:spare".into()],
        labels: [("team".to_owned(), "infra".to_owned())]
            .into_iter()
            .collect(),
        yubaba_channel: "stable".into(),
        yubaba_url: "https://releases.yubaba.invalid/yubaba-1.4.2-x86_64.tar.gz".into(),
        yubaba_sha256: "4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10".into(),
        ..Default::default()
    };
    match crate::machines::machine_configs::create(state, &Caller::system(), &input).await {
        Ok(_) => Ok(()),
        Err(crate::machines::MachinesError::Invalid(e))
            if e.for_field("name") == Some("is already taken") =>
        {
            Ok(())
        }
        Err(e) => Err(anyhow::anyhow!("seeding the demo machine config: {e}")),
    }
}

/// The demo's accounts: one per role a newcomer wants to try.
pub const DEMO_USERS: [(&str, Role); 3] = [
    ("admin", Role::Admin),
    ("operator", Role::Operator),
    ("approver", Role::Approver),
];

/// Creates the demo accounts (or gives them fresh passwords) and prints the credentials once.
pub async fn seed_demo(pool: &SqlitePool, bind: &str) -> anyhow::Result<()> {
    let caller = Caller::system();
    let now = SystemClock.now();
    let mut lines = Vec::new();
    for (name, role) in DEMO_USERS {
        let password = random_password();
        let input = NewUserInput {
            username: name.into(),
            role: role.to_string(),
            password: password.clone(),
        };
        match accounts::create_user(pool, &caller, now, &input).await {
            Ok(_) => {}
            Err(AccountError::Invalid(e)) if e.for_field("username").is_some() => {
                accounts::set_disabled(pool, &caller, now, name, false).await?;
                accounts::set_role(pool, &caller, now, name, role.as_str()).await?;
                accounts::reset_password(pool, &caller, now, name, &password).await?;
            }
            Err(e) => return Err(anyhow::anyhow!("seeding {name}: {e}")),
        }
        lines.push(format!("  {name:<9} {role:<9} {password}"));
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "\nheadroom demo — open http://{bind}/login and sign in as one of:\n"
    )?;
    writeln!(out, "  user      role      password (new on every start)")?;
    for l in lines {
        writeln!(out, "{l}")?;
    }
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

fn random_password() -> String {
    // 20 characters from 32 unambiguous symbols: 100 bits.
    const ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789-";
    let mut bytes = [0_u8; 20];
    getrandom::getrandom(&mut bytes).expect("the OS random source is available");
    bytes
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

/// `headroom user …`
pub async fn user(pool: &SqlitePool, cmd: UserCommand) -> anyhow::Result<ExitCode> {
    let caller = Caller::system();
    let now = SystemClock.now();
    let result = match cmd {
        UserCommand::Add {
            name,
            role,
            password_stdin: _,
        } => {
            let mut password = String::new();
            std::io::stdin().lock().read_line(&mut password)?;
            let password = password.trim_end_matches(['\n', '\r']).to_owned();
            accounts::create_user(
                pool,
                &caller,
                now,
                &NewUserInput {
                    username: name,
                    role,
                    password,
                },
            )
            .await
            .map(|u| println!("created {} ({})", u.username, u.role))
        }
        UserCommand::List => accounts::list_users(pool, &caller).await.map(|users| {
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
        UserCommand::SetRole { name, role } => accounts::set_role(pool, &caller, now, &name, &role)
            .await
            .map(|u| println!("{} is now {}", u.username, u.role)),
        UserCommand::Disable { name } => accounts::set_disabled(pool, &caller, now, &name, true)
            .await
            .map(|u| println!("{} disabled", u.username)),
    };
    Ok(result.map_or_else(report, |()| ExitCode::SUCCESS))
}

/// `headroom token create`
pub async fn token(pool: &SqlitePool, cmd: TokenCommand) -> anyhow::Result<ExitCode> {
    let TokenCommand::Create { name, label } = cmd;
    let input = NewTokenInput {
        username: name,
        label,
    };
    match accounts::create_token(pool, &Caller::system(), SystemClock.now(), &input).await {
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

/// `headroom audit …`
pub async fn audit(pool: &SqlitePool, cmd: AuditCommand) -> anyhow::Result<ExitCode> {
    let mut conn = pool.acquire().await?;
    match cmd {
        AuditCommand::Verify => match audit::verify(&mut conn).await? {
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
            drop(conn);
            let format = match format {
                ExportFormat::Jsonl => audit::ExportFormat::Jsonl,
                ExportFormat::Csv => audit::ExportFormat::Csv,
            };
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let mut failure = None;
            audit::export(
                pool,
                &db::audit::AuditFilter::default(),
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
