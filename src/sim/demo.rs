//! Everything `headroom demo` adds to a plain `serve`: its own database file, the simulated
//! cloud, a ready machine config and one account per role with fresh passwords printed once.

use std::io::Write;

use crate::auth::users::{self, NewUserInput};
use crate::auth::AccountError;
use crate::auth::Caller;
use crate::config::PartialSettings;
use crate::context::Ctx;
use crate::domain::Role;
use crate::state::AppState;

/// The demo's accounts: one per role a newcomer wants to try.
pub const DEMO_USERS: [(&str, Role); 3] = [
    ("admin", Role::Admin),
    ("operator", Role::Operator),
    ("approver", Role::Approver),
];

/// Characters of generated passwords: letters and digits only, so a password can be pasted
/// into a shell command line or a login form without quoting (one starting with `-` once
/// read as an option).
const PASSWORD_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// Length of generated passwords: 20 of 36 symbols, about 103 bits.
const PASSWORD_LEN: usize = 20;

/// The demo's defaults layer: its own database file, so it never touches a production
/// database by accident. The file, variables and flags still apply over it.
pub fn default_settings() -> PartialSettings {
    PartialSettings {
        database_url: Some("sqlite:headroom-demo.db".into()),
        ..PartialSettings::defaults()
    }
}

/// One seeded account and its new password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// Login name.
    pub username: &'static str,
    /// Its role.
    pub role: Role,
    /// The password, new on every start.
    pub password: String,
}

/// Seeds the machine config and the accounts, then prints the credentials to stdout once.
pub async fn seed(state: &AppState, address: &str) -> anyhow::Result<()> {
    seed_config(state).await?;
    seed_fleet(state).await?;
    let credentials = seed_users(&state.ctx).await?;
    let mut out = std::io::stdout().lock();
    print_credentials(&mut out, address, &credentials)?;
    Ok(())
}

/// The demo's ready machine config (simulated provider), created once.
pub async fn seed_config(state: &AppState) -> anyhow::Result<()> {
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
    match crate::machines::machine_configs::create(&state.ctx, &Caller::system(), &input).await {
        Ok(_) => Ok(()),
        Err(crate::machines::MachinesError::Invalid(e))
            if e.for_field("name") == Some("is already taken") =>
        {
            Ok(())
        }
        Err(e) => Err(anyhow::anyhow!("seeding the demo machine config: {e}")),
    }
}

/// The demo fleet's name.
pub const DEMO_FLEET: &str = "demo";

/// The demo fleet `demo`, restored with `spare-fsn1` after one approval, created once (after
/// `seed_config`, whose config it names).
pub async fn seed_fleet(state: &AppState) -> anyhow::Result<()> {
    let input = crate::domain::fleet::FleetInput {
        name: DEMO_FLEET.into(),
        // The simulated yubaba fleet arrives with the scraper (issue 9) and will listen on
        // loopback; until then nothing scrapes this address, and requests do not need it.
        endpoints: vec!["http://127.0.0.1:7480".into()],
        restore_machine_config: "spare-fsn1".into(),
        approvals_required: Some(serde_json::json!(1)),
        ..Default::default()
    };
    match crate::fleets::create(&state.ctx, &Caller::system(), &input).await {
        Ok(_) => Ok(()),
        Err(crate::fleets::FleetsError::Invalid(e)) if e.for_field("name").is_some() => Ok(()),
        Err(e) => Err(anyhow::anyhow!("seeding the demo fleet: {e}")),
    }
}

/// Creates the demo accounts, or re-enables them with their role and a fresh password.
pub async fn seed_users(ctx: &Ctx) -> anyhow::Result<Vec<Credential>> {
    let caller = Caller::system();
    let mut credentials = Vec::new();
    for (name, role) in DEMO_USERS {
        let password = random_password();
        let input = NewUserInput {
            username: name.into(),
            role: role.to_string(),
            password: password.clone(),
        };
        match users::create_user(ctx, &caller, &input).await {
            Ok(_) => {}
            Err(AccountError::Invalid(e)) if e.for_field("username").is_some() => {
                users::set_disabled(ctx, &caller, name, false).await?;
                users::set_role(ctx, &caller, name, role.as_str()).await?;
                users::reset_password(ctx, &caller, name, &password).await?;
            }
            Err(e) => return Err(anyhow::anyhow!("seeding {name}: {e}")),
        }
        credentials.push(Credential {
            username: name,
            role,
            password,
        });
    }
    Ok(credentials)
}

