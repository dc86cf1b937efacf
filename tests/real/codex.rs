//! Turns through the real codex (pinned, as the other engines) against the loopback Responses
//! API: answers streamed and kept, the history, the system prompt and the model reaching the
//! request, tokens recorded, and nothing written in the user's own `~/.codex`.

use super::*;
use crate::caching::filler;

/// A test home whose `~/.codex/config.toml` points codex at the loopback server.
fn codex_real() -> (Real, PathBuf) {
    let r = Real::new();
    let codex = real_program("CCA_TEST_CODEX", "codex/node_modules/.bin/codex");
    let dir = r.env.home.join(".codex");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "model = \"gpt-mock\"\nmodel_provider = \"mock\"\n\n[model_providers.mock]\n\
             name = \"mock\"\nbase_url = \"{}/v1\"\n\
             wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
            r.api.url()
        ),
    )
    .unwrap();
    (r, codex)
}

/// `cca ARGS` with codex found through `CCA_CODEX` (with a timeout, as every run).
fn run(r: &Real, codex: &Path, args: &[&str]) -> Run {
    let mut cmd = r.command();
    cmd.args(args).env("CCA_CODEX", codex);
    run_command(cmd, None)
}

/// The text of the request's messages of `role`, in order.
fn texts(body: &Value, role: &str) -> Vec<String> {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["role"] == role)
        .map(|i| mock_api::content_text(&i["content"]))
        .collect()
}

/// The questions a request holds, in order (a framed message's history and `<user_query>`),
/// codex's own context messages (`<environment_context>`) aside.
fn questions(body: &Value) -> Vec<String> {
    let texts = texts(body, "user");
    let asked = texts.iter().filter(|t| !t.starts_with("<environment_context>"));
    asked
        .flat_map(|t| {
            let mut framed = history_users(t);
            framed.push(tag(t, "user_query").unwrap_or(t).to_string());
            framed
        })
        .collect()
}

/// The question cca framed for codex: the last user message holding a `<user_query>`.
fn framed(body: &Value) -> String {
    texts(body, "user").into_iter().rfind(|t| t.contains("<user_query>")).unwrap_or_default()
}

