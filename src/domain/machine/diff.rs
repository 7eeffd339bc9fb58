//! Field-level differences between two versions of a config.

use std::collections::BTreeMap;

use serde::Serialize;

use super::MachineSpec;

/// One changed field between two versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldChange {
    pub field: String,
    /// `None` when the field was absent.
    pub before: Option<String>,
    pub after: Option<String>,
}

/// Field-level differences, in field order, comparing the JSON encodings (nested objects such
/// as `allocatable` are compared per inner field).
pub fn diff_specs(before: Option<&MachineSpec>, after: &MachineSpec) -> Vec<FieldChange> {
    fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(m) if prefix == "allocatable" || prefix.is_empty() => {
                for (k, inner) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    flatten(&key, inner, out);
                }
            }
            serde_json::Value::String(s) => out.push((prefix.to_owned(), s.clone())),
            other => out.push((prefix.to_owned(), other.to_string())),
        }
    }
    let mut a = Vec::new();
    if let Some(b) = before {
        flatten("", &serde_json::to_value(b).unwrap_or_default(), &mut a);
    }
    let mut b = Vec::new();
    flatten("", &serde_json::to_value(after).unwrap_or_default(), &mut b);
    let old: BTreeMap<_, _> = a.into_iter().collect();
    let mut changes = Vec::new();
    for (k, v) in &b {
        if old.get(k) != Some(v) {
            changes.push(FieldChange {
                field: k.clone(),
                before: old.get(k).cloned(),
                after: Some(v.clone()),
            });
        }
    }
    changes
}
