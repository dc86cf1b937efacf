//! Signals, for the terminal front ends: Ctrl-C, SIGTERM and SIGHUP become a cancel of the turn
//! that is running, so that it can stop its engine and record what arrived. A second Ctrl-C
//! stops the engine without the grace period.
//!
//! From the first [`route_to`] on, these signals no longer kill cca; while no turn is routed
//! (between turns of a chat) they are dropped.

use std::sync::Mutex;

use anyhow::{Context, Result};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::run::{Cancel, Stop};

/// The cancel of the running turn, if one runs.
static ROUTE: Mutex<Option<Cancel>> = Mutex::new(None);
static INSTALLED: Mutex<bool> = Mutex::new(false);

/// Sends the process's signals to `cancel` until the returned guard is dropped.
pub fn route_to(cancel: &Cancel) -> Result<Route> {
    install()?;
    *ROUTE.lock().unwrap_or_else(|e| e.into_inner()) = Some(cancel.clone());
    Ok(Route(()))
}

/// While it lives, signals go to one turn's cancel.
pub struct Route(());

impl Drop for Route {
    fn drop(&mut self) {
        *ROUTE.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

fn install() -> Result<()> {
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if *installed {
        return Ok(());
    }
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .context("cannot install signal handlers")?;
    std::thread::spawn(move || {
        for signal in signals.forever() {
            let route = ROUTE.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(cancel) = route.as_ref()
                // Once stopping, only another Ctrl-C (impatience) hurries it.
                && (cancel.requested().is_none() || signal == SIGINT)
            {
                cancel.stop(Stop::Signal(signal));
            }
        }
    });
    *installed = true;
    Ok(())
}