#[test]
fn three_turns_and_a_resume_through_codex_keep_the_answers_and_the_history() {
    let (r, codex) = codex_real();
    let first = run(&r, &codex, &["search", "-e", "codex", "first question"]);
    first.ok();
    assert_eq!(first.stdout, "ECHO: first question");
    run(&r, &codex, &["search", "-q", "-r", "second question"]).ok();
    let third = run(&r, &codex, &["search", "-r", "third question"]);
    third.ok();
    assert_eq!(third.stdout, "ECHO: third question");
    let turns = r.api.turns();
    assert_eq!(turns.len(), 3, "{turns:?}");
    // The history as real turns (a rollout codex resumes), the system prompt in the first.
    let body = &turns[2].body;
    let opening = framed(body);
    let system = tag(&opening, "system_instructions").expect("the system prompt, framed");
    assert!(system.starts_with("You are a web research assistant"), "{system}");
    assert_eq!(questions(body), ["first question", "second question", "third question"]);
    assert_eq!(texts(body, "assistant"), ["ECHO: first question", "ECHO: second question"]);
    let t = r.transcript();
    assert_eq!(
        answers(&t),
        ["ECHO: first question", "ECHO: second question", "ECHO: third question"]
    );
    let latest = r.env.latest();
    assert!(latest.contains("\"engine\":\"codex\""), "{latest}");
    // The loopback server's usage (10 in, 4 of them cached, 3 out) for each answer.
    assert!(latest.contains("\"input_tokens\":10,\"cached_tokens\":4"), "{latest}");
    assert!(latest.contains("\"output_tokens\":3"), "{latest}");
    // A session resumed by its id, after another one began, goes on from its own history.
    let id =
        r.env.session_files()[0].trim_start_matches("session_").trim_end_matches(".md").to_string();
    run(&r, &codex, &["search", "-q", "-e", "codex", "another session"]).ok();
    let resumed = run(&r, &codex, &["search", "-s", &id, "fourth question"]);
    resumed.ok();
    assert_eq!(resumed.stdout, "ECHO: fourth question");
    let body = &r.api.turns()[4].body;
    let asked = ["first question", "second question", "third question", "fourth question"];
    assert_eq!(questions(body), asked);
    let file = r.env.sessions_dir().join(format!("session_{id}.md"));
    let kept = std::fs::read_to_string(&file).unwrap();
    assert!(kept.contains("ECHO: fourth question"), "{kept}");
    // codex wrote in the home cca gave it, not in the user's ~/.codex.
    let users: Vec<String> = std::fs::read_dir(r.env.home.join(".codex"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(users, ["config.toml"]);
    let own = r.env.cca_home.join("engines/codex").join(&id).join(".codex");
    assert!(own.join("config.toml").is_symlink(), "{}", own.display());
    // The rollouts of the turns were read and removed.
    let mut find = std::process::Command::new("find");
    let found = find.arg(own.join("sessions")).args(["-type", "f"]).output().unwrap();
    let left = String::from_utf8(found.stdout).unwrap();
    assert_eq!(left, "", "rollouts left in the session's home");
}

#[test]
fn the_model_and_a_native_system_prompt_reach_codex_s_request() {
    let (r, codex) = codex_real();
    r.env.write_config("[engines.codex]\nsystem_prompt = \"native\"\n");
    run(&r, &codex, &["search", "-e", "codex", "-m", "gpt-test-model", "which model?"]).ok();
    let body = &r.api.turns()[0].body;
    assert_eq!(body["model"], "gpt-test-model");
    // cca's system prompt in place of codex's own instructions, and not in the question.
    let developer = texts(body, "developer");
    assert!(developer[0].starts_with("You are a web research assistant"), "{developer:?}");
    assert!(!developer.iter().any(|d| d.contains("Codex CLI")), "{developer:?}");
    assert_eq!(questions(body), ["which model?"]);
    // A follow-up, which resumes the history, with the system prompt and another model.
    run(&r, &codex, &["search", "-r", "-m", "gpt-other-model", "and now?"]).ok();
    let body = &r.api.turns()[1].body;
    assert_eq!(body["model"], "gpt-other-model");
    let developer = texts(body, "developer");
    assert!(developer[0].starts_with("You are a web research assistant"), "{developer:?}");
    assert_eq!(questions(body), ["which model?", "and now?"]);
}

/// The cost each answer of the latest session records, in order.
fn costs(r: &Real) -> Vec<Option<f64>> {
    let records = r.transcript().records.into_iter();
    records
        .filter(|rec| rec.kind == cca::transcript::Kind::Assistant)
        .map(|rec| rec.meta.cost_usd)
        .collect()
}

#[test]
fn a_turn_on_a_model_with_a_price_records_its_cost_and_one_without_records_none() {
    let (r, codex) = codex_real();
    // The loopback server's usage: 10 in, 4 of them cached, 3 out.
    run(&r, &codex, &["search", "-q", "-e", "codex", "-m", "gpt-5", "priced?"]).ok();
    let gpt_5 = (6.0 * 1.25 + 4.0 * 0.125 + 3.0 * 10.0) / 1e6;
    assert_eq!(costs(&r), [Some(gpt_5)]);
    // codex's own default (`gpt-mock`, in its config) is on no price list: no cost.
    run(&r, &codex, &["search", "-q", "-e", "codex", "unpriced?"]).ok();
    assert_eq!(costs(&r), [None]);
    // Kept in `cca chat`, codex's app server names its thread's model: codex's default here.
    let config = r.env.home.join(".codex/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("\"gpt-mock\"", "\"gpt-5-mini\"")).unwrap();
    r.env.write_config("engine = \"codex\"\n");
    let mut cmd = r.command();
    cmd.arg("chat").env("CCA_CODEX", &codex);
    run_command(cmd, Some(b"c1\nc2\n")).ok();
    let mini = (6.0 * 0.25 + 4.0 * 0.025 + 3.0 * 2.0) / 1e6;
    assert_eq!(costs(&r), [Some(mini), Some(mini)]);
    // A one-shot turn on codex's default: `codex exec` does not say the model, the rollout it
    // keeps of the run does.
    run(&r, &codex, &["search", "-q", "-e", "codex", "priced by the rollout?"]).ok();
    assert_eq!(costs(&r), [Some(mini)]);
}

#[test]
fn codex_is_the_default_engine_when_it_is_the_only_one_and_doctor_lists_it() {
    let (r, codex) = codex_real();
    let missing = r.env.root.path().join("missing");
    let mut cmd = r.command();
    cmd.args(["search", "only codex here"])
        .env("CCA_CODEX", &codex)
        .env("CCA_CLAUDE", &missing)
        .env("CCA_GEMINI", &missing);
    let only = run_command(cmd, None);
    only.ok();
    assert_eq!(only.stdout, "ECHO: only codex here");
    assert!(r.env.latest().contains("\"engine\":\"codex\""));
    let doctor = run(&r, &codex, &["doctor"]);
    let line = doctor.stdout.lines().find(|l| l.trim_start().starts_with("codex")).unwrap_or("");
    assert!(line.contains("codex-cli 0.169.0"), "{}", doctor.stdout);
    // Asked its version, codex wrote nothing in the user's folder either.
    let users: Vec<_> = std::fs::read_dir(r.env.home.join(".codex")).unwrap().collect();
    assert_eq!(users.len(), 1, "{users:?}");
}

#[test]
fn a_failing_api_fails_the_turn_and_keeps_no_answer() {
    let (r, codex) = codex_real();
    r.api.set(Behavior { status: Some(401), ..Behavior::default() });
    let failed = run(&r, &codex, &["search", "-e", "codex", "refused?"]);
    assert_ne!(failed.code, Some(0), "{failed}");
    assert!(failed.stderr.contains("401"), "{}", failed.stderr);
    assert!(answers(&r.transcript()).is_empty());
}

#[test]
fn an_image_reaches_codex_s_request_once() {
    let (r, codex) = codex_real();
    let png = include_bytes!("../fixtures/pixel.png");
    std::fs::write(r.env.work.join("pic.png"), png).unwrap();
    let asked = run(&r, &codex, &["search", "-q", "-e", "codex", "-f", "pic.png", "what is it?"]);
    asked.ok();
    assert_eq!(asked.stdout, "ECHO: what is it?");
    let images = |body: &Value| -> Vec<String> {
        let parts = body["input"].as_array().into_iter().flatten().flat_map(|i| {
            i["content"].as_array().into_iter().flatten().cloned().collect::<Vec<_>>()
        });
        parts
            .filter(|p| p["type"] == "input_image")
            .map(|p| p["image_url"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let sent = images(&r.api.turns()[0].body);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].starts_with("data:image/png;base64,"), "{sent:?}");
    run(&r, &codex, &["search", "-q", "-r", "and its colour?"]).ok();
    assert_eq!(images(&r.api.turns()[1].body), Vec::<String>::new());
    // On a follow-up, which resumes the history: the new image, once.
    run(&r, &codex, &["search", "-q", "-r", "-f", "pic.png", "and this one?"]).ok();
    assert_eq!(images(&r.api.turns()[2].body).len(), 1);
}

#[test]
fn searches_and_commands_are_tool_lines_kept_and_a_refused_write_does_not_hang() {
    let (r, codex) = codex_real();
    let refused = r.env.work.join("written-by-codex");
    r.api.set(Behavior {
        script: vec![
            vec![
                Block::text("Let me look."),
                Block::tool("web_search", json!({"query": "rust 1.89 file locking"})),
                Block::tool("exec_command", json!({"cmd": "echo hello"})),
            ],
            vec![Block::tool(
                "exec_command",
                json!({"cmd": format!("touch {}", refused.display())}),
            )],
            vec![Block::text("Rust 1.89 stabilised File::lock.")],
        ],
        ..Behavior::default()
    });
    let asked = run(&r, &codex, &["search", "-e", "codex", "file locking?"]);
    asked.ok();
    assert_eq!(asked.stdout, "Let me look.\n\nRust 1.89 stabilised File::lock.");
    let lines = tool_lines(&asked.stderr);
    assert_eq!(
        lines[..2],
        ["· web_search: rust 1.89 file locking", "· command: /bin/bash -lc 'echo hello'"],
        "{}",
        asked.stderr
    );
    // The write was refused by the read-only sandbox, and the model was told so. codex 0.169.0
    // prints no item for it when the sandbox refuses at once, and the command's failure when
    // the machine is loaded (measured: 5 of 6 runs side by side): then it is a refused call.
    assert!(!refused.exists());
    match lines.get(2) {
        None => assert_eq!(lines.len(), 2),
        Some(line) => assert_eq!(
            *line,
            format!(
                "· command (refused): /bin/bash -lc 'touch {}' · the read-only sandbox kept it \
                 from writing",
                refused.display()
            )
        ),
    }
    let turns = r.api.turns();
    let told = turns.last().unwrap().body.to_string();
    assert!(told.contains("Read-only file system"), "{told}");
    let kept = r.env.latest();
    assert!(kept.contains("> web_search: rust 1.89 file locking\n"), "{kept}");
    assert!(kept.contains("> command: /bin/bash -lc 'echo hello'\n"), "{kept}");
}

#[test]
fn ctrl_c_while_codex_answers_ends_it_and_keeps_the_attempt_as_interrupted() {
    let (r, codex) = codex_real();
    // The answer's message is out; the response stays open until `go` exists (never).
    let go = r.env.root.path().join("go");
    r.api.set(Behavior { hold: Some(go.clone()), ..Behavior::default() });
    let mut cmd = r.command();
    cmd.args(["search", "-e", "codex", "stop me"])
        .env("CCA_CODEX", &codex)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = Guard(cmd.spawn().unwrap());
    let mut stdout = child.0.stdout.take().unwrap();
    let mut first = [0u8; 4];
    stdout.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"ECHO");
    child.signal(rustix::process::Signal::INT);
    let status = child.finish().status;
    assert_eq!(shell_status(status), 130);
    std::fs::write(&go, "").unwrap();
    let kept = r.env.latest();
    assert!(kept.contains("stop me") && kept.contains("interrupted"), "{kept}");
    // The next turn asks as usual.
    r.api.set(Behavior::default());
    let next = run(&r, &codex, &["search", "-r", "again"]);
    next.ok();
    assert_eq!(next.stdout, "ECHO: again");
}

#[test]
fn an_mcp_server_an_editor_gives_is_started_by_codex() {
    let (r, codex) = codex_real();
    r.env.write_config(&format!(
        "engine = \"codex\"\n[engines.codex]\nprogram = \"{}\"\n",
        codex.display()
    ));
    let script = r.env.root.path().join("mcp_server.py");
    std::fs::write(&script, acp_mcp::MCP_SERVER).unwrap();
    let marker = r.env.root.path().join("mcp-started");
    let python = acp_mcp::python();
    let server = json!({"name": "marker", "command": python, "args": [script, "--flag"],
                        "env": [{"name": "MARKER", "value": marker}]});
    let steps = vec![
        json!({"call": "session/new", "as": "s", "params": {"cwd": r.env.work, "mcpServers": [server]}}),
        acp_prompt("p", "$s.sessionId", "with a server", true),
    ];
    let out = acp(&r, &steps);
    assert_eq!(out["results"]["p"]["stopReason"], "end_turn", "{}", out["results"]);
    let started = std::fs::read_to_string(&marker)
        .unwrap_or_else(|_| panic!("codex did not start the MCP server: {}", out["results"]));
    assert_eq!(started, "--flag");
}

/// The share of each request from the third on that the previous one could have cached.
fn shares(bodies: &[Value]) -> Vec<f64> {
    bodies.windows(2).skip(1).map(|pair| mock_api::cacheable_share(&pair[0], &pair[1])).collect()
}

/// A request's input items, their ids aside (codex gives each a new one).
fn items(body: &Value) -> Vec<Value> {
    let mut items = body["input"].as_array().cloned().unwrap_or_default();
    for item in &mut items {
        item.as_object_mut().map(|o| o.remove("id"));
    }
    items
}

/// Whether `later` repeats every input item of `earlier` exactly, then adds to them.
fn extends(earlier: &Value, later: &Value) -> bool {
    let (earlier, later) = (items(earlier), items(later));
    later.len() > earlier.len() && later[..earlier.len()] == earlier[..]
}

#[test]
fn codex_follow_ups_extend_the_previous_request_and_a_hand_edit_reaches_the_next() {
    // Five turns of about 2,800 tokens each through cca (the history as a rollout codex
    // resumes), then the same conversation through codex's own `exec resume --last`.
    let (r, codex) = codex_real();
    for n in 0..5 {
        r.api.set(Behavior { answer: Some(filler(n, "Answer", 110)), ..Behavior::default() });
        let question = filler(n, "Question", 105);
        let resume: &[&str] = if n > 0 { &["-r"] } else { &["-e", "codex"] };
        run(&r, &codex, &[&["search", "-q"], resume, &[question.as_str()]].concat()).ok();
    }
    let ours: Vec<Value> = r.api.turns().into_iter().map(|t| t.body).collect();
    let (r2, _) = codex_real();
    for n in 0..5 {
        r2.api.set(Behavior { answer: Some(filler(n, "Answer", 110)), ..Behavior::default() });
        let question = filler(n, "Question", 105);
        let mut cmd = std::process::Command::new(&codex);
        cmd.env_clear()
            .env("HOME", &r2.env.home)
            .env("PATH", r2.env.path_var())
            .current_dir(&r2.env.work)
            .args(["exec", "--json", "--skip-git-repo-check"])
            .args(if n > 0 { &["resume", "--last"][..] } else { &[][..] })
            .arg(&question)
            .stdin(Stdio::null());
        run_command(cmd, None).ok();
    }
    let theirs: Vec<Value> = r2.api.turns().into_iter().map(|t| t.body).collect();
    // Each follow-up repeats the request before it, codex's context included, and adds the
    // answer and the new question: as codex's own resume does.
    for (n, pair) in ours.windows(2).enumerate() {
        assert!(extends(&pair[0], &pair[1]), "request {} does not extend the one before", n + 2);
    }
    let (ours, theirs) = (shares(&ours), shares(&theirs));
    eprintln!(
        "cached share from the third request on: cca {ours:.3?}, codex's own resume {theirs:.3?}"
    );
    for (n, (ours, theirs)) in ours.iter().zip(&theirs).enumerate() {
        assert!(ours + 0.005 >= *theirs, "request {}: cca {ours:.3}, codex {theirs:.3}", n + 3);
    }
    // An answer edited by hand reaches the next request, which then starts afresh from the
    // edit; the one after it extends it again.
    let file = r.env.sessions_dir().join("latest");
    let text = std::fs::read_to_string(&file).unwrap();
    let old = filler(3, "Answer", 110);
    let edited = text.replacen(old.trim_end(), "An answer edited by hand.", 1);
    assert_ne!(edited, text, "the fourth answer is in the transcript");
    std::fs::write(&file, edited).unwrap();
    for n in 5..7 {
        r.api.set(Behavior { answer: Some(filler(n, "Answer", 110)), ..Behavior::default() });
        run(&r, &codex, &["search", "-q", "-r", &filler(n, "Question", 105)]).ok();
    }
    let bodies: Vec<Value> = r.api.turns().into_iter().map(|t| t.body).collect();
    let answers = texts(&bodies[5], "assistant");
    assert_eq!(answers[3].trim_end(), "An answer edited by hand.");
    assert!(!extends(&bodies[4], &bodies[5]), "the edit changed what was sent before");
    assert!(extends(&bodies[5], &bodies[6]), "the request after the edit extends it");
}

#[test]
fn turns_of_a_usual_size_are_cached_past_85_percent_from_the_third_request() {
    // A question of about 0.5 KB and an answer of about 2 KB. (The long turns above leave
    // request 3 near 84% for any route, codex's own resume included: what it must send anew,
    // the last answer and the new question, is then a larger share of all it holds.)
    let (r, codex) = codex_real();
    for n in 0..4 {
        r.api.set(Behavior { answer: Some(filler(n, "Answer", 40)), ..Behavior::default() });
        let question = filler(n, "Question", 10);
        let resume: &[&str] = if n > 0 { &["-r"] } else { &["-e", "codex"] };
        run(&r, &codex, &[&["search", "-q"], resume, &[question.as_str()]].concat()).ok();
    }
    let bodies: Vec<Value> = r.api.turns().into_iter().map(|t| t.body).collect();
    assert_eq!(bodies.len(), 4);
    for (n, share) in shares(&bodies).into_iter().enumerate() {
        assert!(share >= 0.85, "request {}: {share:.3} of it cached", n + 3);
    }
}

#[test]
fn codex_answers_a_steer_as_the_next_turn() {
    use cca::transcript::Kind::{Assistant, User};
    let (r, codex) = codex_real();
    r.env.write_config(&format!("[engines.codex]\nprogram = \"{}\"\n", codex.display()));
    let args = ["-e", "codex", "review the auth module"];
    let run = steer_real(&r, &args, Behavior::default(), "focus on JWT");
    run.ok().stderr_has("cca: steer taken: focus on JWT");
    assert_eq!(run.stdout, "ECHO: review the auth module\n\nECHO: focus on JWT");
    // A second codex, sent the whole conversation.
    let turns = r.api.turns();
    assert_eq!(turns.len(), 2, "{turns:?}");
    let body = &turns[1].body;
    assert_eq!(questions(body), ["review the auth module", "focus on JWT"]);
    assert_eq!(texts(body, "assistant"), ["ECHO: review the auth module"]);
    assert_eq!(
        records_of(&r),
        [
            (User, "review the auth module".to_string()),
            (Assistant, "ECHO: review the auth module".to_string()),
            (User, "focus on JWT".to_string()),
            (Assistant, "ECHO: focus on JWT".to_string()),
        ]
    );
}

#[test]
fn an_exported_session_is_resumed_by_codex_with_its_history() {
    let (r, codex) = codex_real();
    run(&r, &codex, &["search", "-q", "-e", "codex", "first question"]).ok();
    run(&r, &codex, &["search", "-q", "-r", "second question"]).ok();
    let exported = run(&r, &codex, &["export", "codex"]);
    let uuid = exported.ok().stdout.trim().to_string();
    assert!(exported.stderr.contains(&format!("codex resume {uuid}")), "{exported}");
    let mut cmd = std::process::Command::new(&codex);
    cmd.env_clear()
        .env("HOME", &r.env.home)
        .env("PATH", r.env.path_var())
        .current_dir(&r.env.work)
        .args(["exec", "--json", "--skip-git-repo-check", "resume", &uuid, "third question"])
        .stdin(Stdio::null());
    let resumed = run_command(cmd, None);
    assert!(resumed.ok().stdout.contains("ECHO: third question"), "{resumed}");
    // The history as real turns, then codex's own context, then the question.
    let body = &r.api.turns().last().unwrap().body.clone();
    let users: Vec<String> =
        texts(body, "user").into_iter().filter(|t| !t.starts_with('<')).collect();
    assert_eq!(users, ["first question", "second question", "third question"]);
    assert_eq!(texts(body, "assistant"), ["ECHO: first question", "ECHO: second question"]);
    // Imported after the resume: not copied, codex's turn goes on in a fork of the session.
    let id = r.env.session_files()[0].replace("session_", "").replace(".md", "");
    let imported = run(&r, &codex, &["import", "codex"]);
    assert!(imported.ok().stdout.contains(&format!("fork of {id} at 2")), "{imported}");
    assert_eq!(r.env.session_files().len(), 2, "{imported}");
}

/// With `CODEX_HOME` set, codex's folder is there and not in `~/.codex`: the settings cca's
/// codex runs with, where `cca export` writes and `cca import` reads, and where `--auto` puts
/// its hook.
#[test]
fn codex_home_is_where_codex_s_settings_and_sessions_are() {
    let (r, codex) = codex_real();
    let elsewhere = r.env.root.path().join("codex-elsewhere");
    std::fs::rename(r.env.home.join(".codex"), &elsewhere).unwrap();
    let run = |args: &[&str]| {
        let mut cmd = r.command();
        cmd.args(args).env("CCA_CODEX", &codex).env("CODEX_HOME", &elsewhere);
        run_command(cmd, None)
    };
    // The loopback provider is in the moved config.toml alone: the turn reaches it only
    // through a link to it.
    run(&["search", "-q", "-e", "codex", "first question"]).ok();
    assert_eq!(r.api.turns().len(), 1);
    let uuid = run(&["export", "codex"]).ok().stdout.trim().to_string();
    let mut cmd = std::process::Command::new(&codex);
    cmd.env_clear()
        .env("HOME", &r.env.home)
        .env("PATH", r.env.path_var())
        .env("CODEX_HOME", &elsewhere)
        .current_dir(&r.env.work)
        .args(["exec", "--json", "--skip-git-repo-check", "resume", &uuid, "second question"])
        .stdin(Stdio::null());
    assert!(run_command(cmd, None).ok().stdout.contains("ECHO: second question"));
    let imported = run(&["import", "codex"]);
    assert!(imported.ok().stdout.contains("fork of"), "{imported}");
    assert!(!r.env.home.join(".codex").exists(), "nothing was written in ~/.codex");
    run(&["import", "--auto", "on"]).ok();
    let config = std::fs::read_to_string(elsewhere.join("config.toml")).unwrap();
    assert!(config.contains("import\", \"--hook\", \"codex\""), "{config}");
    assert!(!r.env.home.join(".codex").exists(), "nothing was written in ~/.codex");
}

/// A wrapper around codex that notes each start (its first argument) in a file: the wrapper,
/// and the file.
fn count_starts(r: &Real, codex: &Path) -> (PathBuf, PathBuf) {
    let log = r.env.root.path().join("codex-starts.log");
    let wrapper = r.env.root.path().join("codex-counted");
    let script = format!(
        "#!/bin/sh\necho \"$1\" >> '{}'\nexec '{}' \"$@\"\n",
        log.display(),
        codex.display()
    );
    std::fs::write(&wrapper, script).unwrap();
    let mut perms = std::fs::metadata(&wrapper).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&wrapper, perms).unwrap();
    (wrapper, log)
}

