//! One outbound policy for every server-side fetch whose destination a user chose (the pin
//! pre-flight now; fleet scraping and webhooks later): the pure decision (`policy`), DNS
//! answers judged before use (`resolver`) and the client that applies both at every hop
//! (`client`).

pub mod client;
pub mod policy;
pub mod resolver;

pub use client::{FetchError, OutboundClient, MAX_REDIRECTS};
pub use policy::{check, AllowList, Purpose, Refusal};
