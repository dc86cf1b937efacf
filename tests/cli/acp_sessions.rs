//! `cca acp` sessions: what `session/new` writes, forks, models, the kept engine.

use serde_json::json;

use super::acp::*;
use crate::common::TestEnv;

#[test]
fn session_new_writes_nothing_until_the_first_prompt() {
    let env = TestEnv::new();
    let out = sdk(
        &env,
        &[
            new_session("left", &env.work),
            new_session("used", &env.work),
            json!({"call": "session/set_config_option", "as": "set",
                   "params": {"sessionId": "$left.sessionId", "configId": "model", "value": "default"}}),
        ],
        &[],
    );
    let (left, used) = (id_of(&out, "left"), id_of(&out, "used"));
    assert_ne!(left, used, "two new sessions in the same second have ids of their own");
    assert!(out["results"]["set"]["configOptions"].is_array(), "{}", out["results"]);
    assert!(env.session_files().is_empty(), "{:?}", env.session_files());
    let out = sdk(&env, &[new_session("s", &env.work), prompt("p", "$s.sessionId", "hello")], &[]);
    assert_eq!(out["results"]["p"]["stopReason"], "end_turn", "{}", out["results"]);
    let id = id_of(&out, "s");
    assert_eq!(env.session_files().len(), 1, "{:?}", env.session_files());
    let text = std::fs::read_to_string(env.session_path(&id)).unwrap();
    assert!(text.contains("ECHO: hello"), "{text}");
}

#[test]
fn a_new_session_forked_before_its_first_prompt_is_a_new_session_too() {
    let env = TestEnv::new();
    let out = sdk(
        &env,
        &[
            new_session("s", &env.work),
            json!({"call": "session/fork", "as": "f",
                   "params": {"sessionId": "$s.sessionId", "cwd": env.work, "mcpServers": []}}),
            prompt("p", "$f.sessionId", "hello from the fork"),
        ],
        &[],
    );
    let r = &out["results"];
    assert!(r["f"]["configOptions"].is_array(), "{r}");
    assert_eq!(r["p"]["stopReason"], "end_turn", "{r}");
    let (source, fork) = (id_of(&out, "s"), id_of(&out, "f"));
    assert_ne!(source, fork);
    // Only the fork, prompted, was written; the source still writes nothing.
    assert_eq!(env.session_files().len(), 1, "{:?}", env.session_files());
    let text = std::fs::read_to_string(env.session_path(&fork)).unwrap();
    assert!(text.contains("ECHO: hello from the fork"), "{text}");
}

#[test]
fn a_model_chosen_for_one_engine_is_not_passed_to_the_next() {
    let env = TestEnv::new();
    let set = |name: &str, option: &str, value: &str| {
        json!({"call": "session/set_config_option", "as": name,
               "params": {"sessionId": "$s.sessionId", "configId": option, "value": value}})
    };
    let out = sdk(
        &env,
        &[
            new_session("s", &env.work),
            set("model", "model", "opus"),
            set("engine", "engine", "gemini"),
            prompt("p", "$s.sessionId", "by gemini"),
        ],
        &[],
    );
    let r = &out["results"];
    assert_eq!(r["model"]["configOptions"][1]["currentValue"], "opus", "{r}");
    assert_eq!(r["engine"]["configOptions"][0]["currentValue"], "gemini", "{r}");
    assert_eq!(r["engine"]["configOptions"][1]["currentValue"], "default", "{r}");
    assert_eq!(r["p"]["stopReason"], "end_turn", "{r}");
    let argv = env.calls()[0]["argv"].to_string();
    assert!(argv.contains("gemini") && !argv.contains("opus"), "{argv}");
}

/// docs/DESIGN.md, "Warm engines": a follow-up goes to the claude kept from the prompt before,
/// as its next user line; `keep_warm = "off"` starts one per prompt.
#[test]
fn a_follow_up_goes_to_the_kept_claude_unless_keep_warm_is_off() {
    for (config, runs) in [("", 1), ("keep_warm = \"off\"\n", 2)] {
        let env = TestEnv::new();
        env.write_config(config);
        let out = sdk(
            &env,
            &[
                json!({"call": "session/new", "as": "s", "params": {"cwd": env.work, "mcpServers": []}}),
                prompt("p1", "$s.sessionId", "first question"),
                prompt("p2", "$s.sessionId", "second question"),
            ],
            &[],
        );
        let id = id_of(&out, "s");
        assert_eq!(
            texts(&out, &id, "agent_message_chunk").concat(),
            "ECHO: first questionECHO: second question",
            "{config}"
        );
        assert_eq!(env.calls().len(), runs, "{config}");
    }
}
