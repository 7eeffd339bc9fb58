//! The sample machine config rendered by the golden test and the render benchmark.

use crate::domain::machine::{CatalogueView, MachineInput, MachineSpec};

/// A typical Hetzner x86 spare with mesh tags, labels and a pinned tarball.
pub fn sample_spec() -> MachineSpec {
    let view = CatalogueView {
        locations: vec!["fsn1".into()],
        server_types: [("cx22".to_owned(), (2, 4.0))].into_iter().collect(),
        images: vec!["debian-12".into()],
    };
    MachineSpec::parse(
        &MachineInput::sample(),
        &view,
        &[super::DEFAULT_TEMPLATE.into()],
        super::DEFAULT_TEMPLATE,
    )
    .expect("the sample is valid")
}
