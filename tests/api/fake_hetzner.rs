//! A stateful Hetzner Cloud on wiremock, for the provider, runner and webhook tests and the
//! benchmark (which includes this file with `#[path]`, so it depends only on wiremock,
//! serde_json, tokio and std).
//!
//! It keeps servers and actions, checks the bearer token, paginates lists, answers with
//! `RateLimit-*` headers from a token bucket (429 `rate_limit_exceeded` when it is empty, like
//! Hetzner), and plays queued faults per route. Every request is recorded.

// Shared by several test modules and the benchmark; not every user calls every helper.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Which endpoint a fault is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// `POST /servers`.
    CreateServer,
    /// `GET /servers` (by label or name).
    ListServers,
    /// `GET /servers/{id}`.
    GetServer,
    /// `DELETE /servers/{id}`.
    DeleteServer,
    /// `GET /actions/{id}`.
    GetAction,
    /// `GET /locations`, `/server_types`, `/images`.
    Catalogue,
}

/// One scripted misbehaviour, used by the next request to its route.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Answer this status with Hetzner's error body for it (503 `unavailable`, 500
    /// `service_error`, …); nothing happens.
    Status(u16),
    /// 429 `rate_limit_exceeded` with `RateLimit-Remaining: 0` and a `RateLimit-Reset` at least
    /// `reset_in_secs` from now; nothing happens.
    RateLimited { reset_in_secs: u64 },
    /// Answer this status, code and message; nothing happens.
    Error {
        status: u16,
        code: String,
        message: String,
    },
    /// (create) Make the server, then hold the answer this long (beyond the client's timeout:
    /// the answer is lost, the server exists).
    CreateThenHang(Duration),
    /// (create) The new server's action ends in `error` with this code and message;
    /// (action) the polled action ends so now.
    ActionError { code: String, message: String },
}

/// How the fake is set up.
#[derive(Debug, Clone)]
pub struct FakeHetznerOptions {
    /// The bearer token it accepts.
    pub token: String,
    /// Token bucket size (`RateLimit-Limit`); Hetzner's is 3,600.
    pub capacity: u32,
    /// Requests given back per second; Hetzner's is 1.
    pub refill_per_sec: f64,
    /// The poll of an action that reports `success` (1: the first poll).
    pub action_polls: u32,
}

impl Default for FakeHetznerOptions {
    fn default() -> Self {
        Self {
            token: "fake-hetzner-token".into(),
            capacity: 3600,
            refill_per_sec: 1.0,
            action_polls: 1,
        }
    }
}

/// One request as the fake received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub method: String,
    /// The path below `/v1`, e.g. `/servers/3`.
    pub path: String,
    pub query: Vec<(String, String)>,
    /// The JSON body, if there was one.
    pub body: Option<Value>,
    /// The `Authorization` header as sent.
    pub authorization: Option<String>,
    /// The status the fake answered.
    pub status: u16,
    /// When the request arrived (before it was handled), by the wall clock `RateLimit-Reset`
    /// is stated in: the wait between a 429 and the retry is measured from the fake's side.
    pub at: SystemTime,
}

/// A server the fake holds.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeServer {
    pub id: i64,
    pub name: String,
    /// `initializing` until its action succeeds, then `running`; `off` when the action failed.
    pub status: String,
    pub server_type: String,
    pub image: String,
    pub location: String,
    pub labels: BTreeMap<String, String>,
    pub ssh_keys: Vec<i64>,
    pub user_data: String,
    pub ipv4: String,
    /// Its `create_server` action.
    pub action_id: i64,
}

#[derive(Debug, Clone)]
struct FakeAction {
    id: i64,
    command: String,
    server_id: i64,
    polls: u32,
    needed: u32,
    error: Option<(String, String)>,
}

#[derive(Debug)]
struct State {
    options: FakeHetznerOptions,
    tokens: f64,
    refilled: Instant,
    next_id: i64,
    servers: BTreeMap<i64, FakeServer>,
    actions: HashMap<i64, FakeAction>,
    faults: HashMap<Route, VecDeque<Fault>>,
    requests: Vec<Recorded>,
}

/// The fake Hetzner Cloud API on a loopback port.
pub struct FakeHetzner {
    server: MockServer,
    state: Arc<Mutex<State>>,
}

