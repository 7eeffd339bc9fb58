//! Webhook notifications: an outbox row written in the transaction of the change it reports,
//! delivered (signed, retried with backoff, recorded) by a background loop, so a failing
//! receiver never blocks a provision.

use std::time::Duration;

use hmac::{Hmac, Mac};
use secrecy::ExposeSecret;
use serde_json::json;
use sha2::Sha256;
use sqlx::AnyConnection;

use crate::context::Ctx;
use crate::db::provision_events::{self, NewEvent};
use crate::db::webhooks::{self, DeliveryRow, Settle};
use crate::domain::capacity::n_plus_words;
use crate::domain::{millis, ProvisionState, UnixMillis};

/// What a notification reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// `provision.requested`
    Requested,
    /// `provision.approved`
    Approved,
    /// `provision.rejected`
    Rejected,
    /// `provision.expired`
    Expired,
    /// `provision.finished` (succeeded or failed)
    Finished,
}

impl Event {
    /// The notification a request's arrival in `state` sends, if any.
    pub fn for_state(state: ProvisionState) -> Option<Event> {
        match state {
            ProvisionState::PendingApproval => Some(Event::Requested),
            ProvisionState::Approved => Some(Event::Approved),
            ProvisionState::Rejected => Some(Event::Rejected),
            ProvisionState::Expired => Some(Event::Expired),
            ProvisionState::Succeeded | ProvisionState::Failed => Some(Event::Finished),
            _ => None,
        }
    }

    /// The event's name, as the body's `event` and the `X-Headroom-Event` header carry it.
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Requested => "provision.requested",
            Event::Approved => "provision.approved",
            Event::Rejected => "provision.rejected",
            Event::Expired => "provision.expired",
            Event::Finished => "provision.finished",
        }
    }
}

/// The header carrying the body's signature: `sha256=<hex HMAC-SHA256(secret, body)>`.
pub const SIGNATURE_HEADER: &str = "X-Headroom-Signature";
/// The header naming the event.
pub const EVENT_HEADER: &str = "X-Headroom-Event";
/// The header carrying the delivery's id (the same on every retry, for de-duplication).
pub const DELIVERY_HEADER: &str = "X-Headroom-Delivery";

/// First retry delay; each failed attempt doubles it.
const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// Longest retry delay.
pub const BACKOFF_CAP: Duration = Duration::from_secs(600);
/// How long a claimed delivery stays out of other loops' way while it is being sent (longer
/// than the webhook client's total timeout, so a send in flight is never sent twice).
const CLAIM_LEASE: Duration = Duration::from_secs(60);
/// Deliveries attempted per `deliver_once`.
const BATCH: i64 = 20;
/// How often the loop looks for due deliveries.
pub const POLL_EVERY: Duration = Duration::from_secs(1);

/// Queues a notification about a request, when a webhook is configured. Call inside the
/// write transaction of the change it reports: the body is read from the same transaction,
/// so it describes the request exactly as the change left it.
pub async fn enqueue(
    conn: &mut AnyConnection,
    ctx: &Ctx,
    now: UnixMillis,
    event: Event,
    provision_id: i64,
) -> anyhow::Result<()> {
    if ctx.settings.webhook_url.is_none() {
        return Ok(());
    }
    let id = webhooks::insert(conn, event.as_str(), Some(provision_id), "{}", now).await?;
    let body = body(conn, &ctx.settings.public_url, now, event, provision_id, id).await?;
    webhooks::set_body(conn, id, &body).await?;
    Ok(())
}

