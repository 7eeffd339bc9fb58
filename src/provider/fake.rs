//! The fake provider for tests: in memory, records every call, injectable faults per call.
//!
//! A test builds one `Fake`, hands a clone to `Providers::with`, and keeps the other to script
//! faults (`fail_next`), action outcomes (`next_action`), pause a create between "the server
//! exists" and "the caller hears about it" (`pause_create`), and read back what happened
//! (`calls`, `servers`, `count`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use secrecy::ExposeSecret;
use tokio::sync::Notify;

use super::simulated::builtin_catalogue;
use super::{
    ActionStatus, ApiError, BoxFuture, Catalogue, Created, MachineProvider, ProviderAction,
    ProviderError, Server, ServerSpec,
};

/// Which trait method a call or a fault is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Catalogue,
    Create,
    FindByLabel,
    FindByName,
    Server,
    Action,
    Destroy,
}

/// What goes wrong on one call.
#[derive(Debug, Clone)]
pub enum Fault {
    /// The call fails the way a Hetzner answer with this HTTP status maps to a typed error
    /// (400/422 invalid input, 401/403 unauthorized, 404 not found, 409 name conflict,
    /// 429 rate limited for 1 s, 5xx transient); nothing happens at the provider.
    Status(u16),
    /// The call fails with exactly this error; nothing happens at the provider.
    Error(ProviderError),
    /// The call takes effect (a create makes its server, a destroy deletes) but its answer is
    /// lost: the caller gets `Transient("timed out")`.
    LoseAnswer,
    /// The call goes through as if no fault were queued: lets a test aim a fault at a later
    /// call of the same method (the first lookup passes, the second fails).
    Pass,
}

/// How the action started by a create ends.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionPlan {
    /// `running` until the n-th poll, which reports `success` (0 and 1: the first poll); the
    /// server is then `running` with an address.
    SucceedAfter(u32),
    /// The first poll reports `error` with this code and message; the server stays `off`.
    Error(ApiError),
    /// The create answers without an action and the server is `running` at once.
    NoAction,
}

/// A create as the fake saw it: everything but the payload, which is kept as digest and size.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateArgs {
    pub name: String,
    pub server_type: String,
    pub image: String,
    pub location: String,
    pub labels: BTreeMap<String, String>,
    pub ssh_keys: Vec<i64>,
    /// Lowercase hex sha256 of the user_data bytes.
    pub user_data_sha256: String,
    /// user_data length in bytes.
    pub user_data_len: usize,
}

/// The arguments of one recorded call.
#[derive(Debug, Clone, PartialEq)]
pub enum Args {
    /// `catalogue()`.
    None,
    /// `create_server(spec)`.
    Create(CreateArgs),
    /// `find_by_label(key, value)`.
    Label { key: String, value: String },
    /// `find_by_name(name)`.
    Name(String),
    /// `server(id)`, `action(id)`, `destroy(id)`.
    Id(i64),
}

/// One call to the fake, in the order made.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub method: Method,
    pub args: Args,
    /// `Err(message)` when the call failed (a fault, a missing id).
    pub outcome: Result<(), String>,
}

#[derive(Debug)]
struct FakeAction {
    command: String,
    plan: ActionPlan,
    polls: u32,
    server_id: i64,
}

#[derive(Debug, Default)]
struct State {
    next_id: i64,
    servers: BTreeMap<i64, Server>,
    actions: HashMap<i64, FakeAction>,
    faults: HashMap<Method, VecDeque<Fault>>,
    plans: VecDeque<ActionPlan>,
    default_plan: Option<ActionPlan>,
    calls: Vec<Call>,
    pause: Option<CreatePause>,
}

/// The fake provider. Clones share one state.
#[derive(Debug, Clone, Default)]
pub struct Fake {
    state: Arc<Mutex<State>>,
}

/// A create paused after its server exists and before it answers; see `Fake::pause_create`.
#[derive(Debug, Clone, Default)]
pub struct CreatePause {
    reached: Arc<Notify>,
    release: Arc<Notify>,
}

impl CreatePause {
    /// Waits until a create has made its server and is holding its answer back.
    pub async fn reached(&self) {
        self.reached.notified().await;
    }

