//! The sample machine config rendered by the golden test and the render benchmark.

use crate::domain::machine::{CatalogueView, MachineInput, MachineSpec};

/// A typical Hetzner x86 spare with mesh tags, labels and a pinned tarball.
pub fn sample_spec() -> MachineSpec {
    let view = CatalogueView {
        locations: vec!["fsn1".into()],
        server_types: [("cx22".to_owned(), (2, 4.0))].into_iter().collect(),
        images: vec!["debian-12".into()],
    };
    let input = MachineInput {
        name: "spare-fsn1".into(),
        provider: "hetzner".into(),
        location: "fsn1".into(),
        server_type: "cx22".into(),
        region: "eu-central".into(),
        zone: "fsn1-dc14".into(),
        mesh_tags: vec!["tag:spare".into(), "tag:eu".into()],
        ssh_keys: vec![serde_json::json!(4711)],
        labels: [("team".to_owned(), "infra".to_owned())]
            .into_iter()
            .collect(),
        yubaba_url: "https://releases.example.com/yubaba/yubaba-1.4.2-x86_64.tar.gz".into(),
        yubaba_sha256: "4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10".into(),
        ..MachineInput::default()
    };
    MachineSpec::parse(
        &input,
        &view,
        &[super::DEFAULT_TEMPLATE.into()],
        super::DEFAULT_TEMPLATE,
    )
    .expect("the sample is valid")
}
