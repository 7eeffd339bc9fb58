//! See `crate::scraper`.
