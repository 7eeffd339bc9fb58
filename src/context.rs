//! The context every operation works with: `op(ctx, caller, input)`. It holds what operations
//! need to do their work — storage, time, settings, providers, the template renderer and the
//! outbound client — and nothing of HTTP, so pages, the API, the CLI and background loops call
//! the same operations the same way.

use std::sync::Arc;

use sqlx::SqlitePool;

use crate::cloud_init::Renderer;
use crate::config::Settings;
use crate::domain::{Clock, UnixMillis};
use crate::outbound::OutboundClient;
use crate::provider::Providers;

/// Audit exports that may run at once (the rest are refused as busy): each walks the log.
pub const MAX_EXPORTS: usize = 2;

/// Shared by every operation; cheap to clone.
#[derive(Clone)]
pub struct Ctx {
    /// The database.
    pub pool: SqlitePool,
    /// "Now", swappable in tests.
    pub clock: Arc<dyn Clock>,
    /// Loaded settings.
    pub settings: Arc<Settings>,
    /// Enabled cloud providers.
    pub providers: Providers,
    /// Renders and validates templates in the sandbox (with cloud-init's schema when found).
    pub renderer: Renderer,
    /// Client for pin pre-flights (tarball downloads), under the outbound policy for pins.
    pub outbound: OutboundClient,
    /// Client for webhook deliveries, under the outbound policy for webhooks.
    pub webhook: OutboundClient,
    /// Client for fleet status scrapes, under the outbound policy for scraping (loopback and
    /// private addresses allowed, link-local refused); each scrape sets its fleet's timeout.
    pub scrape: OutboundClient,
    /// Permits for audit exports running at once.
    pub exports: Arc<tokio::sync::Semaphore>,
    /// Wakes the provisioning runner when a request becomes approved, so execution starts
    /// without waiting for the runner's next poll.
    pub jobs: Arc<tokio::sync::Notify>,
}

impl Ctx {
    /// Builds the context from settings: providers (Hetzner when a token is set), the renderer
    /// (with cloud-init's schema when found) and the outbound client for pins. Starts nothing
    /// and contacts nothing, so the CLI can build one as cheaply as the server.
    pub fn build(
        settings: Settings,
        pool: SqlitePool,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Ctx> {
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
        let limits = crate::cloud_init::RenderLimits {
            timeout: settings.render_timeout,
            output_bytes: settings.render_output_bytes,
        };
        let renderer = Renderer::new(program, limits, schema);
        let mut pin = OutboundClient::builder(
            crate::outbound::Purpose::Pin,
            settings.outbound_allow.clone(),
        )
        .timeout(settings.pin_limits.timeout);
        if let Some(path) = &settings.outbound_ca_file {
            pin = pin.ca_file(path)?;
        }
        // A receiver that hangs holds one delivery, never a provision: short limits keep the
        // outbox moving.
        let mut webhook = OutboundClient::builder(
            crate::outbound::Purpose::Webhook,
            settings.outbound_allow.clone(),
        )
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(std::time::Duration::from_secs(10));
        if let Some(path) = &settings.outbound_ca_file {
            webhook = webhook.ca_file(path)?;
        }
        // Fleets answer within their own scrape timeout (at most a minute); these bound a
        // scrape whose fleet asks for more than the client allows.
        let mut scrape = OutboundClient::builder(
            crate::outbound::Purpose::Scrape,
            settings.outbound_allow.clone(),
        )
        .connect_timeout(std::time::Duration::from_secs(10))
        .timeout(std::time::Duration::from_secs(
            u64::from(crate::domain::fleet::SCRAPE_TIMEOUT_SECS_MAX) + 5,
        ));
        if let Some(path) = &settings.outbound_ca_file {
            scrape = scrape.ca_file(path)?;
        }
        Ok(Ctx {
            pool,
            scrape: scrape.build()?,
            webhook: webhook.build()?,
            clock,
            providers: Providers::new(hetzner, settings.simulated_provider),
            settings: Arc::new(settings),
            renderer,
            outbound: pin.build()?,
            exports: Arc::new(tokio::sync::Semaphore::new(MAX_EXPORTS)),
            jobs: Arc::new(tokio::sync::Notify::new()),
        })
    }

    /// Whether the database answers (for `/readyz`).
    pub async fn database_ready(&self) -> bool {
        match self.pool.acquire().await {
            Ok(mut conn) => crate::db::ping(&mut conn).await.is_ok(),
            Err(_) => false,
        }
    }

    /// The current time.
    pub fn now(&self) -> UnixMillis {
        self.clock.now()
    }
}
