//! Builds the HTTP application (listener bound first, so port 0 works) and runs it.

use std::net::TcpListener;
use std::sync::Arc;

use actix_htmx::HtmxMiddleware;
use actix_web::dev::Server;
use actix_web::http::StatusCode;
use actix_web::middleware::from_fn;
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use sqlx::SqlitePool;
use tracing_actix_web::TracingLogger;

use crate::config::Settings;
use crate::domain::Clock;
use crate::http::span::HeadroomRootSpan;
use crate::http::{
    body_deadline, guard, is_api_path, metrics, security_headers, Endpoint, Problem,
};
use crate::state::AppState;
use crate::{api, web as pages};

/// Both route tables: pages and API. Tests enumerate this.
pub fn route_table() -> Vec<Endpoint> {
    let mut all = pages::endpoints();
    all.extend(api::endpoints());
    all
}

/// A bound, not yet running, console.
pub struct Application {
    port: u16,
    server: Server,
    state: AppState,
    /// Turned true when the server ends; every background loop watches it.
    shutdown: tokio::sync::watch::Sender<bool>,
    /// The background loops, awaited after the stop signal so none outlives the server.
    loops: Vec<tokio::task::JoinHandle<()>>,
}

impl Application {
    /// Loads first-start data (the default template; the simulated catalogue in the demo),
    /// binds `settings.bind` and prepares the server over an open pool.
    pub async fn build(
        settings: Settings,
        pool: SqlitePool,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(&settings.bind)
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", settings.bind))?;
        let port = listener.local_addr()?.port();
        let hashing = crate::auth::password::configure(settings.password_hash_concurrency);
        if hashing != settings.password_hash_concurrency {
            // The bound is process-wide and set once (tests start several apps in one process).
            tracing::warn!(
                password.hash_concurrency = hashing,
                "password hashing bound already set; keeping it"
            );
        }
        let login_key = crate::auth::csrf::LoginKey::load_or_create(&pool, clock.now()).await?;
        crate::provisioning::plan::secret_digest_key(&pool, clock.now()).await?;
        let ctx = crate::context::Ctx::build(settings, pool, clock)?;
        ctx.renderer.probe().await?;
        let state = AppState {
            ctx,
            metrics: Arc::new(crate::telemetry::metrics::Metrics::for_routes(
                route_table().iter().map(|e| e.path),
            )),
            login_key,
            sessions: Arc::new(crate::auth::sessions::Activity::default()),
            scrape_stats: Arc::new(crate::scraper::ScrapeStats::default()),
        };
        crate::machines::templates::ensure_default(&state.ctx).await?;
        // Stored templates that the sandbox now refuses are reported, never changed: each
        // renders with a blocking finding until someone edits it.
        // Awaited, not spawned: a check is a few milliseconds a template, and nothing is left
        // running that shutdown would have to stop.
        crate::machines::templates::report_refused(&state.ctx).await;
        if state.ctx.settings.simulated_provider {
            crate::sim::demo::fill_simulated_catalogue(&state.ctx).await?;
        }
        // Deficits a crash left without their restore proposal are filed, and ended ones left
        // unsettled are settled, before the scraper starts (and after the catalogue their
        // plans are priced from), so a recovery it sees next always finds the proposal to
        // supersede. A failure is logged, never fatal: the scraper supervisor retries on
        // every pass.
        // A standby instance (scraping off) leaves deficits to the active one.
        if state.ctx.settings.scrape_enabled {
            match crate::headroom::deficit::resume(&state.ctx).await {
                Ok(done) if done == Default::default() => {}
                Ok(done) => tracing::info!(
                    proposals = done.filed,
                    settlements = done.settled,
                    failed = done.failed,
                    "finished deficit work a previous run left undone"
                ),
                Err(e) => tracing::error!(
                    error = format!("{e:#}"),
                    "resuming deficit work failed; the scraper retries it"
                ),
            }
        }
        let server = run(listener, state.clone())?;
        let (shutdown, _) = tokio::sync::watch::channel(false);
        let mut loops = vec![
            // Webhook notifications queued by provision changes (none when no webhook is set).
            tokio::spawn(crate::provisioning::notify::run_until_stopped(
                state.ctx.clone(),
                shutdown.subscribe(),
            )),
            // A configured provider with an empty cache is fetched now, without holding up start.
            tokio::spawn(crate::machines::catalogue::fetch_missing_until_stopped(
                state.ctx.clone(),
                shutdown.subscribe(),
            )),
            tokio::spawn(crate::auth::sessions::run_until_stopped(
                crate::auth::sessions::PurgeDeps {
                    pool: state.ctx.pool.clone(),
                    clock: state.ctx.clock.clone(),
                    life: crate::auth::sessions::Lifetimes {
                        idle: state.ctx.settings.session_idle,
                        absolute: state.ctx.settings.session_absolute,
                    },
                    every: crate::auth::sessions::PURGE_EVERY,
                    activity: state.sessions.clone(),
                },
                shutdown.subscribe(),
            )),
            // Reconciles interrupted executions first, then runs approved requests.
            tokio::spawn(crate::provisioning::runner::start(
                state.ctx.clone(),
                shutdown.subscribe(),
            )),
            // Drops headroom history older than its retention, at start and every ten minutes.
            tokio::spawn(crate::headroom::retention::run_until_stopped(
                state.ctx.clone(),
                shutdown.subscribe(),
            )),
        ];
        if state.ctx.settings.scrape_enabled {
            // Every fleet on its own schedule (the proposals a crash left unfiled were filed
            // above, before any new sample could race them).
            loops.push(tokio::spawn(crate::scraper::run_until_stopped(
                state.ctx.clone(),
                state.scrape_stats.clone(),
                shutdown.subscribe(),
            )));
        }
        Ok(Self {
            port,
            server,
            state,
            shutdown,
            loops,
        })
    }

