//! Readers of a node's `GET /node` (published capacity) and `GET /node/usage` (what runs on
//! it), for derived headroom on builds without the `headroom` section. Both answers are flat
//! objects with dotted keys; only the keys the spare rule needs are read, the rest ignored.

use serde_json::{Map, Value};

use super::status::StatusError;
use crate::domain::absorption::Resources;

/// The key of published allocatable memory on `/node`.
pub const ALLOCATABLE_MEMORY: &str = "yah.allocatable.memory_mb";
/// The key of published allocatable CPU on `/node` (absent when not measured).
pub const ALLOCATABLE_CPU: &str = "yah.allocatable.cpu_millis";
/// The keys of committed totals on `/node/usage` (a lower bound: reset when yubaba restarts).
pub const COMMITTED_MEMORY: &str = "yah.committed.memory_mb";
pub const COMMITTED_CPU: &str = "yah.committed.cpu_millis";
/// The key of the host name on `/node` (cloud-init sets it to the machine's name).
pub const HOST_NAME: &str = "host.name";
/// The key of running workloads on `/node/usage`.
pub const WORKLOADS: &str = "yah.workloads.count";

/// What `/node` says about capacity.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeCapacity {
    /// Allocatable memory in MB; `None` when the node has not published it.
    pub allocatable_memory_mb: Option<f64>,
    /// Allocatable CPU in millicores; `None` when the node has not measured it.
    pub allocatable_cpu_millis: Option<f64>,
}

impl NodeCapacity {
    /// Both allocatable resources, whole, when both are published (what absorption packs
    /// into); `None` otherwise.
    pub fn allocatable(&self) -> Option<Resources> {
        match (self.allocatable_memory_mb, self.allocatable_cpu_millis) {
            // Checked finite and ≥ 0 when read; fractions of a MB or millicore are dropped.
            (Some(m), Some(c)) if self.published() => Some(Resources::new(m as u64, c as u64)),
            _ => None,
        }
    }
}

impl NodeCapacity {
    /// Whether the node has published capacity (allocatable memory above zero).
    pub fn published(&self) -> bool {
        self.allocatable_memory_mb.is_some_and(|m| m > 0.0)
    }
}

/// What `/node/usage` says about load.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeUsage {
    /// Live workloads (tenants) on the node.
    pub workloads: u64,
    /// Committed memory and CPU, when the node reports both.
    pub committed: Option<Resources>,
}

/// Reads a `/node` answer (2xx only).
pub fn parse_node(http_status: u16, body: &[u8]) -> Result<NodeCapacity, StatusError> {
    let top = object(http_status, body)?;
    Ok(NodeCapacity {
        allocatable_memory_mb: non_negative(&top, ALLOCATABLE_MEMORY)?,
        allocatable_cpu_millis: non_negative(&top, ALLOCATABLE_CPU)?,
    })
}

/// An optional number ≥ 0 (absent or null: `None`).
fn non_negative(top: &Map<String, Value>, key: &str) -> Result<Option<f64>, StatusError> {
    match top.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
            _ => Err(field(key, "must be a number ≥ 0")),
        },
        Some(_) => Err(field(key, "must be a number ≥ 0")),
    }
}

/// An optional whole number ≥ 0 (absent or null: `None`).
fn whole(top: &Map<String, Value>, key: &str) -> Result<Option<u64>, StatusError> {
    match top.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| field(key, "must be a whole number ≥ 0")),
        Some(_) => Err(field(key, "must be a whole number ≥ 0")),
    }
}

/// Reads the host name from a `/node` answer (2xx only): an RFC 1123 name of at most 253
/// characters, as a machine name is; anything else is refused, never matched.
pub fn parse_host_name(http_status: u16, body: &[u8]) -> Result<String, StatusError> {
    let top = object(http_status, body)?;
    match top.get(HOST_NAME) {
        Some(Value::String(name))
            if !name.is_empty()
                && name.len() <= 253
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.') =>
        {
            Ok(name.clone())
        }
        None | Some(Value::Null) => Err(field(HOST_NAME, "is missing")),
        Some(_) => Err(field(
            HOST_NAME,
            "must be a host name (letters, digits, '-', '.')",
        )),
    }
}

/// Reads a `/node/usage` answer (2xx only); the workload count is required, since a node that
/// does not report it cannot be shown to be empty.
pub fn parse_usage(http_status: u16, body: &[u8]) -> Result<NodeUsage, StatusError> {
    let top = object(http_status, body)?;
    let workloads = whole(&top, WORKLOADS)?.ok_or_else(|| field(WORKLOADS, "is missing"))?;
    let committed = match (whole(&top, COMMITTED_MEMORY)?, whole(&top, COMMITTED_CPU)?) {
        (Some(m), Some(c)) => Some(Resources::new(m, c)),
        _ => None,
    };
    Ok(NodeUsage {
        workloads,
        committed,
    })
}

