//! Executing a claimed request: one label lookup for the whole request, adopt what exists,
//! create what does not (each machine's `creating` committed before its create is sent),
//! poll every create action to its end, then finish the request.
//!
//! Provider calls per created server: one create, one action poll when the action is quick,
//! and a share of the one label lookup. The server is read again only when the create answer
//! lacked its address: the action's success is what makes a machine `created`.

use std::collections::BTreeMap;
use std::sync::Arc;

use secrecy::SecretString;
use serde_json::json;

use super::payload::{self, Payloads};
use super::{event, Options};
use crate::context::Ctx;
use crate::db;
use crate::db::provision_jobs::{self, MachineUpdate};
use crate::db::provisions::{self, ProvisionRow};
use crate::domain::machine::ProviderKind;
use crate::domain::provision::MachineRecord;
use crate::domain::{Actor, MachineStatus, ProvisionState};
use crate::provider::{
    ActionStatus, Created, MachineProvider, ProviderError, Server, ServerSpec, FLEET_LABEL,
    PROVISION_LABEL,
};
use crate::provisioning::transition::{self, Transition};
use crate::provisioning::Plan;

/// Runs request `id` (which must be `executing`) to a terminal state. `payloads` are the
/// claim's renders; a reconcile passes `None` and renders only if something must be created.
pub(super) async fn execute(
    ctx: &Ctx,
    opts: &Options,
    id: i64,
    payloads: Option<Payloads>,
) -> anyhow::Result<()> {
    let job = {
        let mut conn = ctx.pool.acquire().await?;
        provisions::get(&mut conn, id).await?
    };
    let Some(job) = job.filter(|j| j.state == ProvisionState::Executing.as_str()) else {
        return Ok(());
    };
    let plan: Plan = serde_json::from_str(&job.plan)
        .map_err(|e| anyhow::anyhow!("stored plan of provision {id}: {e}"))?;
    let provider = ProviderKind::parse_field("provider", &plan.provider)
        .ok()
        .and_then(|k| ctx.providers.get(k).cloned());
    let mut run = Run {
        ctx,
        opts,
        job: &job,
        plan: &plan,
        payloads: payloads.map(Ok),
        provider: None,
    };
    match provider {
        Some(p) => {
            run.provider = Some(p);
            run.machines().await?;
        }
        None => {
            let why = format!(
                "provider {} is not enabled on this instance (for hetzner, set HETZNER_API_TOKEN)",
                plan.provider
            );
            for m in run.load().await?.iter().filter(|m| !m.status.is_settled()) {
                run.fail(m, &why).await?;
            }
        }
    }
    run.finish().await
}

struct Run<'a> {
    ctx: &'a Ctx,
    opts: &'a Options,
    job: &'a ProvisionRow,
    plan: &'a Plan,
    /// Rendered on first need during a reconcile; `Err` when the plan cannot be rendered.
    payloads: Option<Result<Payloads, String>>,
    provider: Option<Arc<dyn MachineProvider>>,
}