    /// Lets the held create answer (a permit is kept if it has not arrived yet).
    pub fn release(&self) {
        self.release.notify_one();
    }
}

/// Maps an HTTP status to the error the Hetzner client would return for it.
pub fn status_error(status: u16) -> ProviderError {
    let api = |code: &str| ApiError {
        code: code.into(),
        message: format!("fake HTTP {status}"),
    };
    match status {
        400 | 422 => ProviderError::InvalidInput(api("invalid_input")),
        401 | 403 => ProviderError::Unauthorized(api("unauthorized")),
        404 => ProviderError::NotFound(api("not_found")),
        409 => ProviderError::NameConflict(api("uniqueness_error")),
        429 => ProviderError::RateLimited {
            retry_after: Duration::from_secs(1),
        },
        500..=599 => ProviderError::Transient(format!("HTTP {status}: fake")),
        _ => ProviderError::Other(api("")),
    }
}

impl Fake {
    /// An empty fake: no servers, actions succeed on the first poll.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock already failed; keep the state readable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next call of `method` meets `fault` (faults queue up per method, one per call).
    pub fn fail_next(&self, method: Method, fault: Fault) {
        self.lock()
            .faults
            .entry(method)
            .or_default()
            .push_back(fault);
    }

    /// The action of the next create ends as `plan` (plans queue up, one per create).
    pub fn next_action(&self, plan: ActionPlan) {
        self.lock().plans.push_back(plan);
    }

    /// How every create's action ends when no `next_action` is queued
    /// (initially `SucceedAfter(1)`).
    pub fn set_default_action(&self, plan: ActionPlan) {
        self.lock().default_plan = Some(plan);
    }

    /// Holds the next create after its server exists and before it answers, until the
    /// returned handle's `release()`: a test stops the runner exactly between "create sent"
    /// and "answer stored".
    pub fn pause_create(&self) -> CreatePause {
        let pause = CreatePause::default();
        self.lock().pause = Some(pause.clone());
        pause
    }

    /// Puts a server in place as if someone had created it earlier (status `running`).
    pub fn add_server(&self, name: &str, labels: BTreeMap<String, String>) -> Server {
        let mut s = self.lock();
        s.next_id += 1;
        let id = s.next_id;
        let server = Server {
            id,
            name: name.into(),
            status: "running".into(),
            ipv4: Some(loopback_ip(id)),
            labels,
            created: Some("2026-01-01T00:00:00Z".into()),
        };
        s.servers.insert(id, server.clone());
        server
    }

    /// Changes server `id` as someone at the provider would (strip a label, power it off);
    /// false when no such server exists.
    pub fn edit_server(&self, id: i64, edit: impl FnOnce(&mut Server)) -> bool {
        self.lock().servers.get_mut(&id).map(edit).is_some()
    }