struct Responder {
    state: Arc<Mutex<State>>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn error_body(code: &str, message: &str) -> Value {
    json!({"error": {"code": code, "message": message, "details": {}}})
}

/// Hetzner's error code for a bare status.
fn code_for(status: u16) -> &'static str {
    match status {
        400 => "invalid_input",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not_found",
        409 => "conflict",
        423 => "locked",
        429 => "rate_limit_exceeded",
        500 => "service_error",
        502..=504 => "unavailable",
        _ => "error",
    }
}

impl FakeHetzner {
    /// A fake with Hetzner's defaults (3,600 requests, one back per second, actions done on
    /// the first poll).
    pub async fn start() -> Self {
        Self::start_with(FakeHetznerOptions::default()).await
    }

    /// A fake set up with `options`.
    pub async fn start_with(options: FakeHetznerOptions) -> Self {
        let state = Arc::new(Mutex::new(State {
            tokens: f64::from(options.capacity),
            refilled: Instant::now(),
            options,
            next_id: 0,
            servers: BTreeMap::new(),
            actions: HashMap::new(),
            faults: HashMap::new(),
            requests: Vec::new(),
        }));
        let server = MockServer::start().await;
        Mock::given(wiremock::matchers::any())
            .respond_with(Responder {
                state: state.clone(),
            })
            .mount(&server)
            .await;
        Self { server, state }
    }

    /// The API base URL, ending in `/v1`.
    pub fn uri(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// The bearer token it accepts.
    pub fn token(&self) -> String {
        lock(&self.state).options.token.clone()
    }

    /// The next request to `route` meets `fault` (faults queue up per route).
    pub fn push_fault(&self, route: Route, fault: Fault) {
        lock(&self.state)
            .faults
            .entry(route)
            .or_default()
            .push_back(fault);
    }

    /// How many faults queued for `route` no request has met yet: a test sees the moment
    /// its fault was taken (a held create has made its server).
    pub fn queued_faults(&self, route: Route) -> usize {
        lock(&self.state)
            .faults
            .get(&route)
            .map_or(0, VecDeque::len)
    }

    /// From now on, actions of new creates succeed on the `n`-th poll.
    pub fn set_action_polls(&self, n: u32) {
        lock(&self.state).options.action_polls = n;
    }

    /// Puts a running server in place as if made earlier (no request is recorded).
    pub fn add_server(&self, name: &str, labels: &[(&str, &str)]) -> FakeServer {
        let mut s = lock(&self.state);
        let labels = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let server = s.make_server(name, "cx22", "debian-12", "fsn1", labels, vec![], "", 0);
        s.servers.get_mut(&server.id).expect("just made").status = "running".into();
        s.servers[&server.id].clone()
    }

    /// The servers that exist now, by id.
    pub fn servers(&self) -> Vec<FakeServer> {
        lock(&self.state).servers.values().cloned().collect()
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.state).requests.clone()
    }

    /// Every `POST /servers` so far (answered or not), in order.
    pub fn creates(&self) -> Vec<Recorded> {
        lock(&self.state)
            .requests
            .iter()
            .filter(|r| r.method == "POST" && r.path == "/servers")
            .cloned()
            .collect()
    }

    /// How many requests got a 429.
    pub fn rate_limited(&self) -> usize {
        lock(&self.state)
            .requests
            .iter()
            .filter(|r| r.status == 429)
            .count()
    }
}

impl State {
    /// Takes one request from the bucket; `None` when it is empty.
    fn take_token(&mut self) -> Option<()> {
        let now = Instant::now();
        let cap = f64::from(self.options.capacity);
        self.tokens = (self.tokens
            + now.duration_since(self.refilled).as_secs_f64() * self.options.refill_per_sec)
            .min(cap);
        self.refilled = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Some(())
        } else {
            None
        }
    }

    /// `RateLimit-*` headers: remaining as a whole number, reset when the bucket is full again
    /// (rounded up, so waiting until it never comes early).
    fn rate_headers(&self, t: ResponseTemplate) -> ResponseTemplate {
        let cap = f64::from(self.options.capacity);
        let missing = (cap - self.tokens).max(0.0);
        let reset = (unix_now() + missing / self.options.refill_per_sec.max(1e-9)).ceil() as u64;
        t.insert_header("RateLimit-Limit", self.options.capacity.to_string())
            .insert_header(
                "RateLimit-Remaining",
                (self.tokens.floor() as u64).to_string(),
            )
            .insert_header("RateLimit-Reset", reset.to_string())
    }

    #[allow(clippy::too_many_arguments)]
    fn make_server(
        &mut self,
        name: &str,
        server_type: &str,
        image: &str,
        location: &str,
        labels: BTreeMap<String, String>,
        ssh_keys: Vec<i64>,
        user_data: &str,
        polls: u32,
    ) -> FakeServer {
        self.next_id += 1;
        let id = self.next_id;
        let action_id = 10_000 + id;
        let server = FakeServer {
            id,
            name: name.into(),
            status: "initializing".into(),
            server_type: server_type.into(),
            image: image.into(),
            location: location.into(),
            labels,
            ssh_keys,
            user_data: user_data.into(),
            // Loopback-shaped, so no routable address appears in tests.
            ipv4: format!("127.0.{}.{}", (id / 250) % 250, id % 250 + 2),
            action_id,
        };
        self.servers.insert(id, server.clone());
        self.actions.insert(
            action_id,
            FakeAction {
                id: action_id,
                command: "create_server".into(),
                server_id: id,
                polls: 0,
                needed: polls,
                error: None,
            },
        );
        server
    }

    fn take_fault(&mut self, route: Route) -> Option<Fault> {
        self.faults.get_mut(&route).and_then(VecDeque::pop_front)
    }
}

