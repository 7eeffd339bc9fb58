//! The scraper: one loop per fleet asks any reachable endpoint for `/raft/status`, follows
//! `current_leader` to the leader, reads the `headroom` section (native) or each member's
//! `/node` and `/node/usage` (derived), and hands one `Sample` per tick to
//! `crate::headroom::record::record`. Every fetch goes through the outbound policy for
//! scraping; every failure is an error sample (a gap), never a crash and never "healthy".

pub mod derived;
pub mod fetch;
pub mod node;
pub mod status;
