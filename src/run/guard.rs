//! The guard: what keeps an engine (or git, for `cca sync`) from outliving cca, even when cca
//! is killed (SIGKILL gives it no chance to stop anything).
//!
//! The process cca starts is the guard, first of the engine's process group; the engine is its
//! child, forked from it. The system sends the guard SIGUSR1 when the thread of cca that
//! started it ends (Linux's parent-death signal, which survives nothing cca does), and the
//! guard then kills the whole group: the engine and whatever the engine started (gemini
//! restarts itself as a child process). Otherwise it waits for the engine and ends as the
//! engine did, with its exit code or by its signal; the signals cca sends the group to stop a
//! turn reach the engine and leave the guard waiting for it.
//!
//! The guard is forked from cca rather than started as a program: starting a second cca
//! process for each turn was most of cca's own share of a turn (BENCHMARKS.md, "Where a turn's
//! milliseconds go"). So it runs between `fork` and `exec`, in a copy of a process whose other
//! threads are gone, and makes only async-signal-safe system calls: no allocation, no lock,
//! nothing printed.

use std::io;
use std::process::Command;

/// Makes the process `command` starts a guard, and the program the guard's child.
pub(super) fn guard(command: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id();
        // SAFETY: `become_guard` runs in the forked child and makes only async-signal-safe
        // system calls (see the module's comment).
        unsafe {
            command.pre_exec(move || become_guard(parent));
        }
    }
    // Elsewhere there is no parent-death signal: the program is started as it is.
    #[cfg(not(target_os = "linux"))]
    let _ = command;
}

/// In the child `Command` forked (its pipes, folder and process group set): forks the engine,
/// which returns to `exec` the program, while this process stays as the guard and never
/// returns. `parent` is cca's process id.
#[cfg(target_os = "linux")]
fn become_guard(parent: u32) -> io::Result<()> {
    use libc::{SIG_BLOCK, SIG_SETMASK, SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGUSR1};
    // SAFETY: plain system calls on values of this stack; see the module's comment.
    unsafe {
        // What the guard waits for is blocked before the fork, so that nothing is lost between.
        let mut waited: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut waited);
        for signal in [SIGCHLD, SIGUSR1, SIGTERM, SIGINT, SIGHUP] {
            libc::sigaddset(&mut waited, signal);
        }
        let mut before: libc::sigset_t = std::mem::zeroed();
        libc::sigprocmask(SIG_BLOCK, &waited, &mut before);
        let engine = libc::fork();
        if engine < 0 {
            return Err(io::Error::last_os_error());
        }
        if engine == 0 {
            libc::sigprocmask(SIG_SETMASK, &before, std::ptr::null_mut());
            return Ok(());
        }
        libc::prctl(libc::PR_SET_PDEATHSIG, SIGUSR1 as libc::c_ulong);
        // Nothing of cca's is kept open here: not its locks (a lock held by a copy of its
        // descriptor would outlive it), not the pipe by which `spawn` learns whether the
        // program started, not the engine's own pipes.
        // (Before Linux 5.9 there is no `close_range`: one by one, as far as the limit says;
        // `spawn` would otherwise wait on its pipe for as long as the engine runs.)
        if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
            let mut limit: libc::rlimit = std::mem::zeroed();
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
            for fd in 0..limit.rlim_cur.min(1 << 20) as libc::c_int {
                libc::close(fd);
            }
        }
        // cca may have ended before the death signal was asked for: then nothing tells.
        if libc::getppid() as u32 != parent {
            libc::kill(0, libc::SIGKILL);
        }
        loop {
            match libc::sigwaitinfo(&waited, std::ptr::null_mut()) {
                // The whole group, this process too.
                SIGUSR1 => {
                    libc::kill(0, libc::SIGKILL);
                }
                SIGCHLD => {
                    let mut status = 0;
                    if libc::waitpid(engine, &mut status, libc::WNOHANG) == engine {
                        end_as(status);
                    }
                }
                // SIGTERM, SIGINT, SIGHUP are for the engine, which got them too.
                _ => {}
            }
        }
    }
}

/// Ends this process as the engine ended (`status`, from `waitpid`).
#[cfg(target_os = "linux")]
unsafe fn end_as(status: libc::c_int) -> ! {
    // SAFETY: as `become_guard`.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            libc::signal(signal, libc::SIG_DFL);
            let mut only: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut only);
            libc::sigaddset(&mut only, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 1 })
    }
}
