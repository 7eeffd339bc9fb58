//! The firewall a payload sets up, as far as its ufw commands say: which ports its `runcmd` and
//! `bootcmd` open to the world, and whether it enables ufw at all. Pure and total: any text
//! gives an answer (unreadable YAML is one), never a panic.
//!
//! The document is walked as parser events, never built: a payload stored before validation
//! grew its depth limit, or any other text, costs one pass and a small stack.

use yaml_rust2::parser::{Event, Parser};

use crate::domain::plan_check::{FirewallFacts, FirewallRules};

/// A command as cloud-init runs it: a string goes to `sh -c`, a list is the argv itself.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Command {
    Shell(String),
    Argv(Vec<String>),
}

/// What a payload's firewall rules open to the world.
pub fn read(payload: &str) -> FirewallFacts {
    match commands(payload) {
        Ok(commands) => FirewallFacts::Read(rules_of(&commands)),
        Err(why) => FirewallFacts::Unreadable(why),
    }
}

/// Where a node sits, as far as finding commands needs.
enum Frame {
    /// A mapping; `top` for a document's root. Nodes alternate key, value.
    Map {
        top: bool,
        expecting_key: bool,
        key: Option<String>,
    },
    /// A sequence that is not a command list.
    Seq,
    /// The value of a top-level `runcmd` or `bootcmd`.
    Commands,
    /// One command written as a list of words.
    Argv(Vec<String>),
}

/// The keys cloud-init runs commands from.
const COMMAND_KEYS: [&str; 2] = ["runcmd", "bootcmd"];

