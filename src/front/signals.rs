//! Signals, for the terminal front ends: Ctrl-C, SIGTERM, SIGHUP, SIGQUIT (Ctrl-\) and SIGTSTP
//! (Ctrl-Z) become a cancel of the turn that is running, so that it can stop its engine and
//! record what arrived. A second Ctrl-C stops the engine without the grace period.
//!
//! Ctrl-Z is a cancel too, not a suspension: the engine runs in a process group of its own, which
//! the terminal's job control does not reach, so suspending cca alone would leave the engine
//! running behind it (or, stopped with it, waiting for a `fg` that may never come).
//!
//! From the first [`listen`] (or [`route_to`]) on, these signals no longer act on cca directly.
//! While no turn is routed (at the chat prompt): SIGTERM, SIGHUP and SIGQUIT end cca by that
//! signal, as they would have, once the terminal's modes are put back (a line editor may hold it
//! in raw mode); SIGTSTP suspends cca as usual, since no engine runs; Ctrl-C is dropped (at the
//! prompt the line editor reads it as a key).
//!
//! That suspension happens inside the signal handler, before the `kill` that sent it returns: the
//! line editor sends SIGTSTP itself on Ctrl-Z, then takes the terminal back and redraws its
//! prompt, which must happen after `fg`, not just before the stop.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGTSTP};

use crate::run::{Cancel, Stop};

/// The cancel of the running turn, if one runs.
static ROUTE: Mutex<Option<Cancel>> = Mutex::new(None);
static INSTALLED: Mutex<bool> = Mutex::new(false);
/// No turn is routed: SIGTSTP suspends cca at once (see the module's note).
static UNROUTED: AtomicBool = AtomicBool::new(true);

/// Takes over the signals now, before any turn runs (a chat, from its start).
pub(crate) fn listen() -> Result<()> {
    install()
}

/// Sends the process's signals to `cancel` until the returned guard is dropped.
pub(crate) fn route_to(cancel: &Cancel) -> Result<Route> {
    install()?;
    *ROUTE.lock().unwrap_or_else(|e| e.into_inner()) = Some(cancel.clone());
    UNROUTED.store(false, Ordering::SeqCst);
    Ok(Route(()))
}

/// While it lives, signals go to one turn's cancel.
pub(crate) struct Route(());

impl Drop for Route {
    fn drop(&mut self) {
        *ROUTE.lock().unwrap_or_else(|e| e.into_inner()) = None;
        UNROUTED.store(true, Ordering::SeqCst);
    }
}

fn install() -> Result<()> {
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if *installed {
        return Ok(());
    }
    // The terminal's modes as they are before any line editor changes them.
    let stdin = std::io::stdin();
    let modes = stdin.is_terminal().then(|| rustix::termios::tcgetattr(&stdin).ok()).flatten();
    signal_hook::flag::register_conditional_default(SIGTSTP, &UNROUTED)
        .context("cannot install signal handlers")?;
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP])
            .context("cannot install signal handlers")?;
    std::thread::spawn(move || {
        for signal in signals.forever() {
            let route = ROUTE.lock().unwrap_or_else(|e| e.into_inner());
            match route.as_ref() {
                Some(cancel) => {
                    // Once stopping, only another Ctrl-C (impatience) hurries it.
                    if cancel.requested().is_none() || signal == SIGINT {
                        cancel.stop(Stop::Signal(signal));
                    }
                }
                // Ctrl-C is the line editor's key; SIGTSTP was done in the handler.
                None if signal == SIGINT || signal == SIGTSTP => {}
                None => {
                    if let Some(modes) = &modes {
                        let _ = rustix::termios::tcsetattr(
                            std::io::stdin(),
                            rustix::termios::OptionalActions::Now,
                            modes,
                        );
                    }
                    // What the signal would have done: end cca.
                    let _ = signal_hook::low_level::emulate_default_handler(signal);
                }
            }
        }
    });
    *installed = true;
    Ok(())
}
