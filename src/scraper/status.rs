//! A tolerant reader of yubaba's `GET /raft/status` answers (see docs of yubaba: every build
//! since openraft 0.9 serialises the same shape, newer ones add sections). Unknown keys are
//! ignored and key order does not matter; what headroom relies on is checked by type, and a
//! wrong type, truncated JSON, garbage or an empty body is a typed error naming the field and
//! the rule, never a panic and never a default that would pass for "healthy".

use serde_json::{Map, Value};

use crate::domain::headroom::Member;

/// Characters of a non-JSON answer (the 503 text) kept in an error, at most.
pub const TEXT_CAP_CHARS: usize = 200;

/// One node's `/raft/status`, reduced to what the scraper uses.
#[derive(Debug, Clone, PartialEq)]
pub struct RaftStatus {
    /// This node's raft id.
    pub node_id: u64,
    /// `Leader`, `Follower`, `Candidate`, `Learner`, `Shutdown` (kept as sent; empty when the
    /// key is absent).
    pub state: String,
    /// The leader this node knows of.
    pub current_leader: Option<u64>,
    /// The raft term, when sent.
    pub current_term: Option<u64>,
    /// Every member with its address; voters first, then by id.
    pub members: Vec<Member>,
    /// The `headroom` section: absent (older builds), null (followers, or before the first
    /// evaluation) or the leader's last verdict.
    pub headroom: HeadroomSection,
    /// The whole body as parsed, kept as evidence.
    pub raw: Value,
}

impl RaftStatus {
    /// Whether this node is the leader: it says so, or it names itself as the leader.
    pub fn is_leader(&self) -> bool {
        self.state == "Leader" || self.current_leader == Some(self.node_id)
    }

    /// The member with raft id `id`.
    pub fn member(&self, id: u64) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }
}

/// The `headroom` section of a status answer.
#[derive(Debug, Clone, PartialEq)]
pub enum HeadroomSection {
    /// No `headroom` key: a build without the check (derived mode applies).
    Absent,
    /// `"headroom": null`: a follower, or a leader before its first evaluation.
    Null,
    /// The leader's verdict; `raw` keeps every field, known or not.
    Present {
        /// Warm spares counted.
        spare: u32,
        /// Spares required.
        required: u32,
        /// The section as sent (later builds add fields).
        raw: Value,
    },
}

/// Why an answer could not be read as a status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatusError {
    /// A non-2xx answer; `text` is its body made safe to show (trimmed, control characters
    /// removed, capped), empty when there was none.
    #[error("HTTP {status}{}", if text.is_empty() { String::new() } else { format!(": {text}") })]
    Http {
        /// The HTTP status.
        status: u16,
        /// The shown part of the body.
        text: String,
    },
    /// A 2xx answer without a body.
    #[error("unreadable status: empty body")]
    Empty,
    /// The body is not JSON (garbage, truncated); the parser's position, never the body.
    #[error("unreadable status: not JSON ({0})")]
    NotJson(String),
    /// A field has the wrong type or value.
    #[error("unreadable status: `{field}` {rule}")]
    Field {
        /// Dotted path of the field.
        field: String,
        /// The rule it broke.
        rule: &'static str,
    },
}

fn field_err(field: impl Into<String>, rule: &'static str) -> StatusError {
    StatusError::Field {
        field: field.into(),
        rule,
    }
}

const RULE_ID: &str = "must be a raft id (a whole number ≥ 0, or one written as a string)";
const RULE_U64: &str = "must be a whole number ≥ 0";
const RULE_U32: &str = "must be a whole number from 0 to 4294967295";
const RULE_OBJECT: &str = "must be an object";
const RULE_ARRAY: &str = "must be a list";
const RULE_STRING: &str = "must be a string";
const RULE_PRESENT: &str = "is missing";

