//! The decoder's side of a run: what the engine's output means as it arrives (answer text
//! teed to the scratch file, tool calls, usage, steers taken), kept as state beside the loop
//! that pumps the pipes (`run`), which decides when the run ends.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::time::Instant;

use anyhow::{Context, Result};

use super::{Earlier, Ending, EngineRun, Halted, Progress, STDERR_TAIL};
use crate::answer;
use crate::engine::{Decoder, Output, Usage};
use crate::steer::Steered;

/// Where an engine that reads input while it runs is with the messages sent to it.
#[derive(Default)]
pub(super) struct Stream {
    /// The prompt was taken (claude echoed it).
    prompt_taken: bool,
    /// Steers written to the engine and not yet taken, oldest first.
    pub(super) written: VecDeque<String>,
    /// An answer is being written (a message was taken and its `result` has not come).
    answering: bool,
}

impl Stream {
    /// Nothing sent is waiting to be taken or answered.
    pub(super) fn done(&self) -> bool {
        self.prompt_taken && self.written.is_empty() && !self.answering
    }
}

/// The decoder's state while the engine runs: the answers so far and what the engine reported,
/// fed by the decoder's outputs, with the answer teed to its scratch file.
pub(super) struct Decoding {
    decoder: Box<dyn Decoder>,
    /// The decoder's outputs not yet handled (kept to reuse its buffer).
    outputs: Vec<Output>,
    /// The answer's scratch file.
    answer: File,
    pub(super) stream: Stream,
    earlier: Vec<Earlier>,
    /// The answer file's length: where the current answer's bytes end so far.
    len: u64,
    /// When the current answer started.
    split_at: Option<Instant>,
    answer_has_text: bool,
    kept: answer::Kept,
    usage: Usage,
    engine_error: Option<String>,
    engine_session: Option<String>,
    model: Option<String>,
    stderr_tail: Vec<u8>,
    /// The start of a stderr line not yet ended, for an engine whose noise is left out.
    stderr_line: Vec<u8>,
    /// The first error writing the answer's scratch file; nothing is written after it.
    pub(super) scratch_error: Option<String>,
    scratch_failed: bool,
    /// The API refused the engine's credentials ([`Output::Refused`]): the loop stops it.
    pub(super) refused: Option<String>,
    /// Lines the engine asked for an answer to, for its stdin ([`Output::Reply`]).
    pub(super) replies: Vec<String>,
}

impl Decoding {
    pub(super) fn new(decoder: Box<dyn Decoder>, answer: File, started: Instant) -> Decoding {
        Decoding {
            decoder,
            outputs: Vec::new(),
            answer,
            stream: Stream::default(),
            earlier: Vec::new(),
            len: 0,
            split_at: Some(started),
            answer_has_text: false,
            kept: answer::Kept::default(),
            usage: Usage::default(),
            engine_error: None,
            engine_session: None,
            model: None,
            stderr_tail: Vec::new(),
            stderr_line: Vec::new(),
            scratch_error: None,
            scratch_failed: false,
            refused: None,
            replies: Vec::new(),
        }
    }

    /// A chunk of the engine's stdout.
    pub(super) fn stdout(&mut self, chunk: &[u8], progress: &mut dyn FnMut(Progress)) {
        self.decoder.feed(chunk, &mut self.outputs);
        self.handle(progress);
    }

    /// The end of the engine's stdout.
    pub(super) fn stdout_end(&mut self, progress: &mut dyn FnMut(Progress)) {
        self.decoder.finish(&mut self.outputs);
        self.handle(progress);
    }

    /// What the run gave, once the engine's group is gone: the answer's file, positioned at the
    /// start of the last answer, and how the run ended.
    pub(super) fn finish(self, ending: Ending, started: Instant) -> Result<EngineRun> {
        self.finish_keeping_decoder(ending, started).1
    }

    /// [`Decoding::finish`], giving the decoder back for the next turn of a kept engine.
    pub(super) fn finish_keeping_decoder(
        mut self,
        ending: Ending,
        started: Instant,
    ) -> (Box<dyn Decoder>, Result<EngineRun>) {
        let rest = self.kept.finish();
        self.keep(rest.as_bytes());
        let mut halted = ending.halted;
        if let Some(e) = self.scratch_error.take() {
            halted.get_or_insert(Halted::Scratch(e));
        }
        if let Some(why) = self.refused.take() {
            halted.get_or_insert(Halted::Refused(why));
        }
        let start = self.earlier.last().map_or(0, |e| e.range.end);
        if let Err(e) = io::Seek::seek(&mut self.answer, io::SeekFrom::Start(start)) {
            return (self.decoder, Err(e).context("cannot read back the answer"));
        }
        let run = EngineRun {
            earlier: self.earlier,
            untaken: self.stream.written.into_iter().collect(),
            answer: self.answer,
            answer_has_text: self.answer_has_text,
            status: ending.status,
            engine_error: self.engine_error,
            engine_session: self.engine_session,
            model: self.model,
            usage: self.usage,
            stderr_tail: String::from_utf8_lossy(&self.stderr_tail).into_owned(),
            interrupted: ending.interrupted,
            duration: self.split_at.map_or(started.elapsed(), |at| at.elapsed()),
            feed_error: ending.feed_error,
            halted,
        };
        (self.decoder, Ok(run))
    }