/// Every `runcmd`/`bootcmd` item, in document order.
fn commands(payload: &str) -> Result<Vec<Command>, String> {
    let mut parser = Parser::new_from_str(payload);
    let mut stack: Vec<Frame> = Vec::new();
    let mut out = Vec::new();
    let mut saw_mapping = false;
    loop {
        let (event, _) = parser
            .next_token()
            .map_err(|e| format!("not valid YAML at line {}: {}", e.marker().line(), e.info()))?;
        match event {
            Event::StreamEnd => break,
            Event::Scalar(value, ..) => {
                match stack.last_mut() {
                    Some(Frame::Commands) => out.push(Command::Shell(value.clone())),
                    Some(Frame::Argv(words)) => words.push(value.clone()),
                    None => return Err(not_a_mapping()),
                    _ => {}
                }
                completed(&mut stack, Some(value));
            }
            Event::Alias(_) => completed(&mut stack, None),
            Event::SequenceStart(..) => {
                let frame = match stack.last() {
                    None => return Err(not_a_mapping()),
                    Some(Frame::Map {
                        top: true,
                        expecting_key: false,
                        key: Some(k),
                    }) if COMMAND_KEYS.contains(&k.as_str()) => Frame::Commands,
                    Some(Frame::Commands) => Frame::Argv(Vec::new()),
                    _ => Frame::Seq,
                };
                stack.push(frame);
            }
            Event::MappingStart(..) => {
                let top = stack.is_empty();
                saw_mapping |= top;
                stack.push(Frame::Map {
                    top,
                    expecting_key: true,
                    key: None,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some(Frame::Argv(words)) = stack.pop() {
                    out.push(Command::Argv(words));
                }
                completed(&mut stack, None);
            }
            Event::Nothing | Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => {}
        }
    }
    if saw_mapping {
        Ok(out)
    } else {
        Err(not_a_mapping())
    }
}

fn not_a_mapping() -> String {
    "not a cloud-config mapping".to_owned()
}

/// A node inside the top frame is complete: a mapping's next node is the other of key/value.
fn completed(stack: &mut [Frame], scalar: Option<String>) {
    if let Some(Frame::Map {
        expecting_key, key, ..
    }) = stack.last_mut()
    {
        if *expecting_key {
            *key = scalar;
        }
        *expecting_key = !*expecting_key;
    }
}

/// Programs whose rules this reader does not follow.
const OTHER_FIREWALLS: [&str; 8] = [
    "nft",
    "iptables",
    "ip6tables",
    "iptables-restore",
    "ip6tables-restore",
    "iptables-nft",
    "iptables-legacy",
    "firewall-cmd",
];

/// Shells whose `-c` script is read as commands too.
const SHELLS: [&str; 4] = ["sh", "bash", "dash", "zsh"];

/// How deep `sh -c "bash -c '…'"` is followed.
const SHELL_DEPTH_MAX: usize = 4;

fn rules_of(commands: &[Command]) -> FirewallRules {
    let mut state = Ufw::default();
    for c in commands {
        match c {
            Command::Shell(script) => state.script(script, 0),
            Command::Argv(words) => state.simple(words, 0),
        }
    }
    FirewallRules {
        world_open: state.open,
        enabled: state.enabled,
        other_firewalls: state.other_firewalls,
    }
}

/// What the commands did to ufw so far.
#[derive(Default)]
struct Ufw {
    open: Vec<String>,
    /// `open` as a set: a hostile payload may list thousands of ports in one rule.
    seen: std::collections::HashSet<String>,
    enabled: bool,
    other_firewalls: bool,
}

impl Ufw {
    fn script(&mut self, script: &str, depth: usize) {
        for words in shell_commands(script) {
            self.simple(&words, depth);
        }
    }

    /// One simple command: its words, after `sudo`, `env` and `VAR=value` prefixes.
    fn simple(&mut self, words: &[String], depth: usize) {
        let mut rest = words;
        while let Some((first, tail)) = rest.split_first() {
            let assignment = first
                .split_once('=')
                .is_some_and(|(name, _)| is_variable_name(name));
            if first == "sudo"
                || first == "env"
                || first == "command"
                || first == "exec"
                || assignment
            {
                rest = tail;
            } else {
                break;
            }
        }
        let Some((program, args)) = rest.split_first() else {
            return;
        };
        let program = program.rsplit('/').next().unwrap_or(program);
        if program == "ufw" {
            self.ufw(args);
        } else if OTHER_FIREWALLS.contains(&program) {
            self.other_firewalls = true;
        } else if SHELLS.contains(&program) && depth < SHELL_DEPTH_MAX {
            if let Some(i) = args.iter().position(|a| a == "-c") {
                if let Some(script) = args.get(i + 1) {
                    self.script(script, depth + 1);
                }
            }
        }
    }

    fn ufw(&mut self, args: &[String]) {
        if args.iter().any(|a| a == "--dry-run") {
            return; // Changes nothing.
        }
        let args: Vec<&str> = args
            .iter()
            .map(String::as_str)
            .filter(|a| !a.starts_with("--"))
            .collect();
        match args.as_slice() {
            ["enable", ..] => self.enabled = true,
            ["disable", ..] => self.enabled = false,
            ["reset", ..] => {
                self.enabled = false;
                self.open.clear();
                self.seen.clear();
            }
            ["default", "allow"] | ["default", "allow", "incoming", ..] => {
                self.add(vec![EVERY_PORT.to_owned()]);
            }
            ["default", "deny" | "reject", ..] => self.remove(&[EVERY_PORT.to_owned()]),
            ["allow" | "limit", rule @ ..]
            | ["insert", _, "allow" | "limit", rule @ ..]
            | ["prepend", "allow" | "limit", rule @ ..] => {
                if let Some(ports) = world_open(rule) {
                    self.add(ports);
                }
            }
            ["delete", "allow" | "limit", rule @ ..] => {
                if let Some(ports) = world_open(rule) {
                    self.remove(&ports);
                }
            }
            // `route` rules forward traffic through the machine, `deny`/`reject` close; the
            // rest (status, logging, app info, …) changes no rule.
            _ => {}
        }
    }

    fn add(&mut self, ports: Vec<String>) {
        for p in ports {
            if self.seen.insert(p.clone()) {
                self.open.push(p);
            }
        }
    }

    fn remove(&mut self, ports: &[String]) {
        let gone: std::collections::HashSet<&String> = ports.iter().collect();
        self.open.retain(|p| !gone.contains(p));
        self.seen.retain(|p| !gone.contains(p));
    }
}

/// What `ufw default allow incoming` (or an allow naming no port) opens.
pub const EVERY_PORT: &str = "every port";

fn is_variable_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Sources that mean anyone.
fn is_anywhere(addr: &str) -> bool {
    matches!(addr, "any" | "0.0.0.0/0" | "::/0")
}

/// The ports an allow rule (the words after `allow`/`limit`) opens to the world: `None` when
/// it is outgoing, names a source other than anywhere, or names an interface.
fn world_open(rule: &[&str]) -> Option<Vec<String>> {
    let mut words = rule;
    if words.is_empty() {
        return None; // ufw refuses a bare `allow`.
    }
    match words.first() {
        Some(&"out") => return None,
        Some(&"in") => words = &words[1..],
        _ => {}
    }
    if let Some(&("log" | "log-all")) = words.first() {
        words = &words[1..];
    }
    if words.first() == Some(&"on") {
        return None;
    }
    // The simple form: one port, range, list or service, maybe with a comment.
    if let Some(spec) = words.first().filter(|w| !KEYWORDS.contains(*w)) {
        return Some(ports_of(spec, None));
    }
    let (mut proto, mut to_port, mut app) = (None, None, None);
    let mut last_address = "";
    let mut i = 0;
    while i < words.len() {
        let next = words.get(i + 1).copied();
        match words[i] {
            "proto" => proto = next,
            "from" => {
                let addr = next.unwrap_or("any");
                if !is_anywhere(addr) {
                    return None;
                }
                last_address = "from";
            }
            "to" => last_address = "to",
            "port" if last_address == "to" => to_port = next,
            "app" if last_address == "to" => app = next,
            "on" => return None,
            "comment" | "port" | "app" => {}
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    Some(match (to_port, app) {
        (Some(spec), _) => ports_of(spec, proto),
        (None, Some(name)) => ports_of(name, None),
        (None, None) => vec![EVERY_PORT.to_owned()],
    })
}

/// The words that start ufw's full rule syntax.
const KEYWORDS: [&str; 7] = ["proto", "from", "to", "port", "app", "comment", "on"];

/// `22/tcp`, `80,443/tcp`, `6000:6007/udp`, `53`, `ssh`, `OpenSSH` as one label per port
/// (no protocol means both, as ufw reads it).
fn ports_of(spec: &str, proto: Option<&str>) -> Vec<String> {
    let (ports, own_proto) = match spec.split_once('/') {
        Some((p, proto)) => (p, Some(proto)),
        None => (spec, None),
    };
    let proto = own_proto.or(proto);
    ports
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match (known_service(p), proto) {
            (Some(port), _) => port.to_owned(),
            (None, Some(proto)) => format!("{p}/{proto}"),
            (None, None) => p.to_owned(),
        })
        .collect()
}

/// Services and app profiles ufw resolves to one tcp port.
fn known_service(name: &str) -> Option<&'static str> {
    match name {
        "ssh" | "OpenSSH" => Some("22/tcp"),
        "http" | "WWW" => Some("80/tcp"),
        "https" | "WWW Secure" => Some("443/tcp"),
        _ => None,
    }
}

/// A shell script's simple commands as words: split at `;`, `&`, `|` and newlines outside
/// quotes, quotes removed, `#` comments dropped. Enough for firewall commands; no expansion.
fn shell_commands(script: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = script.chars();
    let end_word = |words: &mut Vec<String>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                word.push(n);
                            }
                        }
                        _ => word.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    if n != '\n' {
                        word.push(n);
                    }
                }
            }
            '#' if !in_word => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        break;
                    }
                }
                end_word(&mut words, &mut word, &mut in_word);
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            ';' | '&' | '|' | '\n' | '(' | ')' | '`' => {
                end_word(&mut words, &mut word, &mut in_word);
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            c if c.is_whitespace() => end_word(&mut words, &mut word, &mut in_word),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut words, &mut word, &mut in_word);
    if !words.is_empty() {
        commands.push(words);
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rules(payload: &str) -> FirewallRules {
        match read(payload) {
            FirewallFacts::Read(r) => r,
            FirewallFacts::Unreadable(why) => panic!("unreadable: {why}\n{payload}"),
        }
    }

    fn open_in(runcmd: &str) -> Vec<String> {
        rules(&format!("#cloud-config\nruncmd:\n{runcmd}")).world_open
    }

    #[test]
    fn the_default_template_without_a_mesh_key_opens_7443_80_and_443_besides_ssh() {
        let r = rules(include_str!("../../tests/golden/yubaba-node.sample.yaml"));
        assert_eq!(r.world_open, ["22/tcp", "7443/tcp", "80/tcp", "443/tcp"]);
        assert!(r.enabled);
        assert!(!r.other_firewalls);
    }

    #[test]
    fn the_default_template_with_a_mesh_key_opens_only_ssh_and_7443_on_the_mesh() {
        let r = rules(include_str!(
            "../../tests/golden/yubaba-node.sample-mesh.yaml"
        ));
        assert_eq!(r.world_open, ["22/tcp"]);
        assert!(r.enabled);
    }

    #[test]
    fn sources_and_interfaces_restrict_while_any_and_full_syntax_ports_do_not() {
        for restricted in [
            "  - ufw allow from 10.0.0.0/8 to any port 22 proto tcp\n",
            "  - ufw allow in on tailscale0 to any port 7443 proto tcp\n",
            "  - ufw allow in on eth1\n",
            "  - ufw allow out 53\n",
            "  - ufw allow from 192.168.1.4\n",
            "  - ufw route allow 80/tcp\n",
            "  - ufw deny 80/tcp\n",
            "  - ufw --dry-run allow 80/tcp\n",
            "  - ufw allow 80/tcp\n  - ufw delete allow 80/tcp\n",
        ] {
            assert!(open_in(restricted).is_empty(), "{restricted}");
        }
        for (open, want) in [
            (
                "  - ufw allow from any to any port 80,443 proto tcp\n",
                vec!["80/tcp", "443/tcp"],
            ),
            (
                "  - ufw allow proto udp to any port 51820\n",
                vec!["51820/udp"],
            ),
            (
                "  - ufw allow from 0.0.0.0/0 to any port 8080\n",
                vec!["8080"],
            ),
            ("  - ufw limit ssh\n", vec!["22/tcp"]),
            ("  - ufw allow OpenSSH\n", vec!["22/tcp"]),
            (
                "  - ufw allow 6000:6007/udp comment 'x11'\n",
                vec!["6000:6007/udp"],
            ),
            ("  - ufw insert 1 allow 9100/tcp\n", vec!["9100/tcp"]),
            ("  - ufw allow in 53\n", vec!["53"]),
            ("  - ufw default allow incoming\n", vec![EVERY_PORT]),
            ("  - ufw allow from any\n", vec![EVERY_PORT]),
        ] {
            assert_eq!(open_in(open), want, "{open}");
        }
    }

    #[test]
    fn commands_may_be_lists_shell_lines_or_nested_shells_in_runcmd_or_bootcmd() {
        let payload = "#cloud-config\nbootcmd:\n  - [ufw, allow, 8443/tcp]\nruncmd:\n  - \"apt-get install -y ufw && sudo /usr/sbin/ufw allow '9000/tcp' ; ufw --force enable\"\n  - [sh, -c, \"bash -c 'ufw allow 2379/tcp'\"]\n  - |\n    # ufw allow 1/tcp is a comment\n    DEBIAN_FRONTEND=noninteractive ufw allow 3000\n";
        let r = rules(payload);
        assert_eq!(r.world_open, ["8443/tcp", "9000/tcp", "2379/tcp", "3000"]);
        assert!(r.enabled);
    }

    #[test]
    fn ufw_never_enabled_or_disabled_at_the_end_is_not_enabled() {
        assert!(!rules("#cloud-config\nruncmd:\n  - ufw allow 22/tcp\n").enabled);
        assert!(!rules("#cloud-config\nruncmd:\n  - ufw enable\n  - ufw disable\n").enabled);
        assert!(rules("#cloud-config\nruncmd:\n  - ufw enable\n").enabled);
        assert!(!rules("#cloud-config\npackages: [ufw]\n").enabled);
        // Only top-level runcmd/bootcmd run: a nested one is data.
        let nested = "#cloud-config\nwrite_files:\n  - path: /x\n    runcmd: [ufw enable]\n";
        assert!(!rules(nested).enabled);
    }

    #[test]
    fn other_firewall_tools_are_noticed_not_read() {
        let r = rules("#cloud-config\nruncmd:\n  - nft add rule inet filter input tcp dport 80 accept\n  - [iptables, -A, INPUT, -j, ACCEPT]\n");
        assert!(r.other_firewalls);
        assert!(r.world_open.is_empty());
        assert!(!rules("#cloud-config\nruncmd:\n  - echo nft\n").other_firewalls);
    }

    #[test]
    fn stand_ins_parse_as_scalars_and_text_that_is_not_a_mapping_is_unreadable() {
        let r = rules("#cloud-config\nruncmd:\n  - tailscale up --auth-key='«secret:mesh_preauth_key»'\n  - ufw allow 22/tcp\n");
        assert_eq!(r.world_open, ["22/tcp"]);
        for bad in [
            "",
            "#cloud-config\n",
            "just text",
            "- a\n- b\n",
            "runcmd: [\n",
            "a: b: c",
        ] {
            assert!(matches!(read(bad), FirewallFacts::Unreadable(_)), "{bad:?}");
        }
    }

    #[test]
    fn a_rule_listing_thousands_of_ports_is_read_once_each() {
        let ports: Vec<String> = (1..=6000).map(|p| p.to_string()).collect();
        let list = ports.join(",");
        let r = rules(&format!(
            "#cloud-config\nruncmd:\n  - ufw allow {list}/tcp\n  - ufw allow {list}/tcp\n"
        ));
        assert_eq!(r.world_open.len(), 6000);
        assert_eq!(r.world_open[5999], "6000/tcp");
    }

    fn restricted_rule() -> impl Strategy<Value = String> {
        let port = "[0-9]{1,5}(/(tcp|udp))?";
        prop_oneof![
            port.prop_map(|p| format!("ufw allow from 10.0.0.0/8 to any port {p}")),
            port.prop_map(|p| format!("ufw allow in on tailscale0 to any port {p}")),
            port.prop_map(|p| format!("ufw allow from 10.0.0.0/8 port {p}")),
            port.prop_map(|p| format!("sudo ufw allow in on tailscale0 {p}")),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn reading_never_panics_on_arbitrary_text(text in "\\PC*") {
            let _ = read(&text);
        }

        #[test]
        fn ports_are_listed_once_in_the_order_first_opened(ports in proptest::collection::vec(1u16..40, 0..60)) {
            let items: String = ports.iter().map(|p| format!("  - ufw allow {p}/tcp\n")).collect();
            let r = rules(&format!("#cloud-config\nruncmd:\n{items}"));
            let mut want: Vec<String> = Vec::new();
            for p in &ports {
                let p = format!("{p}/tcp");
                if !want.contains(&p) {
                    want.push(p);
                }
            }
            prop_assert_eq!(r.world_open, want);
        }

        #[test]
        fn reading_never_panics_on_yaml_like_text(
            text in "(#cloud-config\n)?((runcmd|bootcmd|[a-z]{1,5}): ?(\\[|\\{|-|\\||>|\"|'|&a|\\*a| |ufw|allow|[0-9]{1,3}|/|\n|  - |,)*\n?){0,8}"
        ) {
            let _ = read(&text);
        }

        #[test]
        fn a_rule_with_a_private_source_or_a_mesh_interface_is_never_world_open(
            rules_ in proptest::collection::vec(restricted_rule(), 1..6),
            as_list in any::<bool>(),
        ) {
            let items: String = rules_
                .iter()
                .map(|r| if as_list {
                    let words: Vec<String> = r.split(' ').map(|w| format!("'{w}'")).collect();
                    format!("  - [{}]\n", words.join(", "))
                } else {
                    format!("  - \"{r}\"\n")
                })
                .collect();
            let payload = format!("#cloud-config\nruncmd:\n{items}  - ufw --force enable\n");
            match read(&payload) {
                FirewallFacts::Read(r) => {
                    prop_assert!(r.world_open.is_empty(), "{:?}\n{}", r.world_open, payload);
                    prop_assert!(r.enabled);
                }
                FirewallFacts::Unreadable(why) => prop_assert!(false, "{why}\n{payload}"),
            }
        }
    }
}