impl Run<'_> {
    fn provider(&self) -> &dyn MachineProvider {
        self.provider
            .as_deref()
            .expect("machines() runs only with a provider")
    }

    async fn load(&self) -> anyhow::Result<Vec<MachineRecord>> {
        let mut conn = self.ctx.pool.acquire().await?;
        Ok(provisions::machines(&mut conn, self.job.id).await?)
    }

    async fn machines(&mut self) -> anyhow::Result<()> {
        let machines = self.load().await?;
        if machines.iter().all(|m| m.status.is_settled()) {
            return Ok(());
        }
        let unsent = machines
            .iter()
            .filter(|m| !m.status.is_settled() && m.server_id.is_none());
        match self.lookup().await? {
            Ok(found) => {
                for m in unsent {
                    match found.iter().find(|s| s.name == m.name) {
                        Some(s) => self.adopt(m, s, "found by its provision label").await?,
                        None => self.create(m).await?,
                    }
                }
            }
            // Without the lookup a create could make a second server: fail instead.
            Err(e) => {
                let why = format!("looking up this request's servers at the provider failed: {e}");
                for m in unsent {
                    self.fail(m, &why).await?;
                }
            }
        }
        let booting: Vec<MachineRecord> = self
            .load()
            .await?
            .into_iter()
            .filter(|m| m.status == MachineStatus::Booting)
            .collect();
        self.await_boot(booting).await
    }

    /// The one label lookup (retried a bounded number of times when transient).
    async fn lookup(&self) -> anyhow::Result<Result<Vec<Server>, ProviderError>> {
        let value = self.job.id.to_string();
        let mut last = None;
        for attempt in 0..self.opts.create_attempts {
            match self.provider().find_by_label(PROVISION_LABEL, &value).await {
                Ok(servers) => return Ok(Ok(servers)),
                Err(e) if e.is_transient() => {
                    self.wait_after(&e, attempt).await;
                    last = Some(e);
                }
                Err(e) => return Ok(Err(e)),
            }
        }
        Ok(Err(last.unwrap_or_else(|| {
            ProviderError::other("no lookup attempted")
        })))
    }

    async fn wait_after(&self, e: &ProviderError, attempt: u32) {
        let wait = match e {
            ProviderError::RateLimited { retry_after } => (*retry_after).min(self.opts.max_wait),
            _ => self.opts.poll_delay(attempt),
        };
        tokio::time::sleep(wait).await;
    }

    fn spec_for(
        &self,
        m: &MachineRecord,
        payloads: &Payloads,
        user_data: SecretString,
    ) -> ServerSpec {
        let mut labels: BTreeMap<String, String> = payloads
            .spec
            .labels
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.as_str().to_owned()))
            .collect();
        labels.insert(PROVISION_LABEL.into(), self.job.id.to_string());
        labels.insert(FLEET_LABEL.into(), self.job.fleet.clone());
        ServerSpec {
            name: m.name.clone(),
            server_type: self.plan.server_type.clone(),
            image: self.plan.image.clone(),
            location: self.plan.location.clone(),
            user_data,
            labels,
            ssh_keys: payloads.spec.ssh_keys.iter().map(|k| *k as i64).collect(),
        }
    }

    /// The real payload of `m`, or why it may not be sent.
    async fn payload_for(
        &mut self,
        m: &MachineRecord,
    ) -> anyhow::Result<Result<ServerSpec, String>> {
        if self.payloads.is_none() {
            self.payloads = Some(payload::render(self.ctx, self.job).await?);
        }
        Ok(match self.payloads.as_ref().expect("rendered above") {
            Err(stale) => Err(format!("not created: the plan no longer matches: {stale}")),
            Ok(p) => match p.by_name.get(&m.name) {
                Some(user_data) => Ok(self.spec_for(m, p, user_data.clone())),
                None => Err("not created: the plan has no payload for it".to_owned()),
            },
        })
    }

    async fn create(&mut self, m: &MachineRecord) -> anyhow::Result<()> {
        let spec = match self.payload_for(m).await? {
            Ok(spec) => spec,
            Err(why) => return self.fail(m, &why).await,
        };
        let via = self.provider().name();
        for attempt in 0..self.opts.create_attempts {
            // Committed before the call: after a crash, `creating` says a create may have
            // been sent, and the label lookup decides whether it was.
            self.step(
                m,
                &[MachineStatus::Planned, MachineStatus::Creating],
                MachineStatus::Creating,
                &MachineUpdate::default(),
                ("provider.call", format!("create {} via {via}", m.name)),
                json!({ "attempt": attempt + 1 }),
            )
            .await?;
            let e = match self.provider().create_server(&spec).await {
                Ok(created) => return self.record_created(m, &created).await,
                Err(e) => e,
            };
            self.answer(
                m,
                &format!("create {} failed: {e}", m.name),
                json!({ "error": e.to_string() }),
            )
            .await?;
            match &e {
                ProviderError::NameConflict(api) => {
                    return match self.provider().find_by_name(&m.name).await {
                        Ok(Some(s)) if self.is_ours(&s) => {
                            self.adopt(m, &s, "found by name after a name conflict")
                                .await
                        }
                        _ => self.fail(m, &api.to_string()).await,
                    };
                }
                e if e.is_transient() => {
                    // The create may have happened (a lost answer): look before sending again.
                    self.wait_after(e, attempt).await;
                    // A create is never sent again unless the label lookup answered and
                    // showed no server of this name: a failed lookup fails the machine (an
                    // approver can look, and destroy what exists) rather than risk a second.
                    match self.lookup().await? {
                        Ok(servers) => {
                            if let Some(s) = servers.iter().find(|s| s.name == m.name) {
                                return self.adopt(m, s, "found by its provision label").await;
                            }
                        }
                        Err(lookup) => {
                            let why = format!(
                                "{e}; the label lookup that must come before another create \
                                 failed too ({lookup}), so no second create was sent"
                            );
                            return self.fail(m, &why).await;
                        }
                    }
                    if attempt + 1 == self.opts.create_attempts {
                        let why = format!(
                            "{e} (gave up after {} create attempts)",
                            self.opts.create_attempts
                        );
                        return self.fail(m, &why).await;
                    }
                }
                e => return self.fail(m, &e.to_string()).await,
            }
        }
        Ok(())
    }

    fn is_ours(&self, s: &Server) -> bool {
        s.labels.get(PROVISION_LABEL) == Some(&self.job.id.to_string())
    }

    async fn record_created(&self, m: &MachineRecord, c: &Created) -> anyhow::Result<()> {
        let done = c
            .action
            .as_ref()
            .is_none_or(|a| a.status == ActionStatus::Success);
        let details = json!({
            "server_id": c.server.id,
            "status": c.server.status,
            "ipv4": c.server.ipv4,
            "action": c.action.as_ref().map(|a| json!({
                "id": a.id, "command": a.command, "status": a.status, "progress": a.progress,
            })),
        });
        self.step(
            m,
            &[MachineStatus::Creating],
            if done {
                MachineStatus::Created
            } else {
                MachineStatus::Booting
            },
            &MachineUpdate {
                server_id: Some(c.server.id),
                action_id: c.action.as_ref().map(|a| a.id),
                ipv4: c.server.ipv4.as_deref(),
                provider_status: Some(&c.server.status),
                error: None,
            },
            (
                "provider.answer",
                format!("created server {} ({})", c.server.id, c.server.status),
            ),
            details,
        )
        .await
    }

    /// Takes over a server found at the provider. Its create action is unknown (the answer
    /// was lost, or a previous process died before storing it), so the server's own status
    /// decides: one that exists and is coming up or up is the machine; any other (`off` after
    /// a failed boot, `deleting`) is a failure left for an approver to look at.
    async fn adopt(&self, m: &MachineRecord, s: &Server, how: &str) -> anyhow::Result<()> {
        let alive = matches!(s.status.as_str(), "running" | "initializing" | "starting");
        self.step(
            m,
            &[MachineStatus::Planned, MachineStatus::Creating],
            if alive {
                MachineStatus::Created
            } else {
                MachineStatus::Failed
            },
            &MachineUpdate {
                server_id: Some(s.id),
                ipv4: s.ipv4.as_deref(),
                provider_status: Some(&s.status),
                error: (!alive)
                    .then(|| format!("adopted server {} is {}", s.id, s.status))
                    .as_deref(),
                ..MachineUpdate::default()
            },
            (
                "provider.answer",
                format!("adopted server {} ({}), {how}", s.id, s.status),
            ),
            json!({ "server_id": s.id, "status": s.status, "ipv4": s.ipv4, "adopted": true }),
        )
        .await
    }

    /// Polls the create actions of `booting` machines until each ends: rounds with a
    /// doubling wait, every machine still running polled once per round (so the machines of
    /// one request share their waits), at most `action_polls` rounds.
    async fn await_boot(&self, mut booting: Vec<MachineRecord>) -> anyhow::Result<()> {
        for n in 0..self.opts.action_polls {
            if booting.is_empty() {
                return Ok(());
            }
            tokio::time::sleep(self.opts.poll_delay(n)).await;
            let mut still = Vec::with_capacity(booting.len());
            for m in booting {
                let settled = match (m.server_id, m.action_id) {
                    (Some(server_id), Some(action_id)) => {
                        self.poll_action(&m, server_id, action_id).await?
                    }
                    // Booting without a known action is never written by this runner; a
                    // server id alone means the server exists.
                    _ => {
                        self.booted(&m, None, None, "server exists").await?;
                        true
                    }
                };
                if !settled {
                    still.push(m);
                }
            }
            booting = still;
        }
        for m in &booting {
            let why = format!(
                "create action {} of server {} was still running after {} polls; the server \
                 exists at the provider: check it there, then destroy it here if it is broken",
                m.action_id.unwrap_or_default(),
                m.server_id.unwrap_or_default(),
                self.opts.action_polls
            );
            self.fail(m, &why).await?;
        }
        Ok(())
    }

    /// One poll of the create action; true when the machine is settled.
    async fn poll_action(
        &self,
        m: &MachineRecord,
        server_id: i64,
        id: i64,
    ) -> anyhow::Result<bool> {
        let a = match self.provider().action(id).await {
            Ok(a) => a,
            Err(e) if e.is_transient() => return Ok(false),
            Err(e) => {
                self.fail(m, &format!("polling create action {id}: {e}"))
                    .await?;
                return Ok(true);
            }
        };
        match a.status {
            ActionStatus::Running => Ok(false),
            ActionStatus::Error => {
                let err = a
                    .error
                    .map_or_else(|| "no reason given".to_owned(), |e| e.to_string());
                self.fail(m, &format!("create action {id} ended in error: {err}"))
                    .await?;
                Ok(true)
            }
            ActionStatus::Success => {
                let mut ipv4 = m.ipv4.clone();
                let mut status = None;
                if ipv4.is_none() {
                    match self.provider().server(server_id).await {
                        Ok(Some(s)) => {
                            ipv4 = s.ipv4;
                            status = Some(s.status);
                        }
                        Ok(None) => {
                            self.fail(m, &format!("server {server_id} is gone at the provider"))
                                .await?;
                            return Ok(true);
                        }
                        // The action succeeded: the address is a detail worth no retry loop.
                        Err(e) => tracing::warn!(error = %e, "reading a created server"),
                    }
                }
                self.booted(
                    m,
                    ipv4.as_deref(),
                    status.as_deref(),
                    &format!("create action {id} succeeded"),
                )
                .await?;
                Ok(true)
            }
        }
    }

    async fn booted(
        &self,
        m: &MachineRecord,
        ipv4: Option<&str>,
        status: Option<&str>,
        message: &str,
    ) -> anyhow::Result<()> {
        self.step(
            m,
            &[MachineStatus::Booting],
            MachineStatus::Created,
            &MachineUpdate {
                ipv4,
                provider_status: status,
                ..MachineUpdate::default()
            },
            ("provider.answer", message.to_owned()),
            json!({ "server_id": m.server_id, "ipv4": ipv4, "status": status }),
        )
        .await
    }

    async fn fail(&self, m: &MachineRecord, why: &str) -> anyhow::Result<()> {
        self.step(
            m,
            &[
                MachineStatus::Planned,
                MachineStatus::Creating,
                MachineStatus::Booting,
            ],
            MachineStatus::Failed,
            &MachineUpdate {
                error: Some(why),
                ..MachineUpdate::default()
            },
            ("machine", format!("{} failed: {why}", m.name)),
            json!({ "server_id": m.server_id }),
        )
        .await
    }

    async fn answer(
        &self,
        m: &MachineRecord,
        message: &str,
        details: serde_json::Value,
    ) -> anyhow::Result<()> {
        event(
            self.ctx,
            self.job.id,
            "provider.answer",
            Some(&m.name),
            message,
            details,
        )
        .await
    }

    /// One machine write and its timeline line, committed together.
    async fn step(
        &self,
        m: &MachineRecord,
        from: &[MachineStatus],
        to: MachineStatus,
        u: &MachineUpdate<'_>,
        (kind, message): (&str, String),
        details: serde_json::Value,
    ) -> anyhow::Result<()> {
        let now = self.ctx.now();
        let mut tx = db::begin_write(&self.ctx.pool).await?;
        super::lease::check(&mut tx, self.ctx, self.job.id).await?;
        let written =
            provision_jobs::set_machine(&mut tx, self.job.id, m.idx, from, to, u, now).await?;
        anyhow::ensure!(
            written,
            "provision {} machine {}: not in {from:?}, cannot become {to}",
            self.job.id,
            m.name
        );
        db::provision_events::append(
            &mut tx,
            db::provision_events::NewEvent {
                provision_id: self.job.id,
                at: now,
                kind,
                machine: Some(&m.name),
                message: &message,
                details: &details,
            },
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Notes on the timeline, once, that the created machines are now awaited as members.
    async fn await_joins(
        &self,
        machines: usize,
        timeout: std::time::Duration,
    ) -> anyhow::Result<()> {
        let mut tx = db::begin_write(&self.ctx.pool).await?;
        super::lease::check(&mut tx, self.ctx, self.job.id).await?;
        let noted = db::provision_events::for_provision(&mut tx, self.job.id)
            .await?
            .iter()
            .any(|e| e.kind == "awaiting_join");
        if !noted {
            let message = format!(
                "{machines} machine{} running; waiting up to {} min for {} to join fleet {}",
                if machines == 1 { "" } else { "s" },
                timeout.as_secs() / 60,
                if machines == 1 { "it" } else { "them" },
                self.job.fleet
            );
            db::provision_events::append(
                &mut tx,
                db::provision_events::NewEvent {
                    provision_id: self.job.id,
                    at: self.ctx.now(),
                    kind: "awaiting_join",
                    machine: None,
                    message: &message,
                    details: &json!({ "join_timeout_minutes": timeout.as_secs() / 60 }),
                },
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Moves the request to `succeeded` (every machine created) or `failed` (naming the
    /// machines that were not), once every machine is settled; with joins followed, a request
    /// whose machines were all created waits for them to join instead.
    async fn finish(&self) -> anyhow::Result<()> {
        let machines = self.load().await?;
        if let Some(m) = machines.iter().find(|m| !m.status.is_settled()) {
            anyhow::bail!(
                "provision {}: machine {} is still {} after execution",
                self.job.id,
                m.name,
                m.status
            );
        }
        let failed: Vec<String> = machines
            .iter()
            .filter(|m| m.status != MachineStatus::Created)
            .map(|m| {
                format!(
                    "{} ({})",
                    m.name,
                    m.error.as_deref().unwrap_or(m.status.as_str())
                )
            })
            .collect();
        if failed.is_empty() {
            if let Some(timeout) = self.ctx.settings.join_timeout {
                if machines.iter().any(|m| m.joined_at.is_none()) {
                    // Running is the cloud's word: the request succeeds when its machines
                    // join the fleet (`joins`), or fails when they do not in time.
                    return self.await_joins(machines.len(), timeout).await;
                }
            }
        }
        let (to, reason) = if failed.is_empty() {
            (ProvisionState::Succeeded, String::new())
        } else {
            (
                ProvisionState::Failed,
                format!(
                    "{} of {} machines not created: {}",
                    failed.len(),
                    machines.len(),
                    failed.join("; ")
                ),
            )
        };
        let mut tx = db::begin_write(&self.ctx.pool).await?;
        super::lease::check(&mut tx, self.ctx, self.job.id).await?;
        transition::apply(
            &mut tx,
            self.ctx,
            self.ctx.now(),
            Transition {
                provision_id: self.job.id,
                from: ProvisionState::Executing,
                to,
                actor: &Actor::System,
                reason: &reason,
                details: json!({ "machines": machines.len(), "failed": failed.len() }),
            },
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
