//! A machine config's fields and their rules, one concept a module. `MachineSpec` is what a version stores; it is
//! built only by `MachineSpec::parse` from raw input plus the provider catalogue, so holding one
//! proves every field is valid and consistent (arch matches server type, location exists, …).

mod diff;
mod kinds;
mod labels;
mod names;
mod spec;
mod tarball;
mod values;

pub use diff::{diff_specs, FieldChange};
pub use kinds::{Allocatable, Arch, Channel, ProviderKind};
pub use labels::{label_key, label_value, mesh_tag, taint, RESERVED_LABELS};
pub use names::{document_name, rfc1123_label, ConfigName, TemplateName, LABEL_MAX};
pub use spec::{AllocatableInput, CatalogueView, MachineInput, MachineSpec};
pub use tarball::{https_url, sha256_pin};
pub use values::{HttpsUrl, LabelKey, LabelValue, MeshTag, Sha256Pin, Taint};

#[cfg(test)]
mod tests {
    use super::*;

    pub fn catalogue() -> CatalogueView {
        CatalogueView {
            locations: vec!["fsn1".into(), "hel1".into()],
            server_types: [
                ("cx22".to_owned(), (2, 4.0)),
                ("cax11".to_owned(), (2, 4.0)),
            ]
            .into_iter()
            .collect(),
            images: vec!["debian-12".into()],
        }
    }

    fn err_fields(i: &MachineInput) -> Vec<String> {
        MachineSpec::parse(i, &catalogue(), &["yubaba-node".into()], "yubaba-node")
            .unwrap_err()
            .0
            .into_iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn a_complete_input_parses_with_defaults_and_derived_arch() {
        let s = MachineSpec::parse(
            &MachineInput::sample(),
            &catalogue(),
            &["yubaba-node".into()],
            "yubaba-node",
        )
        .unwrap();
        assert_eq!(s.arch, Arch::X86_64);
        assert_eq!(s.image, "debian-12");
        assert_eq!(s.template, "yubaba-node");
        assert_eq!(s.yubaba_channel, Channel::Stable);
    }

    #[test]
    fn each_rule_names_its_field() {
        type Mutation = fn(&mut MachineInput);
        let cases: Vec<(Mutation, &str)> = vec![
            (|i| i.name = "Bad_Name".into(), "name"),
            (|i| i.name = "a".repeat(64), "name"),
            (|i| i.name = "-lead".into(), "name"),
            (|i| i.provider = "aws".into(), "provider"),
            (|i| i.location = "mars1".into(), "location"),
            (|i| i.server_type = "t3.micro".into(), "server_type"),
            (|i| i.arch = "aarch64".into(), "arch"),
            (|i| i.region = "EU".into(), "region"),
            (|i| i.mesh_tags = vec!["spare".into()], "mesh_tags"),
            (|i| i.mesh_tags = vec!["tag: spare".into()], "mesh_tags"),
            (
                |i| {
                    i.labels.insert(" example.com/x".into(), "y".into());
                },
                "labels",
            ),
            (|i| i.ssh_keys = vec![serde_json::json!("abc")], "ssh_keys"),
            (|i| i.ssh_keys = vec![serde_json::json!(0)], "ssh_keys"),
            (
                |i| {
                    i.labels.insert("hetzner.cloud/x".into(), "y".into());
                },
                "labels",
            ),
            (
                |i| {
                    i.labels.insert("k".into(), "bad value!".into());
                },
                "labels",
            ),
            (
                |i| {
                    i.labels.insert("headroom-fleet".into(), "x".into());
                },
                "labels",
            ),
            (
                |i| i.allocatable.memory_mb = Some(serde_json::json!(10)),
                "allocatable.memory_mb",
            ),
            (
                |i| i.allocatable.memory_mb = Some(serde_json::json!(8192)),
                "allocatable.memory_mb",
            ),
            (
                |i| i.allocatable.cpu_millis = Some(serde_json::json!(4000)),
                "allocatable.cpu_millis",
            ),
            (|i| i.taints = vec!["dedicated=ops".into()], "taints"),
            (|i| i.template = "nope".into(), "template"),
            (|i| i.yubaba_channel = "nightly".into(), "yubaba_channel"),
            (
                |i| i.yubaba_url = "http://releases.example.com/x.tar.gz".into(),
                "yubaba_url",
            ),
            (
                |i| i.yubaba_url = "https://user:pw@example.com/x".into(),
                "yubaba_url",
            ),
            (|i| i.yubaba_sha256 = "A".repeat(64), "yubaba_sha256"),
            (|i| i.yubaba_sha256 = "a".repeat(63), "yubaba_sha256"),
        ];
        for (mutate, field) in cases {
            let mut i = MachineInput::sample();
            mutate(&mut i);
            assert_eq!(err_fields(&i), vec![field.to_owned()], "{i:?}");
        }
    }

    #[test]
    fn arm_server_types_derive_aarch64() {
        let mut i = MachineInput::sample();
        i.server_type = "cax11".into();
        i.arch = "aarch64".into();
        let s =
            MachineSpec::parse(&i, &catalogue(), &["yubaba-node".into()], "yubaba-node").unwrap();
        assert_eq!(s.arch, Arch::Aarch64);
    }

    #[test]
    fn diff_lists_changed_fields_only() {
        let a = MachineSpec::parse(
            &MachineInput::sample(),
            &catalogue(),
            &["yubaba-node".into()],
            "yubaba-node",
        )
        .unwrap();
        let mut b = a.clone();
        b.location = "hel1".into();
        b.allocatable.memory_mb = Some(2048);
        let d = diff_specs(Some(&a), &b);
        let fields: Vec<&str> = d.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["allocatable.memory_mb", "location"]);
        assert_eq!(d[1].before.as_deref(), Some("fsn1"));
    }
}
