//! `cca acp`'s `usage_update` as ACP defines it, read by the official SDK client: `used` the
//! tokens in the session's context, `size` the context window, `cost` the session's running total.

use serde_json::{Value, json};

use super::acp::{id_of, new_session, prompt, sdk, updates};
use crate::common::TestEnv;

fn figures(out: &Value, id: &str) -> (Vec<u64>, Vec<u64>, Vec<f64>) {
    let u = updates(out, id, "usage_update");
    (
        u.iter().map(|u| u["used"].as_u64().unwrap()).collect(),
        u.iter().map(|u| u["size"].as_u64().unwrap()).collect(),
        u.iter().map(|u| u["cost"]["amount"].as_f64().unwrap()).collect(),
    )
}

#[test]
fn usage_reports_the_sessions_running_cost_and_the_context_it_holds() {
    let env = TestEnv::new();
    let cwd = env.work.clone();
    let long = "a longer question ".repeat(50);
    let out = sdk(
        &env,
        &[
            new_session("s", &cwd),
            prompt("p1", "$s.sessionId", "first question"),
            prompt("p2", "$s.sessionId", &long),
            prompt("c", "$s.sessionId", "/clear"),
            prompt("p3", "$s.sessionId", "after the clear"),
        ],
        &[],
    );
    let id = id_of(&out, "s");
    let (used, size, cost) = figures(&out, &id);
    assert_eq!(used.len(), 3, "one update a turn: {used:?}");
    // The fake claude's answers cost $0.0015 each: the editor is told the sum so far.
    let expected = [0.0015, 0.003, 0.0045];
    for (got, want) in cost.iter().zip(expected) {
        assert!((got - want).abs() < 1e-9, "running total {cost:?}");
    }
    assert!(cost.iter().all(|c| c.is_finite()));
    assert_eq!(size, [160_000; 3], "claude's context budget");
    // The context grows with each turn and falls when it is cleared.
    assert!(used[0] > 0 && used[1] > used[0] + 100, "{used:?}");
    assert!(used[2] < used[0] * 2, "after /clear only the last exchange is live: {used:?}");
    assert_eq!(out["results"]["c"]["stopReason"], json!("end_turn"));
}