    fn handle(&mut self, progress: &mut dyn FnMut(Progress)) {
        let mut outputs = std::mem::take(&mut self.outputs);
        for output in outputs.drain(..) {
            match output {
                Output::Text(text) => {
                    progress(Progress::Text(&text));
                    let kept = self.kept.text(&text);
                    self.keep(kept.as_bytes());
                    self.answer_has_text |= text.chars().any(|c| !c.is_whitespace());
                }
                Output::ToolStarted(call) => progress(Progress::ToolStarted(&call)),
                Output::Tool(call) => {
                    self.tail(format!("· {}\n", call.summary()).as_bytes());
                    progress(Progress::Tool(&call));
                    self.kept.tool(&call);
                }
                Output::Note(note) => self.engine_stderr(format!("{note}\n").as_bytes(), progress),
                Output::Retry(note) => {
                    self.tail(format!("{note}\n").as_bytes());
                    progress(Progress::Retry(&note));
                }
                Output::Error(e) => self.engine_error = Some(e),
                Output::Refused(why) => {
                    self.tail(format!("{why}\n").as_bytes());
                    self.refused.get_or_insert(why);
                }
                Output::Usage(u) => self.usage = u,
                Output::Session(id) => self.engine_session = Some(id),
                Output::Model(model) => self.model = Some(model),
                Output::Taken(n) => self.taken(n, progress),
                Output::AnswerEnd => {
                    // An engine that never echoes what it takes: the answer still ends the run.
                    self.stream.prompt_taken = true;
                    self.stream.answering = false;
                }
                Output::Reply(line) => self.replies.push(line),
            }
        }
        self.outputs = outputs;
    }

    /// Tees answer bytes to the scratch file. After a write error nothing more is written (what
    /// was is kept), and the loop stops the engine.
    fn keep(&mut self, bytes: &[u8]) {
        if bytes.is_empty() || self.scratch_failed {
            return;
        }
        match self.answer.write_all(bytes) {
            Ok(()) => self.len += bytes.len() as u64,
            Err(e) => {
                self.scratch_failed = true;
                self.scratch_error = Some(e.to_string());
                // What a partial write put there counts (the file's end is where reading stops).
                if let Ok(end) = io::Seek::stream_position(&mut self.answer) {
                    self.len = end;
                }
            }
        }
    }

    /// The engine took `n` user messages: the prompt, or steers. A steer ends the answer so
    /// far; what follows answers it.
    fn taken(&mut self, n: usize, progress: &mut dyn FnMut(Progress)) {
        self.stream.answering = true;
        let mut n = n;
        if !self.stream.prompt_taken {
            self.stream.prompt_taken = true;
            n -= 1;
        }
        let n = n.min(self.stream.written.len());
        if n == 0 {
            return;
        }
        let steer: Vec<String> = self.stream.written.drain(..n).collect();
        let steer = steer.join("\n\n");
        let rest = std::mem::take(&mut self.kept).finish();
        self.keep(rest.as_bytes());
        let start = self.earlier.last().map_or(0, |e| e.range.end);
        let now = Instant::now();
        let since = self.split_at.unwrap_or(now);
        self.earlier.push(Earlier {
            range: start..self.len,
            has_text: std::mem::take(&mut self.answer_has_text),
            usage: std::mem::take(&mut self.usage),
            engine_error: self.engine_error.take(),
            duration: now.duration_since(since),
            steer,
        });
        self.split_at = Some(now);
        progress(Progress::Steer(Steered::Taken(&self.earlier.last().expect("pushed").steer)));
    }

    pub(super) fn engine_stderr(&mut self, bytes: &[u8], progress: &mut dyn FnMut(Progress)) {
        let Some(noise) = self.decoder.stderr_noise() else {
            progress(Progress::Stderr(bytes));
            self.tail(bytes);
            return;
        };
        // A line at a time, without the ones that tell the user nothing.
        self.stderr_line.extend_from_slice(bytes);
        let mut shown = Vec::new();
        let mut start = 0;
        while let Some(end) = memchr::memchr(b'\n', &self.stderr_line[start..]) {
            let line = &self.stderr_line[start..=start + end];
            if !noise(line) {
                shown.extend_from_slice(line);
            }
            start += end + 1;
        }
        self.stderr_line.drain(..start);
        if !shown.is_empty() {
            progress(Progress::Stderr(&shown));
            self.tail(&shown);
        }
    }

    /// The end of the engine's stderr: a last line without a newline is shown too.
    pub(super) fn engine_stderr_end(&mut self, progress: &mut dyn FnMut(Progress)) {
        let rest = std::mem::take(&mut self.stderr_line);
        if !rest.is_empty() && !self.decoder.stderr_noise().is_some_and(|noise| noise(&rest)) {
            progress(Progress::Stderr(&rest));
            self.tail(&rest);
        }
    }

    fn tail(&mut self, bytes: &[u8]) {
        self.stderr_tail.extend_from_slice(bytes);
        if self.stderr_tail.len() > 2 * STDERR_TAIL {
            self.stderr_tail.drain(..self.stderr_tail.len() - STDERR_TAIL);
        }
    }
}
