//! Leases: which instance does a piece of shared work (executes a request, scrapes a fleet,
//! runs a periodic job), and until when. Several instances on one database each take their
//! share once; one that dies has its work taken over when its lease runs out.
//!
//! An instance is known by its *name* (configured, unique among the instances, the same after
//! a restart) and, within one process, by its *holder* id: the name plus a boot id drawn at
//! start. A lease names its holder. Renewals compare the holder, so a process that lost its
//! lease (paused past its end, or replaced) cannot renew it by accident; a restarted instance
//! knows that an earlier boot of its own name is gone and takes that one's leases at once
//! instead of waiting them out.

use super::UnixMillis;

/// Separates an instance's name from its boot id in a holder id (so names may not hold it).
const BOOT_SEPARATOR: char = '#';
/// Longest instance name.
pub const NAME_MAX_CHARS: usize = 64;

/// A lease as stored: who holds it, and until when (exclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub holder: String,
    pub until: UnixMillis,
}

/// This process among the instances sharing a database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    name: String,
    holder: String,
}

impl Instance {
    /// Instance `name` (already checked by [`instance_name`]) in a boot identified by `boot`.
    pub fn new(name: &str, boot: &str) -> Self {
        Self {
            name: name.to_owned(),
            holder: format!("{name}{BOOT_SEPARATOR}{boot}"),
        }
    }

    /// The configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What this process writes into the leases it holds.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Whether `holder` is an earlier (or later) boot of this instance's name.
    fn same_name(&self, holder: &str) -> bool {
        holder
            .rsplit_once(BOOT_SEPARATOR)
            .is_some_and(|(name, _)| name == self.name)
    }
}

/// Whether `me` may take (or keep) a lease found as `seen` at `now`: a free lease, an expired
/// one, its own, or one held by an earlier boot of its own name (that process is gone: two
/// live processes never share a name).
pub fn may_take(seen: Option<&Held>, me: &Instance, now: UnixMillis) -> bool {
    match seen {
        None => true,
        Some(h) => h.until <= now || h.holder == me.holder || me.same_name(&h.holder),
    }
}

/// Whether `me` may resume work whose lease is `seen` at `now`, work it is not doing itself:
/// never leased, run out, or held by an earlier boot of its name — never its own live lease
/// (this very process is at that work, or gave it up by letting the lease end).
pub fn may_resume(seen: Option<&Held>, me: &Instance, now: UnixMillis) -> bool {
    match seen {
        Some(h) if h.holder == me.holder => h.until <= now,
        _ => may_take(seen, me, now),
    }
}

/// How far a server's clock, read as `server` between this machine's `before` and `after`,
/// is off this machine's at least: it read its clock somewhere within the round trip.
pub fn clock_skew(before: UnixMillis, server: UnixMillis, after: UnixMillis) -> i64 {
    if server < before {
        before - server
    } else if server > after {
        server - after
    } else {
        0
    }
}

/// The end of a lease taken or renewed at `now` for `ttl_ms`.
pub fn until(now: UnixMillis, ttl_ms: u64) -> UnixMillis {
    now.saturating_add(i64::try_from(ttl_ms).unwrap_or(i64::MAX))
}

/// Checks a configured instance name: 1–64 characters from ASCII letters, digits and `-._:`
/// (it is shown on pages and in logs, and `#` separates it from a boot id).
pub fn instance_name(raw: &str) -> Result<String, String> {
    let chars = raw.chars().count();
    if chars == 0 || chars > NAME_MAX_CHARS {
        return Err(format!(
            "must be 1–{NAME_MAX_CHARS} characters, not {chars}"
        ));
    }
    if let Some(c) = raw.chars().find(|c| !allowed(*c)) {
        return Err(format!(
            "may contain only ASCII letters, digits and - . _ : (found U+{:04X})",
            u32::from(c)
        ));
    }
    Ok(raw.to_owned())
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':')
}

