//! Which plan checks refuse approval when they only warn: the `plan_checks_blocking` setting.
//! A check decides pass, warn or block from the plan's facts (`plan_check`); an instance then
//! chooses which warnings it will not approve past. A pin nobody verified is the default: an
//! approver cannot know what a machine will download and run.

use std::collections::BTreeSet;

use super::plan_check::{PlanCheck, Verdict};

/// Every check's name, in the order the page lists them: exactly the checks `decide` makes,
/// so no name the setting accepts is one that never warns (a budget or firewall check named
/// here before it exists would read as a rule nobody enforces).
pub const CHECK_NAMES: [&str; 7] = [
    "pin",
    "max_restore_machines",
    "ssh_keys",
    "server_type",
    "image",
    "monthly_budget",
    "firewall",
];

/// The checks whose warning blocks approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockingChecks(BTreeSet<&'static str>);

impl Default for BlockingChecks {
    /// A pin not verified for the plan's exact (url, sha256) blocks; every other warning is
    /// the approver's to weigh.
    fn default() -> Self {
        BlockingChecks(BTreeSet::from(["pin"]))
    }
}

impl BlockingChecks {
    /// The setting's list of check names; an empty list blocks on no warning.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        let mut set = BTreeSet::new();
        for raw in names {
            let raw = raw.as_ref();
            let name = CHECK_NAMES
                .iter()
                .find(|n| **n == raw.trim())
                .ok_or_else(|| {
                    format!(
                        "plan_checks_blocking entry {:?} is not a plan check; the checks are {}",
                        raw.chars().take(64).collect::<String>(),
                        CHECK_NAMES.join(", ")
                    )
                })?;
            set.insert(*name);
        }
        Ok(BlockingChecks(set))
    }

    /// Whether a warning of check `name` blocks.
    pub fn blocks(&self, name: &str) -> bool {
        self.0.contains(name)
    }

    /// The names, for `headroom settings` and the docs.
    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().copied().collect()
    }
}

/// Turns each warning of a check named in `blocking` into a block that says so; passes and
/// blocks are kept as they are.
pub fn escalate(checks: Vec<PlanCheck>, blocking: &BlockingChecks) -> Vec<PlanCheck> {
    checks
        .into_iter()
        .map(|mut c| {
            if c.verdict == Verdict::Warn && blocking.blocks(c.name) {
                c.verdict = Verdict::Block;
                c.detail = format!(
                    "{}; this blocks approval here (plan_checks_blocking names {})",
                    c.detail, c.name
                );
            }
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn check(name: &'static str, verdict: Verdict) -> PlanCheck {
        PlanCheck {
            name,
            verdict,
            detail: "why".into(),
        }
    }

    #[test]
    fn by_default_only_a_pin_warning_blocks() {
        let checks = vec![
            check("pin", Verdict::Warn),
            check("ssh_keys", Verdict::Warn),
            check("image", Verdict::Pass),
        ];
        let out = escalate(checks, &BlockingChecks::default());
        assert_eq!(out[0].verdict, Verdict::Block);
        assert!(
            out[0].detail.ends_with("(plan_checks_blocking names pin)"),
            "{}",
            out[0].detail
        );
        assert_eq!(out[1].verdict, Verdict::Warn);
        assert_eq!(out[1].detail, "why");
        assert_eq!(out[2].verdict, Verdict::Pass);
    }

    #[test]
    fn the_setting_names_known_checks_only() {
        assert_eq!(
            BlockingChecks::parse(&["ssh_keys", " image "])
                .unwrap()
                .names(),
            ["image", "ssh_keys"]
        );
        assert!(BlockingChecks::parse::<&str>(&[])
            .unwrap()
            .names()
            .is_empty());
        for bad in [
            "",
            "Pin",
            "pin;drop",
            "ssh-keys",
            "monthly-budget",
            "firewalls",
            &"x".repeat(10_000),
        ] {
            let e = BlockingChecks::parse(&[bad]).unwrap_err();
            assert!(
                e.starts_with("plan_checks_blocking entry") && e.contains("pin, max_restore"),
                "{e}"
            );
            assert!(e.len() < 300, "a huge entry is not echoed whole");
        }
    }

    #[test]
    fn the_names_are_exactly_the_checks_decide_makes() {
        use crate::domain::money::Amount;
        use crate::domain::plan_check::{decide, CheckFacts, PinFacts, RunningFacts};
        let facts = CheckFacts {
            count: 1,
            proposal: false,
            max_restore_machines: Some(1),
            ssh_keys: 0,
            pin_url: "https://example.test/yubaba.tar.gz".into(),
            pin: PinFacts::NotChecked,
            provider: "hetzner".into(),
            location: "fsn1".into(),
            server_type: "cx22".into(),
            image: "debian-12".into(),
            offer: None,
            monthly_cost: "9.0200".into(),
            currency: "EUR".into(),
            monthly_budget: None,
            running: RunningFacts {
                machines: 0,
                monthly: Amount::ZERO,
            },
            firewall: Vec::new(),
            now: 0,
        };
        let made: Vec<&str> = decide(&facts).iter().map(|c| c.name).collect();
        assert_eq!(made, CHECK_NAMES);
    }

    fn verdict() -> impl Strategy<Value = Verdict> {
        prop_oneof![
            Just(Verdict::Pass),
            Just(Verdict::Warn),
            Just(Verdict::Block)
        ]
    }

    proptest! {
        /// Escalation only ever raises a warning of a named check: it never lowers a block,
        /// never touches a pass, and keeps the checks' names and order.
        #[test]
        fn escalation_raises_exactly_the_named_warnings(
            verdicts in proptest::collection::vec((0..CHECK_NAMES.len(), verdict()), 0..12),
            named in proptest::collection::btree_set(0..CHECK_NAMES.len(), 0..CHECK_NAMES.len()),
        ) {
            let names: Vec<&str> = named.iter().map(|i| CHECK_NAMES[*i]).collect();
            let blocking = BlockingChecks::parse(&names).unwrap();
            let before: Vec<PlanCheck> =
                verdicts.iter().map(|(i, v)| check(CHECK_NAMES[*i], *v)).collect();
            let after = escalate(before.clone(), &blocking);
            prop_assert_eq!(after.len(), before.len());
            for (b, a) in before.iter().zip(&after) {
                prop_assert_eq!(a.name, b.name);
                let expected = match b.verdict {
                    Verdict::Warn if names.contains(&b.name) => Verdict::Block,
                    v => v,
                };
                prop_assert_eq!(a.verdict, expected);
            }
        }
    }
}
