//! A simulated yubaba fleet on loopback: every node is a real HTTP listener on
//! `127.0.0.1:<port>` answering `/raft/status`, `/node`, `/node/usage`, `/workloads` and
//! `/health` in the
//! shapes of `tests/fixtures/yubaba/`, so the scraper, its leader following and its derived
//! mode run against sockets exactly as they would against a fleet.
//!
//! Node 1 is the leader; the first `voters` nodes are voters carrying tenants; spares are
//! learners with published capacity and no tenants. A `native` fleet's leader publishes the
//! `headroom` section (followers `null`); a derived fleet has no section anywhere, so the spare
//! count must come from each node's `/node` and `/node/usage`. `run_until_stopped` makes the
//! fleet live: tenants land on spares over time (the fleet drifts into a deficit) and every
//! server the simulated provider creates for the fleet joins as a spare once it runs.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::Instant;

use super::http::{self, Request, Response};
use crate::provider::simulated::Simulated;
use crate::provider::FLEET_LABEL;

/// Nodes a simulated fleet may hold: each is a listening socket.
pub const MAX_NODES: usize = 256;

/// The raft term every simulated node reports (the leader never changes).
const TERM: u64 = 3;

/// What one simulated tenant reserves: 1 GiB and half a core.
pub const TENANT_MEMORY_MB: u32 = 1024;
pub const TENANT_CPU_MILLIS: u32 = 500;
/// What a simulated node publishes as allocatable (MiB, millicores): an 8 GiB, 4-core host.
pub const NODE_ALLOCATABLE: (u32, u32) = (7807, 4000);

/// How a simulated fleet starts and how fast it lives.
#[derive(Debug, Clone)]
pub struct SimFleetOptions {
    /// The fleet's name: the provider label `headroom-fleet=<name>` that makes a server join.
    pub name: String,
    /// Whether the leader publishes the `headroom` section (newer builds) or not (derived).
    pub native: bool,
    /// Voters (at least 1; node 1 leads), each carrying `tenants_per_voter` tenants.
    pub voters: u32,
    /// Learners with capacity and no tenant at start.
    pub spares: u32,
    /// What those starting spares publish as allocatable (MiB, millicores); `None`: the
    /// same as every other node ([`NODE_ALLOCATABLE`]). A smaller spare than the busy nodes'
    /// workloads is the fleet yubaba's count calls healthy and absorption calls short.
    pub spare_allocatable: Option<(u32, u32)>,
    /// Tenants on each voter (at least 1, so voters never count as spare).
    pub tenants_per_voter: u32,
    /// Regions given to the starting nodes in turn; nodes that join later take the first.
    /// Two or more distinct regions make the native section require 2 spares.
    pub regions: Vec<String>,
    /// When the first tenant lands on a spare, counted from `run_until_stopped`'s start.
    pub first_tenant_after: Duration,
    /// Then one more tenant this often (`None`: only the first). A fleet without a spare
    /// waits: tenants land on spares only, so each deficit needs one restore to end.
    pub tenant_every: Option<Duration>,
    /// How long a provider server that is `running` takes to join (yubaba booting).
    pub join_after: Duration,
    /// How often the loop looks at the clock and the provider's servers.
    pub poll_every: Duration,
    /// Bounds on each node's HTTP server.
    pub limits: http::Limits,
}

impl Default for SimFleetOptions {
    fn default() -> Self {
        Self {
            name: "sim".into(),
            native: true,
            voters: 3,
            spares: 1,
            spare_allocatable: None,
            tenants_per_voter: 2,
            regions: vec!["eu-central".into()],
            first_tenant_after: Duration::from_secs(60),
            tenant_every: Some(Duration::from_secs(300)),
            join_after: Duration::from_secs(2),
            poll_every: Duration::from_millis(500),
            limits: http::Limits::default(),
        }
    }
}

