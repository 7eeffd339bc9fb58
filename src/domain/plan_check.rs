//! The named checks shown beside a request's Approve button: what is risky about this plan,
//! decided from facts headroom already holds (the config's ssh keys, the fleet's
//! `max_restore_machines`, the remembered pin verdict, the cached catalogue). Pure: the
//! provisioning layer gathers the facts, this decides each verdict and says why.

use serde::Serialize;

use super::UnixMillis;

/// How a check came out. `Block` refuses approval; `Warn` is shown and left to the approver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Warn,
    Block,
}

impl Verdict {
    /// The name the API and the page use.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Block => "block",
        }
    }
}

/// One named check with its verdict and a sentence saying why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanCheck {
    /// `ssh_keys`, `max_restore_machines`, `pin`, `server_type` or `image`.
    pub name: &'static str,
    pub verdict: Verdict,
    pub detail: String,
}

impl PlanCheck {
    fn new(name: &'static str, verdict: Verdict, detail: impl Into<String>) -> Self {
        PlanCheck {
            name,
            verdict,
            detail: detail.into(),
        }
    }
}

/// What is remembered about the pin of the config version the plan uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinFacts {
    /// No check was ever made for this exact (url, sha256).
    NotChecked,
    /// The download matched the pin.
    Verified { at: UnixMillis },
    /// The download did not match the pin.
    Mismatch { at: UnixMillis, message: String },
    /// The last check reached no verdict (unreachable, refused, too large, …).
    Failed { at: UnixMillis, message: String },
}

/// What the cached catalogue says about the plan's server type and image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferFacts {
    /// Locations the catalogue prices the server type at; `None` when it does not list it.
    pub type_locations: Option<Vec<String>>,
    /// The catalogue marks the server type deprecated.
    pub type_deprecated: bool,
    /// The catalogue lists an image of the plan's name.
    pub image_listed: bool,
    /// When the catalogue was fetched.
    pub fetched_at: UnixMillis,
}

/// Everything the checks are decided from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckFacts {
    pub count: u32,
    /// headroom filed it (a restore proposal), rather than a person.
    pub proposal: bool,
    /// The fleet's limit; `None` when the fleet no longer exists.
    pub max_restore_machines: Option<u32>,
    /// The config version's ssh key ids.
    pub ssh_keys: usize,
    pub pin_url: String,
    pub pin: PinFacts,
    pub provider: String,
    pub location: String,
    pub server_type: String,
    pub image: String,
    /// `None` when the provider's catalogue was never fetched.
    pub offer: Option<OfferFacts>,
    pub now: UnixMillis,
}

/// Every check, in the order the page lists them.
pub fn decide(f: &CheckFacts) -> Vec<PlanCheck> {
    vec![pin(f), machines(f), ssh_keys(f), server_type(f), image(f)]
}

/// The first check that refuses approval, if any.
pub fn first_block(checks: &[PlanCheck]) -> Option<&PlanCheck> {
    checks.iter().find(|c| c.verdict == Verdict::Block)
}

/// A duration in the largest whole unit that fits, for "… ago".
pub fn ago(now: UnixMillis, then: UnixMillis) -> String {
    let s = (now.saturating_sub(then) / 1000).max(0);
    match s {
        0..60 => format!("{s} s ago"),
        60..3600 => format!("{} min ago", s / 60),
        3600..86_400 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86_400),
    }
}

/// The pin: a mismatch blocks. Not checked and no verdict warn here; whether such a warning
/// blocks is the instance's choice (`plan_checks_blocking`; by default it does).
fn pin(f: &CheckFacts) -> PlanCheck {
    let url = &f.pin_url;
    match &f.pin {
        PinFacts::Verified { at } => PlanCheck::new(
            "pin",
            Verdict::Pass,
            format!(
                "the tarball at {url} matched its sha256 {}",
                ago(f.now, *at)
            ),
        ),
        PinFacts::Mismatch { at, message } => PlanCheck::new(
            "pin",
            Verdict::Block,
            format!(
                "the tarball at {url} did not match its sha256 ({}): {message}",
                ago(f.now, *at)
            ),
        ),
        PinFacts::Failed { at, message } => PlanCheck::new(
            "pin",
            Verdict::Warn,
            format!(
                "the last check of {url} reached no verdict ({}): {message}; check it again on the machine config's page",
                ago(f.now, *at)
            ),
        ),
        PinFacts::NotChecked => PlanCheck::new(
            "pin",
            Verdict::Warn,
            format!(
                "not checked: nobody has downloaded {url} and compared it with this sha256; check it on the machine config's page"
            ),
        ),
    }
}