/// The spare rule of derived mode (yubaba's own, deliberately coarse): capacity published and
/// no workload at all; a node carrying one small tenant is not spare even with room left.
pub fn is_spare(capacity: &NodeCapacity, usage: &NodeUsage) -> bool {
    capacity.published() && usage.workloads == 0
}

fn field(name: &str, rule: &'static str) -> StatusError {
    StatusError::Field {
        field: name.to_owned(),
        rule,
    }
}

fn object(http_status: u16, body: &[u8]) -> Result<Map<String, Value>, StatusError> {
    if !(200..300).contains(&http_status) {
        // A node's address is node-published: its body is never echoed, only the code.
        return Err(super::status::http_error(http_status, body, false));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(StatusError::Empty);
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(field("(body)", "must be an object")),
        Err(e) => Err(StatusError::NotJson(format!(
            "line {} column {}",
            e.line(),
            e.column()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        std::fs::read(root.join("tests/fixtures/yubaba").join(name))
            .unwrap_or_else(|e| panic!("fixture {name}: {e}"))
    }

    #[test]
    fn the_node_fixture_publishes_capacity() {
        let c = parse_node(200, &fixture("node.json")).unwrap();
        assert_eq!(c.allocatable_memory_mb, Some(7807.0));
        assert!(c.published());
        assert_eq!(c.allocatable(), Some(Resources::new(7807, 4000)));
        let no_cpu = parse_node(200, br#"{"yah.allocatable.memory_mb": 7807}"#).unwrap();
        assert_eq!(
            no_cpu.allocatable(),
            None,
            "CPU not measured: nothing to pack into"
        );
    }

    #[test]
    fn idle_and_busy_usage_fixtures_count_workloads() {
        let idle = parse_usage(200, &fixture("node-usage-idle.json")).unwrap();
        let busy = parse_usage(200, &fixture("node-usage-busy.json")).unwrap();
        assert_eq!((idle.workloads, busy.workloads), (0, 3));
        assert_eq!(busy.committed, Some(Resources::new(3072, 1500)));
        let cap = parse_node(200, &fixture("node.json")).unwrap();
        assert!(is_spare(&cap, &idle));
        assert!(!is_spare(&cap, &busy));
    }

    #[test]
    fn a_node_without_published_capacity_is_never_spare() {
        let absent = parse_node(200, br#"{"host.name": "n"}"#).unwrap();
        let zero = parse_node(200, br#"{"yah.allocatable.memory_mb": 0}"#).unwrap();
        let idle = NodeUsage {
            workloads: 0,
            committed: None,
        };
        assert!(!is_spare(&absent, &idle));
        assert!(!is_spare(&zero, &idle));
    }

    #[test]
    fn wrong_types_garbage_and_errors_are_refused() {
        assert!(parse_node(200, br#"{"yah.allocatable.memory_mb": "7807"}"#).is_err());
        assert!(parse_node(200, br#"{"yah.allocatable.memory_mb": -1}"#).is_err());
        assert!(parse_usage(200, br#"{"yah.workloads.count": -1}"#).is_err());
        assert!(parse_usage(200, br#"{"yah.workloads.count": 0.5}"#).is_err());
        assert!(parse_node(200, br#"{"yah.allocatable.cpu_millis": "4000"}"#).is_err());
        assert!(parse_usage(
            200,
            br#"{"yah.workloads.count": 1, "yah.committed.memory_mb": -5}"#
        )
        .is_err());
        let half = parse_usage(
            200,
            br#"{"yah.workloads.count": 1, "yah.committed.memory_mb": 5}"#,
        )
        .unwrap();
        assert_eq!(half.committed, None, "both totals or none");
        assert_eq!(
            parse_usage(200, br#"{"system.cpu.utilization": 0.1}"#)
                .unwrap_err()
                .to_string(),
            "unreadable status: `yah.workloads.count` is missing"
        );
        assert!(matches!(
            parse_usage(200, b"{\"yah.wor"),
            Err(StatusError::NotJson(_))
        ));
        assert!(matches!(parse_node(200, b""), Err(StatusError::Empty)));
        assert!(matches!(
            parse_node(200, b"[]"),
            Err(StatusError::Field { .. })
        ));
        assert!(matches!(
            parse_node(404, b"not found"),
            Err(StatusError::Http { status: 404, .. })
        ));
        for (code, body) in [(503, "raft not configured"), (500, "secret")] {
            assert_eq!(
                parse_usage(code, body.as_bytes()).unwrap_err().to_string(),
                format!("HTTP {code}")
            );
        }
        assert_eq!(
            parse_node(302, b"").unwrap_err().to_string(),
            "HTTP 302: redirects are not followed"
        );
    }
}
