//! The evidence a sample carries: what the leader said, kept with a deficit so approvers can
//! see why a restore was proposed. It is bounded by `EVIDENCE_CAP_BYTES` serialised, whatever
//! the node sent: a status body may be up to the fetch cap, and re-serialised numbers can
//! grow (`1e15` comes back as `1000000000000000.0`), so the size is measured, not assumed.

use std::io::Write;

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::status::{HeadroomSection, RaftStatus};

/// Largest evidence, serialised, in bytes (the contract with whoever stores it).
pub const EVIDENCE_CAP_BYTES: usize = 16 * 1024;

/// The leader's status as evidence: its body with `membership_config` reduced to the voter
/// sets and each member's id and address, the `headroom` section as sent; when that still
/// exceeds `EVIDENCE_CAP_BYTES`, only `{truncated, headroom, node_id, current_leader,
/// current_term}` (and the headroom section reduced to its numbers if even that is too big).
pub fn bounded(status: &RaftStatus) -> Value {
    if let Some(full) = reduced_body(status) {
        if serialised_within(&full, EVIDENCE_CAP_BYTES).is_some() {
            return full;
        }
    }
    let headroom = status.raw.get("headroom").cloned().unwrap_or(Value::Null);
    let short = truncated(status, headroom);
    if serialised_within(&short, EVIDENCE_CAP_BYTES).is_some() {
        return short;
    }
    let numbers = match &status.headroom {
        HeadroomSection::Present {
            spare, required, ..
        } => json!({ "spare": spare, "required": required, "truncated": true }),
        HeadroomSection::Null | HeadroomSection::Absent => Value::Null,
    };
    truncated(status, numbers)
}

fn truncated(status: &RaftStatus, headroom: Value) -> Value {
    json!({
        "truncated": true,
        "headroom": headroom,
        "node_id": status.node_id,
        "current_leader": status.current_leader,
        "current_term": status.current_term,
    })
}

/// The body with its membership reduced, or `None` as soon as it is clear it cannot fit (so
/// a large body is never copied whole).
fn reduced_body(status: &RaftStatus) -> Option<Value> {
    let top = status.raw.as_object()?;
    let membership = membership(status);
    let mut out = Map::new();
    let mut used = 2; // the braces
    for (key, value) in top {
        let value = match (key.as_str(), value) {
            ("membership_config", Value::Null) => value,
            ("membership_config", _) => &membership,
            _ => value,
        };
        let budget = EVIDENCE_CAP_BYTES.checked_sub(used)?;
        // A comma before every entry but the first, the key and its colon, then the value.
        let comma = usize::from(!out.is_empty());
        used += comma + serialised_within(key, budget)? + 1;
        used += serialised_within(value, EVIDENCE_CAP_BYTES.checked_sub(used)?)?;
        out.insert(key.clone(), value.clone());
    }
    Some(Value::Object(out))
}

fn membership(status: &RaftStatus) -> Value {
    let nodes: Map<String, Value> = status
        .members
        .iter()
        .map(|m| (m.id.to_string(), json!({ "addr": m.addr })))
        .collect();
    json!({ "membership": { "configs": status.voter_sets, "nodes": nodes } })
}

/// Counts bytes written and fails once past its budget.
struct Counter {
    count: usize,
    budget: usize,
}

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.count += buf.len();
        if self.count > self.budget {
            return Err(std::io::Error::other("over budget"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The serialised size of `v` when it is at most `budget` bytes; serialising stops at the
/// budget, so measuring a huge value costs at most `budget` bytes of work past its start.
fn serialised_within(v: &impl Serialize, budget: usize) -> Option<usize> {
    let mut counter = Counter { count: 0, budget };
    serde_json::to_writer(&mut counter, v).ok()?;
    Some(counter.count)
}

#[cfg(test)]
mod tests {
    use super::super::status::parse;
    use super::*;

    fn size(v: &Value) -> usize {
        serde_json::to_vec(v).unwrap().len()
    }

    #[test]
    fn a_normal_status_is_kept_with_its_membership_reduced() {
        let body = br#"{"node_id":1,"state":"Leader","current_leader":1,"current_term":3,
            "last_log_index":9,"membership_config":{"log_id":{"index":4},"membership":{
            "configs":[[1,2]],"nodes":{"1":{"addr":"h:1","zone":"a"},"2":{"addr":"h:2"}}}},
            "headroom":{"spare":1,"required":2,"zones":["a"]}}"#;
        let s = parse(200, body).unwrap();
        let e = bounded(&s);
        assert_eq!(e["last_log_index"], 9);
        assert_eq!(e["headroom"], json!({"spare":1,"required":2,"zones":["a"]}));
        assert_eq!(
            e["membership_config"],
            json!({"membership": {"configs": [[1, 2]],
                "nodes": {"1": {"addr": "h:1"}, "2": {"addr": "h:2"}}}})
        );
        assert!(e.get("truncated").is_none());
    }

    #[test]
    fn a_body_that_grows_when_reserialised_is_truncated_under_the_cap() {
        let numbers = vec!["1e15"; 50_000].join(",");
        let body = format!(
            r#"{{"node_id":1,"state":"Leader","current_leader":1,"current_term":7,"headroom":{{"spare":0,"required":1}},"x":[{numbers}]}}"#
        );
        let e = bounded(&parse(200, body.as_bytes()).unwrap());
        assert_eq!(
            e,
            json!({"truncated": true, "headroom": {"spare": 0, "required": 1},
                "node_id": 1, "current_leader": 1, "current_term": 7})
        );
        assert!(size(&e) <= EVIDENCE_CAP_BYTES);
    }

    #[test]
    fn a_huge_headroom_section_is_reduced_to_its_numbers() {
        // Many short strings: a single long one is already cut by the status parser.
        let notes = vec!["n".repeat(200); 200];
        let body = json!({"node_id": 1, "headroom": {"spare": 2, "required": 3, "notes": notes}})
            .to_string();
        let e = bounded(&parse(200, body.as_bytes()).unwrap());
        assert_eq!(
            e["headroom"],
            json!({"spare": 2, "required": 3, "truncated": true})
        );
        assert_eq!(e["truncated"], true);
        assert!(size(&e) <= EVIDENCE_CAP_BYTES);
    }

    #[test]
    fn a_body_just_under_the_cap_is_kept_and_one_just_over_is_not() {
        // A pad of exactly `n` bytes more than `[""]`: ones, then a string of 0 or 1 bytes
        // (strings longer than a field's cap are cut by the status parser).
        let with_pad = |n: usize| {
            let ones = "1,".repeat(n / 2);
            let tail = "p".repeat(n % 2);
            let body = format!(r#"{{"node_id":1,"pad":[{ones}"{tail}"]}}"#);
            bounded(&parse(200, body.as_bytes()).unwrap())
        };
        let base = size(&with_pad(0));
        let fits = with_pad(EVIDENCE_CAP_BYTES - base);
        assert_eq!(size(&fits), EVIDENCE_CAP_BYTES);
        assert!(fits.get("truncated").is_none());
        let over = with_pad(EVIDENCE_CAP_BYTES - base + 1);
        assert_eq!(over["truncated"], true);
    }
}