#[test]
fn cca_chat_keeps_codex_warm_as_its_app_server() {
    let (r, codex) = codex_real();
    let (wrapper, log) = count_starts(&r, &codex);
    r.env.write_config("engine = \"codex\"\n");
    let mut cmd = r.command();
    cmd.arg("chat").env("CCA_CODEX", &wrapper);
    let chat = run_command(cmd, Some(b"c1\nc2\nc3\n"));
    chat.ok();
    for n in 1..=3 {
        assert!(chat.stdout.contains(&format!("ECHO: c{n}")), "{chat}");
    }
    let starts = std::fs::read_to_string(&log).unwrap();
    assert_eq!(starts, "app-server\n", "three messages in one chat start codex once");
    // The kept codex is sent only each new question: each request extends the one before.
    let bodies: Vec<Value> = r.api.turns().into_iter().map(|t| t.body).collect();
    assert_eq!(bodies.len(), 3);
    for (n, pair) in bodies.windows(2).enumerate() {
        assert!(extends(&pair[0], &pair[1]), "request {} does not extend the one before", n + 2);
    }
    assert_eq!(questions(&bodies[2]), ["c1", "c2", "c3"]);
    assert_eq!(answers(&r.transcript()), ["ECHO: c1", "ECHO: c2", "ECHO: c3"]);
    let latest = r.env.latest();
    assert!(latest.contains("\"input_tokens\":10,\"cached_tokens\":4"), "{latest}");
}

