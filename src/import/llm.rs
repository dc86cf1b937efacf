//! llm's logs (`logs.db`, SQLite), as `llm logs --json -n 0 --database PATH` prints them: a
//! JSON array of responses, oldest first, each with its `conversation_id`, `prompt`,
//! `response`, `model`, `datetime_utc`, token counts, `reasoning`, `tool_calls` and
//! `attachments`. cca runs llm for this (through `run`) rather than link SQLite itself: whoever
//! has a `logs.db` has llm, and cca's build stays free of a C library.

use serde_json::Value;

use super::{Conversation, Exchange, Figures, LeftOut, Problem, answer_text};
use crate::engine::{Output, ToolCall, ToolStatus};

/// Every conversation in the log, in the order each started.
pub(crate) fn parse(json: &[u8]) -> (Vec<Conversation>, Vec<Problem>) {
    let responses: Vec<Value> = match serde_json::from_slice(json) {
        Ok(Value::Array(items)) => items,
        Ok(_) => return (Vec::new(), vec![problem(1, "not a JSON array of responses")]),
        Err(e) => return (Vec::new(), vec![problem(e.line() as u64, &format!("not JSON: {e}"))]),
    };
    let mut conversations: Vec<Conversation> = Vec::new();
    for (n, r) in responses.iter().enumerate() {
        let Some(cid) = r["conversation_id"].as_str() else { continue };
        let i = match conversations.iter().position(|c| c.id == cid) {
            Some(i) => i,
            None => {
                conversations.push(Conversation {
                    id: cid.to_string(),
                    created: r["datetime_utc"].as_str().and_then(super::rfc3339),
                    title: r["conversation_name"].as_str().map(str::to_string),
                    ..Conversation::default()
                });
                conversations.len() - 1
            }
        };
        let c = &mut conversations[i];
        c.lines = n as u64 + 1;
        c.exchanges.push(exchange(r, &mut c.figures));
    }
    (conversations, Vec::new())
}

fn exchange(r: &Value, figures: &mut Figures) -> Exchange {
    let mut left_out = LeftOut {
        thinking: usize::from(r["reasoning"].as_str().is_some_and(|s| !s.is_empty())),
        images: r["attachments"].as_array().map_or(0, Vec::len),
        ..LeftOut::default()
    };
    if r["system"].as_str().is_some_and(|s| !s.is_empty()) {
        left_out.other.push("the system prompt".into());
    }
    let mut outputs = Vec::new();
    for call in r["tool_calls"].as_array().into_iter().flatten() {
        let input = match &call["arguments"] {
            Value::String(s) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
            other => other.clone(),
        };
        let mut tool = ToolCall::new(call["name"].as_str().unwrap_or("tool"), &input);
        (tool.status, tool.reason) = (ToolStatus::Ran, None);
        outputs.push(Output::Tool(tool));
    }
    outputs.push(Output::Text(r["response"].as_str().unwrap_or("").to_string()));
    let at = r["datetime_utc"].as_str().and_then(super::rfc3339);
    Exchange {
        question: r["prompt"].as_str().unwrap_or("").to_string(),
        asked: at.clone(),
        answer: answer_text(outputs, &left_out),
        answered: at,
        model: r["model"].as_str().map(str::to_string),
        input_tokens: figures.tokens(&r["input_tokens"]),
        output_tokens: figures.tokens(&r["output_tokens"]),
        key: r["id"].as_str().unwrap_or("").to_string(),
        attempts: Vec::new(),
    }
}

fn problem(line: u64, message: &str) -> Problem {
    Problem { line, message: message.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_group_into_conversations() {
        let json = br#"[
          {"id": "r1", "conversation_id": "c1", "conversation_name": "hello", "model": "echo",
           "prompt": "hello", "response": "HELLO", "datetime_utc": "2026-11-23T19:42:34.144769+00:00",
           "system": "be brief", "input_tokens": 2, "output_tokens": 3},
          {"id": "r2", "conversation_id": "c2", "prompt": "x", "response": "y", "model": "echo"},
          {"id": "r3", "conversation_id": "c1", "prompt": "more", "response": "MORE", "model": "echo",
           "tool_calls": [{"name": "search", "arguments": "{\"query\": \"q\"}"}]}
        ]"#;
        let (c, problems) = parse(json);
        assert!(problems.is_empty());
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].exchanges.len(), 2);
        assert_eq!(
            c[0].exchanges[0].answer,
            "HELLO\n\n> Left out by cca import: the system prompt\n"
        );
        assert_eq!(c[0].exchanges[1].answer, "> search: q\n\nMORE");
        assert_eq!((c[0].exchanges[1].key.as_str(), c[0].lines), ("r3", 3));
        assert_eq!(c[0].created.as_deref(), Some("2026-11-23T19:42:34Z"));
        assert!(!parse(b"{").1.is_empty());
    }

    #[test]
    fn absurd_token_counts_are_left_out() {
        let json = br#"[{"id": "r1", "conversation_id": "c1", "prompt": "p", "response": "r",
                         "input_tokens": 18446744073709551615, "output_tokens": 4}]"#;
        let (c, _) = parse(json);
        assert_eq!(
            (c[0].exchanges[0].input_tokens, c[0].exchanges[0].output_tokens),
            (None, Some(4))
        );
        assert_eq!(c[0].figures.left_out, 1);
    }
}