/// Machines against the fleet's limit. A proposal of headroom's over it blocks (the limit was
/// lowered after it was filed: headroom would not ask for that many now); a person's request
/// over it only warns, since a person may ask for up to `COUNT_MAX` on purpose.
fn machines(f: &CheckFacts) -> PlanCheck {
    let n = f.count;
    let word = if n == 1 { "machine" } else { "machines" };
    match f.max_restore_machines {
        None => PlanCheck::new(
            "max_restore_machines",
            Verdict::Warn,
            format!("{n} {word}; the fleet no longer exists, so no limit applies"),
        ),
        Some(max) if n > max && f.proposal => PlanCheck::new(
            "max_restore_machines",
            Verdict::Block,
            format!("{n} {word}, more than the fleet's max_restore_machines of {max}"),
        ),
        Some(max) if n > max => PlanCheck::new(
            "max_restore_machines",
            Verdict::Warn,
            format!(
                "{n} {word}, more than the fleet's max_restore_machines of {max} (a person asked for them)"
            ),
        ),
        Some(max) => PlanCheck::new(
            "max_restore_machines",
            Verdict::Pass,
            format!("{n} {word}, within the fleet's max_restore_machines of {max}"),
        ),
    }
}

fn ssh_keys(f: &CheckFacts) -> PlanCheck {
    match f.ssh_keys {
        0 => PlanCheck::new(
            "ssh_keys",
            Verdict::Warn,
            "the machine config names no ssh key: nobody can log in to a machine that does not join",
        ),
        1 => PlanCheck::new("ssh_keys", Verdict::Pass, "1 ssh key"),
        n => PlanCheck::new("ssh_keys", Verdict::Pass, format!("{n} ssh keys")),
    }
}

fn never_fetched(name: &'static str, provider: &str) -> PlanCheck {
    PlanCheck::new(
        name,
        Verdict::Warn,
        format!("the {provider} catalogue was never fetched; refresh it on the catalogue page"),
    )
}

fn server_type(f: &CheckFacts) -> PlanCheck {
    let (t, loc, provider) = (&f.server_type, &f.location, &f.provider);
    let Some(offer) = &f.offer else {
        return never_fetched("server_type", provider);
    };
    let age = ago(f.now, offer.fetched_at);
    match &offer.type_locations {
        None => PlanCheck::new(
            "server_type",
            Verdict::Block,
            format!("the {provider} catalogue ({age}) does not list {t}"),
        ),
        Some(locs) if !locs.iter().any(|l| l == loc) => PlanCheck::new(
            "server_type",
            Verdict::Block,
            format!("the {provider} catalogue ({age}) does not offer {t} in {loc}"),
        ),
        Some(_) if offer.type_deprecated => PlanCheck::new(
            "server_type",
            Verdict::Warn,
            format!("{t} is offered in {loc} but deprecated (catalogue {age})"),
        ),
        Some(_) => PlanCheck::new(
            "server_type",
            Verdict::Pass,
            format!("{t} is offered in {loc} (catalogue {age})"),
        ),
    }
}

