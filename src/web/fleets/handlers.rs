//! Fleet handlers: parse, call one operation, render.

use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};

use super::capacity::page_path;
use super::forms::FleetForm;
use super::views;
use super::views::{ChartPanel, Refused};
use super::window::{self, ChartWindow, DEFAULT_RANGE};
use crate::capacity::{board, series};
use crate::domain::capacity::{Annotation, Range, Series};
use crate::domain::fleet::FleetInput;
use crate::domain::{Caller, FieldErrors, Role, UnixMillis};
use crate::error::OpError;
use crate::fleets::{self};
use crate::http::html_error;
use crate::machine_setup::configs;
use crate::state::AppState;
use crate::web::components::filter_query;
use crate::web::errors::WebError;
use crate::web::layout::fragment;
use crate::web::reply::{submitted, Reply, Shown};
use crate::web::{paths, see_other};

/// GET /fleets
pub async fn list(reply: Reply) -> Result<HttpResponse, WebError> {
    let all = fleets::list(reply.ctx(), &reply.caller()).await?;
    let board = board::board(reply.ctx(), &reply.caller()).await?;
    let can_edit = reply.principal.role.includes(Role::Operator);
    let now = reply.ctx().now();
    let body = || views::list(now, &all, &board, can_edit);
    Ok(reply.page(StatusCode::OK, "Fleets", "fleets", body).await)
}

/// The create or edit form (`editing` names the fleet), `shown` fresh or with its errors.
async fn form_page(
    reply: &Reply,
    editing: Option<&str>,
    form: &FleetForm,
    shown: Shown<'_>,
) -> Result<HttpResponse, WebError> {
    let errors = shown.errors();
    let (ctx, caller) = (&reply.state.ctx, reply.principal.caller());
    let configs = configs::names(ctx, &caller).await?;
    let declared = fleets::secrets::declared(ctx, &caller)?;
    let title = editing.map_or_else(|| "New fleet".to_owned(), |n| format!("Edit fleet {n}"));
    let body = || views::form_page(&reply.principal, editing, form, errors, &configs, &declared);
    Ok(reply.page(shown.status(), title, "fleets", body).await)
}

/// Where a fleet's page is.
fn fleet_path(name: &str) -> String {
    paths::fill(paths::FLEET, &[("name", name)])
}

/// GET /fleets/new
pub async fn new(reply: Reply) -> Result<HttpResponse, WebError> {
    let form = FleetForm::defaults();
    form_page(&reply, None, &form, Shown::Fresh).await
}

/// POST /fleets
pub async fn create(reply: Reply, form: web::Form<FleetForm>) -> Result<HttpResponse, WebError> {
    let input = FleetInput::from(&*form);
    submitted(
        fleets::create(reply.ctx(), &reply.caller(), &input).await,
        async |f| {
            let name = f.spec.name();
            let msg = format!("Fleet {name} created.");
            reply.done(&msg, see_other(&fleet_path(name))).await
        },
        async |errors| form_page(&reply, None, &form, Shown::Refused(&errors)).await,
    )
    .await
}

/// The chart's window as sent to the fleet page and its chart partial: `?range=`, or a
/// custom `?from=&to=` (which wins when either is given).
#[derive(Debug, serde::Deserialize)]
pub struct WindowQuery {
    range: Option<String>,
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
}

impl WindowQuery {
    /// The custom window asked for: `Ok(None)` without `from` and `to`, else the window or
    /// the rules it broke.
    fn custom(&self, now: UnixMillis) -> Result<Option<ChartWindow>, FieldErrors> {
        window::custom(&self.from, &self.to, now)
    }

    /// The range asked for (1 h without one), or the message naming `range` and the allowed
    /// values (for a 400).
    fn range(&self) -> Result<Range, String> {
        let given = self.range.as_deref().unwrap_or(DEFAULT_RANGE.as_str());
        Range::parse(given).ok_or_else(|| {
            let allowed: Vec<&str> = Range::ALL.iter().map(|r| r.as_str()).collect();
            format!(
                "range: \"{given}\" is not a chart range; use one of {}",
                allowed.join(", ")
            )
        })
    }

    /// The refused values beside their rules, for the form.
    fn refused<'a>(&'a self, errors: &'a FieldErrors) -> Refused<'a> {
        Refused {
            from: window::echo(&self.from),
            to: window::echo(&self.to),
            errors,
        }
    }
}

