//! A benchmark's goals: each is printed as met or missed, and a bench that missed any exits
//! non-zero, so a regression fails the run instead of scrolling past as a figure.

/// The goals a bench has checked so far.
#[derive(Default)]
pub struct Goals {
    missed: Vec<String>,
}

impl Goals {
    /// Records whether the goal `what` (with the figure it was judged on) is met.
    pub fn check(&mut self, what: &str, met: bool) {
        println!("goal {what}: {}", if met { "met" } else { "MISSED" });
        if !met {
            self.missed.push(what.to_owned());
        }
    }

    /// Exits with status 1 when a goal was missed.
    pub fn exit_if_missed(self) {
        if self.missed.is_empty() {
            return;
        }
        eprintln!("{} goal(s) missed:", self.missed.len());
        for what in &self.missed {
            eprintln!("  {what}");
        }
        std::process::exit(1);
    }
}
