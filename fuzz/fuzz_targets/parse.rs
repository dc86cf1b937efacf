//! Any bytes as a transcript: reading never panics, the streaming summary agrees with the full
//! parse, reading on from the latest checkpoint agrees with reading it all, and what was read
//! renders back to something that reads the same.
#![no_main]

use cca::transcript::{self, Kind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let summary = transcript::summarize(data).expect("reading memory cannot fail");
    if let Ok(Ok(scan)) = transcript::scan(data, None)
        && let Some(checkpoint) = &scan.checkpoint
    {
        let rest = &data[checkpoint.at.offset as usize..];
        let tail = transcript::scan(rest, Some(checkpoint)).expect("reading memory cannot fail");
        assert_eq!(tail.ok().as_ref(), Some(&scan), "reading on from the checkpoint differs");
    }
    let Ok(text) = std::str::from_utf8(data) else { return };
    let parsed = transcript::parse(text);
    match (&parsed, &summary) {
        (Ok((t, problems)), Ok(s)) => {
            assert_eq!(problems.len(), s.problems.len());
            let answers = t.records.iter().filter(|r| r.kind == Kind::Assistant).count() as u64;
            assert!(s.exchanges <= answers);
            let again = transcript::parse(&transcript::render(t)).expect("a render reads back");
            assert!(again.1.is_empty(), "{:?}", again.1);
            assert_eq!(&again.0, t);
        }
        (Err(_), Err(_)) => {}
        _ => panic!("parse and summarize disagree on whether this is a transcript"),
    }
});
