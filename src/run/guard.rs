//! The guard: what keeps an engine (or git, for `cca sync`) from outliving cca, even when cca
//! is killed (SIGKILL gives it no chance to stop anything).
//!
//! The guard is a process of cca's that leads a process group and only waits; the engine is
//! started into that group, as cca's own child. The system sends the guard SIGUSR1 when the
//! thread of cca that started it ends (Linux's parent-death signal, which survives nothing cca
//! does), and the guard then kills its whole group: the engine and whatever the engine
//! started (gemini restarts itself as a child process). Otherwise cca ends it once the engine
//! has exited and been waited for ([`Guard`]'s drop): until then the group's id, which is the
//! guard's process id, cannot be taken by another group, so the guard's kill and cca's own
//! signals to the group reach only the engine's processes.
//!
//! The guard shares cca's memory and descriptor table (`clone` with `CLONE_VM` and
//! `CLONE_FILES`) and runs on a small stack of its own: a forked copy of cca cost a turn about
//! a millisecond, its page tables copied and every page cca wrote while it lived copied again
//! (BENCHMARKS.md, "Where a turn's milliseconds go"), and a copy of the descriptors would hold
//! cca's locks and pipes. Sharing makes its code strict: it touches only its own stack, every
//! signal is blocked in it from its first instruction (none of cca's handlers may run there),
//! and it makes its five system calls directly, without the C library, whose wrappers would
//! write `errno` in the thread-local storage of the thread that started it.

use std::io;

/// A running guard, leading the process group it was started with. Dropping it kills it and
/// waits for it; drop it once the processes it guards were waited for.
pub(crate) struct Guard {
    pid: libc::pid_t,
    /// The guard's stack, unmapped once it has ended.
    stack: usize,
}

impl Guard {
    /// The process group of `child`, started in [`Guard::group`].
    pub(crate) fn group_of(&self, child: &std::process::Child) -> rustix::process::Pid {
        rustix::process::Pid::from_raw(self.group())
            .unwrap_or_else(|| rustix::process::Pid::from_child(child))
    }
}

/// The guard's stack: its code is a few calls deep and keeps nothing.
const STACK: usize = 64 * 1024;

#[cfg(target_os = "linux")]
impl Guard {
    /// Starts a guard in a process group of its own.
    pub(crate) fn start() -> io::Result<Guard> {
        // SAFETY: the stack is fresh memory only the guard uses, unmapped after it has ended;
        // `guarding` keeps to the rules of the module's comment.
        unsafe {
            let stack = libc::mmap(
                std::ptr::null_mut(),
                STACK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if stack == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut before: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut before);
            let parent = libc::getpid() as usize;
            let pid = libc::clone(
                guarding,
                stack.cast::<u8>().add(STACK).cast(),
                libc::CLONE_VM | libc::CLONE_FILES | libc::SIGCHLD,
                parent as *mut libc::c_void,
            );
            let error = io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
            if pid < 0 {
                libc::munmap(stack, STACK);
                return Err(error);
            }
            let guard = Guard { pid, stack: stack as usize };
            if libc::setpgid(pid, pid) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(guard)
        }
    }

    /// The process group it leads, to start the guarded program in.
    pub(crate) fn group(&self) -> i32 {
        self.pid
    }
}

#[cfg(target_os = "linux")]
impl Drop for Guard {
    fn drop(&mut self) {
        // SAFETY: the guard is this process's child, waited for here and nowhere else; its
        // stack is unmapped only once it has ended.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            while libc::waitpid(self.pid, std::ptr::null_mut(), 0) < 0
                && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
            {}
            libc::munmap(self.stack as *mut libc::c_void, STACK);
        }
    }
}

#[cfg(target_os = "linux")]
/// The guard's code, on its own stack: asks for SIGUSR1 when cca's thread ends, and kills its
/// group, itself included, when that comes (or when cca ended before it could ask).
extern "C" fn guarding(parent: *mut libc::c_void) -> libc::c_int {
    // The kernel's signal set: one bit a signal.
    let death: u64 = 1 << (libc::SIGUSR1 - 1);
    // SAFETY: system calls on values of this stack (see the module's comment). None of them
    // can fail here, so none would have written `errno` even through the C library.
    unsafe {
        // Its own group before anything is killed: until `start` has moved it, it is in cca's,
        // with whatever else the shell runs there (`cca ... | less`). Both set it, so that
        // neither waits for the other.
        syscall(libc::SYS_setpgid, 0, 0, 0, 0);
        syscall(libc::SYS_prctl, libc::PR_SET_PDEATHSIG as usize, libc::SIGUSR1 as usize, 0, 0);
        if syscall(libc::SYS_getppid, 0, 0, 0, 0) as usize != parent as usize {
            syscall(libc::SYS_kill, 0, libc::SIGKILL as usize, 0, 0);
        }
        loop {
            let signal = syscall(
                libc::SYS_rt_sigtimedwait,
                &death as *const u64 as usize,
                0,
                0,
                std::mem::size_of::<u64>(),
            );
            if signal == libc::SIGUSR1 as isize {
                // The whole group, this process too.
                syscall(libc::SYS_kill, 0, libc::SIGKILL as usize, 0, 0);
            }
        }
    }
}

/// A system call made directly: the C library's `syscall` writes `errno` when one fails.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
unsafe fn syscall(number: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let result: isize;
    // SAFETY: the x86-64 Linux system call convention; the caller answers for the call.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") number as isize => result,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            in("r10") d,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    result
}

/// A system call made directly: the C library's `syscall` writes `errno` when one fails.
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
unsafe fn syscall(number: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let result: isize;
    // SAFETY: the AArch64 Linux system call convention; the caller answers for the call.
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") number as usize,
            inlateout("x0") a => result,
            in("x1") b,
            in("x2") c,
            in("x3") d,
            options(nostack),
        );
    }
    result
}

/// Elsewhere, through the C library: its `errno` is written only by a call that fails, and
/// these do not.
#[cfg(all(target_os = "linux", not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
unsafe fn syscall(number: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    // SAFETY: the caller answers for the call.
    unsafe { libc::syscall(number, a, b, c, d) as isize }
}

/// Elsewhere there is no parent-death signal: the program leads a group of its own, unguarded.
#[cfg(not(target_os = "linux"))]
impl Guard {
    pub(crate) fn start() -> io::Result<Guard> {
        Ok(Guard { pid: 0, stack: 0 })
    }

    /// 0: the program's own group.
    pub(crate) fn group(&self) -> i32 {
        let _ = self.stack;
        self.pid
    }
}
