//! How a signed-in page handler answers: a page (full or htmx partial, as
//! [`respond`] decides) or the outcome of a submitted form.

use actix_htmx::Htmx;
use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use maud::Markup;

use super::errors::WebError;
use super::layout::{respond, Frame};
use crate::auth::Principal;
use crate::domain::FieldErrors;
use crate::error::OpError;
use crate::state::AppState;

/// What every signed-in page handler answers with: the app, who asks, and whether htmx asks.
#[derive(Clone, Copy)]
pub struct Reply<'a> {
    pub state: &'a AppState,
    pub principal: &'a Principal,
    pub htmx: &'a Htmx,
}

impl<'a> Reply<'a> {
    /// The reply of one request.
    pub fn new(state: &'a AppState, principal: &'a Principal, htmx: &'a Htmx) -> Self {
        Reply {
            state,
            principal,
            htmx,
        }
    }

    /// A page whose htmx partial is the same content as its full page (most pages); consumes
    /// the waiting flash message.
    pub async fn page(
        self,
        status: StatusCode,
        title: impl Into<String>,
        section: &'static str,
        body: impl Fn() -> Markup,
    ) -> HttpResponse {
        let frame = Frame::load(self.state, self.principal, title, section).await;
        respond(self.htmx, status, frame, &body, &body)
    }

    /// After a successful write: `message` waits for the next page, `redirect` leads there.
    pub async fn done(
        self,
        message: &str,
        redirect: HttpResponse,
    ) -> Result<HttpResponse, WebError> {
        super::flash(self.state, self.principal, message).await;
        Ok(redirect)
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
