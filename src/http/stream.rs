//! A response body of text chunks, for exports that stream as they are read, answered as a
//! download.

use actix_web::http::header;
use actix_web::{web, HttpResponse};

/// Text chunks (e.g. an audit export) as the bytes actix sends.
pub struct TextChunks<S>(pub S);

impl<S> futures_core::Stream for TextChunks<S>
where
    S: futures_core::Stream<Item = Result<String, std::io::Error>> + Unpin,
{
    type Item = Result<web::Bytes, std::io::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::pin::Pin::new(&mut self.0)
            .poll_next(cx)
            .map(|item| item.map(|chunk| chunk.map(web::Bytes::from)))
    }
}

/// A streamed export of encoded text chunks as a download named `file_name`.
pub fn download<S>(content_type: &str, file_name: &str, stream: S) -> HttpResponse
where
    S: futures_core::Stream<Item = Result<String, std::io::Error>> + Unpin + 'static,
{
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{file_name}\""),
        ))
        .streaming(TextChunks(stream))
}
