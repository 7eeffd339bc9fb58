//! Slow clients on real sockets: a client that stalls in the middle of a request's head or
//! body is cut off at `client_timeout_seconds`, while others are served; connections beyond
//! `max_connections` wait in the listen queue until one closes; a slow but complete upload
//! within the deadline is served; a client trickling a chunked body that nobody reads (the
//! answer needs none of it) is closed once answered, not drained at its pace.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::helpers::TestApp;

/// The deadline the tests set (the default is 10 s).
const DEADLINE: Duration = Duration::from_secs(2);

/// Time allowed past the deadline for the server to notice and close.
const SLACK: Duration = Duration::from_secs(2);

async fn app_with(max_connections: usize) -> TestApp {
    TestApp::spawn_with(|s| {
        s.client_timeout = DEADLINE;
        s.max_connections = max_connections;
    })
    .await
}

fn socket_address(app: &TestApp) -> String {
    app.address.trim_start_matches("http://").to_owned()
}

/// A request stalled after a few bytes of a 100000-byte login body.
fn stalled_body() -> &'static [u8] {
    b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\n\
      Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\nuser"
}

/// A request stalled after the first chunk of a chunked login body.
fn stalled_chunked_body() -> &'static [u8] {
    b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\n\
      Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n\
      4\r\nuser\r\n"
}

/// A request stalled in the middle of its head.
fn stalled_head() -> &'static [u8] {
    b"GET /healthz HTTP/1.1\r\nHost: 127.0"
}

/// Reads until the server closes (EOF or an error); what it sent and when it closed.
async fn until_closed(
    mut stream: impl AsyncRead + Unpin,
    limit: Duration,
) -> Option<(Vec<u8>, Instant)> {
    let mut got = Vec::new();
    let mut buf = [0_u8; 4096];
    let read_all = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return Instant::now(),
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    let closed = tokio::time::timeout(limit, read_all).await.ok()?;
    Some((got, closed))
}

#[tokio::test]
async fn stalled_clients_are_closed_at_the_deadline_while_healthz_keeps_answering() {
    let app = app_with(256).await;
    let address = socket_address(&app);
    let started = Instant::now();
    let mut clients = Vec::new();
    for i in 0..40 {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        // Half stall in the body (a quarter of them chunked), half in the head.
        let (kind, bytes) = match i % 4 {
            0 => ("body", stalled_body()),
            2 => ("body", stalled_chunked_body()),
            _ => ("head", stalled_head()),
        };
        stream.write_all(bytes).await.unwrap();
        clients.push(tokio::spawn(async move {
            (kind, until_closed(stream, DEADLINE + SLACK + SLACK).await)
        }));
    }

    // The server keeps answering others while forty clients stall.
    let health = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    while started.elapsed() < DEADLINE {
        let res = health.get(app.url("/healthz")).send().await.unwrap();
        assert_eq!(res.status(), 200);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    for client in clients {
        let (kind, closed) = client.await.unwrap();
        let (got, at) = closed.unwrap_or_else(|| {
            panic!(
                "a client stalled in its {kind} was still open after {:?}",
                started.elapsed()
            )
        });
        let took = at - started;
        assert!(
            took <= DEADLINE + SLACK,
            "a client stalled in its {kind} was closed only after {took:?}"
        );
        if kind == "body" {
            let text = String::from_utf8_lossy(&got);
            assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        }
    }
}

#[tokio::test]
async fn a_connection_beyond_max_connections_waits_until_one_closes() {
    // One worker, two connections: two stalled clients take both. The server cannot close
    // either before DEADLINE after accepting it, so not before `taken + DEADLINE`.
    let app = app_with(2).await;
    let address = socket_address(&app);
    let taken = Instant::now();
    let mut stalled = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        stream.write_all(stalled_head()).await.unwrap();
        stalled.push(tokio::spawn(until_closed(stream, DEADLINE + SLACK + SLACK)));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    // A third connects (the kernel queues it) and asks a complete question.
    let mut third = TcpStream::connect(&address).await.unwrap();
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    // Timestamps are taken when a reader task runs, not when its bytes arrived, so comparing
    // two readers' clocks proves nothing under load. One clock does: bytes seen before
    // `taken + DEADLINE` were sent before, while both connections were still held.
    let mut first = [0_u8; 4096];
    let n = tokio::time::timeout(DEADLINE + SLACK + SLACK, third.read(&mut first))
        .await
        .expect("the queued connection is served once the stalled ones are closed")
        .unwrap();
    let first_byte_seen = Instant::now();
    let (rest, _) = until_closed(third, SLACK)
        .await
        .expect("closed once answered");
    let answer = String::from_utf8_lossy(&[&first[..n], &rest[..]].concat()).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        first_byte_seen >= taken + DEADLINE,
        "the third connection was served {:?} after both connections were taken, before \
         either could be closed",
        first_byte_seen - taken
    );
    for s in stalled {
        s.await.unwrap().expect("the stalled clients are closed");
    }
}