/// Recent samples shown on the fleet page.
const PAGE_SAMPLES: u32 = 50;
/// Deficits shown on the fleet page (newest first).
const PAGE_DEFICITS: u32 = 20;

/// The chart of `window` read at `now`: the series and the provision requests over it, read
/// together.
async fn chart_data(
    state: &AppState,
    caller: &Caller,
    name: &str,
    window: ChartWindow,
    now: UnixMillis,
) -> Result<(Series, Vec<Annotation>), OpError> {
    let (from, to) = window.bounds(now);
    tokio::try_join!(
        series::series(&state.ctx, caller, name, from, to, None),
        series::annotations(&state.ctx, caller, name, from, to),
    )
}

/// GET /fleets/{name}: settings, headroom now, the chart (`?range=`, 1 h by default, or a
/// custom `?from=&to=`), recent samples and time to restore. An unknown `range` falls back to
/// 1 h with a notice naming the allowed values, and a refused custom window to 1 h with each
/// field's rule: a stale bookmark still shows the fleet (the chart partial refuses an unknown
/// range, and the API any bad value, instead).
pub async fn show(
    reply: Reply,
    name: web::Path<String>,
    query: web::Query<WindowQuery>,
) -> Result<HttpResponse, WebError> {
    let caller = reply.caller();
    let now_ms = reply.ctx().now();
    let custom = query.custom(now_ms);
    let given = query.range.as_deref();
    let bad_range = given.filter(|g| Range::parse(g).is_none());
    let window = match &custom {
        Ok(Some(w)) => *w,
        Ok(None) => ChartWindow::Last(given.and_then(Range::parse).unwrap_or(DEFAULT_RANGE)),
        Err(_) => ChartWindow::Last(DEFAULT_RANGE),
    };
    let fleet = fleets::get(reply.ctx(), &caller, &name).await?;
    let (now, (series, annotations), samples, deficits, changes) = tokio::try_join!(
        board::now(reply.ctx(), &caller, &name),
        chart_data(&reply.state, &caller, &name, window, now_ms),
        series::recent_samples(reply.ctx(), &caller, &name, PAGE_SAMPLES),
        board::deficits(reply.ctx(), &caller, &name, PAGE_DEFICITS),
        fleets::history(reply.ctx(), &caller, &name),
    )?;
    let headroom = views::Headroom {
        now_ms,
        now: &now,
        // A custom window wins over `range`: its notice would describe another window.
        bad_range: bad_range.filter(|_| matches!(custom, Ok(None))),
        chart: ChartPanel {
            fleet: &name,
            window,
            refused: custom.as_ref().err().map(|e| query.refused(e)),
            series: &series,
            annotations: &annotations,
            updated: now_ms,
            scrape_interval_secs: fleet.spec.scrape_interval_secs(),
        },
        samples: &samples,
        deficits: &deficits,
    };
    let body = || views::show(&reply.principal, &fleet, &headroom, &changes);
    Ok(reply
        .page(StatusCode::OK, name.as_str(), "fleets", body)
        .await)
}

/// GET /fleets/{name}/chart?range= (or ?from=&to=): the chart panel the range buttons and
/// the window form swap in (1 h without either). An unknown `range` is refused with 400
/// naming the allowed values (only the page's own buttons send one, so a bad value is a bug
/// to surface, not to paper over); a refused custom window, typed by a person, is the panel
/// of the last hour with each field's rule beside it. The answer pushes the page's address
/// for what was asked (`HX-Push-Url`), so the address bar links to the same window.
pub async fn chart(
    reply: Reply,
    name: web::Path<String>,
    query: web::Query<WindowQuery>,
) -> Result<HttpResponse, WebError> {
    let now_ms = reply.ctx().now();
    let custom = query.custom(now_ms);
    let (window, pushed) = match &custom {
        Ok(Some(w)) => (*w, page_path(&name, *w)),
        Err(_) => {
            let asked = filter_query(&[("from", &query.from), ("to", &query.to)], None, None);
            let page = paths::fill(paths::FLEET, &[("name", &name)]);
            (ChartWindow::Last(DEFAULT_RANGE), format!("{page}?{asked}"))
        }
        Ok(None) => {
            let range = match query.range() {
                Ok(r) => r,
                Err(message) => return Ok(html_error(StatusCode::BAD_REQUEST, &message)),
            };
            let w = ChartWindow::Last(range);
            (w, page_path(&name, w))
        }
    };
    let caller = reply.caller();
    let (fleet, (series, annotations)) = tokio::try_join!(
        fleets::get(reply.ctx(), &caller, &name),
        chart_data(&reply.state, &caller, &name, window, now_ms),
    )?;
    let panel = ChartPanel {
        fleet: &name,
        window,
        refused: custom.as_ref().err().map(|e| query.refused(e)),
        series: &series,
        annotations: &annotations,
        updated: now_ms,
        scrape_interval_secs: fleet.spec.scrape_interval_secs(),
    };
    let mut res = fragment(StatusCode::OK, views::chart_panel(&panel));
    if let Ok(value) = HeaderValue::from_str(&pushed) {
        res.headers_mut()
            .insert(HeaderName::from_static("hx-push-url"), value);
    }
    Ok(res)
}

