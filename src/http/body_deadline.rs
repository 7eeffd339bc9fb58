//! A deadline for the request body. actix bounds the request head
//! (`client_request_timeout`) but not the body: a client announcing `Content-Length: 100000`
//! and sending a byte now and then held its connection, and a file descriptor, for as long as
//! it liked. This middleware gives every request's payload a deadline `client_timeout` after
//! the head arrived; past it, reading the body fails, whoever reads it (the CSRF guard, an
//! extractor), and the answer is a 408 that closes the connection. Responses are not touched:
//! a long export or stream runs as long as it needs once its request was read.
//!
//! The deadline only counts while someone reads. A request answered without reading its body
//! (`/healthz`, a refused token, a cross-site refusal) would leave a chunked body to actix,
//! which drains it after the answer at the client's pace with no timer at all. So an unfinished
//! body is never dropped: it is kept until the answer is sent, and the connection then closes.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::{ConnectionType, StatusCode};
use actix_web::middleware::Next;
use actix_web::web::Bytes;
use actix_web::Error;
use futures_core::Stream;

/// What a client whose body missed the deadline is told (the setting is named so an operator
/// knows what to raise).
pub const DETAIL: &str =
    "the request body did not arrive within client_timeout_seconds; send it faster";

/// Middleware: wraps the request payload in a [`DeadlinePayload`] of `timeout`, and answers
/// 408 with `Connection: close` when that deadline was what ended the request.
pub async fn apply(
    timeout: Duration,
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let expired = Rc::new(Expiry::default());
    let inner = std::mem::replace(req.parts_mut().1, Payload::None);
    let payload: BoxedPayload = Box::pin(DeadlinePayload::new(inner, timeout, expired.clone()));
    req.set_payload(Payload::from(payload));
    // Not a clone of the request: routing needs it unshared.
    let api = crate::http::is_api_path(req.path());
    let res = next.call(req).await?;
    if !expired.fired.get() {
        // Answered while the body was still arriving (the reader dropped it unfinished).
        return match expired.unread.borrow_mut().take() {
            None => Ok(res.map_into_boxed_body()),
            Some(unread) => Ok(closing_with(res.map_into_boxed_body(), unread)),
        };
    }
    // Whatever the reader made of the failed read (a 400 from the guard, an extractor's
    // error), the truth is that the client was too slow; the connection is closed so no
    // unread rest of the body can keep it. The unread body goes with the answer: actix
    // closes a connection whose request body is unread and still held when the answer is
    // sent, while one dropped (a chunked body) would be drained, at the client's pace.
    let timed_out = if api {
        crate::http::Problem::new(StatusCode::REQUEST_TIMEOUT, DETAIL).response()
    } else {
        crate::http::html_error(StatusCode::REQUEST_TIMEOUT, DETAIL)
    };
    tracing::info!(
        http.path = %res.request().path(),
        "request body missed its deadline; connection closed"
    );
    let unread = expired.unread.borrow_mut().take();
    let res = res.into_response(timed_out);
    Ok(match unread {
        Some(unread) => closing_with(res, unread),
        None => close_connection(res),
    })
}

/// `res`, closing its connection once sent and holding the unread request body until then:
/// actix closes a connection whose unfinished body is still held when the answer goes out,
/// while one dropped (a chunked body) would be drained, at the client's pace.
fn closing_with(res: ServiceResponse<BoxBody>, unread: Payload) -> ServiceResponse<BoxBody> {
    close_connection(res).map_body(|_, body| {
        HoldingUnread {
            body,
            _unread: unread,
        }
        .boxed()
    })
}

fn close_connection(mut res: ServiceResponse<BoxBody>) -> ServiceResponse<BoxBody> {
    res.response_mut()
        .head_mut()
        .set_connection_type(ConnectionType::Close);
    res
}

/// The boxed stream type a `Payload` is built from.
type BoxedPayload = Pin<Box<dyn Stream<Item = Result<Bytes, PayloadError>>>>;

/// What a [`DeadlinePayload`] tells its middleware: whether the deadline passed, and the
/// unread body (left at the deadline or dropped unfinished), kept so the connection is closed
/// rather than drained.
#[derive(Default)]
pub struct Expiry {
    fired: Cell<bool>,
    unread: RefCell<Option<Payload>>,
}

/// A response body that holds the request's unread body until the response is sent.
struct HoldingUnread {
    body: BoxBody,
    _unread: Payload,
}

impl MessageBody for HoldingUnread {
    type Error = <BoxBody as MessageBody>::Error;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_next(cx)
    }
}

/// A request payload that fails with a timeout once its deadline has passed; `expired` tells
/// the middleware that it did.
pub struct DeadlinePayload {
    inner: Payload,
    deadline: Pin<Box<tokio::time::Sleep>>,
    expired: Rc<Expiry>,
    done: bool,
}

impl DeadlinePayload {
    /// `inner`, readable for `timeout` from now.
    pub fn new(inner: Payload, timeout: Duration, expired: Rc<Expiry>) -> Self {
        Self {
            inner,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            expired,
            done: false,
        }
    }
}

impl Stream for DeadlinePayload {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // Every field is Unpin (the timer is boxed), so no pin projection is needed.
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if !this.deadline.is_elapsed() {
            match Pin::new(&mut this.inner).poll_next(cx) {
                Poll::Ready(None) => {
                    this.done = true;
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(item)) => return Poll::Ready(Some(item)),
                Poll::Pending => {}
            }
        }
        // Polled only while the body is awaited, so the timer wakes the reader at the
        // deadline; a handler that never reads its body is never failed by it.
        match this.deadline.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                this.done = true;
                this.expired.fired.set(true);
                *this.expired.unread.borrow_mut() =
                    Some(std::mem::replace(&mut this.inner, Payload::None));
                Poll::Ready(Some(Err(PayloadError::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    DETAIL,
                )))))
            }
        }
    }
}

impl Drop for DeadlinePayload {
    /// A body dropped before its end (its reader answered without it) goes to the middleware
    /// rather than to actix's untimed drain. What already arrived is discarded first, without
    /// waiting: a body that had arrived whole is finished and keeps its connection alive.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        loop {
            match Pin::new(&mut self.inner).poll_next(&mut cx) {
                Poll::Ready(Some(Ok(_))) => {}
                // Ended, or broken (actix closes a connection whose body failed).
                Poll::Ready(None | Some(Err(_))) => return,
                Poll::Pending => break,
            }
        }
        *self.expired.unread.borrow_mut() = Some(std::mem::replace(&mut self.inner, Payload::None));
    }
}