    /// The servers that exist now, by id.
    pub fn servers(&self) -> Vec<Server> {
        self.lock().servers.values().cloned().collect()
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// How many calls of `method` were made (failed ones included).
    pub fn count(&self, method: Method) -> usize {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .count()
    }

    /// The arguments of every create, in order.
    pub fn creates(&self) -> Vec<CreateArgs> {
        self.lock()
            .calls
            .iter()
            .filter_map(|c| match &c.args {
                Args::Create(a) => Some(a.clone()),
                _ => None,
            })
            .collect()
    }

    /// Records the call and takes its next fault, if any.
    fn begin(&self, method: Method, args: Args) -> (usize, Option<Fault>) {
        let mut s = self.lock();
        let fault = s.faults.get_mut(&method).and_then(VecDeque::pop_front);
        s.calls.push(Call {
            method,
            args,
            outcome: Ok(()),
        });
        (s.calls.len() - 1, fault)
    }

    /// Notes how a recorded call ended and passes the result through.
    fn end<T>(&self, idx: usize, r: Result<T, ProviderError>) -> Result<T, ProviderError> {
        if let Err(e) = &r {
            self.lock().calls[idx].outcome = Err(e.to_string());
        }
        r
    }

    /// The error a fault raises before the call takes effect, if it is that kind of fault.
    fn early(fault: &Option<Fault>) -> Option<ProviderError> {
        match fault {
            Some(Fault::Status(code)) => Some(status_error(*code)),
            Some(Fault::Error(e)) => Some(e.clone()),
            Some(Fault::LoseAnswer | Fault::Pass) | None => None,
        }
    }

    /// Runs a call: fault first, then `effect`, then a lost answer if asked for.
    fn run<T>(
        &self,
        method: Method,
        args: Args,
        effect: impl FnOnce(&mut State) -> Result<T, ProviderError>,
    ) -> Result<T, ProviderError> {
        let (idx, fault) = self.begin(method, args);
        let r = match Self::early(&fault) {
            Some(e) => Err(e),
            None => {
                let r = effect(&mut self.lock());
                match (r, fault) {
                    (Ok(_), Some(Fault::LoseAnswer)) => Err(lost()),
                    (r, _) => r,
                }
            }
        };
        self.end(idx, r)
    }

    fn create(&self, spec: &ServerSpec) -> (usize, Result<Created, ProviderError>, bool) {
        let payload = spec.user_data.expose_secret().as_bytes();
        let args = CreateArgs {
            name: spec.name.clone(),
            server_type: spec.server_type.clone(),
            image: spec.image.clone(),
            location: spec.location.clone(),
            labels: spec.labels.clone(),
            ssh_keys: spec.ssh_keys.clone(),
            user_data_sha256: crate::domain::digest::sha256_hex(payload),
            user_data_len: payload.len(),
        };
        let (idx, fault) = self.begin(Method::Create, Args::Create(args));
        if let Some(e) = Self::early(&fault) {
            return (idx, Err(e), false);
        }
        let mut s = self.lock();
        if s.servers.values().any(|x| x.name == spec.name) {
            let e = ProviderError::NameConflict(ApiError {
                code: "uniqueness_error".into(),
                message: format!("server name {:?} is already used", spec.name),
            });
            return (idx, Err(e), false);
        }
        s.next_id += 1;
        let id = s.next_id;
        let plan = s
            .plans
            .pop_front()
            .or_else(|| s.default_plan.clone())
            .unwrap_or(ActionPlan::SucceedAfter(1));
        let up = plan == ActionPlan::NoAction;
        let server = Server {
            id,
            name: spec.name.clone(),
            status: if up { "running" } else { "initializing" }.into(),
            ipv4: up.then(|| loopback_ip(id)),
            labels: spec.labels.clone(),
            created: Some("2026-01-01T00:00:00Z".into()),
        };
        s.servers.insert(id, server.clone());
        let action = (!up).then(|| {
            let action_id = 1000 + id;
            s.actions.insert(
                action_id,
                FakeAction {
                    command: "create_server".into(),
                    plan,
                    polls: 0,
                    server_id: id,
                },
            );
            ProviderAction {
                id: action_id,
                command: "create_server".into(),
                status: ActionStatus::Running,
                progress: 0,
                error: None,
            }
        });
        let lose = matches!(fault, Some(Fault::LoseAnswer));
        (idx, Ok(Created { server, action }), lose)
    }
}

fn lost() -> ProviderError {
    ProviderError::Transient("timed out".into())
}

/// A loopback-shaped address, so no test or fixture carries a routable IP literal.
fn loopback_ip(id: i64) -> String {
    format!("127.0.0.{}", id.rem_euclid(250) + 2)
}

impl MachineProvider for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn catalogue(&self) -> BoxFuture<'_, Result<Catalogue, ProviderError>> {
        Box::pin(
            async move { self.run(Method::Catalogue, Args::None, |_| Ok(builtin_catalogue())) },
        )
    }

    fn create_server<'a>(
        &'a self,
        spec: &'a ServerSpec,
    ) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(async move {
            let (idx, r, lose) = self.create(spec);
            if r.is_ok() {
                let pause = self.lock().pause.take();
                if let Some(p) = pause {
                    p.reached.notify_one();
                    p.release.notified().await;
                }
            }
            let r = if lose { r.and(Err(lost())) } else { r };
            self.end(idx, r)
        })
    }

    fn find_by_label<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Server>, ProviderError>> {
        let args = Args::Label {
            key: key.into(),
            value: value.into(),
        };
        Box::pin(async move {
            self.run(Method::FindByLabel, args, |s| {
                Ok(s.servers
                    .values()
                    .filter(|x| x.labels.get(key).is_some_and(|v| v == value))
                    .cloned()
                    .collect())
            })
        })
    }

    fn find_by_name<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Server>, ProviderError>> {
        Box::pin(async move {
            self.run(Method::FindByName, Args::Name(name.into()), |s| {
                Ok(s.servers.values().find(|x| x.name == name).cloned())
            })
        })
    }

    fn server(&self, id: i64) -> BoxFuture<'_, Result<Option<Server>, ProviderError>> {
        Box::pin(async move {
            self.run(Method::Server, Args::Id(id), |s| {
                Ok(s.servers.get(&id).cloned())
            })
        })
    }

    fn action(&self, id: i64) -> BoxFuture<'_, Result<ProviderAction, ProviderError>> {
        Box::pin(async move { self.run(Method::Action, Args::Id(id), |s| poll(s, id)) })
    }

    fn destroy(&self, id: i64) -> BoxFuture<'_, Result<(), ProviderError>> {
        Box::pin(async move {
            self.run(Method::Destroy, Args::Id(id), |s| {
                s.servers.remove(&id);
                Ok(())
            })
        })
    }
}

