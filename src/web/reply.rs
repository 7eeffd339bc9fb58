//! How a signed-in page handler answers: a page (full or htmx partial, as
//! [`respond`] decides) or the outcome of a submitted form.

use std::future::{ready, Ready};

use actix_htmx::Htmx;
use actix_web::dev::Payload;
use actix_web::http::StatusCode;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use maud::Markup;

use super::errors::WebError;
use super::layout::{respond, Frame};
use crate::auth::Principal;
use crate::domain::FieldErrors;
use crate::error::OpError;
use crate::state::AppState;

/// What every signed-in page handler answers with: the app, who asks, and whether htmx asks.
/// Extracted like the three it holds, in this order, so a handler takes one `reply: Reply`.
pub struct Reply {
    pub state: web::Data<AppState>,
    pub principal: Principal,
    pub htmx: Htmx,
}

impl FromRequest for Reply {
    type Error = actix_web::Error;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        ready(Reply::extract_parts(req, payload))
    }
}

impl Reply {
    /// The three parts, each by its own extractor: all are ready at once and none reads the
    /// body, so the first that fails (missing app data: 500, no principal: 401) answers.
    fn extract_parts(req: &HttpRequest, payload: &mut Payload) -> Result<Self, actix_web::Error> {
        Ok(Reply {
            state: web::Data::<AppState>::extract(req).into_inner()?,
            principal: Principal::from_request(req, payload).into_inner()?,
            htmx: Htmx::from_request(req, payload).into_inner()?,
        })
    }
}

impl Reply {
    /// What operations work with.
    pub fn ctx(&self) -> &crate::context::Ctx {
        &self.state.ctx
    }

    /// Who asks, as the operations know them.
    pub fn caller(&self) -> crate::domain::Caller {
        self.principal.caller()
    }

    /// A page whose htmx partial is the same content as its full page (most pages); consumes
    /// the waiting flash message.
    pub async fn page(
        &self,
        status: StatusCode,
        title: impl Into<String>,
        section: &'static str,
        body: impl Fn() -> Markup,
    ) -> HttpResponse {
        let frame = Frame::load(&self.state, &self.principal, title, section).await;
        respond(&self.htmx, status, frame, &body, &body)
    }

    /// After a successful write: `message` waits for the next page, `redirect` leads there.
    pub async fn done(
        &self,
        message: &str,
        redirect: HttpResponse,
    ) -> Result<HttpResponse, WebError> {
        super::flash(&self.state, &self.principal, message).await;
        Ok(redirect)
    }
}

/// No messages: a form as first shown.
static NO_ERRORS: FieldErrors = FieldErrors(Vec::new());

/// How a form page is shown: fresh (200, no messages) or sent back with what was wrong (422).
#[derive(Clone, Copy)]
pub enum Shown<'a> {
    Fresh,
    Refused(&'a FieldErrors),
}

impl<'a> Shown<'a> {
    /// The status the page answers with.
    pub fn status(self) -> StatusCode {
        match self {
            Shown::Fresh => StatusCode::OK,
            Shown::Refused(_) => StatusCode::UNPROCESSABLE_ENTITY,
        }
    }

    /// The messages shown next to the fields.
    pub fn errors(self) -> &'a FieldErrors {
        match self {
            Shown::Fresh => &NO_ERRORS,
            Shown::Refused(errors) => errors,
        }
    }
}

/// What a submitted form comes to: `done` with what the operation returned, or `invalid` with
/// the messages to show next to the fields; every other error is the error page.
pub async fn submitted<T>(
    result: Result<T, OpError>,
    done: impl AsyncFnOnce(T) -> Result<HttpResponse, WebError>,
    invalid: impl AsyncFnOnce(FieldErrors) -> Result<HttpResponse, WebError>,
) -> Result<HttpResponse, WebError> {
    match result {
        Ok(value) => done(value).await,
        Err(OpError::Invalid(errors)) => invalid(errors).await,
        Err(e) => Err(e.into()),
    }
}

/// The flash after saving a versioned thing: its new version, or that nothing changed (an
/// identical save makes no version).
pub fn saved_message(name: &str, version: i64, changed: bool) -> String {
    if changed {
        format!("Saved {name} as version {version}.")
    } else {
        "No changes: no new version was made.".to_owned()
    }
}
