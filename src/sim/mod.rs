//! Simulated parts for a first look without a cloud or a fleet: the demo's settings, seeded
//! users and machine config. The simulated provider itself is `provider::simulated`.

pub mod demo;
