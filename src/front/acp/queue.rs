//! The prompts of one session in the order they arrived (see [`PromptQueue`]).

use super::*;

/// The prompts of one session, in the order they arrived: a prompt sent while another is
/// answered is a turn of its own, asked once every prompt before it has its answer. (The
/// session lock alone would not do: its waiters are not served in order.)
#[derive(Default)]
pub(super) struct PromptQueue {
    /// Prompts in line, and whether each is answered already (it leaves once its response is
    /// out).
    waiting: Mutex<VecDeque<(u64, bool)>>,
    moved: Condvar,
}

impl PromptQueue {
    pub(super) fn waiting(&self) -> MutexGuard<'_, VecDeque<(u64, bool)>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a place at the end of the line; returns how many prompts are ahead and not yet
    /// answered (one whose response is on its way is not worth a word of waiting).
    pub(super) fn join(&self, turn: u64) -> usize {
        let mut waiting = self.waiting();
        let ahead = waiting.iter().filter(|(_, answered)| !answered).count();
        waiting.push_back((turn, false));
        ahead
    }

    /// `turn` has its answer; its response goes out next.
    pub(super) fn answered(&self, turn: u64) {
        for (t, answered) in self.waiting().iter_mut() {
            if *t == turn {
                *answered = true;
            }
        }
    }

    /// Waits until `turn` is first in line, or its prompt is cancelled (`false`: it leaves).
    pub(super) fn wait(&self, turn: u64, cancel: &Cancel) -> bool {
        let mut waiting = self.waiting();
        loop {
            if cancel.requested().is_some() {
                return false;
            }
            if waiting.front().map(|(t, _)| *t) == Some(turn) {
                return true;
            }
            // A cancel does not signal the line; it is seen within this period.
            waiting = self
                .moved
                .wait_timeout(waiting, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// `turn` leaves the line, answered or cancelled; the next one goes.
    pub(super) fn leave(&self, turn: u64) {
        self.waiting().retain(|(t, _)| *t != turn);
        self.moved.notify_all();
    }
}
