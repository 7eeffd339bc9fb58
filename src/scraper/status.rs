//! A tolerant reader of yubaba's `GET /raft/status` answers (see docs of yubaba: every build
//! since openraft 0.9 serialises the same shape, newer ones add sections). Unknown keys are
//! ignored and key order does not matter; what headroom relies on is checked by type, and a
//! wrong type, truncated JSON, garbage or an empty body is a typed error naming the field and
//! the rule, never a panic and never a default that would pass for "healthy".

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::text;
use crate::domain::capacity::Member;

/// Characters of yubaba's 503 "raft not configured" text kept in an error, at most.
pub const TEXT_CAP_CHARS: usize = 200;

/// Members a status may list (`nodes`): more is refused, since derived mode asks each one
/// and the evidence keeps each address. Real clusters have a handful.
pub const MAX_MEMBERS: usize = 256;

/// Voter sets in `configs`: one, or two during a joint-consensus change.
pub const MAX_VOTER_SETS: usize = 2;

/// Highest `spare` or `required` a headroom section may report; anything larger is not a
/// count of machines but a broken or hostile node (it would swamp charts and proposals).
pub const MAX_COUNT: u32 = 10_000;

/// The start of yubaba's plain-text 503 when raft is not configured: the one non-2xx body
/// shown (from a configured endpoint only); any other body stays unread in errors.
pub const RAFT_NOT_CONFIGURED: &str = "raft not configured";

/// One node's `/raft/status`, reduced to what the scraper uses.
#[derive(Debug, Clone, PartialEq)]
pub struct RaftStatus {
    /// This node's raft id.
    pub node_id: u64,
    /// `Leader`, `Follower`, `Candidate`, `Learner`, `Shutdown` (kept as sent, cleaned; empty
    /// when the key is absent).
    pub state: String,
    /// The leader this node knows of.
    pub current_leader: Option<u64>,
    /// The raft term, when sent.
    pub current_term: Option<u64>,
    /// Every member with its address (cleaned: a hidden character shows as U+FFFD); voters
    /// first, then by id (at most `MAX_MEMBERS`).
    pub members: Vec<Member>,
    /// The voter sets of `configs` as sent (at most `MAX_VOTER_SETS` of at most `MAX_MEMBERS`
    /// ids each), kept for the evidence.
    pub voter_sets: Vec<Vec<u64>>,
    /// The `headroom` section: absent (older builds), null (followers, or before the first
    /// evaluation) or the leader's last verdict.
    pub headroom: HeadroomSection,
    /// The whole body as parsed, every string and key cleaned (`text::clean_json`), kept as
    /// evidence.
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

