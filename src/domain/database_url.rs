//! Which store a `database_url` names, and the rules a PostgreSQL one must keep: the URL is
//! printed by `headroom settings` and logged by spans, and sqlx logs the value of any
//! parameter it does not know, so nothing secret may be in it; and the password sent to a
//! server off this machine travels only inside TLS that checked the server's certificate.

use std::net::IpAddr;

/// Which store a `database_url` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// One file on this machine (`sqlite:`).
    Sqlite,
    /// A PostgreSQL database (`postgres://` or `postgresql://`).
    Postgres,
}

/// The connection parameters sqlx reads from a PostgreSQL URL, less `password`. sqlx logs
/// any other parameter with its value, so a misspelt `pasword=` would reach the log.
const KNOWN_PARAMETERS: [&str; 17] = [
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "application_name",
    "options",
];

impl Store {
    /// The store `url` names, or the rule it breaks. The message never repeats the URL, which
    /// may be the one carrying a password: that comes from `PGPASSWORD` or a passfile
    /// (`PGPASSFILE`, `~/.pgpass`) instead.
    pub fn of(url: &str) -> Result<Store, &'static str> {
        if url.starts_with("sqlite:") {
            return Ok(Store::Sqlite);
        }
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err("database_url must start with sqlite: or postgres://");
        }
        let Ok(parsed) = url::Url::parse(url) else {
            return Err("database_url is not a valid postgres:// URL");
        };
        let password = "database_url must not carry a password (it is printed and logged): \
                        give it in PGPASSWORD or a passfile (PGPASSFILE)";
        if parsed.password().is_some() {
            return Err(password);
        }
        for (key, value) in parsed.query_pairs() {
            if key == "password" {
                return Err(password);
            }
            let known = KNOWN_PARAMETERS.contains(&key.as_ref()) || key.starts_with("options[");
            if !known {
                return Err(
                    "database_url has a parameter sqlx does not read (it would log \
                            its value): use host, hostaddr, port, dbname, user, sslmode, \
                            sslrootcert, sslcert, sslkey, application_name, options or \
                            statement-cache-capacity",
                );
            }
            // sqlx takes a PEM block in sslkey as the key itself, not a file name.
            if matches!(key.as_ref(), "sslkey" | "ssl-key") && value.trim().starts_with("-----") {
                return Err("database_url must not carry a private key: give sslkey a file");
            }
        }
        if !on_this_machine(&parsed) && !verifies_the_server(&parsed) {
            return Err("database_url names a server off this machine: it needs \
                        sslmode=verify-full (or verify-ca), or the password could go to \
                        whoever answers in its place");
        }
        Ok(Store::Postgres)
    }
}

