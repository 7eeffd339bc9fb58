//! The named checks shown beside a request's Approve button: what is risky about this plan,
//! decided from facts headroom already holds (the config's ssh keys, the fleet's
//! `max_restore_machines` and `monthly_budget`, the remembered pin verdict, the cached
//! catalogue, the machines it already runs for the fleet, the firewall each payload sets up).
//! Pure: the provisioning layer gathers the facts, this decides each verdict and says why.

use serde::Serialize;

use super::fleet::MonthlyBudget;
use super::money::Amount;
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

/// What the machines headroom already created for the fleet cost while they run: those with
/// a server that was not destroyed, of every other request of the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunningFacts {
    pub machines: u32,
    /// Their monthly prices summed (each request's `monthly_price` per machine).
    pub monthly: Amount,
}

/// What one machine's payload (as shown to the approver) does with ufw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirewallFacts {
    Read(FirewallRules),
    /// Not YAML, or not a cloud-config mapping: why.
    Unreadable(String),
}

/// The ufw rules a payload's `runcmd`/`bootcmd` write.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FirewallRules {
    /// Ports allowed from anywhere on any interface (`22/tcp`, `80`, `every port`), in the
    /// order the payload opens them.
    pub world_open: Vec<String>,
    /// ufw ends up enabled (`ufw enable`, `ufw --force enable`).
    pub enabled: bool,
    /// Commands of other firewalls (nft, iptables, firewall-cmd) appear: not read.
    pub other_firewalls: bool,
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
    /// The plan's `monthly_cost` (decimal text) and the currency of every price.
    pub monthly_cost: String,
    pub currency: String,
    /// The fleet's budget; `None` when it sets none or no longer exists.
    pub monthly_budget: Option<MonthlyBudget>,
    pub running: RunningFacts,
    /// One per machine, in machine order.
    pub firewall: Vec<FirewallFacts>,
    pub now: UnixMillis,
}

