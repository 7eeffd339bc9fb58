//! Reader of a node's `GET /workloads`: the workloads it runs, each with its reserved size
//! where yubaba knows it, for absorption headroom (`domain::absorption`). Builds without a
//! workload runtime answer an empty list marked `x-workload-source: stub`; a node whose
//! runtime is unreachable answers 502.

use serde_json::Value;

use super::status::StatusError;
use crate::domain::absorption::Resources;

/// Workloads read from one answer at most: far above what one node runs, and small enough
/// that a hostile node cannot make the packing expensive (the body cap bounds bytes, this
/// bounds entries).
pub const WORKLOADS_MAX: usize = 2_000;

/// What `/workloads` lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeWorkloads {
    /// Each workload's reserved size, in list order; `None` when any entry lacks a size or the
    /// list comes from yubaba's stub runtime (the node's committed total is packed instead).
    pub sizes: Option<Vec<Resources>>,
    /// Entries listed.
    pub count: usize,
}

/// The header naming which backend answered `/workloads`.
pub const WORKLOAD_SOURCE: &str = "x-workload-source";

/// Which backend answered `/workloads` (yubaba's `x-workload-source`): a runtime's or
/// kamaji's list is the node's truth; the stub's, from a build without a workload runtime, is
/// always empty whatever the node has committed, so it says nothing about sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadSource {
    Runtime,
    Kamaji,
    Stub,
    /// No header (older builds) or one this reader does not know: the list is taken as
    /// it is.
    Unnamed,
}

impl WorkloadSource {
    /// Reads the header of `headers`.
    pub fn of(headers: &reqwest::header::HeaderMap) -> Self {
        let Some(value) = headers.get(WORKLOAD_SOURCE) else {
            return Self::Unnamed;
        };
        match value.as_bytes().to_ascii_lowercase().as_slice() {
            b"runtime" => Self::Runtime,
            b"kamaji" => Self::Kamaji,
            b"stub" => Self::Stub,
            _ => Self::Unnamed,
        }
    }
}

/// Reads a `/workloads` answer (2xx only) from `source`.
pub fn parse_workloads(
    http_status: u16,
    source: WorkloadSource,
    body: &[u8],
) -> Result<NodeWorkloads, StatusError> {
    if !(200..300).contains(&http_status) {
        // A node's body is never echoed (it is node-published), only the code.
        return Err(super::status::http_error(http_status, body, false));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(StatusError::Empty);
    }
    let top = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => m,
        Ok(_) => return Err(field("(body)", "must be an object")),
        Err(e) => {
            return Err(StatusError::NotJson(format!(
                "line {} column {}",
                e.line(),
                e.column()
            )))
        }
    };
    let list = match top.get("workloads") {
        Some(Value::Array(list)) => list,
        None | Some(Value::Null) => return Err(field("workloads", "is missing")),
        Some(_) => return Err(field("workloads", "must be a list")),
    };
    if list.len() > WORKLOADS_MAX {
        return Err(field("workloads", "lists more than 2000 entries"));
    }
    let mut sizes = Some(Vec::with_capacity(list.len()));
    for entry in list {
        let Value::Object(w) = entry else {
            return Err(field("workloads[]", "must be an object"));
        };
        match (size(w.get("memory_mb"))?, size(w.get("cpu_millis"))?) {
            (Some(m), Some(c)) => {
                if let Some(s) = sizes.as_mut() {
                    s.push(Resources::new(m, c));
                }
            }
            // A workload whose size yubaba does not know: the list cannot say what moves.
            _ => sizes = None,
        }
    }
    if source == WorkloadSource::Stub {
        sizes = None;
    }
    Ok(NodeWorkloads {
        sizes,
        count: list.len(),
    })
}

/// A size field: absent or null is unknown; anything else must be a whole number ≥ 0.
fn size(v: Option<&Value>) -> Result<Option<u64>, StatusError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| field("workloads[].size", "must be a whole number ≥ 0")),
        Some(_) => Err(field("workloads[].size", "must be a whole number ≥ 0")),
    }
}