#[tokio::test]
async fn a_slow_but_complete_login_within_the_deadline_is_served() {
    let app = app_with(256).await;
    app.create_user("slowpoke", headroom::domain::Role::Viewer)
        .await;
    let (cookie, token) = app.login_form().await;
    let body = serde_urlencoded::to_string([
        ("username", "slowpoke"),
        ("password", crate::helpers::PASSWORD),
        ("csrf_token", token.as_str()),
    ])
    .unwrap();
    let mut stream = TcpStream::connect(socket_address(&app)).await.unwrap();
    let head = format!(
        "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // Four pieces over about 1.2 s: slow, but inside the 2 s deadline.
    for piece in body.as_bytes().chunks(body.len().div_ceil(4)) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        stream.write_all(piece).await.unwrap();
    }
    let (answer, _) = until_closed(stream, DEADLINE + SLACK)
        .await
        .expect("answered");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 303") && answer.contains("headroom_session="),
        "{answer}"
    );
}

/// Sends `head` (announcing a chunked body) and then a 1-byte chunk every 500 ms, never the
/// last chunk; what the server answered and whether it closed the connection within
/// `DEADLINE + SLACK` of the head.
async fn trickle_chunked_body(app: &TestApp, head: &str) -> (String, Option<Duration>) {
    let stream = TcpStream::connect(socket_address(app)).await.unwrap();
    let (reader, mut writer) = stream.into_split();
    let started = Instant::now();
    writer.write_all(head.as_bytes()).await.unwrap();
    let trickle = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if writer.write_all(b"1\r\nx\r\n").await.is_err() {
                return;
            }
        }
    });
    let closed = until_closed(reader, DEADLINE + SLACK).await;
    trickle.abort();
    match closed {
        Some((got, at)) => (
            String::from_utf8_lossy(&got).into_owned(),
            Some(at - started),
        ),
        None => (String::new(), None),
    }
}

#[tokio::test]
async fn a_chunked_body_trickled_to_healthz_is_closed_once_answered() {
    let app = app_with(256).await;
    let (answer, closed_after) = trickle_chunked_body(
        &app,
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .await;
    let closed_after = closed_after.unwrap_or_else(|| {
        panic!("the trickling client was still connected after {DEADLINE:?} + {SLACK:?}")
    });
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(
        closed_after <= DEADLINE + SLACK,
        "closed after {closed_after:?}"
    );
}

#[tokio::test]
async fn a_chunked_body_trickled_with_a_wrong_bearer_token_is_closed_once_refused() {
    let app = app_with(256).await;
    let (answer, closed_after) = trickle_chunked_body(
        &app,
        "POST /api/v1/fleets HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Authorization: Bearer hr_not-a-real-token\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n",
    )
    .await;
    let closed_after = closed_after.unwrap_or_else(|| {
        panic!("the trickling client was still connected after {DEADLINE:?} + {SLACK:?}")
    });
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(
        closed_after <= DEADLINE + SLACK,
        "closed after {closed_after:?}"
    );
}

#[tokio::test]
async fn a_fully_sent_body_and_a_bodiless_get_keep_the_connection_alive() {
    let app = app_with(256).await;
    app.create_user("keeper", headroom::domain::Role::Admin)
        .await;
    let token = app.token_for("keeper").await;
    let mut stream = TcpStream::connect(socket_address(&app)).await.unwrap();
    let mut buf = vec![0_u8; 16384];
    // A bodiless GET, then a JSON body the handler reads in full (refused as invalid, which
    // needs it all), both on one connection.
    let requests = [
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_owned(),
        format!(
            "POST /api/v1/fleets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}",
            token
        ),
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_owned(),
    ];
    for request in requests {
        stream.write_all(request.as_bytes()).await.unwrap();
        let n = tokio::time::timeout(DEADLINE, stream.read(&mut buf))
            .await
            .expect("answered on the same connection")
            .unwrap();
        let answer = String::from_utf8_lossy(&buf[..n]);
        assert!(n > 0, "the connection was closed after a complete request");
        assert!(answer.starts_with("HTTP/1.1 "), "{answer}");
        assert!(
            !answer.to_ascii_lowercase().contains("connection: close"),
            "{answer}"
        );
    }
}