fn server_json(s: &FakeServer) -> Value {
    json!({
        "id": s.id,
        "name": s.name,
        "status": s.status,
        "created": "2026-12-01T10:00:00+00:00",
        "server_type": {"name": s.server_type},
        "image": {"name": s.image},
        "datacenter": {"location": {"name": s.location}},
        "public_net": {"ipv4": {"ip": s.ipv4}, "ipv6": {"ip": "::1/64"}},
        "labels": s.labels,
    })
}

fn action_json(a: &FakeAction, status: &str, progress: u32) -> Value {
    let error = a
        .error
        .as_ref()
        .filter(|_| status == "error")
        .map(|(code, message)| json!({"code": code, "message": message}));
    json!({
        "id": a.id,
        "command": a.command,
        "status": status,
        "progress": progress,
        "started": "2026-12-01T10:00:00+00:00",
        "finished": if status == "running" { Value::Null } else { json!("2026-12-01T10:00:30+00:00") },
        "resources": [{"id": a.server_id, "type": "server"}],
        "error": error.unwrap_or(Value::Null),
    })
}

/// Does `labels` satisfy a selector of comma-joined `k==v` / `k=v` / `k!=v` / `k` terms?
fn selects(selector: &str, labels: &BTreeMap<String, String>) -> bool {
    selector.split(',').map(str::trim).all(|term| {
        if let Some((k, v)) = term.split_once("!=") {
            labels.get(k.trim()).is_none_or(|x| x != v.trim())
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            labels.get(k.trim()).is_some_and(|x| x == v.trim())
        } else if let Some(k) = term.strip_prefix('!') {
            !labels.contains_key(k.trim())
        } else {
            labels.contains_key(term)
        }
    })
}

/// One page of a list with Hetzner's `meta.pagination`.
fn page(key: &str, items: Vec<Value>, query: &[(String, String)]) -> Value {
    let q = |k: &str| {
        query
            .iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, v)| v.parse::<usize>().ok())
    };
    let per_page = q("per_page").unwrap_or(25).clamp(1, 50);
    let page = q("page").unwrap_or(1).max(1);
    let total = items.len();
    let last = total.div_ceil(per_page).max(1);
    let items: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    json!({
        key: items,
        "meta": {"pagination": {
            "page": page, "per_page": per_page, "total_entries": total, "last_page": last,
            "previous_page": if page > 1 { json!(page - 1) } else { Value::Null },
            "next_page": if page < last { json!(page + 1) } else { Value::Null },
        }},
    })
}

