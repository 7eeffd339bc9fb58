//! The query-string fields several parameter structs share (the API's, and the provision
//! history filters the page and the API both read), declared once.
//!
//! utoipa reads `#[param(pattern = ...)]` only as a string literal and cannot flatten one
//! `IntoParams` struct into another, so a shared field cannot be a shared type or a `const`.
//! `query_params!` instead writes such fields' attributes itself: a field declared with a
//! kind in place of its type (`from: @utc_bound`) becomes a `String` carrying that kind's
//! documented bounds. Every other field passes through as written, so each struct keeps its
//! own derives, serde attributes and field docs.
//!
//! The kinds:
//! - `@filter_text`: free text matched exactly, at most 200 characters, no control characters.
//! - `@utc_bound`: empty, `2026-12-02T09:30` (taken as UTC) or RFC 3339.
//! - `@cursor`: empty or the `next_cursor` of the previous page, a positive id.

/// Writes a query-parameter struct, expanding the field kinds listed in the module docs.
///
/// Fields end with a comma, including the last.
macro_rules! query_params {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident { $($fields:tt)* }
    ) => {
        $crate::export::params::query_params!(@fields [$(#[$meta])* $vis struct $name] [] $($fields)*);
    };
    (@fields [$($head:tt)*] [$($done:tt)*]) => {
        $($head)* { $($done)* }
    };
    (@fields [$($head:tt)*] [$($done:tt)*]
        $(#[$attr:meta])* $fvis:vis $field:ident : @filter_text, $($rest:tt)*
    ) => {
        $crate::export::params::query_params!(@fields [$($head)*] [$($done)*
            $(#[$attr])*
            #[param(max_length = 200, pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$")]
            $fvis $field: String,
        ] $($rest)*);
    };
    (@fields [$($head:tt)*] [$($done:tt)*]
        $(#[$attr:meta])* $fvis:vis $field:ident : @utc_bound, $($rest:tt)*
    ) => {
        $crate::export::params::query_params!(@fields [$($head)*] [$($done)*
            $(#[$attr])*
            #[param(
                pattern = "^([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})?)?)?$"
            )]
            $fvis $field: String,
        ] $($rest)*);
    };
    (@fields [$($head:tt)*] [$($done:tt)*]
        $(#[$attr:meta])* $fvis:vis $field:ident : @cursor, $($rest:tt)*
    ) => {
        $crate::export::params::query_params!(@fields [$($head)*] [$($done)*
            $(#[$attr])*
            #[param(pattern = "^([1-9][0-9]{0,17})?$")]
            $fvis $field: String,
        ] $($rest)*);
    };
    (@fields [$($head:tt)*] [$($done:tt)*]
        $(#[$attr:meta])* $fvis:vis $field:ident : $ty:ty, $($rest:tt)*
    ) => {
        $crate::export::params::query_params!(@fields [$($head)*] [$($done)*
            $(#[$attr])* $fvis $field: $ty,
        ] $($rest)*);
    };
}

pub(crate) use query_params;
