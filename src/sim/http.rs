//! A deliberately small HTTP/1.1 server for the simulated yubaba nodes: GET only, no request
//! bodies, JSON or plain-text answers with `Content-Length`, keep-alive as HTTP/1.1 defines it.
//! It exists so the simulated fleet answers over real sockets (the scraper's client, its
//! timeouts and its leader following all run for real) without pulling a second server stack
//! into a demo helper. Everything a client sends is bounded: the request head by size and by
//! one deadline for the whole head, each write by a timeout, the connections open at once by a
//! count. Garbage gets a 4xx
//! and a closed connection, never a panic.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

/// Bounds on what one client may cost the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest request head (request line and headers), in bytes.
    pub head_bytes: usize,
    /// Longest wait for a whole request head (from when the server starts waiting for it, so
    /// a client dripping a byte at a time cannot hold a connection past it), or for a write to
    /// drain; an idle keep-alive connection is closed after it.
    pub io_timeout: Duration,
    /// Connections served at once per listener; more are closed on accept.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            head_bytes: 8 * 1024,
            io_timeout: Duration::from_secs(10),
            max_connections: 64,
        }
    }
}

/// A parsed request: what routing needs and nothing more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, … as sent.
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The raw query string after `?`, if any.
    pub query: Option<String>,
}

impl Request {
    /// The first value of a query parameter, undecoded (the simulated endpoints take numbers).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .as_deref()?
            .split('&')
            .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }
}

/// An answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type` header value.
    pub content_type: &'static str,
    /// The body, sent with its length.
    pub body: Vec<u8>,
}

impl Response {
    /// A JSON answer.
    pub fn json(status: u16, value: &serde_json::Value) -> Self {
        Self {
            status,
            content_type: "application/json",
            body: value.to_string().into_bytes(),
        }
    }

    /// A plain-text answer (yubaba answers 503 this way when raft is not configured).
    pub fn text(status: u16, text: &str) -> Self {
        Self {
            status,
            content_type: "text/plain; charset=utf-8",
            body: text.as_bytes().to_vec(),
        }
    }
}

/// Why a request head was refused, with the status it is answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 400, 413, 501 or 505.
    pub status: u16,
    /// Said in the plain-text body.
    pub reason: &'static str,
}

/// A parsed head: the request and whether the connection may be kept open after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The request.
    pub request: Request,
    /// HTTP/1.1 without `Connection: close`, or HTTP/1.0 with `Connection: keep-alive`.
    pub keep_alive: bool,
}

fn refuse(status: u16, reason: &'static str) -> Refusal {
    Refusal { status, reason }
}

/// Parses a request head (everything before the blank line, without it). Requests carrying a
/// body are refused: the simulated endpoints are all GETs, and a body whose length is not
/// read would be taken for the next request.
pub fn parse_head(head: &[u8]) -> Result<Head, Refusal> {
    let text = std::str::from_utf8(head).map_err(|_| refuse(400, "request head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(refuse(400, "request line must be METHOD TARGET VERSION"));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(refuse(400, "method must be upper-case letters"));
    }
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        v if v.starts_with("HTTP/") => return Err(refuse(505, "only HTTP/1.0 and 1.1")),
        _ => return Err(refuse(400, "version must be HTTP/1.x")),
    };
    if !target.starts_with('/') || target.bytes().any(|b| b.is_ascii_control()) {
        return Err(refuse(400, "target must be an absolute path"));
    }
    let mut keep_alive = http11;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(refuse(400, "header line without a colon"));
        };
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(refuse(400, "header name is empty or has spaces"));
        }
        let value = value.trim();
        if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") {
                    keep_alive = true;
                }
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(refuse(501, "request bodies are not accepted"));
        } else if name.eq_ignore_ascii_case("content-length") && value != "0" {
            return Err(refuse(413, "request bodies are not accepted"));
        }
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q.to_owned())),
        None => (target, None),
    };
    Ok(Head {
        request: Request {
            method: method.to_owned(),
            path: path.to_owned(),
            query,
        },
        keep_alive,
    })
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// The bytes of an answer, head and body.
pub fn encode(response: &Response, keep_alive: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
        response.status,
        reason_phrase(response.status),
        response.content_type,
        response.body.len(),
        if keep_alive { "keep-alive" } else { "close" },
    )
    .into_bytes();
    out.extend_from_slice(&response.body);
    out
}