fn catalogue(path: &str, query: &[(String, String)]) -> Option<Value> {
    let locations = [
        ("fsn1", "Falkenstein DC Park 1", "Falkenstein", "DE"),
        ("nbg1", "Nuremberg DC Park 1", "Nuremberg", "DE"),
        ("hel1", "Helsinki DC Park 1", "Helsinki", "FI"),
    ];
    let prices = |monthly: &str, hourly: &str| {
        locations
            .iter()
            .map(|(l, ..)| {
                json!({"location": l,
                    "price_hourly": {"net": "0", "gross": hourly},
                    "price_monthly": {"net": "0", "gross": monthly}})
            })
            .collect::<Vec<_>>()
    };
    let items = match path {
        "/locations" => locations
            .iter()
            .enumerate()
            .map(|(i, (name, description, city, country))| {
                json!({"id": i + 1, "name": name, "description": description, "city": city,
                    "country": country, "network_zone": "eu-central"})
            })
            .collect(),
        "/server_types" => vec![
            json!({"id": 1, "name": "cx22", "description": "CX22", "cores": 2, "memory": 4.0,
                "disk": 40, "architecture": "x86", "deprecation": null,
                "prices": prices("4.5900", "0.0063")}),
            json!({"id": 2, "name": "cx32", "description": "CX32", "cores": 4, "memory": 8.0,
                "disk": 80, "architecture": "x86", "deprecation": null,
                "prices": prices("7.9900", "0.0110")}),
            json!({"id": 3, "name": "cax11", "description": "CAX11", "cores": 2, "memory": 4.0,
                "disk": 40, "architecture": "arm", "deprecation": null,
                "prices": prices("4.5900", "0.0063")}),
        ],
        "/images" => vec![
            json!({"id": 1, "type": "system", "status": "available", "name": "debian-12",
                "description": "Debian 12", "architecture": "x86"}),
            json!({"id": 2, "type": "system", "status": "available", "name": "debian-12",
                "description": "Debian 12", "architecture": "arm"}),
        ],
        _ => return None,
    };
    Some(page(&path[1..], items, query))
}

/// What the fake answers to one request.
struct Reply {
    status: u16,
    body: Value,
    /// Hold the answer this long.
    delay: Option<Duration>,
    /// A scripted 429: report an empty bucket and this reset (unix seconds).
    reset: Option<u64>,
}

impl Reply {
    fn ok(status: u16, body: Value) -> Self {
        Self {
            status,
            body,
            delay: None,
            reset: None,
        }
    }

    fn error(status: u16, code: &str, message: &str) -> Self {
        Self::ok(status, error_body(code, message))
    }
}

impl State {
    fn handle(
        &mut self,
        method: &str,
        path: &str,
        query: &[(String, String)],
        body: Option<&Value>,
        authorization: Option<&str>,
    ) -> Reply {
        if self.take_token().is_none() {
            return Reply::error(
                429,
                "rate_limit_exceeded",
                "limit of requests per hour reached",
            );
        }
        if authorization != Some(format!("Bearer {}", self.options.token).as_str()) {
            return Reply::error(401, "unauthorized", "unable to authenticate");
        }
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let route = match (method, segments.as_slice()) {
            ("POST", ["servers"]) => Route::CreateServer,
            ("GET", ["servers"]) => Route::ListServers,
            ("GET", ["servers", _]) => Route::GetServer,
            ("DELETE", ["servers", _]) => Route::DeleteServer,
            ("GET", ["actions", _]) => Route::GetAction,
            ("GET", ["locations" | "server_types" | "images"]) => Route::Catalogue,
            _ => return Reply::error(404, "not_found", &format!("no route {method} {path}")),
        };
        let id = segments.get(1).and_then(|x| x.parse::<i64>().ok());
        let fault = self.take_fault(route);
        match &fault {
            Some(Fault::Status(code)) => {
                return Reply::error(*code, code_for(*code), &format!("fake fault {code}"))
            }
            Some(Fault::Error {
                status,
                code,
                message,
            }) => return Reply::error(*status, code, message),
            Some(Fault::RateLimited { reset_in_secs }) => {
                let mut r = Reply::error(
                    429,
                    "rate_limit_exceeded",
                    "limit of requests per hour reached",
                );
                r.reset = Some(unix_now().ceil() as u64 + reset_in_secs);
                return r;
            }
            _ => {}
        }
        match route {
            Route::CreateServer => self.create(body, fault),
            Route::ListServers => {
                let q = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
                let items = self
                    .servers
                    .values()
                    .filter(|s| q("name").is_none_or(|n| s.name == n))
                    .filter(|s| q("label_selector").is_none_or(|sel| selects(sel, &s.labels)))
                    .map(server_json)
                    .collect();
                Reply::ok(200, page("servers", items, query))
            }
            Route::GetServer => match id.and_then(|id| self.servers.get(&id)) {
                Some(s) => Reply::ok(200, json!({"server": server_json(s)})),
                None => Reply::error(404, "not_found", "server not found"),
            },
            Route::DeleteServer => match id.and_then(|id| self.servers.remove(&id)) {
                Some(s) => {
                    self.next_id += 1;
                    let a = FakeAction {
                        id: 10_000 + self.next_id,
                        command: "delete_server".into(),
                        server_id: s.id,
                        polls: 0,
                        needed: 1,
                        error: None,
                    };
                    let body = json!({"action": action_json(&a, "running", 0)});
                    self.actions.insert(a.id, a);
                    Reply::ok(200, body)
                }
                None => Reply::error(404, "not_found", "server not found"),
            },
            Route::GetAction => self.poll(id, fault),
            Route::Catalogue => match catalogue(path, query) {
                Some(v) => Reply::ok(200, v),
                None => Reply::error(404, "not_found", "unknown catalogue"),
            },
        }
    }