impl SimFleetOptions {
    /// Refuses options the simulation cannot honour, naming the field and the rule.
    pub fn check(&self) -> anyhow::Result<()> {
        let fail = |field: &str, rule: &str| Err(anyhow::anyhow!("sim fleet {field}: {rule}"));
        if self.name.trim().is_empty() {
            return fail("name", "must not be empty");
        }
        if self.voters == 0 {
            return fail("voters", "must be at least 1 (node 1 leads)");
        }
        if self.tenants_per_voter == 0 {
            return fail("tenants_per_voter", "must be at least 1");
        }
        if (self.voters as usize).saturating_add(self.spares as usize) > MAX_NODES {
            return fail("voters + spares", "must be at most 256 nodes");
        }
        if self.regions.is_empty() || self.regions.iter().any(|r| r.trim().is_empty()) {
            return fail(
                "regions",
                "must name at least one region, none of them empty",
            );
        }
        if self.poll_every.is_zero() {
            return fail("poll_every", "must be longer than zero");
        }
        if self
            .spare_allocatable
            .is_some_and(|(m, c)| m < TENANT_MEMORY_MB || c < TENANT_CPU_MILLIS)
        {
            return Err(anyhow::anyhow!(
                "sim fleet spare_allocatable: must hold at least one tenant \
                 ({TENANT_MEMORY_MB} MiB, {TENANT_CPU_MILLIS} millicores)"
            ));
        }
        Ok(())
    }
}

/// One node as tests and logs see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimNode {
    /// Raft id.
    pub id: u64,
    /// `127.0.0.1:<port>`: its raft and HTTP address.
    pub addr: String,
    /// Host name on `/node`.
    pub name: String,
    /// Its region label.
    pub region: String,
    /// In the voter set; otherwise a learner.
    pub voter: bool,
    /// Publishes allocatable capacity on `/node`.
    pub capacity: bool,
    /// The allocatable it publishes (MiB, millicores).
    pub allocatable: (u32, u32),
    /// Workloads it runs.
    pub tenants: u32,
    /// The simulated provider's server it came from, if it joined that way.
    pub server_id: Option<i64>,
}

impl SimNode {
    /// Spare by yubaba's rule: published capacity and no tenant.
    pub fn is_spare(&self) -> bool {
        self.capacity && self.tenants == 0
    }
}

struct Node {
    info: SimNode,
    /// Dropped when the node leaves, which stops its listener and its connections.
    _stop: watch::Sender<bool>,
}

struct FleetState {
    name: String,
    native: bool,
    nodes: BTreeMap<u64, Node>,
    next_id: u64,
    /// Raft log entries: every membership change and tenant placement appends one.
    log_index: u64,
    /// The entry of the current membership.
    membership_index: u64,
}

impl FleetState {
    fn headroom(&self) -> (u32, u32) {
        let spare = self.nodes.values().filter(|n| n.info.is_spare()).count() as u32;
        let regions: BTreeSet<&str> = self
            .nodes
            .values()
            .map(|n| n.info.region.as_str())
            .collect();
        (spare, if regions.len() >= 2 { 2 } else { 1 })
    }

    fn log_id(index: u64) -> Value {
        json!({ "leader_id": { "term": TERM, "node_id": 1 }, "index": index })
    }

    /// `/raft/status` as node `id` answers it.
    fn raft_status(&self, id: u64) -> Value {
        let Some(node) = self.nodes.get(&id) else {
            return Value::Null;
        };
        let state = if id == 1 {
            "Leader"
        } else if node.info.voter {
            "Follower"
        } else {
            "Learner"
        };
        let voters: Vec<u64> = self
            .nodes
            .values()
            .filter(|n| n.info.voter)
            .map(|n| n.info.id)
            .collect();
        let members: serde_json::Map<String, Value> = self
            .nodes
            .values()
            .map(|n| (n.info.id.to_string(), json!({ "addr": n.info.addr })))
            .collect();
        let mut body = json!({
            "node_id": id,
            "state": state,
            "current_leader": 1,
            "current_term": TERM,
            "last_log_index": self.log_index,
            "last_applied": Self::log_id(self.log_index),
            "membership_config": {
                "log_id": Self::log_id(self.membership_index),
                "membership": { "configs": [voters], "nodes": members },
            },
        });
        if self.native {
            let section = if id == 1 {
                let (spare, required) = self.headroom();
                // Newer builds add sections beside `headroom`; readers must ignore them.
                body["lease_liveness"] =
                    json!({ "confirmed": self.nodes.keys().collect::<Vec<_>>() });
                json!({ "spare": spare, "required": required })
            } else {
                Value::Null
            };
            body["headroom"] = section;
        }
        body
    }

    /// `/node`: the host and, when measured, its allocatable capacity.
    fn node(&self, id: u64) -> Value {
        let Some(node) = self.nodes.get(&id) else {
            return Value::Null;
        };
        let mut body = json!({
            "schema_version": 1,
            "host.name": node.info.name,
            "host.arch": "amd64",
            "yah.arch": "x86_64",
            "host.cpu.model.name": "Simulated CPU",
            "os.type": "linux",
            "os.version": "6.1.0-28-amd64",
            "system.cpu.logical.count": 4,
            "system.memory.limit": 8_186_298_368_u64,
            "system.filesystem.limit": 160_982_630_400_u64,
            "yah.collector": "procfs",
            "yah.collected_at_unix_ms": unix_ms(),
        });
        if node.info.capacity {
            body["yah.allocatable.memory_mb"] = json!(node.info.allocatable.0);
            body["yah.allocatable.cpu_millis"] = json!(node.info.allocatable.1);
        }
        body
    }