fn field(name: &str, rule: &'static str) -> StatusError {
    StatusError::Field {
        field: name.to_owned(),
        rule,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn fixture() -> Vec<u8> {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/yubaba/workloads.json"),
        )
        .unwrap()
    }

    #[test]
    fn the_fixture_lists_three_sized_workloads() {
        let w = parse_workloads(200, WorkloadSource::Runtime, &fixture()).unwrap();
        assert_eq!(w.count, 3);
        assert_eq!(
            w.sizes.unwrap(),
            [
                Resources::new(1024, 500),
                Resources::new(2048, 1000),
                Resources::new(3072, 1500)
            ]
        );
    }

    #[test]
    fn a_stub_runtime_lists_none_and_an_unsized_entry_makes_sizes_unknown() {
        // The stub's empty list is no evidence of an empty node; a runtime's (or an older
        // build's, which sends no header) is.
        let stub = parse_workloads(200, WorkloadSource::Stub, br#"{"workloads": []}"#).unwrap();
        assert_eq!((stub.sizes, stub.count), (None, 0));
        use WorkloadSource::{Kamaji, Runtime, Unnamed};
        for source in [Runtime, Kamaji, Unnamed] {
            let empty = parse_workloads(200, source, br#"{"workloads": []}"#).unwrap();
            assert_eq!(
                (empty.sizes, empty.count),
                (Some(Vec::new()), 0),
                "{source:?}"
            );
        }
        let unsized_one = parse_workloads(
            200,
            WorkloadSource::Unnamed,
            br#"{"workloads": [{"ident": "a", "memory_mb": 5}]}"#,
        )
        .unwrap();
        assert_eq!((unsized_one.sizes, unsized_one.count), (None, 1));
    }

    #[test]
    fn the_source_header_is_read_whatever_its_case_and_unknown_values_name_nothing() {
        use reqwest::header::{HeaderMap, HeaderValue};
        let with = |v: &[u8]| {
            let mut h = HeaderMap::new();
            h.insert(WORKLOAD_SOURCE, HeaderValue::from_bytes(v).unwrap());
            WorkloadSource::of(&h)
        };
        assert_eq!(with(b"stub"), WorkloadSource::Stub);
        assert_eq!(with(b"STUB"), WorkloadSource::Stub);
        assert_eq!(with(b"runtime"), WorkloadSource::Runtime);
        assert_eq!(with(b"kamaji"), WorkloadSource::Kamaji);
        for other in [&b"stub "[..], b"", b"stubby", b"\xffstub"] {
            assert_eq!(with(other), WorkloadSource::Unnamed, "{other:?}");
        }
        assert_eq!(
            WorkloadSource::of(&HeaderMap::new()),
            WorkloadSource::Unnamed
        );
    }

    #[test]
    fn bad_answers_are_refused_naming_what_is_wrong() {
        let cases: [(u16, &[u8], &str); 7] = [
            (502, br#"{"error": "runtime unreachable"}"#, "502"),
            (200, b"", "empty"),
            (200, b"[]", "must be an object"),
            (200, b"{}", "`workloads` is missing"),
            (200, br#"{"workloads": 3}"#, "must be a list"),
            (200, br#"{"workloads": [1]}"#, "must be an object"),
            (
                200,
                br#"{"workloads": [{"memory_mb": -1, "cpu_millis": 1}]}"#,
                "whole number",
            ),
        ];
        for (status, body, says) in cases {
            let e = parse_workloads(status, WorkloadSource::Unnamed, body)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(says),
                "{status} {:?}: {e}",
                String::from_utf8_lossy(body)
            );
        }
        let many = format!(
            r#"{{"workloads": [{}]}}"#,
            vec![r#"{"memory_mb": 1, "cpu_millis": 1}"#; WORKLOADS_MAX + 1].join(",")
        );
        assert!(parse_workloads(200, WorkloadSource::Unnamed, many.as_bytes()).is_err());
    }

    proptest! {
        /// No body a node can send makes the reader panic.
        #[test]
        fn any_body_is_read_or_refused(body in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse_workloads(200, WorkloadSource::Unnamed, &body);
        }
    }
}
