//! `cca acp`'s stdin reader: whatever bytes arrive, one line comes out per input line, as it
//! was when it is short UTF-8 text, otherwise JSON as it was or a short stand-in that is not
//! JSON; nothing panics. Read through a small buffer, so lines cross its refills.
#![no_main]

use std::io::BufReader;

use cca::front::wire::{self, QUOTED};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&size, data)) = data.split_first() else { return };
    let mut input = BufReader::with_capacity(usize::from(size).max(1), data);
    let mut sent: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    if data.is_empty() || data.ends_with(b"\n") {
        sent.pop();
    }
    let mut read = 0;
    while let Some(line) = wire::read_line(&mut input).expect("reading a slice never fails") {
        let raw = sent[read];
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        match std::str::from_utf8(raw) {
            Ok(text) if text.len() <= 1024 => assert_eq!(line, text),
            Ok(text) if line == text => {
                assert!(serde_json::from_str::<serde_json::Value>(text).is_ok(), "{text:?}");
            }
            _ => {
                assert_eq!(line, wire::stand_in(raw));
                assert!(line.len() <= 3 * QUOTED + '…'.len_utf8(), "{line:?}");
                assert!(serde_json::from_str::<serde_json::Value>(&line).is_err(), "{line:?}");
            }
        }
        read += 1;
    }
    assert_eq!(read, sent.len());
});