/// Every check, in the order the page lists them.
pub fn decide(f: &CheckFacts) -> Vec<PlanCheck> {
    vec![
        pin(f),
        machines(f),
        ssh_keys(f),
        server_type(f),
        image(f),
        budget(f),
        firewall(&f.firewall),
    ]
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

/// An amount as the budget check shows it: 2 places, rounded half-up.
fn cents(a: Amount) -> String {
    a.to_places(2)
}

/// The plan's monthly cost plus what the fleet's running machines cost, against its budget.
fn budget(f: &CheckFacts) -> PlanCheck {
    let name = "monthly_budget";
    let Some(budget) = f.monthly_budget else {
        return PlanCheck::new(name, Verdict::Pass, "no monthly_budget set for the fleet");
    };
    let Ok(plan) = Amount::parse(&f.monthly_cost) else {
        return PlanCheck::new(
            name,
            Verdict::Warn,
            format!(
                "the plan's monthly cost {:?} is not a decimal amount, so it cannot be compared with the budget",
                f.monthly_cost
            ),
        );
    };
    let cur = &f.currency;
    let running = f.running;
    let Some(total) = plan.plus(running.monthly) else {
        return PlanCheck::new(
            name,
            Verdict::Warn,
            "the monthly cost is too large to add up",
        );
    };
    let limit = budget.amount();
    let word = if running.machines == 1 {
        "machine"
    } else {
        "machines"
    };
    let parts = format!(
        "this request {}, plus {} for {} {word} still running from the fleet's earlier requests",
        cents(plan),
        cents(running.monthly),
        running.machines
    );
    if total > limit {
        // `total > limit`, so the difference is positive (`Amount` holds no negatives).
        let over = total.minus(limit).unwrap_or(Amount::ZERO);
        let over = match cents(over) {
            zero if zero == "0.00" => "less than 0.01".to_owned(),
            shown => shown,
        };
        PlanCheck::new(
            name,
            Verdict::Warn,
            format!(
                "{} of {budget} {cur} a month, {over} {cur} over the fleet's monthly_budget ({parts})",
                cents(total),
            ),
        )
    } else {
        PlanCheck::new(
            name,
            Verdict::Pass,
            format!("{} of {budget} {cur} a month ({parts})", cents(total)),
        )
    }
}

/// Ports listed in a firewall detail, at most; the rest are counted.
const PORTS_SHOWN_MAX: usize = 12;

/// The firewall each machine's payload sets up: only ssh open to the world passes.
fn firewall(payloads: &[FirewallFacts]) -> PlanCheck {
    let name = "firewall";
    let total = payloads.len();
    let which = |idx: &[usize]| -> String {
        if total == 1 {
            "the payload".to_owned()
        } else if idx.len() == total {
            "every payload".to_owned()
        } else {
            let list: Vec<String> = idx.iter().map(|i| (i + 1).to_string()).collect();
            format!("the payload of machine {}", list.join(", "))
        }
    };
    let mut unreadable: Vec<(usize, &str)> = Vec::new();
    let mut disabled = Vec::new();
    let mut open: Vec<&str> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut other = false;
    for (i, p) in payloads.iter().enumerate() {
        match p {
            FirewallFacts::Unreadable(why) => unreadable.push((i, why)),
            FirewallFacts::Read(r) => {
                if !r.enabled {
                    disabled.push(i);
                }
                other |= r.other_firewalls;
                for port in &r.world_open {
                    if seen.insert(port.as_str()) {
                        open.push(port);
                    }
                }
            }
        }
    }
    let mut problems = Vec::new();
    if total == 0 {
        problems.push("no payload to read".to_owned());
    }
    if let Some((_, why)) = unreadable.first() {
        let idx: Vec<usize> = unreadable.iter().map(|(i, _)| *i).collect();
        problems.push(format!(
            "{} could not be read as YAML ({why}), so its firewall is unknown",
            which(&idx)
        ));
    }
    if !disabled.is_empty() {
        problems.push(format!(
            "{} never enables ufw (no `ufw enable`): every listening port is reachable",
            which(&disabled)
        ));
    }
    let ssh = "22/tcp";
    let risky: Vec<&str> = open.iter().copied().filter(|p| *p != ssh).collect();
    if !risky.is_empty() {
        let mut shown = risky[..risky.len().min(PORTS_SHOWN_MAX)].join(", ");
        if risky.len() > PORTS_SHOWN_MAX {
            shown.push_str(&format!(" and {} more", risky.len() - PORTS_SHOWN_MAX));
        }
        let besides = if open.contains(&ssh) {
            " (besides 22/tcp for ssh)"
        } else {
            ""
        };
        problems.push(format!("{shown} open to the world{besides}"));
    }
    let note = if other {
        "; rules not written with ufw (nft/iptables) are not read"
    } else {
        ""
    };
    if problems.is_empty() {
        let what = if open.is_empty() {
            "no port open to the world"
        } else {
            "only 22/tcp (ssh) open to the world"
        };
        PlanCheck::new(name, Verdict::Pass, format!("{what}; ufw enabled{note}"))
    } else {
        PlanCheck::new(
            name,
            Verdict::Warn,
            format!("{}{note}", problems.join("; ")),
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
            monthly_cost: "9.0200".into(),
            currency: "EUR".into(),
            monthly_budget: None,
            running: RunningFacts {
                machines: 0,
                monthly: Amount::ZERO,
            },
            firewall: vec![FirewallFacts::Read(FirewallRules {
                world_open: vec!["22/tcp".into()],
                enabled: true,
                other_firewalls: false,
            })],
            now: NOW,
        }
    }

    fn budget_of(raw: &str) -> Option<MonthlyBudget> {
        Some(MonthlyBudget::parse("monthly_budget", raw).unwrap())
    }

    fn rules(open: &[&str], enabled: bool) -> FirewallFacts {
        FirewallFacts::Read(FirewallRules {
            world_open: open.iter().map(|p| (*p).to_owned()).collect(),
            enabled,
            other_firewalls: false,
        })
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
                "image",
                "monthly_budget",
                "firewall"
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
    fn without_a_budget_the_budget_check_passes_saying_so() {
        let (v, d) = verdict_of(&facts(), "monthly_budget");
        assert_eq!(v, Verdict::Pass);
        assert_eq!(d, "no monthly_budget set for the fleet");
    }

    #[test]
    fn the_plan_plus_the_running_machines_within_the_budget_passes_with_both_numbers() {
        let mut f = facts();
        f.monthly_budget = budget_of("250");
        f.running = RunningFacts {
            machines: 1,
            monthly: Amount::parse("3.3150000000").unwrap(),
        };
        let (v, d) = verdict_of(&f, "monthly_budget");
        assert_eq!(v, Verdict::Pass);
        assert!(d.starts_with("12.34 of 250.00 EUR a month ("), "{d}");
        assert!(
            d.contains("this request 9.02, plus 3.32 for 1 machine still running from the fleet's"),
            "{d}"
        );
    }

    #[test]
    fn exactly_the_budget_passes_and_one_hundredth_of_a_cent_over_warns() {
        let mut f = facts();
        f.monthly_budget = budget_of("12.34");
        f.running.machines = 2;
        f.running.monthly = Amount::parse("3.32").unwrap();
        assert_eq!(verdict_of(&f, "monthly_budget").0, Verdict::Pass);
        // Exact decimals: 9.0200 + 3.3201 is over 12.34, though both read 12.34 rounded.
        f.running.monthly = Amount::parse("3.3201").unwrap();
        let (v, d) = verdict_of(&f, "monthly_budget");
        assert_eq!(v, Verdict::Warn);
        assert!(
            d.starts_with(
                "12.34 of 12.34 EUR a month, less than 0.01 EUR over the fleet's monthly_budget"
            ),
            "{d}"
        );
        f.monthly_budget = budget_of("5");
        let (v, d) = verdict_of(&f, "monthly_budget");
        assert_eq!(v, Verdict::Warn);
        assert!(
            d.contains("12.34 of 5.00 EUR a month, 7.34 EUR over"),
            "{d}"
        );
        assert!(d.contains("for 2 machines"), "{d}");
    }

    #[test]
    fn a_plan_cost_that_is_not_a_decimal_warns_rather_than_guessing() {
        let mut f = facts();
        f.monthly_budget = budget_of("250");
        f.monthly_cost = "4,59".into();
        let (v, d) = verdict_of(&f, "monthly_budget");
        assert_eq!(v, Verdict::Warn);
        assert!(d.contains("not a decimal amount"), "{d}");
    }

    #[test]
    fn only_ssh_open_to_the_world_passes_and_any_other_port_warns_listing_it() {
        let (v, d) = verdict_of(&facts(), "firewall");
        assert_eq!(v, Verdict::Pass);
        assert_eq!(d, "only 22/tcp (ssh) open to the world; ufw enabled");
        let mut f = facts();
        f.firewall = vec![rules(&[], true)];
        assert_eq!(
            verdict_of(&f, "firewall"),
            (
                Verdict::Pass,
                "no port open to the world; ufw enabled".into()
            )
        );
        f.firewall = vec![rules(&["22/tcp", "7443/tcp", "80/tcp", "443/tcp"], true)];
        let (v, d) = verdict_of(&f, "firewall");
        assert_eq!(v, Verdict::Warn);
        assert_eq!(
            d,
            "7443/tcp, 80/tcp, 443/tcp open to the world (besides 22/tcp for ssh)"
        );
        // 22 without a protocol opens udp too: not only ssh.
        f.firewall = vec![rules(&["22"], true)];
        assert_eq!(verdict_of(&f, "firewall").0, Verdict::Warn);
    }

    #[test]
    fn no_firewall_enabled_unreadable_payloads_and_other_tools_are_said() {
        let mut f = facts();
        f.firewall = vec![rules(&["22/tcp"], false)];
        let (v, d) = verdict_of(&f, "firewall");
        assert_eq!(v, Verdict::Warn);
        assert!(d.starts_with("the payload never enables ufw"), "{d}");
        f.firewall = vec![
            rules(&["22/tcp"], true),
            FirewallFacts::Unreadable("not valid YAML at line 3: x".into()),
        ];
        let (v, d) = verdict_of(&f, "firewall");
        assert_eq!(v, Verdict::Warn);
        assert!(
            d.starts_with(
                "the payload of machine 2 could not be read as YAML (not valid YAML at line 3: x)"
            ),
            "{d}"
        );
        f.firewall = vec![FirewallFacts::Read(FirewallRules {
            world_open: vec!["22/tcp".into()],
            enabled: true,
            other_firewalls: true,
        })];
        let (v, d) = verdict_of(&f, "firewall");
        assert_eq!(v, Verdict::Pass);
        assert!(
            d.ends_with("; rules not written with ufw (nft/iptables) are not read"),
            "{d}"
        );
        f.firewall = vec![rules(&["80/tcp"], false), rules(&["80/tcp"], false)];
        let (_, d) = verdict_of(&f, "firewall");
        assert!(d.starts_with("every payload never enables ufw"), "{d}");
        assert!(d.ends_with("80/tcp open to the world"), "{d}");
        let many: Vec<String> = (1..=30).map(|n| format!("{n}/tcp")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        f.firewall = vec![rules(&many, true)];
        let (_, d) = verdict_of(&f, "firewall");
        assert!(
            d.ends_with("12/tcp and 17 more open to the world (besides 22/tcp for ssh)"),
            "{d}"
        );
        f.firewall = vec![];
        assert_eq!(verdict_of(&f, "firewall").0, Verdict::Warn);
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