    /// The distinct regions the members declare (none on builds that publish no region):
    /// what yubaba's own rule counts for its required spares.
    pub fn declared_regions(&self) -> BTreeSet<&str> {
        self.members
            .iter()
            .filter_map(|m| m.region.as_deref())
            .collect()
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
    /// A non-2xx answer; `text` says why when known: "redirects are not followed" for a 3xx,
    /// yubaba's "raft not configured" 503 text (cleaned, capped) from a configured endpoint;
    /// empty otherwise, since any other body is the server's, not ours to show.
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

const RULE_ID: &str =
    "must be a raft id (a whole number from 0 to 9223372036854775807, or one written as a string)";
const RULE_TERM: &str = "must be a whole number from 0 to 9223372036854775807";
const RULE_COUNT: &str = "must be a whole number from 0 to 10000 (at most 10000)";
const RULE_OBJECT: &str = "must be an object";
const RULE_ARRAY: &str = "must be a list";
const RULE_STRING: &str = "must be a string";
const RULE_PRESENT: &str = "is missing";
const RULE_MEMBERS: &str = "has more than 256 members";
const RULE_SETS: &str = "must have at most 2 voter sets (joint consensus)";
const RULE_SET_IDS: &str = "must list at most 256 ids";
/// What ids and terms are stored as (SQLite integers): larger values are refused, not wrapped.
const ID_MAX: u64 = i64::MAX as u64;

/// Reads an answer of `/raft/status` from a configured endpoint: `http_status` and the body as
/// received (already capped by the fetch).
pub fn parse(http_status: u16, body: &[u8]) -> Result<RaftStatus, StatusError> {
    parse_answer(http_status, body, true)
}

/// `parse`, saying whether the answer came from an endpoint the fleet was configured with
/// (`configured`) or from an address a node published (the leader hop), whose 503 text is
/// not shown.
pub fn parse_answer(
    http_status: u16,
    body: &[u8],
    configured: bool,
) -> Result<RaftStatus, StatusError> {
    if !(200..300).contains(&http_status) {
        return Err(http_error(http_status, body, configured));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(StatusError::Empty);
    }
    // Cleaned before anything is read from it: every string this status holds (state,
    // member addresses, the evidence) comes out of this one value, so none can carry a
    // control, bidi or zero-width character or run longer than `text::FIELD_CAP_CHARS`.
    let raw: Value = text::clean_json(
        serde_json::from_slice(body).map_err(|e| StatusError::NotJson(position(&e)))?,
    );
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
    let (mut members, voter_sets) = membership(top)?;
    member_regions(top, &mut members);
    let headroom = headroom_section(top.get("headroom"))?;
    Ok(RaftStatus {
        node_id,
        state,
        current_leader,
        current_term,
        members,
        voter_sets,
        headroom,
        raw,
    })
}

/// The error of a non-2xx answer. A 3xx says redirects are not followed (the scrape client
/// follows none: yubaba never redirects, and a hop would let a node point headroom at any
/// path of any internal host). Only yubaba's known 503 text, from a configured endpoint, is
/// shown; any other body could be an internal service's secrets, so only the code is.
pub fn http_error(http_status: u16, body: &[u8], configured: bool) -> StatusError {
    let text = if (300..400).contains(&http_status) {
        "redirects are not followed".to_owned()
    } else if http_status == 503 && configured {
        let shown = text::clean(&String::from_utf8_lossy(body), TEXT_CAP_CHARS);
        if shown.starts_with(RAFT_NOT_CONFIGURED) {
            shown
        } else {
            String::new()
        }
    } else {
        String::new()
    };
    StatusError::Http {
        status: http_status,
        text,
    }
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
        Some(Value::String(s)) => id_text(s)
            .map(Some)
            .ok_or_else(|| field_err(field, RULE_ID)),
        _ => up_to_id_max(v, field, RULE_ID),
    }
}

/// A numeric string as an id: digits only (no sign, no spaces), at most `ID_MAX`.
fn id_text(s: &str) -> Option<u64> {
    if !is_short_digits(s) {
        return None;
    }
    s.parse().ok().filter(|&n| n <= ID_MAX)
}

/// Whether `s` is 1 to 20 ASCII digits: as long as a u64 can be, so it may be an id.
fn is_short_digits(s: &str) -> bool {
    !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit())
}

/// A term: a non-negative integer up to `ID_MAX`; absent and `null` are `None`.
fn whole(v: Option<&Value>, field: &str) -> Result<Option<u64>, StatusError> {
    up_to_id_max(v, field, RULE_TERM)
}

/// A JSON integer from 0 to `ID_MAX`; absent and `null` are `None`, anything else breaks `rule`.
fn up_to_id_max(
    v: Option<&Value>,
    field: &str,
    rule: &'static str,
) -> Result<Option<u64>, StatusError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .filter(|&n| n <= ID_MAX)
            .map(Some)
            .ok_or_else(|| field_err(field, rule)),
        Some(_) => Err(field_err(field, rule)),
    }
}

/// How an error names the `nodes` entry at `index` with map key `key`: the key itself only
/// when it is short and all digits (a plausible id), else its position. A key is
/// node-supplied text of any length and content; it never reaches an error verbatim.
fn node_field(index: usize, key: &str) -> String {
    if is_short_digits(key) {
        format!("membership_config.membership.nodes.{key}")
    } else {
        format!("membership_config.membership.nodes[key {}]", index + 1)
    }
}

