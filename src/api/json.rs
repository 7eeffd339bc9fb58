//! The API's JSON body extractor. Unlike `web::Json`, a body that does not fit its type names
//! the field that broke (`allocatable.memory_mb: invalid type…`), and every failure — wrong
//! content type, too large, malformed — answers as problem+json.

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::http::{header, StatusCode};
use actix_web::{web, FromRequest, HttpRequest};
use serde::de::DeserializeOwned;

use crate::domain::{FieldError, FieldErrors};
use crate::http::Problem;

/// A JSON request body of type `T`.
pub struct ApiJson<T>(pub T);

impl<T> std::ops::Deref for ApiJson<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

fn reject(problem: Problem) -> actix_web::Error {
    actix_web::error::InternalError::from_response(problem.detail.clone(), problem.response())
        .into()
}

/// Decodes `bytes`, naming the path of the first field that does not fit.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." || path.is_empty() {
            "body".to_owned()
        } else {
            path
        };
        let inner = e.into_inner();
        let mut p = Problem::new(
            StatusCode::BAD_REQUEST,
            format!("body: invalid JSON at {field}: {inner}"),
        );
        p.errors = FieldErrors::from(FieldError::new(field, inner.to_string())).0;
        p
    })
}

impl<T: DeserializeOwned + 'static> FromRequest for ApiJson<T> {
    type Error = actix_web::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let is_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.split(';')
                    .next()
                    .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
            });
        let body = web::Bytes::from_request(req, payload);
        Box::pin(async move {
            if !is_json {
                return Err(reject(Problem::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "body: Content-Type must be application/json",
                )));
            }
            let bytes = body.await.map_err(|e| {
                let status = e.as_response_error().status_code();
                reject(Problem::new(status, format!("body: {e}")))
            })?;
            decode(&bytes).map(ApiJson).map_err(reject)
        })
    }
}
