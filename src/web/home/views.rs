//! The overview page: the fleet dashboard (a card per fleet, refreshed through htmx), then who
//! you are and where to go next.

use maud::{html, Markup};

use crate::auth::Principal;
use crate::board_html::SharedHtml;
use crate::domain::capacity::{FleetNow, Health};
use crate::domain::{Role, UnixMillis};
use crate::web::fleets::capacity::{
    absorption_words, n_plus_k, requests_link, span_words, status_badge, status_words, when,
};
use crate::web::paths;

/// Seconds between two refreshes of the cards.
pub const REFRESH_SECS: u32 = 10;

/// Most status changes announced one by one; beyond, the announcement counts them.
const ANNOUNCE_MAX: usize = 5;

/// The dashboard: fleet cards (rendered by [`cards`]) and who is signed in, with links to what
/// their role reaches.
pub fn overview(principal: &Principal, cards: &SharedHtml) -> Markup {
    html! {
        h1 { "Overview" }
        section.card aria-labelledby="fleets-heading" {
            h2 #fleets-heading { "Fleets" }
            // Outside the swapped cards, so it persists and speaks only when a refresh puts a
            // status change in it.
            div #fleet-announcer.visually-hidden role="status" aria-live="polite" {}
            (cards)
        }
        section.card {
            h2 { "You" }
            p { "Signed in as " strong { (principal.username) } " with the " strong { (principal.role) } " role." }
            ul.plain {
                li { a href=(paths::AUDIT) { "Audit log" } " — every change, newest first, hash-chained and verifiable." }
                @if principal.role.includes(Role::Admin) {
                    li { a href=(paths::USERS) { "Users" } " — accounts and roles." }
                    li { a href=(paths::TOKENS) { "API tokens" } " — bearer tokens for automation." }
                }
                li { a href=(paths::ACCOUNT) { "Your account" } " — change your password." }
            }
        }
    }
}

/// The cards and their polling container (what `GET /dashboard/cards` answers, followed by
/// [`announcement`]). The container's `hx-get` carries the statuses it shows (`seen`), so the
/// next refresh can tell what changed without any state on the server. The same for every
/// viewer given the board, the second and whether they may add a fleet, so it is rendered once
/// for all of them (`board_html`).
pub fn cards(now: UnixMillis, board: &[FleetNow], can_create: bool) -> Markup {
    let poll = format!("{}?seen={}", paths::DASHBOARD_CARDS, seen_token(board));
    html! {
        div #fleet-cards data-live hx-get=(poll) hx-trigger={ "every " (REFRESH_SECS) "s" } hx-swap="outerHTML" {
            @if board.is_empty() {
                p.muted {
                    "No fleets yet. "
                    @if can_create { a href=(paths::FLEET_NEW) { "Add a fleet" } " to watch its headroom." }
                }
            } @else {
                ul.fleet-cards {
                    @for f in board { li { (card(now, f)) } }
                }
            }
        }
    }
}

/// `changes` (from [`status_changes`]) put into the live region out of band, and only when
/// non-empty, so nothing is re-announced.
pub fn announcement(changes: &[String]) -> Markup {
    html! {
        @if !changes.is_empty() {
            div #fleet-announcer hx-swap-oob="innerHTML" {
                p { @for c in changes { (c) " " } }
            }
        }
    }
}

fn card(now: UnixMillis, f: &FleetNow) -> Markup {
    let href = paths::fill(paths::FLEET, &[("name", &f.fleet)]);
    // The board carries counts, not the members list (that is read for the fleet page only);
    // no member seen reads as unknown, as an empty list did.
    let members = match (f.voters, f.learners) {
        (Some(v), Some(l)) if u64::from(v) + u64::from(l) > 0 => Some((v, l)),
        _ => None,
    };
    html! {
        article.fleet-card data-fleet=(f.fleet) data-status=(f.status.as_str()) {
            h3 { a id={ "card-" (f.fleet) } href=(href) { (f.fleet) } }
            p.card-headline {
                strong.nk { (n_plus_k(f.spare, f.required)) } " " (status_badge(f))
            }
            dl.card-facts {
                dt { "spare / required" } dd {
                    @match (f.spare, f.required) {
                        (Some(s), Some(r)) => { (s) " / " (r) }
                        _ => span.muted { "—" },
                    }
                }
                dt { "absorption" } dd { (absorption_words(f)) }
                dt { "leader" } dd {
                    @match &f.leader { Some(l) => code { (l) }, None => span.muted { "unknown" } }
                }
                dt { "members" } dd {
                    @match members {
                        None => span.muted { "unknown" },
                        Some((voters, learners)) => {
                            (u64::from(voters) + u64::from(learners)) " (" (voters) " voter" @if voters != 1 { "s" } ", " (learners) " learner" @if learners != 1 { "s" } ")"
                        }
                    }
                }
                dt { "last scrape" } dd { (when(now, f.last_scrape_at)) }
                @if let Some(e) = &f.last_error { dt { "error" } dd.error-text { (e) } }
                @if let Some(since) = f.deficit_since {
                    dt { "in deficit" } dd { strong { "for " (span_words(now - since)) } }
                }
                dt { "requests" } dd { (requests_link(&f.fleet, f.open_requests)) }
            }
        }
    }
}