    fn create(&mut self, body: Option<&Value>, fault: Option<Fault>) -> Reply {
        let Some(body) = body else {
            return Reply::error(400, "json_error", "request body is not JSON");
        };
        let text = |k: &str| body.get(k).and_then(Value::as_str).unwrap_or_default();
        for field in ["name", "server_type", "image"] {
            if text(field).is_empty() {
                return Reply::error(
                    400,
                    "invalid_input",
                    &format!("invalid input in field '{field}'"),
                );
            }
        }
        if text("user_data").chars().count() > 32_768 {
            return Reply::error(400, "invalid_input", "invalid input in field 'user_data'");
        }
        let name = text("name");
        if self.servers.values().any(|s| s.name == name) {
            return Reply::error(409, "uniqueness_error", "server name is already used");
        }
        let labels: BTreeMap<String, String> = body
            .get("labels")
            .cloned()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        let ssh_keys: Vec<i64> = body
            .get("ssh_keys")
            .cloned()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        let polls = self.options.action_polls;
        let server = self.make_server(
            name,
            text("server_type"),
            text("image"),
            text("location"),
            labels,
            ssh_keys.clone(),
            text("user_data"),
            polls,
        );
        let action = self.actions.get_mut(&server.action_id).expect("just made");
        if let Some(Fault::ActionError { code, message }) = &fault {
            action.error = Some((code.clone(), message.clone()));
        }
        let action = action_json(action, "running", 0);
        let mut reply = Reply::ok(
            201,
            json!({
                "server": server_json(&server),
                "action": action,
                "next_actions": [],
                // Hetzner sends one when no ssh key was given; the client must drop it.
                "root_password": if ssh_keys.is_empty() { json!("fake-root-password-ZQ9") } else { Value::Null },
            }),
        );
        if let Some(Fault::CreateThenHang(d)) = fault {
            reply.delay = Some(d);
        }
        reply
    }

    fn poll(&mut self, id: Option<i64>, fault: Option<Fault>) -> Reply {
        let Some(a) = id.and_then(|id| self.actions.get_mut(&id)) else {
            return Reply::error(404, "not_found", "action not found");
        };
        if let Some(Fault::ActionError { code, message }) = fault {
            a.error = Some((code, message));
            a.needed = a.polls + 1;
        }
        a.polls += 1;
        let (status, progress) = if a.polls < a.needed {
            ("running", (a.polls * 100 / a.needed.max(1)).min(99))
        } else if a.error.is_some() {
            ("error", 100)
        } else {
            ("success", 100)
        };
        let body = json!({"action": action_json(a, status, progress)});
        let (server_id, command) = (a.server_id, a.command.clone());
        if command == "create_server" {
            if let Some(s) = self.servers.get_mut(&server_id) {
                s.status = match status {
                    "success" => "running",
                    "error" => "off",
                    _ => "starting",
                }
                .into();
            }
        }
        Reply::ok(200, body)
    }
}

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let at = SystemTime::now();
        let mut s = lock(&self.state);
        let path = request
            .url
            .path()
            .strip_prefix("/v1")
            .unwrap_or(request.url.path())
            .to_owned();
        let query: Vec<(String, String)> = request
            .url
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let authorization = request
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let method = request.method.to_string();
        let body = request.body_json::<Value>().ok();
        let reply = s.handle(
            &method,
            &path,
            &query,
            body.as_ref(),
            authorization.as_deref(),
        );
        s.requests.push(Recorded {
            method,
            path,
            query,
            body,
            authorization,
            status: reply.status,
            at,
        });
        let t = s.rate_headers(ResponseTemplate::new(reply.status).set_body_json(reply.body));
        let t = match reply.reset {
            Some(reset) => t
                .insert_header("RateLimit-Remaining", "0")
                .insert_header("RateLimit-Reset", reset.to_string()),
            None => t,
        };
        match reply.delay {
            Some(d) => t.set_delay(d),
            None => t,
        }
    }
}
