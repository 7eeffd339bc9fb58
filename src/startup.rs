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
use crate::http::{guard, is_api_path, metrics, security_headers, Endpoint, Problem};
use crate::state::AppState;
use crate::telemetry::HeadroomRootSpan;
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
        let hetzner = settings.hetzner_api_token.clone().map(|token| {
            Arc::new(crate::provider::hetzner::Hetzner::new(
                &settings.hetzner_api_url,
                token,
            )) as Arc<dyn crate::provider::MachineProvider>
        });
        let schema = match crate::cloud_init::schema::locate(settings.cloud_init_schema.as_deref())
        {
            Some(path) => {
                let v = crate::cloud_init::schema::load(&path)?;
                tracing::info!(schema = %path.display(), "cloud-init schema check enabled");
                Some(Arc::new(v))
            }
            None => {
                tracing::warn!("cloud-init schema not found: payloads are checked without it (install Debian's cloud-init or set cloud_init_schema)");
                None
            }
        };
        let program =
            crate::cloud_init::worker::default_program(settings.render_worker.as_deref())?;
        let renderer = crate::cloud_init::Renderer::new(program, settings.render_limits, schema);
        renderer.probe().await?;
        let mut pin = crate::outbound::OutboundClient::builder(
            crate::outbound::Purpose::Pin,
            settings.outbound_allow.clone(),
        )
        .timeout(settings.pin_limits.timeout);
        if let Some(path) = &settings.outbound_ca_file {
            pin = pin.ca_file(path)?;
        }
        let pin_client = pin.build()?;
        let login_key = crate::auth::csrf::LoginKey::load_or_create(&pool, clock.now()).await?;
        let state = AppState {
            pool,
            clock,
            providers: crate::provider::Providers::new(hetzner, settings.simulated_provider),
            settings: Arc::new(settings),
            metrics: Arc::new(crate::telemetry::metrics::Metrics::for_routes(
                route_table().iter().map(|e| e.path),
            )),
            login_key,
            renderer,
            pin_client,
        };
        crate::machines::templates::ensure_default(&state.pool, state.clock.now()).await?;
        // Stored templates that the sandbox now refuses are reported, never changed: each
        // renders with a blocking finding until someone edits it.
        tokio::spawn(crate::machines::templates::report_refused(state.clone()));
        if state.settings.simulated_provider {
            crate::machines::catalogue::refresh(
                &state,
                &crate::auth::Caller::system(),
                crate::domain::machine::ProviderKind::Simulated,
            )
            .await?;
        }
        let server = run(listener, state.clone())?;
        Ok(Self {
            port,
            server,
            state,
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

    /// Serves until SIGINT/SIGTERM (graceful: in-flight requests finish).
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.server.await
    }
}

fn run(listener: TcpListener, state: AppState) -> anyhow::Result<Server> {
    let workers = state.settings.workers.max(1);
    let limit = state.settings.body_limit;
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
            // Outside the guard, so its refusals and errors carry the headers too.
            .wrap(from_fn(security_headers::apply))
            .wrap(from_fn(metrics::record))
            .wrap(TracingLogger::<HeadroomRootSpan>::new())
    })
    .workers(workers)
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