/// The name an instance gets when none is configured: its host's name and its bind port, which
/// no two live instances share (a host binds a port once); with port 0 (chosen at bind), the
/// process id instead, so such an instance waits out its own earlier leases.
pub fn default_instance_name(host: &str, bind: &str) -> String {
    let port = bind
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok())
        .filter(|p| *p != 0);
    let host: String = host
        .chars()
        .filter(|c| allowed(*c) && *c != ':')
        .take(NAME_MAX_CHARS - 12)
        .collect();
    let host = if host.is_empty() {
        "headroom".into()
    } else {
        host
    };
    match port {
        Some(p) => format!("{host}:{p}"),
        None => format!("{host}:pid{}", std::process::id()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn held(holder: &str, until: UnixMillis) -> Held {
        Held {
            holder: holder.into(),
            until,
        }
    }

    #[test]
    fn a_live_lease_of_another_instance_is_left_alone_until_it_runs_out() {
        let me = Instance::new("b", "2");
        let theirs = held("a#1", 1_000);
        assert!(!may_take(Some(&theirs), &me, 999));
        assert!(may_take(Some(&theirs), &me, 1_000));
        assert!(may_take(None, &me, 0));
    }

    #[test]
    fn an_earlier_boot_of_the_same_name_is_taken_over_at_once() {
        let me = Instance::new("eu-1", "new");
        assert!(may_take(Some(&held("eu-1#old", i64::MAX)), &me, 0));
        // A name that merely starts like ours is another instance.
        assert!(!may_take(Some(&held("eu-10#x", i64::MAX)), &me, 0));
        assert!(!may_take(Some(&held("eu-1", i64::MAX)), &me, 0));
    }

    #[test]
    fn a_process_never_resumes_work_it_holds_a_live_lease_on() {
        let me = Instance::new("eu-1", "now");
        let mine = held(me.holder(), 1_000);
        assert!(may_take(Some(&mine), &me, 0));
        assert!(!may_resume(Some(&mine), &me, 999));
        assert!(may_resume(Some(&mine), &me, 1_000));
        assert!(may_resume(Some(&held("eu-1#before", 1_000)), &me, 0));
        assert!(!may_resume(Some(&held("eu-2#x", 1_000)), &me, 0));
        assert!(may_resume(None, &me, 0));
    }

    #[test]
    fn a_clock_is_off_by_no_more_than_it_can_be_shown_to_be() {
        assert_eq!(clock_skew(1_000, 1_005, 1_010), 0);
        assert_eq!(clock_skew(1_000, 4_000, 1_010), 2_990);
        assert_eq!(clock_skew(1_000, 0, 1_010), 1_000);
    }

    #[test]
    fn instance_names_name_the_rule_they_break() {
        assert_eq!(instance_name("eu-central-a").unwrap(), "eu-central-a");
        for (raw, rule) in [
            ("", "1–64 characters"),
            (&"x".repeat(65), "1–64 characters"),
            ("a b", "U+0020"),
            ("a\u{202e}b", "U+202E"),
            ("a\nb", "U+000A"),
            ("a#b", "U+0023"),
            ("é", "only ASCII letters"),
        ] {
            let err = instance_name(raw).unwrap_err();
            assert!(err.contains(rule), "{raw:?}: {err}");
        }
    }

    #[test]
    fn the_default_name_is_host_and_port_or_the_process_without_a_port() {
        assert_eq!(default_instance_name("web-1", "0.0.0.0:8080"), "web-1:8080");
        assert_eq!(default_instance_name("[::1]", "[::1]:9090"), "1:9090");
        let pid = format!("headroom:pid{}", std::process::id());
        assert_eq!(default_instance_name("", "127.0.0.1:0"), pid);
        assert!(instance_name(&default_instance_name(&"h".repeat(300), "a:1")).is_ok());
        assert!(instance_name(&default_instance_name("a#b\u{202e}", "a:1")).is_ok());
    }

    proptest! {
        /// Over any two instances and any stored lease: at most one of two *different* names
        /// may take a live lease, and a lease is never taken from a live holder of another
        /// name before its end.
        #[test]
        fn a_live_lease_has_one_taker_among_different_names(
            a in "[a-z0-9:.-]{1,12}",
            b in "[a-z0-9:.-]{1,12}",
            boot_a in "[a-f0-9]{1,8}",
            boot_b in "[a-f0-9]{1,8}",
            until in 0i64..1_000_000,
            now in 0i64..1_000_000,
        ) {
            prop_assume!(a != b);
            let (ia, ib) = (Instance::new(&a, &boot_a), Instance::new(&b, &boot_b));
            let lease = held(ia.holder(), until);
            if now < until {
                prop_assert!(!may_take(Some(&lease), &ib, now));
                prop_assert!(!may_resume(Some(&lease), &ib, now));
                prop_assert!(!may_resume(Some(&lease), &ia, now));
            }
            // Resuming is never allowed where taking is not.
            prop_assert!(!may_resume(Some(&lease), &ib, now) || may_take(Some(&lease), &ib, now));
            prop_assert!(may_take(Some(&lease), &ia, now));
            // Every default and every accepted name survives the holder round trip.
            prop_assert!(ia.same_name(ia.holder()));
            prop_assert!(!ib.same_name(ia.holder()));
        }
    }
}