/// Reads an answer of `/raft/status`: `http_status` and the body as received (already capped
/// by the fetch).
pub fn parse(http_status: u16, body: &[u8]) -> Result<RaftStatus, StatusError> {
    if !(200..300).contains(&http_status) {
        return Err(StatusError::Http {
            status: http_status,
            text: shown_text(body, TEXT_CAP_CHARS),
        });
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(StatusError::Empty);
    }
    let raw: Value =
        serde_json::from_slice(body).map_err(|e| StatusError::NotJson(position(&e)))?;
    let top = raw
        .as_object()
        .ok_or_else(|| field_err("(body)", RULE_OBJECT))?;
    let node_id =
        id(top.get("node_id"), "node_id")?.ok_or_else(|| field_err("node_id", RULE_PRESENT))?;
    let state = match top.get("state") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(field_err("state", RULE_STRING)),
    };
    let current_leader = id(top.get("current_leader"), "current_leader")?;
    let current_term = whole(top.get("current_term"), "current_term")?;
    let members = membership(top)?;
    let headroom = headroom_section(top.get("headroom"))?;
    Ok(RaftStatus {
        node_id,
        state,
        current_leader,
        current_term,
        members,
        headroom,
        raw,
    })
}

/// "line L column C: what" from a serde error, without echoing the input.
fn position(e: &serde_json::Error) -> String {
    let what = match e.classify() {
        serde_json::error::Category::Eof => "ends early",
        serde_json::error::Category::Syntax => "syntax error",
        serde_json::error::Category::Data => "wrong data",
        serde_json::error::Category::Io => "read error",
    };
    format!("{what} at line {} column {}", e.line(), e.column())
}

/// A raft id: a non-negative integer, or (node keys, some builds' ids) a numeric string.
/// Absent and `null` are `None`.
fn id(v: Option<&Value>, field: &str) -> Result<Option<u64>, StatusError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| field_err(field, RULE_ID)),
        Some(Value::String(s)) => id_text(s)
            .map(Some)
            .ok_or_else(|| field_err(field, RULE_ID)),
        Some(_) => Err(field_err(field, RULE_ID)),
    }
}

/// A numeric string as an id: digits only (no sign, no spaces), within u64.
fn id_text(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A non-negative integer; absent and `null` are `None`.
fn whole(v: Option<&Value>, field: &str) -> Result<Option<u64>, StatusError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| field_err(field, RULE_U64)),
        Some(_) => Err(field_err(field, RULE_U64)),
    }
}

/// Members from `membership_config.membership`: every entry of `nodes`, a voter when its id
/// is in ANY set of `configs` (a joint config lists two sets during a change). An
/// uninitialised node has both empty; a missing `membership_config` is read the same way,
/// since some builds omit it before initialisation.
fn membership(top: &Map<String, Value>) -> Result<Vec<Member>, StatusError> {
    let membership = match top.get("membership_config") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(mc)) => match mc.get("membership") {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(field_err("membership_config.membership", RULE_OBJECT)),
        },
        Some(_) => return Err(field_err("membership_config", RULE_OBJECT)),
    };
    let mut voters = Vec::new();
    match membership.get("configs") {
        None | Some(Value::Null) => {}
        Some(Value::Array(sets)) => {
            for (i, set) in sets.iter().enumerate() {
                let field = format!("membership_config.membership.configs[{i}]");
                let ids = set
                    .as_array()
                    .ok_or_else(|| field_err(&field, RULE_ARRAY))?;
                for (j, v) in ids.iter().enumerate() {
                    let f = format!("{field}[{j}]");
                    voters.push(id(Some(v), &f)?.ok_or_else(|| field_err(&f, RULE_ID))?);
                }
            }
        }
        Some(_) => {
            return Err(field_err(
                "membership_config.membership.configs",
                RULE_ARRAY,
            ))
        }
    }
    let mut members = Vec::new();
    match membership.get("nodes") {
        None | Some(Value::Null) => {}
        Some(Value::Object(nodes)) => {
            for (key, node) in nodes {
                let field = format!("membership_config.membership.nodes.{key}");
                let id = id_text(key).ok_or_else(|| field_err(&field, RULE_ID))?;
                let addr = match node {
                    Value::Object(n) => match n.get("addr") {
                        Some(Value::String(a)) => a.clone(),
                        None => return Err(field_err(format!("{field}.addr"), RULE_PRESENT)),
                        Some(_) => return Err(field_err(format!("{field}.addr"), RULE_STRING)),
                    },
                    _ => return Err(field_err(&field, RULE_OBJECT)),
                };
                members.push(Member {
                    id,
                    addr,
                    voter: voters.contains(&id),
                });
            }
        }
        Some(_) => return Err(field_err("membership_config.membership.nodes", RULE_OBJECT)),
    }
    members.sort_by_key(|m| (!m.voter, m.id));
    Ok(members)
}

