//! HTML rendered from the fleet board once and shared: every viewer of the same board in the
//! same second, who may or may not add a fleet, is shown the same bytes, so the dashboard's
//! cards are rendered at most once a second for each (a profile of the dashboard under load
//! had rendering and its allocations as most of the time of every request). What is rendered
//! is the caller's: this module knows the board, not the page.

use std::sync::{Arc, Mutex, PoisonError};

use maud::PreEscaped;

use crate::domain::capacity::FleetNow;
use crate::domain::UnixMillis;

/// Rendered HTML shared between requests (inserted as it is, never copied).
pub type SharedHtml = PreEscaped<Arc<str>>;

/// The rendered HTML, one slot for viewers who may add a fleet and one for those who may not.
#[derive(Default)]
pub struct BoardHtml {
    slots: Mutex<[Option<Rendered>; 2]>,
}

struct Rendered {
    /// The board it shows, held so its address cannot be reused by a newer board.
    board: Arc<Vec<FleetNow>>,
    second: i64,
    html: Arc<str>,
}

impl BoardHtml {
    /// What `render` makes of `board` at `now`: the one rendered in the same second for the
    /// same board (the same `Arc`: a write or the board's ttl makes a new one) and the same
    /// `can_create`, else `render`'s answer now.
    pub fn get(
        &self,
        board: &Arc<Vec<FleetNow>>,
        now: UnixMillis,
        can_create: bool,
        render: impl FnOnce() -> String,
    ) -> SharedHtml {
        let second = now.div_euclid(1000);
        let slot = usize::from(can_create);
        let fresh = |r: &Rendered| Arc::ptr_eq(&r.board, board) && r.second == second;
        let kept = {
            let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots[slot]
                .as_ref()
                .filter(|r| fresh(r))
                .map(|r| r.html.clone())
        };
        let html = kept.unwrap_or_else(|| {
            // Rendered outside the lock: two requests in a new second may both render; the
            // second one's copy is kept, and they are the same.
            let html: Arc<str> = render().into();
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots[slot] = Some(Rendered {
                board: board.clone(),
                second,
                html: html.clone(),
            });
            html
        });
        PreEscaped(html)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn the_same_board_in_the_same_second_is_rendered_once_and_anything_else_again() {
        let cache = BoardHtml::default();
        let renders = Cell::new(0);
        let get = |board: &Arc<Vec<FleetNow>>, now: UnixMillis, can_create: bool| {
            cache
                .get(board, now, can_create, || {
                    renders.set(renders.get() + 1);
                    format!("{} at {now} for {can_create}", renders.get())
                })
                .0
                .to_string()
        };
        let board = Arc::new(Vec::new());
        assert_eq!(get(&board, 10_000, false), "1 at 10000 for false");
        // Within the second: the bytes rendered at its first request.
        assert_eq!(get(&board, 10_999, false), "1 at 10000 for false");
        // The other role, a new second, a new board (even an equal one): rendered afresh.
        assert_eq!(get(&board, 10_999, true), "2 at 10999 for true");
        assert_eq!(get(&board, 11_000, false), "3 at 11000 for false");
        let equal = Arc::new(Vec::new());
        assert_eq!(get(&equal, 11_000, false), "4 at 11000 for false");
        // Each role keeps its own.
        assert_eq!(get(&equal, 11_500, false), "4 at 11000 for false");
    }
}
