//! The console's static files (htmx, its script and stylesheet), compiled into the binary.

use actix_web::http::header;
use actix_web::{web, HttpResponse};

/// Files compiled into the binary, so the console needs nothing beside it at run time.
const STATIC_FILES: &[(&str, &str, &[u8])] = &[
    (
        "htmx-2.0.11.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../static/htmx-2.0.11.min.js"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../static/app.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_bytes!("../../static/app.css"),
    ),
];

/// Serves an embedded static file.
pub async fn static_file(file: web::Path<String>) -> HttpResponse {
    match STATIC_FILES
        .iter()
        .find(|(name, _, _)| *name == file.as_str())
    {
        Some((_, mime, bytes)) => HttpResponse::Ok()
            .content_type(*mime)
            .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
            .body(*bytes),
        None => HttpResponse::NotFound()
            .content_type("text/plain")
            .body("no such file\n"),
    }
}
