fn main() -> std::process::ExitCode {
    if std::env::args_os().nth(1).is_some_and(|word| word == "__standby") {
        close_inherited_descriptors();
    }
    cca::main()
}

/// `cca __standby` outlives the turn that started it, so it keeps no descriptor of its
/// caller's: a pipeline (`cca search ... 3>&1 | ...`) or a test runner (bats' fd 3) that waits
/// for one to close would wait for as long as the standby waits. Its own three (the order,
/// its socket, null) are all it needs, and its engine inherits no more.
#[allow(unsafe_code)]
fn close_inherited_descriptors() {
    use rustix::fd::BorrowedFd;
    use rustix::io::{FdFlags, fcntl_getfd};
    let Ok(mut listing) = std::fs::read_dir("/proc/self/fd") else { return };
    let fds: Vec<i32> = listing
        .by_ref()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: main has not started, so nothing in this process owns a descriptor above 2
        // but the listing's, which is open while this runs. A descriptor that came through
        // exec is never close-on-exec, and std opens each of its own so: the listing's is left.
        let inherited = fcntl_getfd(unsafe { BorrowedFd::borrow_raw(fd) })
            .is_ok_and(|flags| !flags.contains(FdFlags::CLOEXEC));
        if inherited {
            // SAFETY: as above; an inherited descriptor no value owns.
            unsafe { rustix::io::close(fd) };
        }
    }
    drop(listing);
}
