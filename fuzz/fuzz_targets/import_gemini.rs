//! Any bytes as a gemini-cli chat file: the parser returns, and what `cca import`
//! would write of it reads back as the same records (`cca::check_import`). Seeded with files
//! the real program wrote in tests/real.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cca::check_import("gemini", data));
