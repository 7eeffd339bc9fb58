//! Builds the HTTP application on a listener bound first (by the caller, or from settings by
//! [`Application::bind`], so port 0 works), starts its background loops
//! ([`start_background_loops`]) and runs it.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use actix_htmx::HtmxMiddleware;
use actix_web::dev::Server;
use actix_web::http::StatusCode;
use actix_web::middleware::from_fn;
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use sqlx::AnyPool;
use tokio::sync::watch;
use tokio::task::JoinHandle;
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
    address: SocketAddr,
    server: Server,
    state: AppState,
    /// Awaited after the server ends, so no loop outlives it.
    loops: BackgroundLoops,
    /// SIGTERM and SIGINT, listened for from before the port is announced.
    stop: StopSignals,
}

impl Application {
    /// Binds `settings.bind` and builds the console on it (what `serve` and `demo` run).
    pub async fn bind(
        settings: Settings,
        pool: AnyPool,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(&settings.bind)
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", settings.bind))?;
        Self::build(listener, settings, pool, clock).await
    }

    /// Prepares the console over an open pool on `listener` (the caller binds it, so port 0
    /// works and the port is known before anything runs): loads first-start data, finishes the
    /// deficit work a previous run left undone, and starts the background loops.
    pub async fn build(
        listener: TcpListener,
        settings: Settings,
        pool: AnyPool,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Self> {
        let address = listener.local_addr()?;
        let stop = StopSignals::listen()?;
        let state = prepare(settings, pool, clock).await?;
        // Deficits a crash left without their restore proposal are filed, and ended ones left
        // unsettled are settled, before the scraper starts (and after the catalogue their
        // plans are priced from), so a recovery it sees next always finds the proposal to
        // supersede. A standby instance (scraping off) leaves deficits to the active one.
        if state.ctx.settings.scrape_enabled {
            resume_deficits(&state.ctx).await;
        }
        let server = run(listener, state.clone())?;
        let loops = start_background_loops(&state);
        Ok(Self {
            address,
            server,
            state,
            loops,
            stop,
        })
    }

    /// The port actually bound.
    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// Shared state (for background loops started beside the server).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Seeds the demo (machine config, accounts), starts its simulated yubaba fleets (their
    /// loops stop with the other background loops) and prints where to sign in.
    pub async fn seed_demo(
        &mut self,
        release: crate::sim::release::ReleaseServer,
    ) -> anyhow::Result<()> {
        // The bound address, not the configured one, whose port may be 0.
        let address = self.address.to_string();
        let fleets = crate::sim::demo::seed(
            &self.state,
            &address,
            release,
            self.loops.shutdown.subscribe(),
        )
        .await?;
        self.loops.handles.extend(fleets);
        Ok(())
    }

    /// Serves until SIGINT/SIGTERM (graceful: in-flight requests finish), then stops the
    /// background loops and waits for them.
    pub async fn run_until_stopped(mut self) -> std::io::Result<()> {
        let handle = self.server.handle();
        let mut server = self.server;
        let served = tokio::select! {
            served = &mut server => served,
            () = self.stop.received() => {
                // The stop is carried out by the server's own future: both are driven at once.
                let ((), served) = tokio::join!(handle.stop(true), server);
                served
            }
        };
        self.loops.stop().await;
        served
    }
}

/// The context and shared state, with first-start data loaded: the keys, the default
/// template (stored ones the sandbox now refuses are reported) and, in the demo, the
/// simulated catalogue.
async fn prepare(
    settings: Settings,
    pool: AnyPool,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<AppState> {
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
        cards: Arc::default(),
    };
    crate::machine_setup::templates::ensure_default(&state.ctx).await?;
    // Stored templates that the sandbox now refuses are reported, never changed: each
    // renders with a blocking finding until someone edits it.
    // Awaited, not spawned: a check is a few milliseconds a template, and nothing is left
    // running that shutdown would have to stop.
    crate::machine_setup::templates::report_refused(&state.ctx).await;
    if state.ctx.settings.simulated_provider {
        crate::sim::demo::fill_simulated_catalogue(&state.ctx).await?;
    }
    Ok(state)
}

/// Files and settles what a previous run left undone (`capacity::deficit::resume`). A failure
/// is logged, never fatal: the scraper supervisor retries on every pass.
async fn resume_deficits(ctx: &crate::context::Ctx) {
    match crate::capacity::deficit::resume(ctx).await {
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

/// The signals that stop the server. Listened for from `bind` on, so a SIGTERM that comes as
/// soon as the port is announced stops it gracefully: actix's own listener started only when
/// the server was first polled, and a signal before that killed the process outright.
struct StopSignals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn listen() -> std::io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    async fn received(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => tracing::info!("SIGTERM: stopping"),
            _ = self.interrupt.recv() => tracing::info!("SIGINT: stopping"),
        }
    }
}

/// The background loops beside the server, and the signal that stops them.
pub struct BackgroundLoops {
    /// Sending `true` asks every loop to stop; each watches its own receiver.
    pub shutdown: watch::Sender<bool>,
    /// The running loops.
    pub handles: Vec<JoinHandle<()>>,
}

impl BackgroundLoops {
    /// Signals shutdown and waits for every loop to end (one that panicked is logged).
    pub async fn stop(self) {
        // No receiver left only means every loop already ended.
        let _ = self.shutdown.send(true);
        for handle in self.handles {
            if let Err(e) = handle.await {
                tracing::warn!(error = %e, "a background loop ended abnormally");
            }
        }
    }
}

/// Starts every background loop of the console over `state`: webhook deliveries, the
/// catalogue fetch for empty caches, session purging, the provisioning runner, headroom
/// retention and, unless scraping is off (a standby), the scraper. All stop when the returned
/// signal turns true.
pub fn start_background_loops(state: &AppState) -> BackgroundLoops {
    let (shutdown, _) = watch::channel(false);
    let ctx = &state.ctx;
    let mut handles = vec![
        // Webhook notifications queued by provision changes (none when no webhook is set).
        tokio::spawn(crate::provisioning::notify::run_until_stopped(
            ctx.clone(),
            shutdown.subscribe(),
        )),
        // A configured provider with an empty cache is fetched now, without holding up start.
        tokio::spawn(
            crate::machine_setup::catalogue::fetch_missing_until_stopped(
                ctx.clone(),
                shutdown.subscribe(),
            ),
        ),
        tokio::spawn(crate::auth::sessions::run_until_stopped(
            crate::auth::sessions::PurgeDeps {
                pool: ctx.pool.clone(),
                clock: ctx.clock.clone(),
                life: crate::auth::sessions::Lifetimes {
                    idle: ctx.settings.session_idle,
                    absolute: ctx.settings.session_absolute,
                },
                every: crate::auth::sessions::PURGE_EVERY,
                activity: state.sessions.clone(),
            },
            shutdown.subscribe(),
        )),
        // Reconciles interrupted executions first, then runs approved requests.
        tokio::spawn(crate::provisioning::runner::start(
            ctx.clone(),
            shutdown.subscribe(),
        )),
        // Drops headroom history older than its retention, at start and every `retention::EVERY`.
        tokio::spawn(crate::capacity::retention::run_until_stopped(
            ctx.clone(),
            shutdown.subscribe(),
        )),
    ];
    if ctx.settings.scrape_enabled {
        // Every fleet on its own schedule (the proposals a crash left unfiled were filed
        // before, so no new sample could race them).
        handles.push(tokio::spawn(crate::scraper::run_until_stopped(
            ctx.clone(),
            state.scrape_stats.clone(),
            shutdown.subscribe(),
        )));
    }
    BackgroundLoops { shutdown, handles }
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
    // A streamed answer (an export) is written in several pieces; with Nagle on, the last
    // waited for the client's delayed ACK: 40 ms per export on a kept-alive connection.
    .tcp_nodelay(true)
    // The head's deadline; the body's is the middleware's above, counted from the head.
    .client_request_timeout(client_timeout)
    .max_connections(connections_per_worker)
    .shutdown_timeout(10)
    // `StopSignals` stops it: listening starts before the port is announced.
    .disable_signals()
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
