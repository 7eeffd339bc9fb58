//! See `crate::headroom`.