    /// `/node/usage`: load and workloads over `window_ms` (each tenant commits
    /// [`TENANT_MEMORY_MB`] and [`TENANT_CPU_MILLIS`]).
    fn node_usage(&self, id: u64, window_ms: u64) -> Value {
        let Some(node) = self.nodes.get(&id) else {
            return Value::Null;
        };
        let tenants = node.info.tenants;
        let busy = f64::from(tenants.min(8)) / 8.0;
        json!({
            "system.cpu.utilization": round(0.03 + 0.5 * busy),
            "yah.cpu.source": "procstat",
            "system.memory.usage": 612_368_384_u64 + u64::from(tenants) * 1_073_741_824,
            "system.memory.limit": 8_186_298_368_u64,
            "system.memory.utilization": round(0.07 + 0.6 * busy),
            "system.filesystem.usage": 4_294_967_296_u64,
            "system.filesystem.limit": 160_982_630_400_u64,
            "system.filesystem.utilization": 0.0267,
            "yah.load.1m": round(0.04 + 2.0 * busy),
            "yah.load.5m": round(0.02 + 1.8 * busy),
            "yah.load.15m": round(1.5 * busy),
            "yah.workloads.count": tenants,
            "yah.committed.memory_mb": tenants * TENANT_MEMORY_MB,
            "yah.committed.cpu_millis": tenants * TENANT_CPU_MILLIS,
            "yah.sample.window_ms": window_ms,
            "yah.collector": "procfs",
            "yah.collected_at_unix_ms": unix_ms(),
        })
    }

    /// `/workloads`: each tenant with its reserved size (the same sizes `/node/usage`
    /// commits), as a node with a workload runtime lists them.
    fn workloads(&self, id: u64) -> Value {
        let Some(node) = self.nodes.get(&id) else {
            return Value::Null;
        };
        let list: Vec<Value> = (1..=node.info.tenants)
            .map(|n| {
                json!({
                    "ident": format!("tenant-{id}-{n}"),
                    "state": "running",
                    "image": "registry.example/tenant:sim",
                    "memory_mb": TENANT_MEMORY_MB,
                    "cpu_millis": TENANT_CPU_MILLIS,
                })
            })
            .collect();
        json!({ "workloads": list })
    }

    fn health(&self, id: u64) -> Value {
        let name = self.nodes.get(&id).map_or("", |n| n.info.name.as_str());
        json!({ "status": "ok", "name": name, "version": "0.0.0-sim", "mode": "clustered" })
    }

    /// Answers one request to node `id`.
    fn route(&self, id: u64, req: &Request) -> Response {
        if !self.nodes.contains_key(&id) {
            // A node that left answers like a yubaba without raft until its listener stops.
            return Response::text(503, "raft not configured: node left the simulated fleet");
        }
        if req.method != "GET" {
            return Response::text(405, "only GET");
        }
        match req.path.as_str() {
            "/raft/status" => Response::json(200, &self.raft_status(id)),
            "/node" => Response::json(200, &self.node(id)),
            "/node/usage" => match window(req.param("window_ms")) {
                Ok(ms) => Response::json(200, &self.node_usage(id, ms)),
                Err(rule) => Response::text(400, rule),
            },
            "/workloads" => Response::json(200, &self.workloads(id)),
            "/health" => Response::json(200, &self.health(id)),
            _ => Response::text(404, "no such endpoint"),
        }
    }

    fn add(&mut self, mut info: SimNode, addr: SocketAddr, stop: watch::Sender<bool>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        info.id = id;
        info.addr = addr.to_string();
        if info.name.is_empty() {
            info.name = format!("{}-{id}", self.name);
        }
        self.nodes.insert(id, Node { info, _stop: stop });
        self.log_index += 1;
        self.membership_index = self.log_index;
        id
    }
}