/// Members from `membership_config.membership`: every entry of `nodes`, a voter when its id
/// is in ANY set of `configs` (a joint config lists two sets during a change). An
/// uninitialised node has both empty; a missing `membership_config` is read the same way,
/// since some builds omit it before initialisation. Sizes are checked before any entry is
/// read, and voters are looked up in a set: the cost is linear in what was sent.
fn membership(top: &Map<String, Value>) -> Result<(Vec<Member>, Vec<Vec<u64>>), StatusError> {
    let membership = match top.get("membership_config") {
        None | Some(Value::Null) => return Ok((Vec::new(), Vec::new())),
        Some(Value::Object(mc)) => match mc.get("membership") {
            None | Some(Value::Null) => return Ok((Vec::new(), Vec::new())),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(field_err("membership_config.membership", RULE_OBJECT)),
        },
        Some(_) => return Err(field_err("membership_config", RULE_OBJECT)),
    };
    let mut voter_sets = Vec::new();
    let mut voters = BTreeSet::new();
    match membership.get("configs") {
        None | Some(Value::Null) => {}
        Some(Value::Array(sets)) => {
            if sets.len() > MAX_VOTER_SETS {
                return Err(field_err("membership_config.membership.configs", RULE_SETS));
            }
            for (i, set) in sets.iter().enumerate() {
                let field = format!("membership_config.membership.configs[{i}]");
                let ids = set
                    .as_array()
                    .ok_or_else(|| field_err(&field, RULE_ARRAY))?;
                if ids.len() > MAX_MEMBERS {
                    return Err(field_err(&field, RULE_SET_IDS));
                }
                let mut one = Vec::with_capacity(ids.len());
                for (j, v) in ids.iter().enumerate() {
                    let f = format!("{field}[{j}]");
                    let id = id(Some(v), &f)?.ok_or_else(|| field_err(&f, RULE_ID))?;
                    voters.insert(id);
                    one.push(id);
                }
                voter_sets.push(one);
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
            if nodes.len() > MAX_MEMBERS {
                return Err(field_err(
                    "membership_config.membership.nodes",
                    RULE_MEMBERS,
                ));
            }
            for (index, (key, node)) in nodes.iter().enumerate() {
                let field = node_field(index, key);
                let id = id_text(key).ok_or_else(|| field_err(&field, RULE_ID))?;
                let Value::Object(n) = node else {
                    return Err(field_err(&field, RULE_OBJECT));
                };
                let addr = match n.get("addr") {
                    Some(Value::String(a)) => a.clone(),
                    None => return Err(field_err(format!("{field}.addr"), RULE_PRESENT)),
                    Some(_) => return Err(field_err(format!("{field}.addr"), RULE_STRING)),
                };
                let mut member = Member::listed(id, addr, voters.contains(&id));
                member.region = region(n.get("region"), &field);
                members.push(member);
            }
        }
        Some(_) => return Err(field_err("membership_config.membership.nodes", RULE_OBJECT)),
    }
    members.sort_by_key(|m| (!m.voter, m.id));
    Ok((members, voter_sets))
}

/// Regions from the top-level `members` map (`{"<id>": {"addr", "region", …}}`), which
/// yubaba builds with regions publish beside raft's own membership (whose `nodes` carry only
/// `addr`): fills each member whose `nodes` entry named none. The map is an optional section,
/// so one that is malformed or oversized is ignored (logged), never an error: regions only
/// refine the required count and absorption.
fn member_regions(top: &Map<String, Value>, members: &mut [Member]) {
    let map = match top.get("members") {
        None | Some(Value::Null) => return,
        Some(Value::Object(map)) if map.len() <= MAX_MEMBERS => map,
        Some(_) => {
            tracing::debug!(
                field = "members",
                "member regions ignored: not an object of at most {MAX_MEMBERS} entries"
            );
            return;
        }
    };
    for member in members.iter_mut().filter(|m| m.region.is_none()) {
        if let Some(Value::Object(entry)) = map.get(&member.id.to_string()) {
            member.region = region(entry.get("region"), &format!("members.{}", member.id));
        }
    }
}

/// A member's `region` (builds with the `headroom` section publish one): absent or null is
/// unknown; otherwise a short label, since it is stored and shown. A label that breaks the
/// rule is logged and read as unknown: the region only refines absorption (a region loss is
/// judged without that member's region), so it must not cost the fleet its headroom sample.
fn region(v: Option<&Value>, field: &str) -> Option<String> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(r))
            if (1..=MAX_REGION_LEN).contains(&r.len())
                && r.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) =>
        {
            Some(r.clone())
        }
        Some(_) => {
            // Debug, not warn: a node answers this for every member on every tick.
            tracing::debug!(field = %format!("{field}.region"), rule = RULE_REGION, "member region ignored");
            None
        }
    }
}

