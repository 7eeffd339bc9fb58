//! TestApp: the real application on port 0 with its own database (a SQLite file, or a PostgreSQL
//! database when the run is on PostgreSQL: `store`) and a manual clock.

pub mod store;

use std::sync::Arc;
use std::time::Duration;

use headroom::auth::users::{self, NewUserInput};
use headroom::auth::{csrf, secret_token, Caller};
use headroom::config::Settings;
use headroom::domain::{Clock, ManualClock, Role};
use headroom::startup::Application;
use reqwest::header::{HeaderMap, SET_COOKIE};
use reqwest::{Response, StatusCode};
use scraper::{Html, Selector};
use sqlx::AnyPool;

/// A running console.
pub struct TestApp {
    pub address: String,
    pub state: headroom::state::AppState,
    pub pool: AnyPool,
    pub clock: ManualClock,
    pub client: reqwest::Client,
    pub db_path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// A browser-like signed-in session: cookie plus the CSRF token its pages carry.
#[derive(Debug, Clone)]
pub struct Session {
    pub cookie: String,
    pub csrf: String,
}

pub const PASSWORD: &str = "correct horse battery staple";

/// A loopback port nothing listens on now: the OS's pick, released for a process the test
/// starts to bind (another may take it first; rare enough for a test).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Declares render-time secrets (`NAME=env:VAR`, `NAME=file:/path`), as the `secrets` setting
/// does.
pub fn declare(settings: &mut Settings, entries: &[&str]) {
    settings.secrets =
        headroom::domain::secret::DeclaredSecrets::parse_entries(entries).expect("declarations");
}

impl TestApp {
    /// POSTs `body` as JSON with a bearer `token`: the status and the answer (`Null` when it is
    /// not JSON).
    pub async fn post_json(
        &self,
        path: &str,
        token: &str,
        body: &serde_json::Value,
    ) -> (reqwest::StatusCode, serde_json::Value) {
        let res = self
            .client
            .post(self.url(path))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap();
        let status = res.status();
        (status, res.json().await.unwrap_or(serde_json::Value::Null))
    }

    /// Spawns with default settings.
    pub async fn spawn() -> TestApp {
        Self::spawn_with(|_| {}).await
    }

    /// Spawns with the simulated provider's catalogue and the demo's machine config
    /// (`spare-fsn1`), as `headroom demo` has them.
    pub async fn spawn_with_config() -> TestApp {
        Self::spawn_with_config_and(|_| {}).await
    }

    /// [`TestApp::spawn_with_config`] after letting the test adjust settings.
    pub async fn spawn_with_config_and(adjust: impl FnOnce(&mut Settings)) -> TestApp {
        let app = Self::spawn_with(|s| {
            s.simulated_provider = true;
            adjust(s);
        })
        .await;
        headroom::sim::demo::seed_config(&app.state)
            .await
            .expect("seed config");
        app
    }

