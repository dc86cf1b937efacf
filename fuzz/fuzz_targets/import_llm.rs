//! Any bytes as `llm logs --json`'s output: the parser returns, and what `cca import`
//! would write of it reads back as the same records (`cca::check_import`). Seeded with what
//! the real llm (with llm-echo, as in tests/real) printed for three prompts.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cca::check_import("llm", data));