fn image(f: &CheckFacts) -> PlanCheck {
    let (i, provider) = (&f.image, &f.provider);
    let Some(offer) = &f.offer else {
        return never_fetched("image", provider);
    };
    let age = ago(f.now, offer.fetched_at);
    if offer.image_listed {
        PlanCheck::new(
            "image",
            Verdict::Pass,
            format!("{i} is in the {provider} catalogue ({age})"),
        )
    } else {
        PlanCheck::new(
            "image",
            Verdict::Block,
            format!("the {provider} catalogue ({age}) does not list the image {i}"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: UnixMillis = 10 * 86_400_000;

    fn facts() -> CheckFacts {
        CheckFacts {
            count: 2,
            proposal: true,
            max_restore_machines: Some(2),
            ssh_keys: 1,
            pin_url: "https://example.test/yubaba.tar.gz".into(),
            pin: PinFacts::Verified { at: NOW - 300_000 },
            provider: "hetzner".into(),
            location: "fsn1".into(),
            server_type: "cx22".into(),
            image: "debian-12".into(),
            offer: Some(OfferFacts {
                type_locations: Some(vec!["fsn1".into(), "nbg1".into()]),
                type_deprecated: false,
                image_listed: true,
                fetched_at: NOW - 7_200_000,
            }),
            now: NOW,
        }
    }

    fn verdict_of(f: &CheckFacts, name: &str) -> (Verdict, String) {
        let c = decide(f).into_iter().find(|c| c.name == name).unwrap();
        (c.verdict, c.detail)
    }

    #[test]
    fn a_plan_with_every_fact_in_order_passes_every_check_and_says_how_old_its_facts_are() {
        let checks = decide(&facts());
        let names: Vec<&str> = checks.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "pin",
                "max_restore_machines",
                "ssh_keys",
                "server_type",
                "image"
            ]
        );
        assert!(
            checks.iter().all(|c| c.verdict == Verdict::Pass),
            "{checks:?}"
        );
        assert!(first_block(&checks).is_none());
        assert!(
            checks[0].detail.contains("5 min ago"),
            "{}",
            checks[0].detail
        );
        assert!(checks[3].detail.contains("2 h ago"), "{}", checks[3].detail);
    }

    #[test]
    fn a_pin_that_did_not_match_blocks_while_unchecked_or_unreached_only_warn() {
        let mut f = facts();
        f.pin = PinFacts::Mismatch {
            at: NOW - 1000,
            message: "got abc".into(),
        };
        let (v, d) = verdict_of(&f, "pin");
        assert_eq!(v, Verdict::Block);
        assert!(d.contains("did not match") && d.contains("got abc"), "{d}");
        assert_eq!(first_block(&decide(&f)).unwrap().name, "pin");
        f.pin = PinFacts::NotChecked;
        let (v, d) = verdict_of(&f, "pin");
        assert_eq!(v, Verdict::Warn);
        assert!(d.starts_with("not checked"), "{d}");
        f.pin = PinFacts::Failed {
            at: NOW - 3 * 86_400_000,
            message: "refused".into(),
        };
        let (v, d) = verdict_of(&f, "pin");
        assert_eq!(v, Verdict::Warn);
        assert!(d.contains("3 d ago") && d.contains("refused"), "{d}");
    }

    #[test]
    fn a_proposal_over_the_fleets_limit_blocks_a_persons_request_over_it_warns() {
        let mut f = facts();
        f.count = 3;
        let (v, d) = verdict_of(&f, "max_restore_machines");
        assert_eq!(v, Verdict::Block);
        assert_eq!(
            d,
            "3 machines, more than the fleet's max_restore_machines of 2"
        );
        f.proposal = false;
        let (v, d) = verdict_of(&f, "max_restore_machines");
        assert_eq!(v, Verdict::Warn);
        assert!(d.ends_with("(a person asked for them)"), "{d}");
        f.count = 2;
        assert_eq!(verdict_of(&f, "max_restore_machines").0, Verdict::Pass);
        f.count = 1;
        let (v, d) = verdict_of(&f, "max_restore_machines");
        assert_eq!(v, Verdict::Pass);
        assert!(d.starts_with("1 machine,"), "{d}");
        f.max_restore_machines = None;
        assert_eq!(verdict_of(&f, "max_restore_machines").0, Verdict::Warn);
    }

    #[test]
    fn a_config_without_ssh_keys_warns() {
        let mut f = facts();
        f.ssh_keys = 0;
        let (v, d) = verdict_of(&f, "ssh_keys");
        assert_eq!(v, Verdict::Warn);
        assert!(d.contains("no ssh key"), "{d}");
        f.ssh_keys = 3;
        assert_eq!(
            verdict_of(&f, "ssh_keys"),
            (Verdict::Pass, "3 ssh keys".into())
        );
    }

    #[test]
    fn a_server_type_or_image_the_catalogue_does_not_offer_blocks() {
        let mut f = facts();
        f.location = "hel1".into();
        let (v, d) = verdict_of(&f, "server_type");
        assert_eq!(v, Verdict::Block);
        assert!(d.contains("does not offer cx22 in hel1"), "{d}");
        let mut f = facts();
        f.offer.as_mut().unwrap().type_locations = None;
        assert_eq!(verdict_of(&f, "server_type").0, Verdict::Block);
        let mut f = facts();
        f.offer.as_mut().unwrap().type_deprecated = true;
        assert_eq!(verdict_of(&f, "server_type").0, Verdict::Warn);
        let mut f = facts();
        f.offer.as_mut().unwrap().image_listed = false;
        let (v, d) = verdict_of(&f, "image");
        assert_eq!(v, Verdict::Block);
        assert!(d.contains("does not list the image debian-12"), "{d}");
    }

    #[test]
    fn a_catalogue_never_fetched_warns_rather_than_blocks() {
        let mut f = facts();
        f.offer = None;
        assert_eq!(verdict_of(&f, "server_type").0, Verdict::Warn);
        assert_eq!(verdict_of(&f, "image").0, Verdict::Warn);
    }

    #[test]
    fn ages_read_in_the_largest_whole_unit() {
        assert_eq!(ago(NOW, NOW), "0 s ago");
        assert_eq!(ago(NOW, NOW - 59_999), "59 s ago");
        assert_eq!(ago(NOW, NOW - 60_000), "1 min ago");
        assert_eq!(ago(NOW, NOW - 3_600_000), "1 h ago");
        assert_eq!(ago(NOW, NOW - 86_400_000), "1 d ago");
        // A check stamped after now (clock skew) reads as just now, never negative.
        assert_eq!(ago(NOW, NOW + 5000), "0 s ago");
    }
}