/// Serves `listener` until `stop` is dropped or turns true. `handler` answers each parsed
/// request; it runs under no lock of this server and must not block.
pub async fn serve<H>(
    listener: TcpListener,
    limits: Limits,
    handler: Arc<H>,
    stop: watch::Receiver<bool>,
) where
    H: Fn(&Request) -> Response + Send + Sync + 'static,
{
    serve_with(listener, limits, handler, stop, None).await
}

/// [`serve`] over TLS: each connection's handshake must finish within `limits.io_timeout`.
pub async fn serve_tls<H>(
    listener: TcpListener,
    limits: Limits,
    handler: Arc<H>,
    stop: watch::Receiver<bool>,
    tls: tokio_rustls::TlsAcceptor,
) where
    H: Fn(&Request) -> Response + Send + Sync + 'static,
{
    serve_with(listener, limits, handler, stop, Some(tls)).await
}

async fn serve_with<H>(
    listener: TcpListener,
    limits: Limits,
    handler: Arc<H>,
    mut stop: watch::Receiver<bool>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) where
    H: Fn(&Request) -> Response + Send + Sync + 'static,
{
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = crate::shutdown::requested(&mut stop) => return,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors and the like: back off instead of spinning on the error.
                tracing::debug!(error = %e, "simulated node: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Over the bound the connection is dropped at once: a flood costs a socket each,
        // briefly, never a task that waits.
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            continue;
        };
        let handler = handler.clone();
        let stop = stop.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => connection(stream, limits, &*handler, stop).await,
                Some(acceptor) => {
                    if let Ok(Ok(stream)) =
                        tokio::time::timeout(limits.io_timeout, acceptor.accept(stream)).await
                    {
                        connection(stream, limits, &*handler, stop).await;
                    }
                }
            }
            drop(permit);
        });
    }
}

/// Where the head ends (after the blank line), if it has arrived.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