#[test]
fn a_kept_codex_resumes_the_history_so_its_first_request_extends_the_cold_one_before() {
    let (r, codex) = codex_real();
    let (wrapper, log) = count_starts(&r, &codex);
    run(&r, &wrapper, &["search", "-q", "-e", "codex", "first question"]).ok();
    run(&r, &wrapper, &["search", "-q", "-r", "second question"]).ok();
    r.env.write_config("engine = \"codex\"\n");
    let mut cmd = r.command();
    cmd.args(["chat", "--resume"]).env("CCA_CODEX", &wrapper);
    let chat = run_command(cmd, Some(b"c1\nc2\n"));
    chat.ok();
    assert!(chat.stdout.contains("ECHO: c1") && chat.stdout.contains("ECHO: c2"), "{chat}");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "exec\nexec\napp-server\n");
    // The kept codex's first request repeats the cold one before it, then adds its answer and
    // the new question; the next extends it in turn.
    let bodies: Vec<Value> = r.api.turns().into_iter().map(|t| t.body).collect();
    assert_eq!(bodies.len(), 4);
    for (n, pair) in bodies.windows(2).enumerate() {
        assert!(extends(&pair[0], &pair[1]), "request {} does not extend the one before", n + 2);
    }
    assert_eq!(questions(&bodies[3]), ["first question", "second question", "c1", "c2"]);
    let asked = ["first question", "second question", "c1", "c2"].map(|q| format!("ECHO: {q}"));
    assert_eq!(answers(&r.transcript()), asked);
    // What codex kept of the resumed thread was removed, as after a cold turn.
    let id =
        r.env.session_files()[0].trim_start_matches("session_").trim_end_matches(".md").to_string();
    let own = r.env.cca_home.join("engines/codex").join(&id).join(".codex/sessions");
    let found = std::process::Command::new("find").arg(&own).args(["-type", "f"]).output().unwrap();
    assert_eq!(String::from_utf8(found.stdout).unwrap(), "", "rollouts left in the session's home");
    // A cold turn after it goes on from the whole conversation.
    run(&r, &wrapper, &["search", "-q", "-r", "third question"]).ok();
    let last = &r.api.turns()[4].body;
    assert_eq!(
        questions(last),
        ["first question", "second question", "c1", "c2", "third question"]
    );
}