/// The longest region label read.
pub const MAX_REGION_LEN: usize = 64;
const RULE_REGION: &str = "must be 1 to 64 letters, digits, '.', '_' or '-'";

/// The `headroom` section: `spare` and `required` must be whole numbers up to `MAX_COUNT` (a
/// negative or larger number is an error, never a wrapped or clamped value); other fields are
/// kept in `raw` only.
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
                .filter(|&n| n <= MAX_COUNT)
                .ok_or_else(|| field_err(field, RULE_COUNT)),
            Some(_) => Err(field_err(field, RULE_COUNT)),
        }
    };
    Ok(HeadroomSection::Present {
        spare: count("spare")?,
        required: count("required")?,
        raw: Value::Object(section.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The example yubaba answers committed with the repo.
    fn fixtures_dir() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/yubaba")
    }

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(fixtures_dir().join(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
    }

    fn ok(name: &str) -> RaftStatus {
        parse(200, &fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    #[test]
    fn every_fixture_file_is_read_or_refused_by_type() {
        let dir = fixtures_dir();
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
    fn a_member_region_breaking_the_rule_is_read_as_unknown_and_the_status_still_reads() {
        let hostile = [
            json!(""),
            json!("x".repeat(MAX_REGION_LEN + 1)),
            json!("fsn1<script>"),
            json!("fsn 1"),
            json!(7),
            json!(["fsn1"]),
        ];
        for bad in hostile {
            let v = region(Some(&bad), "membership_config.membership.nodes[\"1\"]");
            assert_eq!(v, None, "{bad}");
        }
        assert_eq!(region(Some(&json!("fsn1")), "f"), Some("fsn1".into()));
        assert_eq!(region(Some(&json!(null)), "f"), None);
        assert_eq!(region(None, "f"), None);
        // And a whole status whose member carries one still reads, that member unknown.
        let mut body: Value =
            serde_json::from_slice(&fixture("raft-status-leader-with-headroom.json")).unwrap();
        let nodes = body["membership_config"]["membership"]["nodes"]
            .as_object_mut()
            .unwrap();
        let first = nodes.keys().next().unwrap().clone();
        nodes[&first]["region"] = json!("fsn1<script>");
        let s = parse(200, body.to_string().as_bytes()).expect("still a status");
        let member = s
            .members
            .iter()
            .find(|m| m.id.to_string() == first)
            .unwrap();
        assert_eq!(member.region, None);
    }

    #[test]
    fn the_real_yubaba_0_8_48_names_its_members_regions_beside_raft_membership() {
        // Captured from crates.io yubaba 0.8.48, three nodes on loopback, before its first
        // headroom evaluation: `nodes` carry only `addr`, the top-level `members` the region.
        let s = ok("raft-status-yubaba-0.8.48-leader.json");
        assert!(s.is_leader());
        assert_eq!(s.headroom, HeadroomSection::Absent);
        let regions: Vec<(u64, Option<&str>, bool)> = s
            .members
            .iter()
            .map(|m| (m.id, m.region.as_deref(), m.voter))
            .collect();
        assert_eq!(
            regions,
            [
                (1, Some("fsn1"), true),
                (2, Some("nbg1"), true),
                (3, Some("hel1"), true)
            ]
        );
    }

    #[test]
    fn the_members_map_fills_unknown_regions_only_and_a_malformed_one_is_ignored() {
        let base: Value =
            serde_json::from_slice(&fixture("raft-status-leader-with-headroom.json")).unwrap();
        let with = |members: Value, node_region: Option<&str>| {
            let mut body = base.clone();
            if let Some(r) = node_region {
                body["membership_config"]["membership"]["nodes"]["1"]["region"] = json!(r);
            }
            body["members"] = members;
            parse(200, body.to_string().as_bytes()).expect("still a status")
        };
        let region_of = |s: &RaftStatus, id: u64| {
            s.members
                .iter()
                .find(|m| m.id == id)
                .and_then(|m| m.region.clone())
        };
        let s = with(
            json!({"1": {"region": "hel1"}, "2": {"region": "nbg1"}, "9": {"region": "ash"}}),
            Some("fsn1"),
        );
        assert_eq!(
            region_of(&s, 1).as_deref(),
            Some("fsn1"),
            "raft's own entry wins"
        );
        assert_eq!(region_of(&s, 2).as_deref(), Some("nbg1"));
        assert_eq!(region_of(&s, 3), None, "not in the map");
        assert!(
            s.members.iter().all(|m| m.id != 9),
            "the map adds no member"
        );
        let oversized: serde_json::Map<String, Value> = (0..=MAX_MEMBERS)
            .map(|i| (i.to_string(), json!({"region": "fsn1"})))
            .collect();
        for (case, malformed) in [
            json!([{"region": "fsn1"}]),
            json!("fsn1"),
            json!({"2": "nbg1", "3": {"region": "x<y"}, "4": {"region": 4}}),
            Value::Object(oversized),
        ]
        .into_iter()
        .enumerate()
        {
            let s = with(malformed, None);
            assert!(s.members.iter().all(|m| m.region.is_none()), "case {case}");
        }
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
    fn only_the_raft_not_configured_503_text_is_shown_and_only_from_a_configured_endpoint() {
        let known = fixture("raft-status-503-body.txt");
        let e = parse(503, &known).unwrap_err();
        assert_eq!(
            e.to_string(),
            "HTTP 503: raft not configured: start yubaba with --raft-node-id to enable clustering"
        );
        // The same text from an address a node published: the code only.
        assert_eq!(
            parse_answer(503, &known, false).unwrap_err().to_string(),
            "HTTP 503"
        );
        // The known text, dirtied and long: cleaned and capped.
        let long = format!(
            "  raft not configured\r\n\t\u{1b}[31m\u{202e}{}\u{0}",
            "x".repeat(500)
        );
        let StatusError::Http { text, .. } = parse(503, long.as_bytes()).unwrap_err() else {
            panic!()
        };
        assert!(text.starts_with("raft not configured [31mxxx"), "{text:?}");
        assert_eq!(text.chars().count(), TEXT_CAP_CHARS + 1);
        assert!(text.ends_with('…'));
        assert!(!text.chars().any(super::text::is_hidden));
        // Any other body, of any status, is never echoed.
        for (code, body) in [
            (503, &b"internal-token=s3cr3t"[..]),
            (500, b"raft not configured"),
            (403, b"secret"),
            (502, b""),
            (503, b"\xff\xfe down"),
        ] {
            assert_eq!(
                parse(code, body).unwrap_err().to_string(),
                format!("HTTP {code}")
            );
        }
        for code in [301, 302, 307, 308] {
            assert_eq!(
                parse(code, b"see elsewhere").unwrap_err().to_string(),
                format!("HTTP {code}: redirects are not followed")
            );
        }
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
                "membership_config.membership.nodes[key 1]",
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
    fn headroom_numbers_above_10000_or_negative_are_errors_not_wraps() {
        for field in ["spare", "required"] {
            for bad in [
                "10001",
                "4294967295",
                "4294967296",
                "-1",
                "1.5",
                "18446744073709551616",
            ] {
                let other = if field == "spare" {
                    "required"
                } else {
                    "spare"
                };
                let e = with(&format!(
                    r#"{{"headroom": {{"{field}": {bad}, "{other}": 1}}}}"#
                ))
                .unwrap_err();
                assert_eq!(
                    e.to_string(),
                    format!(
                        "unreadable status: `headroom.{field}` must be a whole number from 0 to \
                         10000 (at most 10000)"
                    ),
                    "{bad}"
                );
            }
        }
        let max = with(r#"{"headroom": {"spare": 10000, "required": 0, "zones": ["a"]}}"#).unwrap();
        let HeadroomSection::Present { spare, raw, .. } = max.headroom else {
            panic!()
        };
        assert_eq!(spare, MAX_COUNT);
        assert_eq!(raw["zones"][0], "a");
    }

    #[test]
    fn ids_and_terms_above_i64_max_are_refused_not_wrapped() {
        let max = i64::MAX as u64;
        let ok = with(&format!(
            r#"{{"node_id": {max}, "current_leader": "{max}", "current_term": {max}}}"#
        ))
        .unwrap();
        assert_eq!((ok.node_id, ok.current_term), (max, Some(max)));
        for (patch, field) in [
            (format!(r#"{{"node_id": {}}}"#, max + 1), "node_id"),
            (
                format!(r#"{{"current_leader": "{}"}}"#, max + 1),
                "current_leader",
            ),
            (
                format!(r#"{{"current_term": {}}}"#, u64::MAX),
                "current_term",
            ),
        ] {
            match with(&patch) {
                Err(StatusError::Field { field: f, rule }) => {
                    assert_eq!(f, field, "{patch}");
                    assert!(rule.contains("9223372036854775807"), "{rule}");
                }
                other => panic!("{patch}: {other:?}"),
            }
        }
    }

    fn members_body(configs: &str, nodes: &str) -> String {
        format!(
            r#"{{"node_id":1,"state":"Leader","membership_config":{{"membership":{{"configs":{configs},"nodes":{{{nodes}}}}}}}}}"#
        )
    }

    #[test]
    fn a_hostile_node_key_is_named_by_its_position_never_echoed() {
        let key = format!("x\n\u{1b}[31m<script>\u{202e}{}", "A".repeat(250_000));
        let body = serde_json::json!({
            "node_id": 1,
            "membership_config": { "membership": { "configs": [[1]],
                "nodes": { "1": {"addr": "h:1"}, key: {"addr": "h:2"} } } },
        });
        let e = parse(200, body.to_string().as_bytes())
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!("unreadable status: `membership_config.membership.nodes[key 2]` {RULE_ID}")
        );
        // A digit key longer than 20 characters is not shown either.
        let long = "1".repeat(21);
        let e = parse(
            200,
            members_body("[[1]]", &format!(r#""{long}":{{"addr":"h:1"}}"#)).as_bytes(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("nodes[key 1]") && !e.contains(&long), "{e}");
    }

    #[test]
    fn members_and_voter_sets_are_capped_before_they_are_read() {
        let nodes = |n: usize| {
            (0..n)
                .map(|i| format!(r#""{i}":{{"addr":"h:{}"}}"#, i + 1))
                .collect::<Vec<_>>()
                .join(",")
        };
        let at_cap = parse(200, members_body("[[0]]", &nodes(MAX_MEMBERS)).as_bytes()).unwrap();
        assert_eq!(at_cap.members.len(), MAX_MEMBERS);
        assert_eq!(at_cap.voter_sets, [vec![0]]);
        let over = parse(
            200,
            members_body("[[0]]", &nodes(MAX_MEMBERS + 1)).as_bytes(),
        );
        assert_eq!(
            over.unwrap_err().to_string(),
            "unreadable status: `membership_config.membership.nodes` has more than 256 members"
        );
        assert!(RULE_MEMBERS.contains(&MAX_MEMBERS.to_string()));
        let three = parse(200, members_body("[[1],[1],[1]]", "").as_bytes()).unwrap_err();
        assert_eq!(
            three.to_string(),
            format!("unreadable status: `membership_config.membership.configs` {RULE_SETS}")
        );
        let ids = vec!["1"; MAX_MEMBERS + 1].join(",");
        let long = parse(200, members_body(&format!("[[1],[{ids}]]"), "").as_bytes());
        assert_eq!(
            long.unwrap_err().to_string(),
            format!("unreadable status: `membership_config.membership.configs[1]` {RULE_SET_IDS}")
        );
        // A joint config keeps both sets; repeated ids are one voter.
        let joint = parse(200, members_body("[[1,1,2],[2,3]]", &nodes(4)).as_bytes()).unwrap();
        assert_eq!(joint.voter_sets, [vec![1, 1, 2], vec![2, 3]]);
        let voters: Vec<u64> = joint
            .members
            .iter()
            .filter(|m| m.voter)
            .map(|m| m.id)
            .collect();
        assert_eq!(voters, [1, 2, 3]);
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