async fn connection<S, H>(
    mut stream: S,
    limits: Limits,
    handler: &H,
    mut stop: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
    H: Fn(&Request) -> Response,
{
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    loop {
        // One deadline for the whole head, not per read: a per-read timeout alone lets a
        // client sending one byte just under it hold a connection slot for hours.
        let head_deadline = tokio::time::Instant::now() + limits.io_timeout;
        let end = loop {
            if let Some(end) = head_end(&buf) {
                break end;
            }
            if buf.len() >= limits.head_bytes {
                let answer = Response::text(431, "request head too large");
                let _ = write(&mut stream, &encode(&answer, false), limits).await;
                return;
            }
            let mut chunk = [0_u8; 1024];
            let want = chunk.len().min(limits.head_bytes - buf.len());
            let read = tokio::select! {
                read = tokio::time::timeout_at(head_deadline, stream.read(&mut chunk[..want])) => read,
                () = crate::shutdown::requested(&mut stop) => return,
            };
            match read {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return,
                Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let (response, keep_alive) = match parse_head(&buf[..end - 4]) {
            Ok(head) => (handler(&head.request), head.keep_alive),
            Err(refusal) => (Response::text(refusal.status, refusal.reason), false),
        };
        buf.drain(..end);
        if write(&mut stream, &encode(&response, keep_alive), limits)
            .await
            .is_err()
            || !keep_alive
        {
            let _ = stream.shutdown().await;
            return;
        }
    }
}

async fn write<S: AsyncWrite + Unpin>(
    stream: &mut S,
    bytes: &[u8],
    limits: Limits,
) -> std::io::Result<()> {
    tokio::time::timeout(limits.io_timeout, stream.write_all(bytes))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

#[cfg(test)]
mod tests {
    use tokio::net::TcpStream;

    use super::*;

    #[test]
    fn a_get_with_a_query_parses_and_keeps_the_connection_open() {
        let head = parse_head(b"GET /node/usage?window_ms=500&x HTTP/1.1\r\nHost: a").unwrap();
        assert_eq!(head.request.method, "GET");
        assert_eq!(head.request.path, "/node/usage");
        assert_eq!(head.request.param("window_ms"), Some("500"));
        assert_eq!(head.request.param("x"), Some(""));
        assert_eq!(head.request.param("y"), None);
        assert!(head.keep_alive);
    }

    #[test]
    fn connection_close_and_http_1_0_end_the_connection_unless_asked_to_keep_it() {
        let close = parse_head(b"GET / HTTP/1.1\r\nConnection: Close").unwrap();
        assert!(!close.keep_alive);
        let old = parse_head(b"GET / HTTP/1.0").unwrap();
        assert!(!old.keep_alive);
        let old_kept = parse_head(b"GET / HTTP/1.0\r\nconnection: keep-alive").unwrap();
        assert!(old_kept.keep_alive);
    }

    #[test]
    fn garbage_heads_are_refused_with_the_status_that_names_the_problem() {
        let cases: [(&[u8], u16); 9] = [
            (b"", 400),
            (b"\xff\xfe GET", 400),
            (b"GET /", 400),
            (b"get / HTTP/1.1", 400),
            (b"GET / HTTP/2.0", 505),
            (b"GET / SPDY", 400),
            (b"GET relative HTTP/1.1", 400),
            (b"GET / HTTP/1.1\r\nno colon here", 400),
            (b"POST / HTTP/1.1\r\nContent-Length: 5", 413),
        ];
        for (head, status) in cases {
            let refusal = parse_head(head).unwrap_err();
            assert_eq!(
                refusal.status,
                status,
                "{:?}",
                String::from_utf8_lossy(head)
            );
        }
        let chunked = parse_head(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked").unwrap_err();
        assert_eq!(chunked.status, 501);
    }

    /// A client dripping a head one byte at a time, each well within the timeout, is cut off
    /// at the whole-head deadline; a prompt client on the same server is still answered.
    #[tokio::test]
    async fn a_dripping_client_is_closed_at_the_head_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = Limits {
            io_timeout: Duration::from_millis(400),
            ..Limits::default()
        };
        let (_stop_tx, stop) = watch::channel(false);
        let handler = Arc::new(|_: &Request| Response::text(200, "ok"));
        tokio::spawn(serve(listener, limits, handler, stop));

        let mut slow = TcpStream::connect(addr).await.unwrap();
        let started = tokio::time::Instant::now();
        let mut closed_after = None;
        for b in b"GET / HTTP/1.1\r\nX-Drip: ".iter().cycle().take(200) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if slow.write_all(&[*b]).await.is_err() {
                closed_after = Some(started.elapsed());
                break;
            }
            let mut probe = [0_u8; 1];
            if let Ok(Ok(0)) =
                tokio::time::timeout(Duration::from_millis(1), slow.read(&mut probe)).await
            {
                closed_after = Some(started.elapsed());
                break;
            }
        }
        let closed_after = closed_after.expect("a dripping client held its connection for 10 s");
        assert!(
            closed_after >= Duration::from_millis(350) && closed_after < Duration::from_secs(2),
            "{closed_after:?}"
        );

        let mut quick = TcpStream::connect(addr).await.unwrap();
        quick
            .write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(2), quick.read_to_end(&mut answer))
            .await
            .unwrap()
            .unwrap();
        assert!(answer.starts_with(b"HTTP/1.1 200 OK"), "{answer:?}");
    }

    #[test]
    fn an_answer_carries_its_length_and_connection_header() {
        let bytes = encode(&Response::json(200, &serde_json::json!({"a": 1})), true);
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("Content-Length: 7\r\n"), "{text}");
        assert!(text.contains("Connection: keep-alive\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\n{\"a\":1}"), "{text}");
    }
}