    /// The port actually bound.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Shared state (for background loops started beside the server).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Seeds the demo (machine config, accounts), starts its simulated yubaba fleets (their
    /// loops stop with the other background loops) and prints where to sign in.
    pub async fn seed_demo(&mut self) -> anyhow::Result<()> {
        // The bound port, not the configured one, which may be 0.
        let host = self
            .state
            .ctx
            .settings
            .bind
            .rsplit_once(':')
            .map_or("127.0.0.1", |(host, _)| host);
        let address = format!("{host}:{}", self.port);
        let fleets =
            crate::sim::demo::seed(&self.state, &address, self.shutdown.subscribe()).await?;
        self.loops.extend(fleets);
        Ok(())
    }

    /// Serves until SIGINT/SIGTERM (graceful: in-flight requests finish), then stops the
    /// background loops and waits for them.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let served = self.server.await;
        // No receiver left only means every loop already ended.
        let _ = self.shutdown.send(true);
        for handle in self.loops {
            if let Err(e) = handle.await {
                tracing::warn!(error = %e, "a background loop ended abnormally");
            }
        }
        served
    }
}

fn run(listener: TcpListener, state: AppState) -> anyhow::Result<Server> {
    let workers = state.ctx.settings.workers.max(1);
    let limit = state.ctx.settings.body_limit;
    let client_timeout = state.ctx.settings.client_timeout;
    // actix counts connections per worker; settings guarantee at least one each.
    let connections_per_worker = (state.ctx.settings.max_connections / workers).max(1);
    let data = web::Data::new(state);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .app_data(web::PayloadConfig::new(limit))
            .app_data(
                web::FormConfig::default()
                    .limit(limit)
                    .error_handler(form_error),
            )
            .app_data(
                web::JsonConfig::default()
                    .limit(limit)
                    .error_handler(api::errors::json_error),
            )
            .app_data(web::QueryConfig::default().error_handler(query_error))
            .app_data(web::PathConfig::default().error_handler(path_error))
            .configure(|cfg| {
                for endpoint in route_table() {
                    endpoint.register(cfg);
                }
            })
            .default_service(web::to(not_found))
            .wrap(from_fn(guard::authenticate))
            .wrap(HtmxMiddleware)
            // Outside the guard, which reads form bodies for their CSRF token: every read of
            // a body, whoever makes it, has the deadline.
            .wrap(from_fn(move |req, next| {
                body_deadline::apply(client_timeout, req, next)
            }))
            // Outside the guard, so its refusals and errors carry the headers too.
            .wrap(from_fn(security_headers::apply))
            .wrap(from_fn(metrics::record))
            .wrap(TracingLogger::<HeadroomRootSpan>::new())
    })
    .workers(workers)
    // The head's deadline; the body's is the middleware's above, counted from the head.
    .client_request_timeout(client_timeout)
    .max_connections(connections_per_worker)
    .shutdown_timeout(10)
    .listen(listener)?
    .run();
    Ok(server)
}

fn error_for(req: &HttpRequest, status: StatusCode, detail: &str) -> HttpResponse {
    if is_api_path(req.path()) {
        Problem::new(status, detail).response()
    } else {
        crate::http::html_error(status, detail)
    }
}

fn form_error(err: actix_web::error::UrlencodedError, req: &HttpRequest) -> actix_web::Error {
    use actix_web::error::UrlencodedError as E;
    let (status, detail) = match &err {
        E::Overflow { .. } => (
            StatusCode::PAYLOAD_TOO_LARGE,
            "form: the body is larger than the limit".to_owned(),
        ),
        E::ContentType => (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "form: Content-Type must be application/x-www-form-urlencoded".to_owned(),
        ),
        other => (StatusCode::BAD_REQUEST, format!("form: {other}")),
    };
    let res = error_for(req, status, &detail);
    actix_web::error::InternalError::from_response(err, res).into()
}

fn query_error(err: actix_web::error::QueryPayloadError, req: &HttpRequest) -> actix_web::Error {
    let res = error_for(
        req,
        StatusCode::BAD_REQUEST,
        &format!("query string: {err}"),
    );
    actix_web::error::InternalError::from_response(err, res).into()
}

fn path_error(err: actix_web::error::PathError, req: &HttpRequest) -> actix_web::Error {
    let res = error_for(req, StatusCode::NOT_FOUND, &format!("path: {err}"));
    actix_web::error::InternalError::from_response(err, res).into()
}

async fn not_found(req: HttpRequest) -> HttpResponse {
    error_for(&req, StatusCode::NOT_FOUND, "nothing here")
}