/// The notification's JSON: what happened, when, the request as it now stands (never a
/// payload or a secret) and a link to its page.
async fn body(
    conn: &mut AnyConnection,
    public_url: &str,
    now: UnixMillis,
    event: Event,
    provision_id: i64,
    delivery_id: i64,
) -> anyhow::Result<String> {
    let p = crate::db::provisions::get(conn, provision_id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("provision {provision_id} not found"))?;
    let approvers = crate::db::provisions::approvers(conn, provision_id, &p.plan_hash).await?;
    let plan: serde_json::Value = serde_json::from_str(&p.plan).unwrap_or_default();
    let body = json!({
        "event": event.as_str(),
        "delivery_id": delivery_id,
        "at": crate::domain::clock::format_utc(now),
        "provision": {
            "id": p.id,
            "state": p.state,
            "state_reason": p.state_reason,
            "fleet": p.fleet,
            "machine_config": p.machine_config,
            "count": p.count,
            "requester": p.requester,
            "approvers": approvers,
            "plan_hash": p.plan_hash,
            "monthly_cost": plan["monthly_cost"],
            "currency": plan["currency"],
        },
        "link": format!("{public_url}/provisions/{}", p.id),
    });
    Ok(body.to_string())
}

/// A notification about a fleet rather than a request (headroom's deficits). Provisioning
/// never asks what a deficit is: the caller says what happened and to which fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetEvent<'a> {
    /// `fleet.deficit_entered`: spare fell below required for the configured samples.
    DeficitEntered {
        fleet: &'a str,
        spare: u32,
        required: u32,
        /// When the fleet first fell below required.
        since: UnixMillis,
        /// The restore proposed (or the open request that stands in for it).
        provision_id: Option<i64>,
        /// Why no request was filed, or which open one stood in; empty when one was filed.
        note: &'a str,
    },
    /// `fleet.deficit_left`: spare stayed at or above required long enough.
    DeficitLeft {
        fleet: &'a str,
        spare: Option<u32>,
        required: Option<u32>,
        /// When the fleet first fell below required.
        since: UnixMillis,
        /// The request the deficit proposed, if any.
        provision_id: Option<i64>,
    },
}

impl FleetEvent<'_> {
    /// The event's name, as the body's `event` and the `X-Headroom-Event` header carry it.
    pub fn as_str(&self) -> &'static str {
        match self {
            FleetEvent::DeficitEntered { .. } => "fleet.deficit_entered",
            FleetEvent::DeficitLeft { .. } => "fleet.deficit_left",
        }
    }

    fn fleet(&self) -> &str {
        match self {
            FleetEvent::DeficitEntered { fleet, .. } | FleetEvent::DeficitLeft { fleet, .. } => {
                fleet
            }
        }
    }

    fn provision_id(&self) -> Option<i64> {
        match self {
            FleetEvent::DeficitEntered { provision_id, .. }
            | FleetEvent::DeficitLeft { provision_id, .. } => *provision_id,
        }
    }
}

/// Queues a notification about a fleet, when a webhook is configured. Call inside the write
/// transaction of the change it reports. The delivery is tied to the request it names (if
/// any), so its delivery is noted on that request's timeline like the request's own events.
pub async fn enqueue_fleet_event(
    conn: &mut AnyConnection,
    ctx: &Ctx,
    now: UnixMillis,
    event: &FleetEvent<'_>,
) -> anyhow::Result<()> {
    if ctx.settings.webhook_url.is_none() {
        return Ok(());
    }
    let id = webhooks::insert(conn, event.as_str(), event.provision_id(), "{}", now).await?;
    let body = fleet_body(&ctx.settings.public_url, now, event, id);
    webhooks::set_body(conn, id, &body).await?;
    Ok(())
}