fn letter(h: Health) -> char {
    match h {
        Health::Healthy => 'h',
        Health::Deficit => 'd',
        Health::Unknown => 'u',
        Health::Stale => 's',
        Health::Pending => 'p',
    }
}

fn from_letter(c: char) -> Option<Health> {
    match c {
        'h' => Some(Health::Healthy),
        'd' => Some(Health::Deficit),
        'u' => Some(Health::Unknown),
        's' => Some(Health::Stale),
        'p' => Some(Health::Pending),
        _ => None,
    }
}

/// FNV-1a over the fleet names in board order: tells whether a `seen` token describes the
/// same list of fleets (one letter per fleet keeps the token short for many fleets).
fn names_hash(board: &[FleetNow]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for f in board {
        for b in f.fleet.bytes().chain(std::iter::once(b'\n')) {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        }
    }
    h
}

/// The statuses a set of cards shows: `<names hash>.<one letter per fleet>`.
pub fn seen_token(board: &[FleetNow]) -> String {
    let letters: String = board.iter().map(|f| letter(f.status)).collect();
    format!("{:08x}.{letters}", names_hash(board))
}

/// What changed since the cards that sent `seen` were rendered, as sentences for the live
/// region. A missing or malformed token, or one from a different list of fleets, announces
/// nothing (a fleet added or removed is seen on the next look, not spoken).
pub fn status_changes(seen: Option<&str>, board: &[FleetNow]) -> Vec<String> {
    let Some((hash, letters)) = seen.and_then(|s| s.split_once('.')) else {
        return Vec::new();
    };
    if hash != format!("{:08x}", names_hash(board)) || letters.chars().count() != board.len() {
        return Vec::new();
    }
    let changed: Vec<(&FleetNow, Health)> = board
        .iter()
        .zip(letters.chars())
        .filter_map(|(f, c)| {
            from_letter(c)
                .filter(|was| *was != f.status)
                .map(|was| (f, was))
        })
        .collect();
    if changed.len() > ANNOUNCE_MAX {
        let deficits = board.iter().filter(|f| f.status == Health::Deficit).count();
        return vec![format!(
            "{} fleets changed status; {deficits} in deficit now.",
            changed.len()
        )];
    }
    changed
        .into_iter()
        .map(|(f, was)| {
            format!(
                "{} is now {} (was {}), {}.",
                f.fleet,
                status_words(f),
                was.as_str(),
                n_plus_k(f.spare, f.required)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::capacity::Source;

    fn fleet(name: &str, status: Health) -> FleetNow {
        FleetNow {
            fleet: name.into(),
            status,
            pending: None,
            n_plus: Some(1),
            spare: Some(1),
            required: Some(2),
            source: Source::Native,
            leader_id: None,
            leader: None,
            members: vec![],
            voters: None,
            learners: None,
            last_scrape_at: None,
            last_ok_at: None,
            last_error: None,
            latency_ms: None,
            deficit_since: None,
            open_requests: 0,
            scrape_interval_secs: 15,
            absorption: None,
        }
    }

    #[test]
    fn only_changed_statuses_are_announced() {
        let before = [fleet("a", Health::Healthy), fleet("b", Health::Healthy)];
        let token = seen_token(&before);
        assert!(status_changes(Some(&token), &before).is_empty());
        let after = [fleet("a", Health::Healthy), fleet("b", Health::Deficit)];
        assert_eq!(
            status_changes(Some(&token), &after),
            ["b is now deficit (was healthy), N+1 of N+2 required."]
        );
    }

    #[test]
    fn a_foreign_or_broken_token_announces_nothing() {
        let board = [fleet("a", Health::Deficit)];
        for bad in ["", "zz", "00000000.d", "garbage.h", ".", "x.hh"] {
            assert!(status_changes(Some(bad), &board).is_empty(), "{bad}");
        }
        let other = seen_token(&[fleet("b", Health::Healthy)]);
        assert!(status_changes(Some(&other), &board).is_empty());
        assert!(status_changes(None, &board).is_empty());
    }

    #[test]
    fn many_changes_are_counted_not_listed() {
        let before: Vec<FleetNow> = (0..8)
            .map(|i| fleet(&format!("f{i}"), Health::Healthy))
            .collect();
        let token = seen_token(&before);
        let after: Vec<FleetNow> = (0..8)
            .map(|i| fleet(&format!("f{i}"), Health::Deficit))
            .collect();
        assert_eq!(
            status_changes(Some(&token), &after),
            ["8 fleets changed status; 8 in deficit now."]
        );
    }

    #[test]
    fn the_cards_poll_with_their_token_and_announce_out_of_band_only_on_change() {
        let board = [fleet("a<b", Health::Deficit)];
        let quiet = cards(0, &board, false).into_string();
        assert!(quiet.contains(&format!(
            "hx-get=\"/dashboard/cards?seen={}\"",
            seen_token(&board)
        )));
        assert!(quiet.contains("hx-trigger=\"every 10s\""));
        assert!(!quiet.contains("hx-swap-oob"));
        assert!(quiet.contains("a&lt;b"), "{quiet}");
        assert_eq!(announcement(&[]).into_string(), "");
        let loud = announcement(&["x changed".into()]).into_string();
        assert!(loud.contains("hx-swap-oob=\"innerHTML\""));
    }
}