/// Writes where to sign in and the credentials table.
pub fn print_credentials(
    out: &mut dyn Write,
    address: &str,
    credentials: &[Credential],
) -> std::io::Result<()> {
    writeln!(
        out,
        "\nheadroom demo — open http://{address}/login and sign in as one of:\n"
    )?;
    writeln!(out, "  user      role      password (new on every start)")?;
    for c in credentials {
        writeln!(out, "  {:<9} {:<9} {}", c.username, c.role, c.password)?;
    }
    writeln!(out)?;
    out.flush()
}

/// A fresh random password of `PASSWORD_LEN` characters from `PASSWORD_ALPHABET` (`[a-z0-9]`,
/// so it never starts with `-` and pastes into a shell as one word).
pub fn random_password() -> String {
    // Bytes at or above the largest multiple of the alphabet's size are drawn again, so
    // every symbol is equally likely.
    let n = PASSWORD_ALPHABET.len();
    let unbiased = 256 - 256 % n;
    let mut out = String::with_capacity(PASSWORD_LEN);
    while out.len() < PASSWORD_LEN {
        let mut bytes = [0_u8; 32];
        getrandom::getrandom(&mut bytes).expect("the OS random source is available");
        for b in bytes
            .iter()
            .map(|b| usize::from(*b))
            .filter(|b| *b < unbiased)
        {
            if out.len() < PASSWORD_LEN {
                out.push(char::from(PASSWORD_ALPHABET[b % n]));
            }
        }
    }
    out
}

/// Fills the simulated cloud's catalogue, which the demo's machine config is checked against.
pub async fn fill_simulated_catalogue(ctx: &Ctx) -> anyhow::Result<()> {
    crate::machines::catalogue::refresh(
        ctx,
        &Caller::system(),
        crate::domain::machine::ProviderKind::Simulated,
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_passwords_use_only_lowercase_letters_and_digits() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..2_000 {
            let p = random_password();
            assert_eq!(p.len(), PASSWORD_LEN);
            assert!(
                p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()),
                "{p}"
            );
            seen.extend(p.bytes());
            assert!(
                crate::domain::password::NewPassword::parse_field("password", &p).is_ok(),
                "{p} is refused by the password rules"
            );
        }
        // Over 40,000 draws every symbol shows up, so none is unreachable.
        assert_eq!(seen.len(), PASSWORD_ALPHABET.len());
    }

    #[tokio::test]
    async fn seeding_twice_gives_the_same_accounts_fresh_passwords() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("demo.db").display());
        let pool = crate::db::connect(&url).await.unwrap();
        let ctx = Ctx::build(
            crate::config::Settings::default(),
            pool,
            std::sync::Arc::new(crate::domain::SystemClock),
        )
        .unwrap();
        let first = seed_users(&ctx).await.unwrap();
        let second = seed_users(&ctx).await.unwrap();
        let names = |c: &[Credential]| c.iter().map(|c| (c.username, c.role)).collect::<Vec<_>>();
        assert_eq!(names(&first), DEMO_USERS.to_vec());
        assert_eq!(names(&second), DEMO_USERS.to_vec());
        for (a, b) in first.iter().zip(&second) {
            assert_ne!(a.password, b.password);
        }
        let users = users::list_users(&ctx, &Caller::system()).await.unwrap();
        assert_eq!(users.len(), DEMO_USERS.len());
        let mut out = Vec::new();
        print_credentials(&mut out, "127.0.0.1:8080", &second).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("http://127.0.0.1:8080/login"), "{text}");
        for c in &second {
            assert!(text.contains(&c.password), "{text}");
        }
    }
}
