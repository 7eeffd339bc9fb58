//! The demo's simulated cloud: a fixed catalogue shaped like Hetzner's, and servers that come
//! up as slowly as a real cloud's. A create answers after about a second with the server
//! `initializing` and a `create_server` action `running`; over the next several seconds the
//! action's progress climbs to 100 and `success` while the server walks
//! `initializing` → `starting` → `running` and gets a (loopback) address. Everything is
//! derived from the time since the create, so polling does not drive it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::{
    ActionStatus, ApiError, BoxFuture, Catalogue, Created, Image, Location, MachineProvider,
    ProviderAction, ProviderError, Server, ServerSpec, ServerType,
};

/// How slow the simulated cloud is, counted from the create's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimTiming {
    /// How long a create takes to answer.
    pub answer_after: Duration,
    /// When the server turns from `initializing` to `starting`.
    pub starting_after: Duration,
    /// When the server is `running` and its action `success`.
    pub running_after: Duration,
}

impl Default for SimTiming {
    fn default() -> Self {
        Self {
            answer_after: Duration::from_secs(1),
            starting_after: Duration::from_secs(3),
            running_after: Duration::from_secs(8),
        }
    }
}

/// Action ids are the server's id plus this, so each server has one create action.
const ACTION_OFFSET: i64 = 100_000;

#[derive(Debug)]
struct SimServer {
    name: String,
    labels: BTreeMap<String, String>,
    /// When the create answered.
    born: Instant,
}

#[derive(Debug, Default)]
struct SimState {
    next_id: i64,
    servers: BTreeMap<i64, SimServer>,
}

/// The simulated provider. Clones share their servers.
#[derive(Debug, Default, Clone)]
pub struct Simulated {
    timing: SimTiming,
    state: Arc<Mutex<SimState>>,
}