/// GET /fleets/{name}/chart/live?range= (or ?from=&to=, or ?from= for a window ending now):
/// the chart figure alone, for the same window, which the fleet page's `#chart-live` polls so
/// the chart stays live (a window ending now moves forward). Only the page's own markup sends
/// these values, so a bad one is a bug to surface: 400 naming the field and its rule. No
/// `HX-Push-Url`: a refresh is not a navigation, the address stays what the person chose.
pub async fn chart_live(
    reply: Reply,
    name: web::Path<String>,
    query: web::Query<WindowQuery>,
) -> Result<HttpResponse, WebError> {
    let now_ms = reply.ctx().now();
    let window = match query.custom(now_ms) {
        Ok(Some(w)) => w,
        Ok(None) => match query.range() {
            Ok(r) => ChartWindow::Last(r),
            Err(message) => return Ok(html_error(StatusCode::BAD_REQUEST, &message)),
        },
        Err(errors) => {
            let rules: Vec<String> = errors
                .0
                .iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect();
            return Ok(html_error(StatusCode::BAD_REQUEST, &rules.join("; ")));
        }
    };
    let caller = reply.caller();
    let (fleet, (series, annotations)) = tokio::try_join!(
        fleets::get(reply.ctx(), &caller, &name),
        chart_data(&reply.state, &caller, &name, window, now_ms),
    )?;
    let panel = ChartPanel {
        fleet: &name,
        window,
        refused: None,
        series: &series,
        annotations: &annotations,
        updated: now_ms,
        scrape_interval_secs: fleet.spec.scrape_interval_secs(),
    };
    Ok(fragment(StatusCode::OK, views::chart_live(&panel)))
}

/// GET /fleets/{name}/now: the fleet page's "now" section, which polls it every scrape
/// interval so the page stays live without a reload.
pub async fn now(reply: Reply, name: web::Path<String>) -> Result<HttpResponse, WebError> {
    let now = board::now(reply.ctx(), &reply.caller(), &name).await?;
    Ok(fragment(
        StatusCode::OK,
        views::now_section(reply.ctx().now(), &now),
    ))
}

/// GET /fleets/{name}/edit
pub async fn edit(reply: Reply, name: web::Path<String>) -> Result<HttpResponse, WebError> {
    let fleet = fleets::get(reply.ctx(), &reply.caller(), &name).await?;
    let form = FleetForm::from_input(&fleet.spec.to_input());
    form_page(&reply, Some(&name), &form, Shown::Fresh).await
}

/// POST /fleets/{name}
pub async fn update(
    reply: Reply,
    name: web::Path<String>,
    form: web::Form<FleetForm>,
) -> Result<HttpResponse, WebError> {
    let input = FleetInput::from(&*form);
    submitted(
        fleets::update(reply.ctx(), &reply.caller(), &name, &input).await,
        async |_| {
            let msg = format!("Fleet {name} saved.");
            reply.done(&msg, see_other(&fleet_path(&name))).await
        },
        async |errors| form_page(&reply, Some(&name), &form, Shown::Refused(&errors)).await,
    )
    .await
}

/// POST /fleets/{name}/delete
pub async fn delete(reply: Reply, name: web::Path<String>) -> Result<HttpResponse, WebError> {
    fleets::delete(reply.ctx(), &reply.caller(), &name).await?;
    reply
        .done(&format!("Fleet {name} deleted."), see_other(paths::FLEETS))
        .await
}
