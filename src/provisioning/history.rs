//! Provision history: the filters the history page, its exports and the API share (parsed
//! once, here), and the export itself — every matching request as CSV or JSONL, newest first
//! like the list, walked page by page through `requests::list` so memory stays flat however
//! long the history is.

use super::{requests, Provision, ProvisionFilter};
use crate::context::Ctx;
use crate::domain::clock::format_utc;
use crate::domain::{Caller, FieldErrors, ProvisionState};
use crate::error::OpError;
use crate::export::params::query_params;
use crate::export::{self, ExportFormat, ExportStream};

/// Requests read per page while exporting.
const EXPORT_PAGE: u32 = 200;
/// The download's name, before its extension.
pub const FILE_STEM: &str = "headroom-provisions";

query_params! {
    /// Filters as submitted: the query string of the history page, its export links, and the
    /// API's listing and export. Empty means "any".
    #[derive(Debug, Clone, Default, serde::Deserialize, utoipa::IntoParams)]
    #[serde(default)]
    #[into_params(parameter_in = Query)]
    pub struct FilterQuery {
        /// Exact fleet name.
        pub fleet: @filter_text,
        /// Exact machine config name.
        pub machine_config: @filter_text,
        /// A state.
        #[param(value_type = Option<String>, pattern = "^(pending_approval|approved|executing|succeeded|failed|rejected|expired|cancelled|superseded)?$")]
        pub state: String,
        /// Exact requester username.
        pub requester: @filter_text,
        /// Requests this user approved.
        pub approver: @filter_text,
        /// Created at or after, UTC (`2026-12-02T09:30` or RFC 3339).
        pub from: @utc_bound,
        /// Created before, UTC; later than `from`.
        pub to: @utc_bound,
    }
}

/// Parses every filter, naming each field that breaks its rule.
pub fn parse_filter(input: &FilterQuery) -> Result<ProvisionFilter, FieldErrors> {
    let mut errors = FieldErrors::default();
    let state = match input.state.trim() {
        "" => None,
        raw => errors.check(ProvisionState::parse_field("state", raw)),
    };
    let filter = ProvisionFilter {
        fleet: export::filter_text(&mut errors, "fleet", &input.fleet),
        machine_config: export::filter_text(&mut errors, "machine_config", &input.machine_config),
        state,
        requester: export::filter_text(&mut errors, "requester", &input.requester),
        approver: export::filter_text(&mut errors, "approver", &input.approver),
        from: export::filter_time(&mut errors, "from", &input.from),
        to: export::filter_time(&mut errors, "to", &input.to),
    };
    export::check_window(&mut errors, filter.from, filter.to);
    if errors.is_empty() {
        Ok(filter)
    } else {
        Err(errors)
    }
}

/// The CSV header row: one column per [`Record`] field.
pub const CSV_HEADER: &str = "id,created_at,state,state_reason,fleet,machine_config,\
config_version,template,template_version,count,requester,approvers,reason,plan_hash,\
monthly_cost,currency,finished_at,server_ids\n";

/// One request as exported (CSV and JSONL share the columns).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Record {
    pub id: i64,
    /// RFC 3339, UTC.
    pub created_at: String,
    pub state: &'static str,
    pub state_reason: String,
    pub fleet: String,
    pub machine_config: String,
    pub config_version: i64,
    pub template: String,
    pub template_version: i64,
    pub count: u32,
    pub requester: String,
    pub approvers: Vec<String>,
    pub reason: String,
    pub plan_hash: String,
    pub monthly_cost: String,
    pub currency: String,
    /// RFC 3339, UTC; absent until the request ends.
    pub finished_at: Option<String>,
    /// The provider's ids of the servers created, by machine.
    pub server_ids: Vec<i64>,
}

impl Record {
    /// The exported view of `p`, with its machines' server ids.
    pub fn new(p: &Provision, server_ids: Vec<i64>) -> Record {
        Record {
            id: p.id,
            created_at: format_utc(p.created_at),
            state: p.state.as_str(),
            state_reason: p.state_reason.clone(),
            fleet: p.fleet.to_string(),
            machine_config: p.machine_config.to_string(),
            config_version: p.config_version,
            template: p.template.to_string(),
            template_version: p.template_version,
            count: p.count,
            requester: p.requester.clone(),
            approvers: p.approvers.clone(),
            reason: p.reason.clone(),
            plan_hash: p.plan_hash.to_string(),
            monthly_cost: p.plan.monthly_cost.clone(),
            currency: p.plan.currency.clone(),
            finished_at: p.finished_at.map(format_utc),
            server_ids,
        }
    }
}

impl export::Record for Record {
    const CSV_HEADER: &'static str = CSV_HEADER;