/// A fleet notification's JSON: what happened, the numbers, the request and a link to the
/// fleet's page (numbers and names only: nothing from the fleet's secrets).
fn fleet_body(
    public_url: &str,
    now: UnixMillis,
    event: &FleetEvent<'_>,
    delivery_id: i64,
) -> String {
    let mut body = json!({
        "event": event.as_str(),
        "delivery_id": delivery_id,
        "at": crate::domain::clock::format_utc(now),
        "fleet": event.fleet(),
        "provision_id": event.provision_id(),
        "link": format!("{public_url}/fleets/{}", event.fleet()),
    });
    match event {
        FleetEvent::DeficitEntered {
            spare,
            required,
            since,
            note,
            ..
        } => {
            body["spare"] = json!(spare);
            body["n_plus"] = json!(spare);
            body["required"] = json!(required);
            body["headroom"] = json!(n_plus_words(*spare, *required));
            body["since"] = json!(crate::domain::clock::format_utc(*since));
            body["note"] = json!(note);
        }
        FleetEvent::DeficitLeft {
            spare,
            required,
            since,
            ..
        } => {
            body["spare"] = json!(spare);
            body["n_plus"] = json!(spare);
            body["required"] = json!(required);
            if let (Some(spare), Some(required)) = (spare, required) {
                body["headroom"] = json!(n_plus_words(*spare, *required));
            }
            body["since"] = json!(crate::domain::clock::format_utc(*since));
        }
    }
    body.to_string()
}

/// `sha256=` and the hex HMAC-SHA256 of `body` under `secret`: what `X-Headroom-Signature`
/// carries, so a receiver can check the body came from this console unchanged.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC accepts any key");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256=");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The wait before the next attempt after `attempts` failed ones: 1 s, 2 s, 4 s … capped at
/// `BACKOFF_CAP`, drawn from its upper half so receivers recovering together are not hit by
/// every console at the same instant.
pub fn backoff(attempts: u32, unit_random: f64) -> Duration {
    let exp = attempts.saturating_sub(1).min(20);
    let nominal = BACKOFF_BASE.saturating_mul(1 << exp).min(BACKOFF_CAP);
    nominal.mul_f64(0.5 + 0.5 * unit_random.clamp(0.0, 1.0))
}

fn unit_random() -> f64 {
    let mut b = [0u8; 8];
    // Without randomness the delay is the nominal one: still bounded, only not spread.
    if getrandom::getrandom(&mut b).is_err() {
        return 1.0;
    }
    (u64::from_le_bytes(b) >> 11) as f64 / (1u64 << 53) as f64
}

/// Attempts every due pending delivery once; returns how many were attempted. No database
/// transaction is open while a receiver is being waited on: each delivery is claimed in a
/// short write, sent, then settled in another.
#[tracing::instrument(skip_all, err)]
pub async fn deliver_once(ctx: &Ctx) -> anyhow::Result<usize> {
    let (Some(url), Some(secret)) = (&ctx.settings.webhook_url, &ctx.settings.webhook_secret)
    else {
        return Ok(0);
    };
    let now = ctx.now();
    let due = {
        let mut conn = ctx.pool.acquire().await?;
        webhooks::due(&mut conn, now, BATCH).await?
    };
    let mut attempted = 0;
    for row in due {
        let claimed = {
            let mut tx = crate::db::begin_write(&ctx.pool).await?;
            let ok = webhooks::claim(&mut tx, row.id, now, now + millis(CLAIM_LEASE)).await?;
            tx.commit().await?;
            ok
        };
        if !claimed {
            continue;
        }
        let result = send(ctx, url.as_str(), secret.expose_secret().as_bytes(), &row).await;
        record(ctx, &row, result).await?;
        attempted += 1;
    }
    Ok(attempted)
}

/// POSTs one delivery; `Ok(status)` for 2xx, else the status (if any) and a generic reason.
async fn send(
    ctx: &Ctx,
    url: &str,
    secret: &[u8],
    row: &DeliveryRow,
) -> Result<u16, (Option<u16>, String)> {
    let headers = [
        ("Content-Type", "application/json".to_owned()),
        (EVENT_HEADER, row.event.clone()),
        (DELIVERY_HEADER, row.id.to_string()),
        (SIGNATURE_HEADER, signature(secret, row.body.as_bytes())),
    ];
    match ctx
        .webhook_client
        .post(url, &headers, row.body.clone().into_bytes())
        .await
    {
        Ok(res) => Ok(res.status().as_u16()),
        // Only the status and the coarse reason are kept: the receiver's body is never stored
        // or echoed.
        Err(crate::outbound::FetchError::Status(code)) => {
            Err((Some(code), format!("receiver answered HTTP {code}")))
        }
        Err(e) => Err((None, e.to_string())),
    }
}