/// One poll of an action: counts it, and settles the action and its server per the plan.
fn poll(s: &mut State, id: i64) -> Result<ProviderAction, ProviderError> {
    let Some(a) = s.actions.get_mut(&id) else {
        return Err(ProviderError::NotFound(ApiError {
            code: "not_found".into(),
            message: format!("action {id} not found"),
        }));
    };
    a.polls += 1;
    let (status, progress, error) = match &a.plan {
        ActionPlan::SucceedAfter(n) if a.polls >= *n => (ActionStatus::Success, 100, None),
        ActionPlan::SucceedAfter(n) => {
            let pct = (a.polls * 100 / n.max(&1)).min(99);
            (ActionStatus::Running, pct as u8, None)
        }
        ActionPlan::Error(e) => (ActionStatus::Error, 100, Some(e.clone())),
        ActionPlan::NoAction => (ActionStatus::Success, 100, None),
    };
    let action = ProviderAction {
        id,
        command: a.command.clone(),
        status,
        progress,
        error,
    };
    let server_id = a.server_id;
    if let Some(server) = s.servers.get_mut(&server_id) {
        match status {
            ActionStatus::Success => {
                server.status = "running".into();
                server.ipv4 = Some(loopback_ip(server_id));
            }
            ActionStatus::Error => server.status = "off".into(),
            ActionStatus::Running => server.status = "starting".into(),
        }
    }
    Ok(action)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, provision: &str) -> ServerSpec {
        ServerSpec {
            name: name.into(),
            server_type: "cx22".into(),
            image: "debian-12".into(),
            location: "fsn1".into(),
            user_data: secrecy::SecretString::from("#cloud-config\nsecret: key-123\n".to_owned()),
            labels: BTreeMap::from([
                (super::super::PROVISION_LABEL.into(), provision.into()),
                (super::super::FLEET_LABEL.into(), "alpha".into()),
            ]),
            ssh_keys: vec![7],
        }
    }

    #[tokio::test]
    async fn a_create_records_digest_and_size_never_the_payload_and_the_server_boots() {
        let fake = Fake::new();
        fake.next_action(ActionPlan::SucceedAfter(2));
        let created = fake.create_server(&spec("node-1", "5")).await.unwrap();
        assert_eq!(created.server.status, "initializing");
        assert_eq!(created.server.ipv4, None);
        let action = created.action.unwrap();
        assert_eq!(
            fake.action(action.id).await.unwrap().status,
            ActionStatus::Running
        );
        let done = fake.action(action.id).await.unwrap();
        assert_eq!((done.status, done.progress), (ActionStatus::Success, 100));
        let server = fake.server(created.server.id).await.unwrap().unwrap();
        assert_eq!(server.status, "running");
        assert!(server.ipv4.unwrap().starts_with("127.0.0."));
        let creates = fake.creates();
        assert_eq!(creates.len(), 1);
        assert_eq!(creates[0].user_data_len, 30);
        assert_eq!(
            creates[0].user_data_sha256,
            crate::domain::digest::sha256_hex(b"#cloud-config\nsecret: key-123\n")
        );
        assert!(!format!("{:?}", fake.calls()).contains("key-123"));
        assert_eq!(fake.count(Method::Action), 2);
    }

    #[tokio::test]
    async fn faults_apply_once_per_call_in_the_order_queued() {
        let fake = Fake::new();
        fake.fail_next(Method::Server, Fault::Status(503));
        fake.fail_next(Method::Server, Fault::Status(401));
        assert!(matches!(
            fake.server(1).await,
            Err(ProviderError::Transient(_))
        ));
        assert!(matches!(
            fake.server(1).await,
            Err(ProviderError::Unauthorized(_))
        ));
        assert_eq!(fake.server(1).await, Ok(None));
        let calls = fake.calls();
        assert_eq!(calls.len(), 3);
        assert!(calls[0].outcome.as_ref().unwrap_err().contains("503"));
        assert_eq!(calls[2].outcome, Ok(()));
        fake.fail_next(
            Method::Create,
            Fault::Error(ProviderError::InvalidInput(ApiError {
                code: "invalid_input".into(),
                message: "user_data too long".into(),
            })),
        );
        let err = fake.create_server(&spec("n", "1")).await.unwrap_err();
        assert!(err.to_string().contains("user_data too long"), "{err}");
        assert!(fake.servers().is_empty(), "a refused create makes nothing");
    }

    #[tokio::test]
    async fn a_lost_answer_still_creates_the_server_which_the_label_finds() {
        let fake = Fake::new();
        fake.fail_next(Method::Create, Fault::LoseAnswer);
        let err = fake.create_server(&spec("node-1", "9")).await.unwrap_err();
        assert_eq!(err, ProviderError::Transient("timed out".into()));
        let found = fake
            .find_by_label(super::super::PROVISION_LABEL, "9")
            .await
            .unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].name, "node-1");
        assert!(fake
            .find_by_label(super::super::PROVISION_LABEL, "10")
            .await
            .unwrap()
            .is_empty());
        let again = fake.create_server(&spec("node-1", "9")).await.unwrap_err();
        assert!(matches!(again, ProviderError::NameConflict(_)), "{again:?}");
        assert_eq!(fake.servers().len(), 1);
    }

    #[tokio::test]
    async fn an_action_plan_error_ends_the_action_with_its_code_and_the_server_off() {
        let fake = Fake::new();
        let why = ApiError {
            code: "server_create_failed".into(),
            message: "no capacity in fsn1".into(),
        };
        fake.next_action(ActionPlan::Error(why.clone()));
        let created = fake.create_server(&spec("node-1", "3")).await.unwrap();
        let action = fake.action(created.action.unwrap().id).await.unwrap();
        assert_eq!(action.status, ActionStatus::Error);
        assert_eq!(action.error, Some(why));
        assert_eq!(fake.servers()[0].status, "off");
        fake.destroy(created.server.id).await.unwrap();
        fake.destroy(created.server.id).await.unwrap();
        assert!(fake.servers().is_empty());
    }

    #[tokio::test]
    async fn a_paused_create_holds_its_answer_until_released_with_the_server_already_there() {
        let fake = Fake::new();
        let pause = fake.pause_create();
        let task = tokio::spawn({
            let fake = fake.clone();
            async move { fake.create_server(&spec("node-1", "4")).await }
        });
        pause.reached().await;
        assert_eq!(
            fake.servers().len(),
            1,
            "the server exists before the answer"
        );
        assert!(!task.is_finished());
        pause.release();
        let created = task.await.unwrap().unwrap();
        assert_eq!(created.server.name, "node-1");
        // The pause was one-shot: the next create answers at once.
        fake.create_server(&spec("node-2", "4")).await.unwrap();
    }
}