/// The `headroom` section: `spare` and `required` must fit a u32 (a negative or larger number
/// is an error, never a wrapped value); other fields are kept in `raw` only.
fn headroom_section(v: Option<&Value>) -> Result<HeadroomSection, StatusError> {
    let section = match v {
        None => return Ok(HeadroomSection::Absent),
        Some(Value::Null) => return Ok(HeadroomSection::Null),
        Some(Value::Object(s)) => s,
        Some(_) => return Err(field_err("headroom", "must be an object or null")),
    };
    let count = |key: &str| -> Result<u32, StatusError> {
        let field = format!("headroom.{key}");
        match section.get(key) {
            None | Some(Value::Null) => Err(field_err(field, RULE_PRESENT)),
            Some(Value::Number(n)) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| field_err(field, RULE_U32)),
            Some(_) => Err(field_err(field, RULE_U32)),
        }
    };
    Ok(HeadroomSection::Present {
        spare: count("spare")?,
        required: count("required")?,
        raw: Value::Object(section.clone()),
    })
}

/// A body made safe to show people: decoded leniently, control characters turned into
/// spaces, runs of whitespace collapsed, trimmed and cut at `cap` characters (with "…").
pub fn shown_text(body: &[u8], cap: usize) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out = String::new();
    let mut chars = 0;
    let mut pending_space = false;
    for c in text.chars() {
        if c.is_control() || c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if chars >= cap {
            out.push('…');
            return out;
        }
        if pending_space {
            out.push(' ');
            chars += 1;
            pending_space = false;
            if chars >= cap {
                out.push('…');
                return out;
            }
        }
        out.push(c);
        chars += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared fixtures, or the copies kept beside the tests when `../shared` is absent.
    fn fixture(name: &str) -> Vec<u8> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let shared = root.join("../shared/fixtures/yubaba").join(name);
        let copy = root.join("tests/api/fixtures/yubaba").join(name);
        std::fs::read(&shared)
            .or_else(|_| std::fs::read(&copy))
            .unwrap_or_else(|e| panic!("fixture {name}: {e}"))
    }

    fn ok(name: &str) -> RaftStatus {
        parse(200, &fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    #[test]
    fn every_fixture_file_is_read_or_refused_by_type() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = [
            root.join("../shared/fixtures/yubaba"),
            root.join("tests/api/fixtures/yubaba"),
        ]
        .into_iter()
        .find(|d| d.is_dir())
        .expect("a fixtures directory");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let body = std::fs::read(&path).unwrap();
            if name.starts_with("raft-status-503") {
                assert!(matches!(
                    parse(503, &body),
                    Err(StatusError::Http { status: 503, .. })
                ));
            } else if name.starts_with("raft-status") {
                parse(200, &body).unwrap_or_else(|e| panic!("{name}: {e}"));
            } else {
                // /node bodies are not statuses: they must be refused, not half-read.
                assert!(parse(200, &body).is_err(), "{name} read as a status");
            }
            seen += 1;
        }
        assert!(seen >= 10, "only {seen} fixtures in {}", dir.display());
    }

    #[test]
    fn a_leader_with_headroom_keeps_its_numbers_and_the_raw_section() {
        let s = ok("raft-status-leader-with-headroom.json");
        assert!(s.is_leader());
        assert_eq!(
            (s.node_id, s.current_leader, s.current_term),
            (1, Some(1), Some(3))
        );
        let HeadroomSection::Present {
            spare,
            required,
            raw,
        } = &s.headroom
        else {
            panic!("{:?}", s.headroom);
        };
        assert_eq!((*spare, *required), (1, 2));
        assert_eq!(raw["spare"], 1);
        // Five members: 1–3 vote, 4 and 5 are learners; voters first.
        let ids: Vec<(u64, bool)> = s.members.iter().map(|m| (m.id, m.voter)).collect();
        assert_eq!(
            ids,
            [(1, true), (2, true), (3, true), (4, false), (5, false)]
        );
        assert_eq!(s.member(4).unwrap().addr, "127.0.0.1:17444");
        // Extra sections stay in the evidence.
        assert_eq!(s.raw["lease_liveness"]["confirmed"][0], 1);
    }

    #[test]
    fn followers_report_null_or_absent_headroom_and_name_their_leader() {
        let null = ok("raft-status-follower-with-null-headroom.json");
        assert_eq!(null.headroom, HeadroomSection::Null);
        assert!(!null.is_leader());
        assert_eq!(null.current_leader, Some(1));
        let old = ok("raft-status-follower-v0.8.json");
        assert_eq!(old.headroom, HeadroomSection::Absent);
        assert_eq!(old.node_id, 2);
        assert_eq!(old.members.len(), 4);
        assert!(!old.member(4).unwrap().voter);
    }

    #[test]
    fn a_joint_config_counts_a_voter_in_any_set() {
        let s = ok("raft-status-joint-config.json");
        assert!(s.members.iter().all(|m| m.voter), "{:?}", s.members);
        assert_eq!(s.members.len(), 4);
        assert!(matches!(
            s.headroom,
            HeadroomSection::Present {
                spare: 0,
                required: 1,
                ..
            }
        ));
    }

    #[test]
    fn an_uninitialised_learner_has_no_leader_and_no_members() {
        let s = ok("raft-status-uninitialised.json");
        assert_eq!(s.state, "Learner");
        assert_eq!(s.current_leader, None);
        assert!(s.members.is_empty());
        assert!(!s.is_leader());
    }

    #[test]
    fn a_single_node_cluster_publishes_its_unspecified_address() {
        let s = ok("raft-status-single-node.json");
        assert!(s.is_leader());
        assert_eq!(s.members[0].addr, "0.0.0.0:7443");
        assert_eq!(s.headroom, HeadroomSection::Absent);
    }

    #[test]
    fn the_503_text_is_named_trimmed_and_capped() {
        let e = parse(503, &fixture("raft-status-503-body.txt")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "HTTP 503: raft not configured: start yubaba with --raft-node-id to enable clustering"
        );
        let long = format!("  \x1b[31mboom\r\n\t{}\u{0}", "x".repeat(500));
        let StatusError::Http { text, .. } = parse(500, long.as_bytes()).unwrap_err() else {
            panic!()
        };
        assert!(text.starts_with("[31mboom x"), "{text:?}");
        assert_eq!(text.chars().count(), TEXT_CAP_CHARS + 1);
        assert!(text.ends_with('…'));
        assert!(!text.chars().any(char::is_control));
        assert_eq!(parse(502, b"").unwrap_err().to_string(), "HTTP 502");
        // Invalid UTF-8 is shown with replacement characters, not refused.
        assert!(parse(503, b"\xff\xfe down")
            .unwrap_err()
            .to_string()
            .ends_with("down"));
    }

    #[test]
    fn garbage_truncated_and_empty_bodies_are_typed_errors() {
        assert_eq!(parse(200, b""), Err(StatusError::Empty));
        assert_eq!(parse(200, b" \n "), Err(StatusError::Empty));
        assert!(matches!(
            parse(200, b"<html>hi</html>"),
            Err(StatusError::NotJson(_))
        ));
        let body = fixture("raft-status-leader-with-headroom.json");
        let e = parse(200, &body[..body.len() / 2]).unwrap_err();
        assert!(e.to_string().contains("ends early"), "{e}");
        assert!(matches!(
            parse(200, b"\x00\xff\x13"),
            Err(StatusError::NotJson(_))
        ));
        assert_eq!(
            parse(200, b"[1,2]").unwrap_err().to_string(),
            "unreadable status: `(body)` must be an object"
        );
        // serde_json's recursion limit turns a deep nest into an error, not a stack overflow.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(
            parse(200, deep.as_bytes()),
            Err(StatusError::NotJson(_))
        ));
    }

    fn with(patch: &str) -> Result<RaftStatus, StatusError> {
        let mut v: Value =
            serde_json::from_slice(&fixture("raft-status-leader-with-headroom.json")).unwrap();
        let p: Value = serde_json::from_str(patch).unwrap();
        for (k, val) in p.as_object().unwrap() {
            v[k] = val.clone();
        }
        parse(200, v.to_string().as_bytes())
    }

    #[test]
    fn wrong_types_name_the_field_and_the_rule() {
        let cases = [
            (r#"{"node_id": "one"}"#, "node_id"),
            (r#"{"node_id": -1}"#, "node_id"),
            (r#"{"state": 3}"#, "state"),
            (r#"{"current_leader": 1.5}"#, "current_leader"),
            (r#"{"current_term": "3"}"#, "current_term"),
            (r#"{"membership_config": []}"#, "membership_config"),
            (
                r#"{"membership_config": {"membership": {"configs": [[1]], "nodes": {"x": {"addr": "a:1"}}}}}"#,
                "membership_config.membership.nodes.x",
            ),
            (
                r#"{"membership_config": {"membership": {"configs": [[1]], "nodes": {"1": {"addr": 7}}}}}"#,
                "membership_config.membership.nodes.1.addr",
            ),
            (
                r#"{"membership_config": {"membership": {"configs": [1], "nodes": {}}}}"#,
                "membership_config.membership.configs[0]",
            ),
            (r#"{"headroom": "ok"}"#, "headroom"),
            (
                r#"{"headroom": {"spare": "1", "required": 1}}"#,
                "headroom.spare",
            ),
            (r#"{"headroom": {"spare": 1}}"#, "headroom.required"),
        ];
        for (patch, field) in cases {
            match with(patch) {
                Err(StatusError::Field { field: f, .. }) => assert_eq!(f, field, "{patch}"),
                other => panic!("{patch}: {other:?}"),
            }
        }
        let absent = parse(200, br#"{"state": "Leader"}"#).unwrap_err();
        assert_eq!(
            absent.to_string(),
            "unreadable status: `node_id` is missing"
        );
    }

    #[test]
    fn headroom_numbers_beyond_u32_or_negative_are_errors_not_wraps() {
        for bad in ["4294967296", "-1", "1.5", "18446744073709551616"] {
            let e = with(&format!(
                r#"{{"headroom": {{"spare": {bad}, "required": 1}}}}"#
            ))
            .unwrap_err();
            assert_eq!(
                e.to_string(),
                "unreadable status: `headroom.spare` must be a whole number from 0 to 4294967295",
                "{bad}"
            );
        }
        let max =
            with(r#"{"headroom": {"spare": 4294967295, "required": 0, "zones": ["a"]}}"#).unwrap();
        let HeadroomSection::Present { spare, raw, .. } = max.headroom else {
            panic!()
        };
        assert_eq!(spare, u32::MAX);
        assert_eq!(raw["zones"][0], "a");
    }

    #[test]
    fn ids_may_be_numeric_strings_and_unknown_keys_are_ignored() {
        let s = parse(
            200,
            br#"{"extra": {"x": [1]}, "node_id": "2", "current_leader": "1", "state": "Follower",
                "membership_config": {"membership": {"configs": [["1", 2]],
                "nodes": {"2": {"addr": "h:2", "zone": "a"}, "1": {"addr": "h:1"}}}}}"#,
        )
        .unwrap();
        assert_eq!((s.node_id, s.current_leader), (2, Some(1)));
        assert_eq!(s.members.iter().map(|m| m.id).collect::<Vec<_>>(), [1, 2]);
        assert!(s.members.iter().all(|m| m.voter));
        assert_eq!(s.current_term, None);
        // A sign or spaces are not an id.
        assert!(with(r#"{"node_id": "+1"}"#).is_err());
        assert!(with(r#"{"node_id": " 1"}"#).is_err());
    }
}
