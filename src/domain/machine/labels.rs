//! Hetzner labels, yubaba taints and mesh tags: their syntax rules.

use super::names::{rfc1123_label, LABEL_MAX};

/// A Hetzner server label key: optional DNS-subdomain prefix and `/`, then a name of ≤ 63
/// alphanumerics, `-`, `_`, `.`, alphanumeric at both ends. `hetzner.cloud/` is reserved.
pub fn label_key(raw: &str) -> Result<String, String> {
    let (prefix, name) = match raw.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, raw),
    };
    if let Some(p) = prefix {
        if p.is_empty()
            || p.len() > 253
            // rfc1123_label trims; a part must be a label as written, spaces included.
            || !p
                .split('.')
                .all(|part| rfc1123_label("x", part).is_ok_and(|l| l == part))
        {
            return Err(format!("key {raw:?}: the prefix must be a DNS subdomain"));
        }
        if p == "hetzner.cloud" || p.ends_with(".hetzner.cloud") {
            return Err(format!(
                "key {raw:?}: the hetzner.cloud/ prefix is reserved"
            ));
        }
    }
    label_word(name, false).map_err(|why| format!("key {raw:?}: {why}"))?;
    Ok(raw.to_owned())
}

/// A Hetzner label value: like a key's name part, and may be empty.
pub fn label_value(raw: &str) -> Result<String, String> {
    label_word(raw, true).map_err(|why| format!("value {raw:?}: {why}"))?;
    Ok(raw.to_owned())
}

fn label_word(w: &str, may_be_empty: bool) -> Result<(), &'static str> {
    if w.is_empty() {
        return if may_be_empty {
            Ok(())
        } else {
            Err("must not be empty")
        };
    }
    if w.len() > LABEL_MAX {
        return Err("must be at most 63 characters");
    }
    let inner = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    let bytes = w.as_bytes();
    if !bytes.iter().all(|b| inner(*b))
        || !bytes[0].is_ascii_alphanumeric()
        || !bytes[bytes.len() - 1].is_ascii_alphanumeric()
    {
        return Err("may use only letters, digits, '-', '_' and '.', and must start and end with a letter or digit");
    }
    Ok(())
}

/// Keys headroom sets itself on every server it creates.
pub const RESERVED_LABELS: [&str; 2] = ["headroom-provision", "headroom-fleet"];

/// A taint: `key[=value]:Effect`, Effect one of NoSchedule, PreferNoSchedule, NoExecute.
pub fn taint(raw: &str) -> Result<String, String> {
    let (kv, effect) = raw
        .rsplit_once(':')
        .ok_or_else(|| format!("{raw:?} must look like key=value:NoSchedule"))?;
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        return Err(format!(
            "{raw:?}: effect must be NoSchedule, PreferNoSchedule or NoExecute"
        ));
    }
    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
    label_key(k)
        .and_then(|_| label_value(v))
        .map_err(|e| format!("{raw:?}: {e}"))?;
    Ok(raw.to_owned())
}

/// A mesh (tailscale) ACL tag: `tag:` followed by an RFC 1123 label.
pub fn mesh_tag(raw: &str) -> Result<String, String> {
    let name = raw
        .strip_prefix("tag:")
        .ok_or_else(|| format!("{raw:?} must start with tag:"))?;
    // rfc1123_label trims; "tag: x" must not pass as "tag:x".
    match rfc1123_label("x", name) {
        Ok(label) if label == name => Ok(raw.to_owned()),
        _ => Err(format!(
            "{raw:?}: after tag: comes an RFC 1123 label (a-z, 0-9, '-')"
        )),
    }
}