#[test]
fn a_kept_codex_forked_from_the_history_keeps_cca_s_native_system_prompt() {
    let (r, codex) = codex_real();
    r.env.write_config("engine = \"codex\"\n[engines.codex]\nsystem_prompt = \"native\"\n");
    run(&r, &codex, &["search", "-q", "first question"]).ok();
    let mut cmd = r.command();
    cmd.args(["chat", "--resume"]).env("CCA_CODEX", &codex);
    run_command(cmd, Some(b"c1\n")).ok();
    let bodies: Vec<Value> = r.api.turns().into_iter().map(|t| t.body).collect();
    assert!(extends(&bodies[0], &bodies[1]), "the kept codex's request extends the cold one");
    let developer = texts(&bodies[1], "developer");
    assert!(developer[0].starts_with("You are a web research assistant"), "{developer:?}");
    assert!(!developer.iter().any(|d| d.contains("Codex CLI")), "{developer:?}");
    assert_eq!(bodies[0]["instructions"], bodies[1]["instructions"]);
}

#[test]
fn codex_follow_ups_take_the_app_server_on_standby() {
    let (r, codex) = codex_real();
    let (wrapper, log) = count_starts(&r, &codex);
    r.env.write_config("engine = \"codex\"\nstandby = \"5m\"\n");
    let ready = || {
        let listed = || r.run(&["standby"]).stdout;
        let waiting =
            || listed().lines().any(|l| l.starts_with("codex") && !l.contains("starting"));
        assert!(wait_until(Duration::from_secs(60), waiting), "{}", listed());
    };
    run(&r, &wrapper, &["search", "first question"]).ok();
    for n in 1..=2 {
        ready();
        let asked = run(&r, &wrapper, &["search", "-r", &format!("follow-up {n}")]);
        assert!(asked.ok().stdout.contains(&format!("ECHO: follow-up {n}")), "{asked}");
    }
    ready();
    // The first turn's `exec`, then an app server left waiting after each turn, two taken.
    let starts = std::fs::read_to_string(&log).unwrap();
    assert_eq!(starts, "exec\napp-server\napp-server\napp-server\n");
    let bodies: Vec<Value> = r.api.turns().into_iter().map(|t| t.body).collect();
    assert_eq!(questions(&bodies[2]), ["first question", "follow-up 1", "follow-up 2"]);
    // Each started from the history as the cold turn before it would resume it.
    for (n, pair) in bodies.windows(2).enumerate() {
        assert!(extends(&pair[0], &pair[1]), "request {} does not extend the one before", n + 2);
    }
    assert!(r.run(&["standby", "--end"]).ok().stdout.contains("codex"));
    // The rollout the ended standby forked stays until the session's next turn.
    let id =
        r.env.session_files()[0].trim_start_matches("session_").trim_end_matches(".md").to_string();
    let own = r.env.cca_home.join("engines/codex").join(&id).join(".codex/sessions");
    let files = || {
        let found = std::process::Command::new("find").arg(&own).args(["-type", "f"]).output();
        String::from_utf8(found.unwrap().stdout).unwrap()
    };
    let left = files();
    assert_eq!(left.lines().count(), 1, "{left}");
    run(&r, &wrapper, &["search", "-q", "-r", "after the end"]).ok();
    assert!(!Path::new(left.trim()).exists(), "{left} stays after the next turn");
    assert!(r.run(&["standby", "--end"]).ok().stdout.contains("codex"));
}