/// Whether the server sqlx will dial is a Unix socket or a loopback address. The last `host`
/// or `hostaddr` parameter wins over the URL's host, as in sqlx; no host at all would leave
/// the choice to `PGHOST`, which this check cannot see, so it counts as off the machine.
fn on_this_machine(url: &url::Url) -> bool {
    let mut host = url.host_str().unwrap_or("").to_owned();
    for (key, value) in url.query_pairs() {
        if key == "host" || key == "hostaddr" {
            host = value.into_owned();
        }
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.starts_with('/')
        || host.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether the URL asks for TLS that checks the server's certificate (sqlx reads the last
/// `sslmode`).
fn verifies_the_server(url: &url::Url) -> bool {
    let mode = url
        .query_pairs()
        .filter(|(k, _)| k == "sslmode" || k == "ssl-mode")
        .last()
        .map(|(_, v)| v.into_owned());
    matches!(mode.as_deref(), Some("verify-full" | "verify-ca"))
}

#[cfg(test)]
mod tests {
    use super::Store;
    use proptest::prelude::*;

    #[test]
    fn the_url_names_the_store() {
        assert_eq!(Store::of("sqlite:headroom.db"), Ok(Store::Sqlite));
        assert_eq!(Store::of("sqlite::memory:"), Ok(Store::Sqlite));
        for url in [
            "postgres://headroom@127.0.0.1:5432/headroom",
            "postgres://headroom@[::1]:5432/headroom",
            "postgres://headroom@localhost/headroom?host=/run/postgresql",
            "postgres:///headroom?host=/run/postgresql",
            "postgres://headroom@127.0.0.1/headroom?options[search_path]=headroom",
            "postgresql://headroom@db.internal/headroom?sslmode=verify-full&sslkey=/etc/k.pem",
            "postgres://headroom@192.0.2.7/headroom?sslmode=verify-ca",
        ] {
            assert_eq!(Store::of(url), Ok(Store::Postgres), "{url}");
        }
    }

    #[test]
    fn other_schemes_and_garbage_are_refused_by_name() {
        for url in [
            "",
            " ",
            "headroom.db",
            "SQLITE:headroom.db",
            "mysql://root@127.0.0.1/headroom",
            "postgres:/headroom",
            "file:headroom.db",
            "\0sqlite:x",
        ] {
            let message = Store::of(url).unwrap_err();
            assert!(message.starts_with("database_url "), "{url:?}: {message}");
        }
    }

    #[test]
    fn a_password_a_key_or_an_unknown_parameter_in_a_postgres_url_is_refused() {
        for (url, rule) in [
            ("postgres://headroom:hunter2@127.0.0.1/headroom", "password"),
            ("postgres://:hunter2@127.0.0.1/headroom", "password"),
            ("postgresql://h@127.0.0.1/h?password=hunter2", "password"),
            (
                "postgres://h@127.0.0.1/h?sslmode=disable&password=",
                "password",
            ),
            ("postgres://h@127.0.0.1/h?pa%73sword=hunter2", "password"),
            ("postgres://h@127.0.0.1/h?pasword=hunter2", "parameter"),
            ("postgres://h@127.0.0.1/h?PASSWORD=hunter2", "parameter"),
            ("postgres://h@127.0.0.1/h?sslpassword=hunter2", "parameter"),
            (
                "postgres://h@127.0.0.1/h?sslkey=-----BEGIN%20KEY-----",
                "private key",
            ),
        ] {
            let message = Store::of(url).unwrap_err();
            assert!(message.contains(rule), "{url}: {message}");
            assert!(!message.contains("hunter2"), "{url}: {message}");
        }
    }

    #[test]
    fn a_server_off_this_machine_needs_tls_that_checks_its_certificate() {
        for url in [
            "postgres://headroom@db.internal/headroom",
            "postgres://headroom@db.internal/headroom?sslmode=require",
            "postgres://headroom@db.internal/headroom?sslmode=prefer",
            "postgres://headroom@192.0.2.7/headroom?sslmode=verify-full&sslmode=disable",
            "postgres://headroom@127.0.0.1/headroom?host=db.internal",
            "postgres://headroom@127.0.0.1/headroom?hostaddr=192.0.2.7",
            "postgres://headroom@127.0.0.2.example/headroom",
            "postgres:///headroom",
        ] {
            let message = Store::of(url).unwrap_err();
            assert!(message.contains("sslmode=verify-full"), "{url}: {message}");
        }
    }

    proptest! {
        /// Whatever follows the scheme, the answer is a store or a rule; a URL whose password
        /// is set is never accepted, and a refusal never repeats what it refused.
        #[test]
        fn any_url_gets_a_store_or_a_rule_that_never_echoes_it(
            scheme in prop_oneof![
                Just(""), Just("sqlite:"), Just("postgres://"), Just("postgresql://"),
                Just("mysql://"), Just("Postgres://"),
            ],
            user in "[^@]{0,12}",
            rest in ".{0,40}",
        ) {
            let secret = "s3cr3t-Zq9";
            let url = format!("{scheme}{user}:{secret}@{rest}");
            match Store::of(&url) {
                Ok(Store::Sqlite) => prop_assert_eq!(scheme, "sqlite:"),
                Ok(Store::Postgres) => {
                    prop_assert!(scheme.starts_with("postgres"));
                    let parsed = url::Url::parse(&url).unwrap();
                    prop_assert!(parsed.password().is_none());
                    prop_assert!(parsed.query_pairs().all(|(k, _)| k != "password"));
                }
                Err(message) => {
                    prop_assert!(scheme != "sqlite:");
                    prop_assert!(!message.contains(secret), "{}", message);
                }
            }
        }
    }
}
