//! A response body of text chunks, for exports that stream as they are read.

use actix_web::web;

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