/// `window_ms` as yubaba takes it: 50–5000 ms; absent means 500 (the scraper always sends it).
fn window(raw: Option<&str>) -> Result<u64, &'static str> {
    let rule = "window_ms must be a whole number from 50 to 5000";
    match raw {
        None => Ok(500),
        Some(v) => v
            .parse::<u64>()
            .ok()
            .filter(|ms| (50..=5000).contains(ms))
            .ok_or(rule),
    }
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A running simulated fleet. Clones share it; when the last clone is dropped every node's
/// listener stops.
#[derive(Clone)]
pub struct SimFleet {
    state: Arc<Mutex<FleetState>>,
    options: Arc<SimFleetOptions>,
}

impl std::fmt::Debug for SimFleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimFleet")
            .field("name", &self.options.name)
            .field("nodes", &self.nodes())
            .finish()
    }
}

impl SimFleet {
    /// Binds one loopback listener per node and starts serving.
    pub async fn start(options: SimFleetOptions) -> anyhow::Result<SimFleet> {
        options.check()?;
        let fleet = SimFleet {
            state: Arc::new(Mutex::new(FleetState {
                name: options.name.clone(),
                native: options.native,
                nodes: BTreeMap::new(),
                next_id: 1,
                log_index: 0,
                membership_index: 0,
            })),
            options: Arc::new(options),
        };
        let regions = fleet.options.regions.clone();
        let starting = fleet.options.voters + fleet.options.spares;
        for i in 0..starting {
            let voter = i < fleet.options.voters;
            fleet
                .add_node(SimNode {
                    id: 0,
                    addr: String::new(),
                    name: String::new(),
                    region: regions[i as usize % regions.len()].clone(),
                    voter,
                    capacity: true,
                    allocatable: if voter {
                        NODE_ALLOCATABLE
                    } else {
                        fleet.options.spare_allocatable.unwrap_or(NODE_ALLOCATABLE)
                    },
                    tenants: if voter {
                        fleet.options.tenants_per_voter
                    } else {
                        0
                    },
                    server_id: None,
                })
                .await?;
        }
        let (spare, required) = fleet.headroom();
        tracing::info!(
            fleet.name = %fleet.options.name,
            native = fleet.options.native,
            nodes = starting,
            spare,
            required,
            leader = %fleet.nodes()[0].addr,
            "simulated yubaba fleet listening"
        );
        Ok(fleet)
    }

    fn lock(&self) -> MutexGuard<'_, FleetState> {
        // Every change is a plain insert or counter update: the state stays whole after a
        // panic elsewhere, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Binds a listener for a new node, then adds it: the socket exists before the node is
    /// listed in any membership, so nothing ever points at a port that is not yet open.
    async fn add_node(&self, info: SimNode) -> anyhow::Result<u64> {
        if self.lock().nodes.len() >= MAX_NODES {
            anyhow::bail!("sim fleet {}: at most {MAX_NODES} nodes", self.options.name);
        }
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = watch::channel(false);
        let id = self.lock().add(info, addr, stop);
        // The handler holds the fleet weakly: the listeners must not keep a dropped fleet alive.
        let weak: Weak<Mutex<FleetState>> = Arc::downgrade(&self.state);
        let handler = Arc::new(move |req: &Request| match weak.upgrade() {
            Some(state) => state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .route(id, req),
            None => Response::text(503, "simulated fleet stopped"),
        });
        tokio::spawn(http::serve(listener, self.options.limits, handler, stopped));
        Ok(id)
    }

    /// The fleet's name.
    pub fn name(&self) -> &str {
        &self.options.name
    }

    /// Base URLs of the voters, followers first and the leader last, so a scraper given them
    /// in order has to follow `current_leader` to find the leader.
    pub fn endpoints(&self) -> Vec<String> {
        let mut voters: Vec<SimNode> = self.nodes().into_iter().filter(|n| n.voter).collect();
        voters.rotate_left(1);
        voters
            .iter()
            .map(|n| format!("http://{}", n.addr))
            .collect()
    }

    /// Every node now, by id.
    pub fn nodes(&self) -> Vec<SimNode> {
        self.lock().nodes.values().map(|n| n.info.clone()).collect()
    }

    /// Spare and required as the leader's `headroom` section states them (for a derived
    /// fleet: what a correct derivation must find).
    pub fn headroom(&self) -> (u32, u32) {
        self.lock().headroom()
    }

    /// A new learner with capacity and no tenant joins (the fleet gains a spare). Returns its id.
    pub async fn add_spare(&self) -> anyhow::Result<u64> {
        let region = self.options.regions[0].clone();
        self.add_node(spare_node(region, String::new(), None)).await
    }