impl Simulated {
    /// A simulated cloud with its own pace (tests make it fast).
    pub fn with_timing(timing: SimTiming) -> Self {
        Self {
            timing,
            state: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SimState> {
        // Every write is a plain insert or remove: the state stays consistent after a panic.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The servers that exist now, as the provider would describe them (the simulated yubaba
    /// fleet picks its spares from these).
    pub fn servers(&self) -> Vec<Server> {
        let now = Instant::now();
        self.lock()
            .servers
            .iter()
            .map(|(id, s)| self.describe(*id, s, now))
            .collect()
    }

    fn describe(&self, id: i64, s: &SimServer, now: Instant) -> Server {
        let age = now.saturating_duration_since(s.born);
        let status = if age >= self.timing.running_after {
            "running"
        } else if age >= self.timing.starting_after {
            "starting"
        } else {
            "initializing"
        };
        Server {
            id,
            name: s.name.clone(),
            status: status.into(),
            ipv4: (status == "running").then(|| format!("127.0.0.{}", id.rem_euclid(250) + 2)),
            labels: s.labels.clone(),
            created: None,
        }
    }

    fn action_now(&self, id: i64, s: &SimServer, now: Instant) -> ProviderAction {
        let age = now.saturating_duration_since(s.born);
        let total = self.timing.running_after.as_secs_f64().max(f64::EPSILON);
        let done = age >= self.timing.running_after;
        ProviderAction {
            id: id + ACTION_OFFSET,
            command: "create_server".into(),
            status: if done {
                ActionStatus::Success
            } else {
                ActionStatus::Running
            },
            progress: if done {
                100
            } else {
                (age.as_secs_f64() / total * 100.0).min(99.0) as u8
            },
            error: None,
        }
    }
}

fn location(name: &str, description: &str, city: &str, country: &str, zone: &str) -> Location {
    Location {
        name: name.into(),
        description: description.into(),
        city: city.into(),
        country: country.into(),
        network_zone: zone.into(),
    }
}

fn server_type(
    name: &str,
    cores: u32,
    memory_gb: f64,
    disk_gb: u64,
    arch: &str,
    price: &str,
) -> ServerType {
    let hourly = price
        .parse::<f64>()
        .map(|m| format!("{:.4}", (m / 730.0 * 10_000.0).ceil() / 10_000.0))
        .unwrap_or_default();
    ServerType {
        name: name.into(),
        description: name.to_uppercase(),
        cores,
        memory_gb,
        disk_gb,
        arch: arch.into(),
        deprecated: false,
        monthly_price: ["fsn1", "nbg1", "hel1"]
            .iter()
            .map(|l| ((*l).to_owned(), price.to_owned()))
            .collect(),
        // Hetzner's hourly price is the monthly one over about 730 hours, rounded up.
        hourly_price: ["fsn1", "nbg1", "hel1"]
            .iter()
            .map(|l| ((*l).to_owned(), hourly.clone()))
            .collect(),
    }
}

/// The built-in catalogue (also the fake provider's).
pub fn builtin_catalogue() -> Catalogue {
    Catalogue {
        locations: vec![
            location(
                "fsn1",
                "Falkenstein DC Park 1",
                "Falkenstein",
                "DE",
                "eu-central",
            ),
            location(
                "nbg1",
                "Nuremberg DC Park 1",
                "Nuremberg",
                "DE",
                "eu-central",
            ),
            location("hel1", "Helsinki DC Park 1", "Helsinki", "FI", "eu-central"),
            location("ash", "Ashburn, VA", "Ashburn, VA", "US", "us-east"),
            location("hil", "Hillsboro, OR", "Hillsboro, OR", "US", "us-west"),
        ],
        server_types: vec![
            server_type("cx22", 2, 4.0, 40, "x86_64", "4.5900"),
            server_type("cx32", 4, 8.0, 80, "x86_64", "7.9900"),
            server_type("cpx31", 4, 8.0, 160, "x86_64", "16.4900"),
            server_type("ccx13", 2, 8.0, 80, "x86_64", "14.8600"),
            server_type("cax11", 2, 4.0, 40, "aarch64", "4.5900"),
            server_type("cax21", 4, 8.0, 80, "aarch64", "7.9900"),
        ],
        images: vec![
            Image {
                name: "debian-12".into(),
                description: "Debian 12".into(),
                archs: vec!["x86_64".into(), "aarch64".into()],
            },
            Image {
                name: "debian-13".into(),
                description: "Debian 13".into(),
                archs: vec!["x86_64".into(), "aarch64".into()],
            },
            Image {
                name: "ubuntu-24.04".into(),
                description: "Ubuntu 24.04".into(),
                archs: vec!["x86_64".into(), "aarch64".into()],
            },
        ],
    }
}

impl MachineProvider for Simulated {
    fn name(&self) -> &'static str {
        "simulated"
    }

    fn catalogue(&self) -> BoxFuture<'_, Result<Catalogue, ProviderError>> {
        Box::pin(async { Ok(builtin_catalogue()) })
    }

    fn create_server<'a>(
        &'a self,
        spec: &'a ServerSpec,
    ) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(async move {
            tokio::time::sleep(self.timing.answer_after).await;
            let now = Instant::now();
            let mut state = self.lock();
            if state.servers.values().any(|s| s.name == spec.name) {
                return Err(ProviderError::NameConflict(ApiError {
                    code: "uniqueness_error".into(),
                    message: format!("server name {:?} is already used", spec.name),
                }));
            }
            state.next_id += 1;
            let id = state.next_id;
            let server = SimServer {
                name: spec.name.clone(),
                labels: spec.labels.clone(),
                born: now,
            };
            let created = Created {
                server: self.describe(id, &server, now),
                action: Some(self.action_now(id, &server, now)),
            };
            state.servers.insert(id, server);
            Ok(created)
        })
    }

    fn find_by_label<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Server>, ProviderError>> {
        Box::pin(async move {
            Ok(self
                .servers()
                .into_iter()
                .filter(|s| s.labels.get(key).is_some_and(|v| v == value))
                .collect())
        })
    }

    fn find_by_name<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Server>, ProviderError>> {
        Box::pin(async move { Ok(self.servers().into_iter().find(|s| s.name == name)) })
    }

    fn server(&self, id: i64) -> BoxFuture<'_, Result<Option<Server>, ProviderError>> {
        Box::pin(async move {
            let now = Instant::now();
            Ok(self
                .lock()
                .servers
                .get(&id)
                .map(|s| self.describe(id, s, now)))
        })
    }

    fn action(&self, id: i64) -> BoxFuture<'_, Result<ProviderAction, ProviderError>> {
        Box::pin(async move {
            let now = Instant::now();
            let server_id = id - ACTION_OFFSET;
            self.lock()
                .servers
                .get(&server_id)
                .map(|s| self.action_now(server_id, s, now))
                .ok_or_else(|| {
                    ProviderError::NotFound(ApiError {
                        code: "not_found".into(),
                        message: format!("action {id} not found"),
                    })
                })
        })
    }

    fn destroy(&self, id: i64) -> BoxFuture<'_, Result<(), ProviderError>> {
        Box::pin(async move {
            self.lock().servers.remove(&id);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> ServerSpec {
        ServerSpec::sample(name, (super::super::PROVISION_LABEL, "12"))
    }

    #[tokio::test]
    async fn a_simulated_server_walks_initializing_starting_running_as_its_action_reaches_success()
    {
        // tokio's test-util (pause/advance) is not enabled in this crate, so the cloud is made
        // fast instead: the same walk in 300 ms.
        let sim = Simulated::with_timing(SimTiming {
            answer_after: Duration::from_millis(40),
            starting_after: Duration::from_millis(100),
            running_after: Duration::from_millis(300),
        });
        let started = Instant::now();
        let created = sim.create_server(&spec("node-1")).await.unwrap();
        assert!(
            started.elapsed() >= Duration::from_millis(40),
            "a create takes its time"
        );
        assert_eq!(created.server.status, "initializing");
        assert_eq!(created.server.ipv4, None);
        let action = created.action.unwrap();
        assert_eq!((action.status, action.progress), (ActionStatus::Running, 0));

        let mut statuses = vec![created.server.status.clone()];
        let mut progress = vec![0_u8];
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let s = sim.server(created.server.id).await.unwrap().unwrap();
            if statuses.last() != Some(&s.status) {
                statuses.push(s.status.clone());
            }
            let a = sim.action(action.id).await.unwrap();
            assert!(
                a.progress >= *progress.last().unwrap(),
                "progress never goes back"
            );
            progress.push(a.progress);
            if a.status == ActionStatus::Success {
                assert_eq!(a.progress, 100);
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "stuck at {statuses:?}"
            );
        }
        assert_eq!(statuses, ["initializing", "starting", "running"]);
        let up = sim.servers();
        assert_eq!(up.len(), 1);
        assert!(up[0]
            .ipv4
            .as_deref()
            .is_some_and(|ip| ip.starts_with("127.0.0.")));
        assert_eq!(
            sim.find_by_label(super::super::PROVISION_LABEL, "12")
                .await
                .unwrap()
                .len(),
            1
        );
        assert!(matches!(
            sim.create_server(&spec("node-1")).await,
            Err(ProviderError::NameConflict(_))
        ));
        sim.destroy(created.server.id).await.unwrap();
        assert_eq!(sim.server(created.server.id).await.unwrap(), None);
    }

    #[test]
    fn the_default_pace_is_a_cloud_s_a_second_to_answer_and_seconds_to_boot() {
        let t = SimTiming::default();
        assert_eq!(t.answer_after, Duration::from_secs(1));
        assert!(
            t.running_after >= Duration::from_secs(5) && t.running_after <= Duration::from_secs(10)
        );
    }
}
