//! Headroom operations: the one writer of samples, fleet status and deficits (`record`, called
//! by the scraper once per tick), the deficit rule turned into restore proposals (`deficit`:
//! filed as `system` through `provisioning::requests`, superseded on recovery before approval,
//! announced by webhook, re-filed by `resume` after a crash between commit and filing),
//! the dashboard's and API's view of each fleet now (`board`), chart series over any range
//! (`series`) and the retention of history (`retention`).
//!
//! Reads check the caller's role like every operation (viewer and up) and refuse an unknown
//! fleet with `OpError::NotFound`; the errors are the fleets' own, since every headroom
//! question is a question about one fleet.

pub mod board;
pub mod deficit;
pub mod record;
pub mod retention;
pub mod series;