    /// A tenant lands on the spare with the lowest id; returns that node, or `None` when the
    /// fleet has no spare.
    pub fn land_tenant(&self) -> Option<u64> {
        let mut state = self.lock();
        let id = state
            .nodes
            .values()
            .find(|n| n.info.is_spare())
            .map(|n| n.info.id)?;
        if let Some(node) = state.nodes.get_mut(&id) {
            node.info.tenants += 1;
        }
        state.log_index += 1;
        Some(id)
    }

    /// Removes a node (its server was destroyed): its listener stops.
    fn remove(&self, id: u64) {
        let mut state = self.lock();
        if state.nodes.remove(&id).is_some() {
            state.log_index += 1;
            state.membership_index = state.log_index;
        }
    }

    /// Lives until `shutdown` turns true (or its sender is dropped): lands a tenant on a spare
    /// `first_tenant_after` the start and then every `tenant_every`, and, when `provider` is
    /// given, adds every server labelled `headroom-fleet=<name>` as a spare `join_after` it
    /// is `running` (and removes the node when the server is destroyed).
    pub async fn run_until_stopped(
        self,
        provider: Option<Arc<Simulated>>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let name = self.options.name.clone();
        let mut next_tenant = Some(Instant::now() + self.options.first_tenant_after);
        // Provider servers seen running and not yet joined: server id → since when.
        let mut booting: BTreeMap<i64, Instant> = BTreeMap::new();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.options.poll_every) => {}
                () = crate::shutdown::requested(&mut shutdown) => return,
            }
            let now = Instant::now();
            if next_tenant.is_some_and(|at| now >= at) {
                next_tenant = self.options.tenant_every.map(|every| now + every);
                match self.land_tenant() {
                    Some(node) => {
                        let (spare, required) = self.headroom();
                        tracing::info!(fleet.name = %name, node, spare, required,
                            "simulated fleet: a tenant landed on a spare");
                    }
                    None => {
                        tracing::debug!(fleet.name = %name, "simulated fleet: no spare for a tenant")
                    }
                }
            }
            let Some(provider) = &provider else {
                continue;
            };
            if let Some(joined) = self.follow_provider(provider, &mut booting, now).await {
                // A restored fleet stays healthy for a whole period before the next tenant.
                if let (Some(at), Some(every)) = (next_tenant, self.options.tenant_every) {
                    next_tenant = Some(at.max(now + every));
                }
                let (spare, required) = self.headroom();
                tracing::info!(fleet.name = %name, node = joined, spare, required,
                    "simulated fleet: a new server joined as a spare");
            }
        }
    }

    /// One look at the provider: joins servers that have run for `join_after`, removes nodes
    /// whose server is gone. Returns the last node that joined.
    async fn follow_provider(
        &self,
        provider: &Simulated,
        booting: &mut BTreeMap<i64, Instant>,
        now: Instant,
    ) -> Option<u64> {
        let servers: Vec<_> = provider
            .servers()
            .into_iter()
            .filter(|s| s.labels.get(FLEET_LABEL) == Some(&self.options.name))
            .collect();
        let joined: BTreeMap<i64, u64> = self
            .nodes()
            .into_iter()
            .filter_map(|n| n.server_id.map(|s| (s, n.id)))
            .collect();
        for (server, node) in &joined {
            if !servers.iter().any(|s| s.id == *server) {
                self.remove(*node);
                tracing::info!(fleet.name = %self.options.name, node, server,
                    "simulated fleet: a node left (its server was destroyed)");
            }
        }
        booting.retain(|id, _| servers.iter().any(|s| s.id == *id));
        let mut last = None;
        for server in servers.iter().filter(|s| !joined.contains_key(&s.id)) {
            if server.status != "running" {
                continue;
            }
            let since = *booting.entry(server.id).or_insert(now);
            if now.saturating_duration_since(since) < self.options.join_after {
                continue;
            }
            let region = self.options.regions[0].clone();
            match self
                .add_node(spare_node(region, server.name.clone(), Some(server.id)))
                .await
            {
                Ok(id) => {
                    booting.remove(&server.id);
                    last = Some(id);
                }
                Err(e) => {
                    tracing::warn!(fleet.name = %self.options.name, server = server.id,
                        error = %e, "simulated fleet: a server could not join")
                }
            }
        }
        last
    }
}

fn spare_node(region: String, name: String, server_id: Option<i64>) -> SimNode {
    SimNode {
        id: 0,
        addr: String::new(),
        name,
        region,
        voter: false,
        capacity: true,
        allocatable: NODE_ALLOCATABLE,
        tenants: 0,
        server_id,
    }
}

#[cfg(test)]
mod tests;
