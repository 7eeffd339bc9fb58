//! The login form as submitted.

use serde::Deserialize;

/// Raw login fields; missing fields arrive empty and are reported by name.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct LoginForm {
    pub username: String,
    pub password: String,
    pub next: String,
}

/// Where to go after login: only a local absolute path (no `//host`, no scheme), else home.
pub fn safe_next(raw: &str) -> &str {
    let ok = raw.starts_with('/')
        && !raw.starts_with("//")
        && !raw.contains('\\')
        && !raw.chars().any(char::is_control);
    if ok {
        raw
    } else {
        "/"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed() {
        assert_eq!(safe_next("/audit?actor=x"), "/audit?actor=x");
        assert_eq!(safe_next("//evil.example/"), "/");
        assert_eq!(safe_next("https://evil.example/"), "/");
        assert_eq!(safe_next("/\\evil.example"), "/");
        assert_eq!(safe_next(""), "/");
    }
}
