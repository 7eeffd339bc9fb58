//! RFC 9457 problem details, the error body of every JSON API answer.

use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use serde::Serialize;

use crate::domain::{FieldError, FieldErrors};

/// Media type of problem answers.
pub const CONTENT_TYPE: &str = "application/problem+json";

/// An error answer.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// A URI naming the kind of problem (`about:blank` when the status says it all).
    #[serde(rename = "type")]
    pub kind: String,
    /// Short summary of the kind.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What went wrong on this request.
    pub detail: String,
    /// One entry per invalid field.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<FieldErrorSchema>)]
    pub errors: Vec<FieldError>,
}

/// A field and the rule it broke.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct FieldErrorSchema {
    field: String,
    message: String,
}

impl Problem {
    /// A problem with the status's own title.
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            kind: "about:blank".into(),
            title: status.canonical_reason().unwrap_or("Error").into(),
            status: status.as_u16(),
            detail: detail.into(),
            errors: Vec::new(),
        }
    }

    /// A 422 listing every invalid field.
    pub fn invalid(errors: &FieldErrors) -> Self {
        Self {
            kind: "urn:headroom:problem:invalid-input".into(),
            title: "Invalid input".into(),
            status: 422,
            detail: errors.to_string(),
            errors: errors.0.clone(),
        }
    }

    /// The HTTP answer.
    pub fn response(&self) -> HttpResponse {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        HttpResponse::build(status)
            .content_type(CONTENT_TYPE)
            .json(self)
    }
}