    /// Spawns after letting the test adjust settings.
    pub async fn spawn_with(adjust: impl FnOnce(&mut Settings)) -> TestApp {
        // `HEADROOM_TEST_LOG=1` (with `RUST_LOG`) shows the apps' logs when a test fails.
        if std::env::var_os("HEADROOM_TEST_LOG").is_some() {
            headroom::telemetry::init(headroom::cli::LogFormat::Text);
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let mut settings = Settings {
            bind: "127.0.0.1:0".into(),
            database_url: store::database_url(dir.path()).await,
            workers: 1,
            // The test binary is not headroom: render workers start from the real one.
            render_worker: Some(env!("CARGO_BIN_EXE_headroom").into()),
            // Tests feed samples themselves (or turn the scraper on): a loop scraping their
            // fleets' unbound example endpoints would write samples in the middle of them.
            scrape_enabled: false,
            // Nothing joins a fleet here unless a test feeds members itself: requests end
            // when their servers run, unless the test turns joins on (`joins.rs`).
            join_timeout: None,
            // Tests' configs pin tarballs nobody may download (`.invalid`, example.com): no
            // pin is fetched on filing, and no warning blocks approval unless a test turns
            // the instance's defaults back on (`plan_checks.rs`).
            pin_check_on_request: false,
            plan_checks_blocking: no_blocking_checks(),
            ..Settings::default()
        };
        adjust(&mut settings);
        let pool = headroom::db::connect(&settings.database_url)
            .await
            .expect("database");
        let clock = ManualClock::new(1_796_000_000_000);
        // The test owns the socket: the app is built on it, never binding by itself.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("loopback port");
        let app = Application::build(listener, settings, pool.clone(), Arc::new(clock.clone()))
            .await
            .expect("build");
        let address = format!("http://127.0.0.1:{}", app.port());
        let state = app.state().clone();
        tokio::spawn(app.run_until_stopped());
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        TestApp {
            address,
            state,
            pool,
            clock,
            client,
            db_path: dir.path().join("headroom.db"),
            _dir: dir,
        }
    }

    /// Files one provision request on the demo fleet (seeded here) as an operator, so routes
    /// naming `{id}` = 1 have a request to show. Returns its id.
    pub async fn file_request(&self) -> i64 {
        headroom::sim::demo::seed_fleet(&self.state)
            .await
            .expect("demo fleet");
        let caller = headroom::domain::Caller {
            actor: headroom::domain::Actor::User("fixture-requester".into()),
            role: Role::Operator,
            user_id: None,
        };
        let request = headroom::provisioning::NewRequest {
            fleet: "demo".into(),
            machine_config: "spare-fsn1".into(),
            template: None,
            count: 1,
            reason: "fixture for routes naming a request".into(),
        };
        headroom::provisioning::requests::create(&self.state.ctx, &caller, &request)
            .await
            .expect("file a request")
            .id
    }

    /// Full URL of a path.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// Creates a user directly through the domain layer (as the CLI would).
    pub async fn create_user(&self, name: &str, role: Role) {
        let input = NewUserInput {
            username: name.into(),
            role: role.to_string(),
            password: PASSWORD.into(),
        };
        users::create_user(&self.state.ctx, &Caller::system(), &input)
            .await
            .expect("create user");
    }

    /// `GET path` on the API with `token`, answered as JSON.
    pub async fn api_json(&self, path: &str, token: &str) -> serde_json::Value {
        self.client
            .get(self.url(path))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// A fresh API token acting as an existing user (as `headroom token create` makes one).
    pub async fn token_for(&self, name: &str) -> String {
        let input = headroom::auth::tokens::NewTokenInput {
            username: name.into(),
            label: "test".into(),
        };
        headroom::auth::tokens::create_token(&self.state.ctx, &Caller::system(), &input)
            .await
            .expect("token")
            .0
    }

    /// A session for an existing user without going through argon2 (for matrices that need
    /// hundreds of sessions); `login` exercises the real form.
    pub async fn quick_session(&self, name: &str) -> Session {
        let mut conn = self.pool.acquire().await.unwrap();
        let user = headroom::db::users::by_name(&mut conn, name)
            .await
            .unwrap()
            .expect("user exists");
        let token = secret_token::generate("hs_");
        headroom::db::sessions::insert(
            &mut conn,
            &secret_token::digest(&token),
            user.id,
            self.clock.now(),
        )
        .await
        .unwrap();
        Session {
            cookie: format!("headroom_session={token}"),
            csrf: csrf::for_session(&token),
        }
    }

    /// Creates a user with `role` (named after it) and signs in through the login form.
    pub async fn session_for(&self, role: Role) -> Session {
        let name = format!("{role}-user");
        self.create_user(&name, role).await;
        self.login(&name, PASSWORD).await.expect("login works")
    }

    /// GETs /login, keeping the pre-login CSRF cookie and the form's token.
    pub async fn login_form(&self) -> (String, String) {
        let res = self.client.get(self.url("/login")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let cookie = cookie_value(res.headers(), "headroom_login_csrf").expect("login csrf cookie");
        let html = res.text().await.unwrap();
        let token = input_value(&html, "csrf_token").expect("csrf_token field");
        (format!("headroom_login_csrf={cookie}"), token)
    }

    /// Posts the login form; the raw response.
    pub async fn post_login(&self, username: &str, password: &str) -> Response {
        let (cookie, token) = self.login_form().await;
        self.client
            .post(self.url("/login"))
            .header("Cookie", cookie)
            .form(&[
                ("username", username),
                ("password", password),
                ("csrf_token", &token),
            ])
            .send()
            .await
            .unwrap()
    }

    /// Signs in like a browser: the session cookie and the CSRF token from a page.
    pub async fn login(&self, username: &str, password: &str) -> Result<Session, Response> {
        let res = self.post_login(username, password).await;
        if res.status() != StatusCode::SEE_OTHER {
            return Err(res);
        }
        let token = cookie_value(res.headers(), "headroom_session").expect("session cookie");
        let cookie = format!("headroom_session={token}");
        let page = self
            .client
            .get(self.url("/account"))
            .header("Cookie", &cookie)
            .send()
            .await
            .unwrap();
        let html = page.text().await.unwrap();
        let csrf = input_value(&html, "csrf_token").expect("pages carry csrf_token");
        Ok(Session { cookie, csrf })
    }

    /// GET as a session.
    pub async fn get(&self, path: &str, s: &Session) -> Response {
        self.client
            .get(self.url(path))
            .header("Cookie", &s.cookie)
            .send()
            .await
            .unwrap()
    }

    /// POST a form as a session, adding its CSRF token.
    pub async fn post_form(&self, path: &str, s: &Session, fields: &[(&str, &str)]) -> Response {
        let mut all: Vec<(&str, &str)> = fields.to_vec();
        all.push(("csrf_token", &s.csrf));
        self.client
            .post(self.url(path))
            .header("Cookie", &s.cookie)
            .form(&all)
            .send()
            .await
            .unwrap()
    }

    /// POST as htmx would: CSRF in the header.
    pub async fn htmx_post(&self, path: &str, s: &Session, fields: &[(&str, &str)]) -> Response {
        self.client
            .post(self.url(path))
            .header("Cookie", &s.cookie)
            .header("X-CSRF-Token", &s.csrf)
            .header("HX-Request", "true")
            .form(fields)
            .send()
            .await
            .unwrap()
    }

    /// Number of rows in a table.
    pub async fn count(&self, table: &str) -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {table}");
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    /// Row counts and contents of every table of the schema, to prove nothing changed. The
    /// list comes from the store's catalogue (`sqlite_master`, `information_schema`), so a
    /// table added by a later migration is covered without editing this helper.
    pub async fn snapshot(&self) -> Vec<(String, i64, String)> {
        let sql = if store::on_postgres() {
            "SELECT table_name::text FROM information_schema.tables \
             WHERE table_schema = 'public' AND table_type = 'BASE TABLE' \
             AND table_name <> '_sqlx_migrations' ORDER BY 1"
        } else {
            "SELECT name FROM sqlite_master WHERE type = 'table' \
             AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name != '_sqlx_migrations' \
             ORDER BY name"
        };
        let tables: Vec<String> = sqlx::query_scalar(sql).fetch_all(&self.pool).await.unwrap();
        assert!(
            tables.len() >= 12,
            "the schema's tables are listed: {tables:?}"
        );
        let mut out = Vec::new();
        for table in tables {
            // Count plus every row's contents, so an UPDATE is noticed as well as an INSERT.
            let count = self.count(&table).await;
            let digest = table_digest(&self.pool, &table).await;
            out.push((table, count, digest));
        }
        out
    }

    /// Every audit action recorded, oldest first.
    pub async fn audit_actions(&self) -> Vec<String> {
        sqlx::query_scalar("SELECT action FROM audit_log ORDER BY id")
            .fetch_all(&self.pool)
            .await
            .unwrap()
    }
}

async fn table_digest(pool: &AnyPool, table: &str) -> String {
    if store::on_postgres() {
        // Each row as PostgreSQL prints a record, in a fixed order (heap order moves).
        let sql = format!(
            "SELECT COALESCE(string_agg(t::text, E'\\n' ORDER BY t::text), '') FROM {table} t"
        );
        return sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(pool)
            .await
            .unwrap();
    }
    let cols: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT name FROM pragma_table_info('{table}')"
    )))
    .fetch_all(pool)
    .await
    .unwrap();
    let expr = cols
        .iter()
        .map(|c| format!("quote({c})"))
        .collect::<Vec<_>>()
        .join(" || ',' || ");
    let sql = format!("SELECT COALESCE(group_concat({expr}, '\n'), '') FROM {table}");
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The value of a cookie set by a response.
pub fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get_all(SET_COOKIE).iter().find_map(|v| {
        let s = v.to_str().ok()?;
        let (pair, _) = s.split_once(';').unwrap_or((s, ""));
        let (k, val) = pair.split_once('=')?;
        (k.trim() == name).then(|| val.trim().to_owned())
    })
}

/// The value of the first `<input name=…>` in a page.
pub fn input_value(html: &str, name: &str) -> Option<String> {
    let doc = Html::parse_document(html);
    let sel = Selector::parse(&format!("input[name=\"{name}\"]")).unwrap();
    doc.select(&sel)
        .next()
        .and_then(|e| e.value().attr("value"))
        .map(str::to_owned)
}

/// Text of every element matching `selector`.
pub fn texts(html: &str, selector: &str) -> Vec<String> {
    let doc = Html::parse_document(html);
    let sel = Selector::parse(selector).unwrap();
    doc.select(&sel)
        .map(|e| e.text().collect::<String>().trim().to_owned())
        .collect()
}

/// Where a redirect points.
pub fn location(res: &Response) -> String {
    res.headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

impl TestApp {
    /// The time the manual clock started at.
    pub fn clock_start(&self) -> i64 {
        1_796_000_000_000
    }
}

/// The route table's method as reqwest's type (actix and reqwest use different `http` majors).
pub fn method(m: &actix_web::http::Method) -> reqwest::Method {
    reqwest::Method::from_bytes(m.as_str().as_bytes()).expect("standard method")
}

/// A renderer whose workers start from the real binary, as the server's do.
pub fn renderer(schema: Option<Arc<jsonschema::Validator>>) -> headroom::cloud_init::Renderer {
    headroom::cloud_init::Renderer::new(
        env!("CARGO_BIN_EXE_headroom").into(),
        headroom::cloud_init::RenderLimits::default(),
        schema,
    )
}

/// The operations' context over a bare database (for tests that prepare a file before the
/// real binary opens it).
pub fn ctx_for(pool: AnyPool) -> headroom::context::Ctx {
    headroom::context::Ctx::build(
        Settings {
            render_worker: Some(env!("CARGO_BIN_EXE_headroom").into()),
            pin_check_on_request: false,
            plan_checks_blocking: no_blocking_checks(),
            ..Settings::default()
        },
        pool,
        Arc::new(ManualClock::new(0)),
    )
    .expect("context")
}

/// A loopback port that refuses every connection for as long as this guard lives: bound, so
/// no parallel test can take it, but never listening, so the kernel answers a connect with a
/// reset (unlike a port bound and released, which another test may bind in between).
pub struct DeadPort(tokio::net::TcpSocket);

impl DeadPort {
    /// Binds a fresh loopback port without listening on it.
    pub fn bind() -> DeadPort {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind("127.0.0.1:0".parse().expect("loopback"))
            .expect("bind a loopback port");
        DeadPort(socket)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.0.local_addr().expect("bound").port()
    }
}

/// `plan_checks_blocking` naming no check: warnings are shown and none refuses approval.
pub fn no_blocking_checks() -> headroom::domain::plan_check_blocking::BlockingChecks {
    headroom::domain::plan_check_blocking::BlockingChecks::parse::<&str>(&[]).expect("empty list")
}
