//! Links the `cca` program as a position-dependent executable on Linux.
//!
//! A position-independent cca spends about a millisecond of each start applying its 37,000
//! relocations and taking the page faults they cause: measured in BENCHMARKS.md ("Where a
//! turn's milliseconds go"). Linked at a fixed address the program has almost none. The
//! libraries it loads (the C library) still load at random addresses.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo::rustc-link-arg-bin=cca=-no-pie");
    }
}
