//! Simulated parts for a first look without a cloud or a fleet: the demo's settings, seeded
//! users, machine config and fleets (`demo`), and yubaba fleets answering real HTTP on loopback
//! (`yubaba`, over the small server in `http`), and the release server whose tarball the demo
//! config pins (`release`). The simulated provider itself is
//! `provider::simulated`.

pub mod demo;
pub mod http;
pub mod release;
pub mod yubaba;