    /// Lists are joined with spaces.
    fn csv_cells(&self) -> Vec<String> {
        let join = |v: &[String]| v.join(" ");
        vec![
            self.id.to_string(),
            self.created_at.clone(),
            self.state.to_owned(),
            self.state_reason.clone(),
            self.fleet.clone(),
            self.machine_config.clone(),
            self.config_version.to_string(),
            self.template.clone(),
            self.template_version.to_string(),
            self.count.to_string(),
            self.requester.clone(),
            join(&self.approvers),
            self.reason.clone(),
            self.plan_hash.clone(),
            self.monthly_cost.clone(),
            self.currency.clone(),
            self.finished_at.clone().unwrap_or_default(),
            join(
                &self
                    .server_ids
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>(),
            ),
        ]
    }
}

/// Encodes a page of requests with their machines' server ids.
async fn encode(ctx: &Ctx, page: &[Provision], format: ExportFormat) -> anyhow::Result<String> {
    let mut conn = ctx.pool.acquire().await?;
    // One query for the whole page's machines, not one per request.
    let ids: Vec<i64> = page.iter().map(|p| p.id).collect();
    let mut servers: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
    for (id, m) in crate::db::provisions::machines_of(&mut conn, &ids).await? {
        if let Some(server) = m.server_id {
            servers.entry(id).or_default().push(server);
        }
    }
    let mut out = String::new();
    for p in page {
        let server_ids = servers.remove(&p.id).unwrap_or_default();
        out.push_str(&format.line(&Record::new(p, server_ids)));
    }
    Ok(out)
}

/// Every request matching `filter`, newest first (the list's order), as a stream of encoded
/// chunks. The first page is read before this returns, so a refused caller or a failing
/// database is an error here, not a broken download; the rest is walked on its own task, a
/// page at a time, and stops when the stream is dropped.
pub async fn export(
    ctx: &Ctx,
    caller: &Caller,
    filter: &ProvisionFilter,
    format: ExportFormat,
) -> Result<ExportStream, OpError> {
    // An export walks the whole (filtered) history: a few at a time, shared with the audit
    // export, so a flood of them cannot slow every other request.
    let permit = ctx.exports.clone().try_acquire_owned().map_err(|_| {
        OpError::throttled(
            crate::audit::EXPORT_RETRY_AFTER,
            format!(
                "{} exports are already running; try again in a moment",
                crate::context::MAX_EXPORTS
            ),
        )
    })?;
    let (first, mut cursor) = requests::list(ctx, caller, filter, None, EXPORT_PAGE).await?;
    let mut head = format.head::<Record>().to_owned();
    head.push_str(
        &encode(ctx, &first, format)
            .await
            .map_err(OpError::Internal)?,
    );
    let (ctx, caller, filter) = (ctx.clone(), caller.clone(), filter.clone());
    Ok(export::spawn_walk(
        "provision",
        permit,
        move |sink| async move {
            if !sink.send(head).await {
                return Ok(());
            }
            while let Some(before) = cursor {
                let (page, next) =
                    requests::list(&ctx, &caller, &filter, Some(before), EXPORT_PAGE).await?;
                cursor = next;
                let chunk = encode(&ctx, &page, format).await?;
                if !sink.send(chunk).await {
                    break;
                }
            }
            Ok::<(), OpError>(())
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_refused_by_field() {
        let long = "x".repeat(export::MAX_FILTER_CHARS + 1);
        let input = FilterQuery {
            fleet: long,
            machine_config: "a\u{0}b".into(),
            state: "done".into(),
            requester: String::new(),
            approver: "bob".into(),
            from: "2026-12-02T10:00".into(),
            to: "2026-12-02T09:00".into(),
        };
        let errors = parse_filter(&input).unwrap_err();
        let fields: Vec<_> = errors.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["state", "fleet", "machine_config", "to"]);
        assert!(errors
            .for_field("state")
            .unwrap()
            .contains("pending_approval"));
        let bad_time = parse_filter(&FilterQuery {
            from: "yesterday".into(),
            ..FilterQuery::default()
        })
        .unwrap_err();
        assert!(bad_time
            .for_field("from")
            .unwrap()
            .contains("2026-12-02T09:30"));
        let ok = parse_filter(&FilterQuery {
            state: " succeeded ".into(),
            approver: "bob".into(),
            ..FilterQuery::default()
        })
        .unwrap();
        assert_eq!(ok.state, Some(ProvisionState::Succeeded));
        assert_eq!(ok.approver.as_deref(), Some("bob"));
        assert_eq!(ExportFormat::parse("xml").unwrap_err().field, "format");
    }
}