/// Settles an attempt and, when the delivery is done either way, notes it on the request's
/// timeline, in one short write.
async fn record(
    ctx: &Ctx,
    row: &DeliveryRow,
    result: Result<u16, (Option<u16>, String)>,
) -> anyhow::Result<()> {
    let now = ctx.now();
    let attempts = u32::try_from(row.attempts)
        .unwrap_or(u32::MAX)
        .saturating_add(1);
    let (outcome, line) = match &result {
        Ok(status) => (
            Settle::Delivered { status: *status },
            Some(format!(
                "webhook {} delivered (attempt {attempts}, HTTP {status})",
                row.event
            )),
        ),
        Err((status, error)) if attempts >= ctx.settings.webhook_attempts => (
            Settle::Failed {
                status: *status,
                error,
            },
            Some(format!(
                "webhook {} failed after {attempts} attempts: {error}",
                row.event
            )),
        ),
        Err((status, error)) => (
            Settle::Retry {
                status: *status,
                error,
                next_attempt_at: now + millis(backoff(attempts, unit_random())),
            },
            None,
        ),
    };
    if let Err((_, error)) = &result {
        tracing::info!(webhook.delivery = row.id, webhook.attempts = attempts, error = %error, "webhook delivery attempt failed");
    }
    let mut tx = crate::db::begin_write(&ctx.pool).await?;
    webhooks::settle(&mut tx, row.id, now, outcome).await?;
    if let (Some(message), Some(provision_id)) = (line, row.provision_id) {
        provision_events::append(
            &mut tx,
            NewEvent {
                provision_id,
                at: now,
                kind: "webhook",
                machine: None,
                message: &message,
                details: &json!({ "delivery_id": row.id, "event": row.event, "attempts": attempts }),
            },
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Delivers due notifications every `POLL_EVERY` until `shutdown` turns true. Due-ness comes
/// from the context's clock, so tests call [`deliver_once`] directly instead.
pub async fn run_until_stopped(ctx: Ctx, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(POLL_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            // A stop wins over a due tick: a delivery not sent now is sent after the restart.
            biased;
            () = crate::shutdown::requested(&mut shutdown) => break,
            _ = tick.tick() => {
                if let Err(e) = deliver_once(&ctx).await {
                    tracing::warn!(error = %e, "webhook delivery round failed");
                }
            }
        }
    }
    tracing::debug!("webhook delivery stopped");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_one_second_and_stops_at_ten_minutes() {
        let top = |n| backoff(n, 1.0);
        assert_eq!(top(1), Duration::from_secs(1));
        assert_eq!(top(2), Duration::from_secs(2));
        assert_eq!(top(3), Duration::from_secs(4));
        assert_eq!(top(10), Duration::from_secs(512));
        assert_eq!(top(11), BACKOFF_CAP);
        assert_eq!(top(u32::MAX), BACKOFF_CAP);
        // Jitter spreads each delay over its upper half, never beyond the nominal value.
        assert_eq!(backoff(3, 0.0), Duration::from_secs(2));
        assert!(backoff(3, 0.5) > Duration::from_secs(2) && backoff(3, 0.5) < top(3));
    }

    #[test]
    fn the_signature_is_the_rfc_4231_hmac_sha256_of_the_exact_body() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn every_event_has_a_dotted_name() {
        for (state, name) in [
            (ProvisionState::PendingApproval, "provision.requested"),
            (ProvisionState::Approved, "provision.approved"),
            (ProvisionState::Rejected, "provision.rejected"),
            (ProvisionState::Expired, "provision.expired"),
            (ProvisionState::Succeeded, "provision.finished"),
            (ProvisionState::Failed, "provision.finished"),
        ] {
            assert_eq!(Event::for_state(state).unwrap().as_str(), name);
        }
        assert_eq!(Event::for_state(ProvisionState::Executing), None);
    }
}
