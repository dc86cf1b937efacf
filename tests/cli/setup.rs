//! What a new user meets: turns that cannot reach an engine record nothing, input is checked
//! for size before it is read or written whole, and every message says what to do.

use std::process::{Command, Stdio};

use crate::common::*;

/// The sessions folder holds no transcript, and the engine never ran.
#[track_caller]
fn nothing_recorded(env: &TestEnv) {
    assert!(env.session_files().is_empty(), "{:?}", env.session_files());
    assert!(env.calls().is_empty(), "the engine ran");
}

#[test]
fn a_command_engine_that_does_not_exist_records_nothing() {
    let env = TestEnv::new();
    env.write_config("[engines.mine]\ncommand = [\"no-such-program-anywhere\"]\n");
    env.run(&["search", "-e", "mine", "where is it?"])
        .code(1)
        .stderr_has("engine mine not found")
        .stderr_has("nothing was recorded; your question was:\nwhere is it?");
    nothing_recorded(&env);
}

#[test]
fn a_question_over_the_input_limit_is_not_written_into_the_transcript() {
    let env = TestEnv::new();
    env.write_config("[engines.claude]\nmax_input_bytes = 20000\n");
    let big = "y".repeat(30_000);
    let run = env.run_with(&["search", "too much?"], Some(big.as_bytes()), &[]);
    run.code(1)
        .stderr_has("over its limit")
        .stderr_has("hint: the question and what is attached to it are too large alone: attach less, or raise max_input_bytes in [engines.claude]")
        .stderr_has("nothing was recorded; your question was:\ntoo much?");
    // No session to clear: a first turn is not told to clear one.
    assert!(!run.stderr.contains("cca clear"), "{run}");
    nothing_recorded(&env);

    // A session that exists is left as it was: no question, no attempt.
    env.run(&["search", "small"]).ok();
    let before = env.latest();
    env.run_with(&["search", "-r", "and this?"], Some(big.as_bytes()), &[])
        .code(1)
        .stderr_has("nothing was recorded");
    assert_eq!(env.latest(), before);
    assert_eq!(env.calls().len(), 1);
    // Over the limit with its history: clearing or compacting the session would help.
    let part = "z".repeat(12_000);
    env.run_with(&["search", "-r", "part one"], Some(part.as_bytes()), &[]).ok();
    env.run_with(&["search", "-r", "part two"], Some(part.as_bytes()), &[])
        .code(1)
        .stderr_has("or `cca clear` or `cca compact` this one");
}

#[test]
fn a_huge_file_is_refused_by_its_size_before_it_is_read() {
    let env = TestEnv::new();
    let huge = env.root.path().join("huge.img");
    // 3 GB, sparse: reading it whole would take 3 GB of memory.
    std::fs::File::create(&huge).unwrap().set_len(3 << 30).unwrap();
    env.run(&["search", "-f", huge.to_str().unwrap(), "what is in it?"])
        .code(2)
        .stderr_has("is 3.0 GiB, more than any engine takes (8.0 MiB); it was not read");
    nothing_recorded(&env);
}

#[test]
fn endless_stdin_is_read_only_up_to_the_limit() {
    let env = TestEnv::new();
    cap_every_engine_at_100_000(&env);
    // Input that never ends: a reader without a bound never returns. For every command that
    // reads stdin: a question (lines), chat's messages (one line that never ends), and a steer
    // (read before the running turn is looked for).
    for (args, refused) in [
        (&["search", "what is this?"][..], "stdin is more than any engine takes (97.7 KiB)"),
        (&["chat"][..], "a message on stdin is over 97.7 KiB"),
        (&["steer"][..], "there is no session to continue yet"),
    ] {
        let mut endless = Command::new("tr")
            .args(["\\0", "x"])
            .stdin(std::fs::File::open("/dev/zero").unwrap())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut cmd = env.command();
        cmd.args(args).stdin(endless.stdout.take().unwrap());
        let endless = Guard(endless);
        let run = run_with_stdin_set(cmd, None);
        drop(endless);
        run.code(2).stderr_has(refused);
    }
    nothing_recorded(&env);
}

/// Turns of at most 100,000 bytes, whichever engine answers.
fn cap_every_engine_at_100_000(env: &TestEnv) {
    env.write_config(
        "[engines.claude]\nmax_input_bytes = 100000\n[engines.gemini]\nmax_input_bytes = 100000\n\
         [engines.codex]\nmax_input_bytes = 100000\n",
    );
}

#[test]
fn a_file_named_for_the_prompt_or_an_import_is_read_only_when_regular_and_not_too_large() {
    let env = TestEnv::new();
    cap_every_engine_at_100_000(&env);
    let fifo = env.root.path().join("fifo");
    make_fifo(&fifo);
    let huge = env.root.path().join("huge.md");
    std::fs::File::create(&huge).unwrap().set_len(3 << 30).unwrap();
    // A FIFO would wait for a writer forever, /dev/zero never end, a 3 GB file fill the memory.
    for (path, why) in [
        (fifo.to_str().unwrap(), "it is a FIFO, not a regular file"),
        ("/dev/zero", "it is a device, not a regular file"),
        (huge.to_str().unwrap(), "it is 3.0 GiB, more than cca takes ("),
    ] {
        env.run(&["search", "--prompt-file", path, "q"]).code(2).stderr_has(why);
        env.run(&["import", "claude", path]).code(1).stderr_has(why);
    }
    nothing_recorded(&env);
}

#[test]
fn a_model_belongs_to_its_engine() {
    let env = TestEnv::new();
    env.write_config(
        "engine = \"claude\"\nmodel = \"sonnet\"\n[engines.gemini]\nmodel = \"gemini-2.5-pro\"\n",
    );
    let argv = |env: &TestEnv| argv_of(&env.last_call()).join(" ");
    let config = env.run(&["config"]);
    assert!(config.ok().stdout.contains("config file (for claude)"), "{config}");
    env.run(&["search", "q"]).ok();
    assert!(argv(&env).contains("--model=sonnet"), "{}", argv(&env));
    // The session's model is claude's too: gemini continuing it gets its own.
    env.run(&["search", "-r", "-e", "gemini", "q"]).ok();
    assert!(argv(&env).contains("--model=gemini-2.5-pro"), "{}", argv(&env));
    // The top-level model is claude's: gemini gets its own.
    env.run(&["search", "-e", "gemini", "q"]).ok();
    assert!(argv(&env).contains("--model=gemini-2.5-pro"), "{}", argv(&env));
    assert!(!argv(&env).contains("sonnet"), "{}", argv(&env));
    assert!(env.latest().contains("\"engine\":\"gemini\",\"model\":\"gemini-2.5-pro\""));

    // CCA_MODEL likewise belongs to the engine named beside it (here the default, claude).
    let env = TestEnv::new();
    env.run_with(&["search", "-e", "gemini", "q"], None, &[("CCA_MODEL", "opus")]).ok();
    assert!(!argv(&env).contains("opus"), "{}", argv(&env));
    env.run_with(&["search", "q"], None, &[("CCA_MODEL", "opus")]).ok();
    assert!(argv(&env).contains("--model=opus"), "{}", argv(&env));
    // A flag is for the engine of the turn, whichever it is.
    env.run(&["search", "-e", "gemini", "-m", "gemini-2.5-flash", "q"]).ok();
    assert!(argv(&env).contains("--model=gemini-2.5-flash"), "{}", argv(&env));
}

#[test]
fn a_model_name_that_reads_as_an_option_is_refused_wherever_it_comes_from() {
    let env = TestEnv::new();
    env.run(&["search", "-m=--yolo", "q"]).code(2).stderr_has("the model name \"--yolo\"");
    env.run_with(&["search", "q"], None, &[("CCA_MODEL", "-x")])
        .code(2)
        .stderr_has("(from CCA_MODEL)");
    env.write_config("[engines.claude]\nmodel = \"two words\"\n");
    env.run(&["search", "q"]).code(2).stderr_has("the model name \"two words\"");
    env.write_config("model = \"--resume=latest\"\n");
    env.run(&["search", "q"]).code(2).stderr_has("config.toml");
    // One far too long for a name would make a header no cca reads: refused, nothing made.
    let long = "a".repeat(70_000);
    env.write_config("");
    env.run(&["search", "-m", &long, "q"]).code(2).stderr_has("is over 256 characters");
    nothing_recorded(&env);
    // So is an engine's name made of control characters, or far too long.
    let long_engine = format!("[engines.{}]\ncommand = [\"x\"]\n", "e".repeat(100));
    for config in ["[engines.\"a\\u001b[31mRED\"]\ncommand = [\"x\"]\n", long_engine.as_str()] {
        env.write_config(config);
        env.run(&["search", "q"]).code(2).stderr_has("is not a usable engine name");
    }
    nothing_recorded(&env);
}

/// An editor's embedded resource is an attachment like a `-f` file: one with a NUL byte is
/// refused the same way, before anything is recorded or sent.
#[test]
fn an_acp_resource_with_a_nul_byte_is_refused_like_a_file() {
    let env = TestEnv::new();
    let out = crate::acp::sdk(
        &env,
        &[
            crate::acp::new_session("s", &env.work),
            serde_json::json!({"call": "session/prompt", "as": "p", "params": {"sessionId": "$s.sessionId", "prompt": [
                {"type": "text", "text": "what is in it?"},
                {"type": "resource", "resource": {"uri": "file:///bin.dat", "text": "a\u{0}b"}},
            ]}}),
        ],
        &[],
    );
    let error = &out["results"]["p"]["error"];
    assert_eq!(error["code"], -32602, "{out}");
    assert!(
        error["message"].as_str().unwrap().contains("file:///bin.dat holds a NUL byte"),
        "{error}"
    );
    assert!(env.calls().is_empty());
    let id = crate::acp::id_of(&out, "s");
    let kept = std::fs::read_to_string(env.session_path(&id)).unwrap_or_default();
    assert!(!kept.contains("<!-- cca:user"), "no question recorded: {kept}");
}

/// Exit 2 and the file's line for every config error, bad values included; exit 2 for a prompt
/// file that cannot be used, however it was named, and for a variable that makes no sense.
#[test]
fn one_exit_code_for_bad_settings_with_the_line_of_every_config_error() {
    let env = TestEnv::new();
    let config = env.cca_home.join("config.toml");
    let config = config.display();
    let faults = [
        ("colour = true\n", ":1:1"),
        ("engine = \"claude\"\n\n[compaction]\nthreshold = 1.5\n", ":4: threshold is a share"),
        ("[engines.claude]\nbytes_per_token = 0.1\n", ":2: [engines.claude] bytes_per_token"),
        ("engine = \"nope\"\n", ":1: unknown engine `nope`"),
        ("prompt = \"../x\"\n", ":1:"),
        ("[engines.mine]\nmodel_arg = \"-m\"\n", ":1: [engines.mine] needs `command`"),
    ];
    for (text, at) in faults {
        env.write_config(text);
        env.run(&["search", "q"]).code(2).stderr_has(&format!("{config}{at}"));
    }
    std::fs::remove_file(env.cca_home.join("config.toml")).unwrap();
    env.run_with(&["search", "q"], None, &[("CCA_NOW", "garbage")])
        .code(2)
        .stderr_has("CCA_NOW is not an RFC 3339 time");
    env.run(&["search", "--prompt-file", "/no/such/prompt.md", "q"])
        .code(2)
        .stderr_has("the prompt file /no/such/prompt.md cannot be used");
    nothing_recorded(&env);

    // The doctor still looks at everything else, and names the file's fault first.
    for (text, at) in faults {
        env.write_config(text);
        let doctor = env.run(&["doctor"]);
        doctor.code(1);
        assert!(doctor.stdout.contains(&format!("config: {config} (not used")), "{doctor}");
        let problems = doctor.stdout.split("problems:\n").nth(1).unwrap_or_default();
        assert!(problems.starts_with(&format!("  - {config}{at}")), "{doctor}");
        assert!(doctor.stdout.contains("engines:\n  claude "), "{doctor}");
    }
}

#[test]
fn a_config_key_that_does_not_apply_to_its_engine_is_an_error_naming_it() {
    let env = TestEnv::new();
    let config = env.cca_home.join("config.toml");
    for (text, says) in [
        (
            "[engines.gemini]\ntools = \"x\"\n",
            ":2: [engines.gemini] `tools` does not apply to gemini: it is for claude",
        ),
        (
            "[engines.claude]\npolicy = \"/x\"\n",
            ":2: [engines.claude] `policy` does not apply to claude: it is for gemini",
        ),
        ("[engines.claude]\ncommand = [\"x\"]\n", "`command` does not apply to claude"),
        (
            "[engines.mine]\ncommand = [\"x\"]\nretries = 1\n",
            ":3: [engines.mine] `retries` does not apply to mine: it is for claude and gemini",
        ),
        (
            "[engines.claude]\nversion_args = [\"-v\"]\n",
            ":2: [engines.claude] `version_args` does not apply to claude: it is for engines \
             declared with `command` and engines declared with `acp`",
        ),
        (
            "[engines.a]\nacp = [\"x\"]\nmodel = \"m\"\n",
            ":3: [engines.a] `model` does not apply to a",
        ),
        (
            "[engines.mine]\ncommand = [\"x\"]\nmodel = \"m\"\n",
            ":3: [engines.mine] `model` needs `model_arg`",
        ),
    ] {
        env.write_config(text);
        env.run(&["config"]).code(2).stderr_has(&format!("{}", config.display())).stderr_has(says);
    }
}

/// `cca config` lists, for each engine, only keys its `[engines.NAME]` takes: each one it
/// shows, written into the file, is accepted.
#[test]
fn cca_config_lists_only_the_keys_each_engine_takes() {
    let env = TestEnv::new();
    let declared = "[engines.a]\nacp = [\"x\"]\n[engines.mine]\ncommand = [\"x\"]\n";
    env.write_config(declared);
    let listed = env.run(&["config"]).ok().stdout.clone();
    let rows: Vec<(String, String)> = listed
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.strip_prefix("engines.").map(str::to_string))
        .filter_map(|k| k.split_once('.').map(|(e, k)| (e.to_string(), k.to_string())))
        .filter(|(_, key)| key != "kind" && !key.starts_with("model_budgets."))
        .collect();
    assert!(rows.len() > 30, "{listed}");
    for (engine, key) in rows {
        let value = match key.as_str() {
            "command" | "acp" | "args" | "version_args" => "[\"x\"]",
            "system_prompt" | "history" => "\"inline\"",
            "max_input_bytes" | "retries" | "context_budget" => "1",
            "bytes_per_token" => "3.5",
            "keep_warm" | "standby" => "\"5m\"",
            _ => "\"x\"",
        };
        let model_arg =
            if engine == "mine" && key == "model" { "model_arg = \"-m\"\n" } else { "" };
        let table = match engine.as_str() {
            "a" => "[engines.a]\n".to_string() + if key == "acp" { "" } else { "acp = [\"x\"]\n" },
            "mine" => {
                "[engines.mine]\n".to_string()
                    + if key == "command" { "" } else { "command = [\"x\"]\n" }
            }
            builtin => format!("[engines.{builtin}]\n"),
        };
        env.write_config(&format!("{table}{model_arg}{key} = {value}\n"));
        let run = env.run(&["config"]);
        assert_eq!(
            run.code,
            Some(0),
            "`cca config` lists engines.{engine}.{key}, which the file refuses\n{run}"
        );
    }
}

/// A model for an engine that cannot take one is refused before anything is sent or recorded,
/// wherever it was chosen, instead of being dropped.
#[test]
fn a_model_for_an_engine_that_takes_none_is_refused() {
    let env = TestEnv::new();
    env.add_engine("plain");
    env.write_config("[engines.plain]\ncommand = [\"plain\"]\n");
    env.run(&["search", "-e", "plain", "-m", "big", "q"])
        .code(2)
        .stderr_has("engine plain takes no model, and `big` was chosen; nothing was sent")
        .stderr_has("set model_arg in [engines.plain]");
    env.run_with(&["search", "q"], None, &[("CCA_ENGINE", "plain"), ("CCA_MODEL", "big")])
        .code(2)
        .stderr_has("cca: error: CCA_MODEL: engine plain takes no model");
    nothing_recorded(&env);
    // With model_arg, it is passed.
    env.write_config("[engines.plain]\ncommand = [\"plain\"]\nmodel_arg = \"-m\"\n");
    env.run(&["search", "-e", "plain", "-m", "big", "q"]).ok();
    let argv = env.last_call()["argv"].to_string();
    assert!(argv.contains("\"-m\",\"big\""), "{argv}");
}

/// A session's prompt file moved: the follow-up says what to do, and `--prompt-file` on it
/// makes the new file the session's prompt for good (recorded in its header).
#[test]
fn a_session_takes_a_new_prompt_file_for_good() {
    let env = TestEnv::new();
    let (old, new) = (env.root.path().join("old.md"), env.root.path().join("new.md"));
    std::fs::write(&old, "You are the old prompt.").unwrap();
    std::fs::write(&new, "You are the new prompt.").unwrap();
    env.run(&["search", "--prompt-file", old.to_str().unwrap(), "first"]).ok();
    std::fs::remove_file(&old).unwrap();
    env.run(&["search", "-r", "second"])
        .code(2)
        .stderr_has("which cannot be read")
        .stderr_has("makes it this session's prompt from then on");
    env.run(&["search", "-r", "--prompt-file", new.to_str().unwrap(), "second"])
        .ok()
        .stderr_has(&format!("this session's system prompt is now `{}`", new.display()));
    assert!(
        env.latest().contains(&format!("\"prompt\":\"{}\"", new.display())),
        "{}",
        env.latest()
    );
    // The next turns use it without being told.
    let run = env.run(&["search", "-r", "third"]);
    run.ok();
    assert!(!run.stderr.contains("prompt"), "{run}");
    let system = tag(stdin_of(&env.last_call()), "system_instructions").unwrap().to_string();
    assert_eq!(system, "You are the new prompt.");
    assert_eq!(env.last_users(), ["first", "second"]);
}

#[test]
fn messages_say_what_happened_and_what_to_do() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "one"]).ok();
    let run = env.run(&["sessions", "--engine", "gemini"]);
    run.ok().stderr_has("the only session does not match the filter --engine\n");
    assert!(!run.stderr.contains("no sessions yet"), "{run}");
    env.run(&["search", ""]).code(2).stderr_has("the question is empty");
    let run = env.run(&["what is rust"]);
    run.code(2)
        .stderr_has("`what is rust` is not a cca command")
        .stderr_has("cca search 'what is rust'");
    assert!(!run.stderr.contains("chat"), "{run}");
    env.run(&["what", "is", "rust"]).code(2).stderr_has("cca search 'what is rust'");
    // Every word from the first on is the question's, as `cca search` takes them.
    let run = env.run(&["what", "does", "--json", "mean"]);
    run.code(2).stderr_has("cca search 'what does --json mean'");
    assert!(run.stdout.is_empty(), "{run}");
    // Options of `cca search` before a question with no command: that command is named.
    let sessions = std::fs::read_dir(env.sessions_dir()).unwrap().count();
    env.run(&["-q", "what", "is", "this"])
        .code(2)
        .stderr_has("`-q` is an option of `cca search`, not of cca itself")
        .stderr_has("to ask it: cca search -q what is this");
    env.run(&["-e", "claude", "--model=opus", "why?"])
        .code(2)
        .stderr_has("to ask it: cca search -e claude --model=opus 'why?'");
    let run = env.run(&["--json", "what", "is", "this"]);
    let printed: serde_json::Value = serde_json::from_str(run.code(2).stdout.trim()).unwrap();
    assert_eq!(printed["hint"], "to ask it: cca search --json what is this", "{run}");
    // As `cca search` reads them: clusters, values attached, a `--`.
    for (args, ask) in [
        (&["-qr", "follow", "up"][..], "cca search -qr follow up"),
        (&["-qe", "gemini", "what"], "cca search -qe gemini what"),
        (&["-egemini", "what"], "cca search -egemini what"),
        (&["-q", "--", "-x", "what"], "cca search -q -- -x what"),
        (&["-q", "=ls"], "cca search -q '=ls'"),
    ] {
        env.run(args).code(2).stderr_has(&format!("to ask it: {ask}\n"));
    }
    // A `--json` in the question is the question's: no JSON error.
    let run = env.run(&["-q", "what", "is", "--json"]);
    assert!(run.code(2).stdout.is_empty(), "{run}");
    // Not options of `cca search` as it takes them, or no question: clap's own words.
    for args in [
        &["--bogus", "what"][..],
        &["-q"],
        &["--json=x", "what"],
        &["-q=x", "what"],
        &["-e", "gemini"],
    ] {
        let run = env.run(args);
        assert!(!run.code(2).stderr.contains("option of `cca search`"), "{run}");
    }
    assert_eq!(std::fs::read_dir(env.sessions_dir()).unwrap().count(), sessions, "nothing asked");
    // The question as a shell takes it back: nothing in it is run or expanded when pasted.
    let asked = "explain $(touch pwned) and `id`, $PATH and it's !!";
    let run = env.run(&[asked]);
    let hint = run.code(2).stderr.lines().find(|l| l.contains("to ask it")).unwrap().to_string();
    let pasted = hint.split("to ask it: ").nth(1).unwrap().replace("cca search ", "printf %s ");
    let shell = std::process::Command::new("sh")
        .args(["-c", &pasted])
        .current_dir(&env.work)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&shell.stdout), asked, "{hint}");
    assert!(!env.work.join("pwned").exists());
    // A word one edit away from a command is a typo of it, said first, with the rest as typed.
    let run = env.run(&["serach", "foo", "bar baz"]);
    run.code(2).stderr_has(
        "cca: error: `serach` is not a cca command\n\
         hint: did you mean `cca search foo 'bar baz'`?\n\
         hint: to ask it as a question: cca search 'serach foo bar baz'\n",
    );
    env.run(&["sesions"]).code(2).stderr_has("did you mean `cca sessions`?");
    let run = env.run(&["shwo", "x", "--json"]);
    assert!(run.stdout.contains("did you mean `cca show x --json`?"), "{run}");
    assert!(env.session_files().len() == 1 && env.calls().len() == 1, "nothing more ran");
    env.run_with(&["search", "-r", "q"], None, &[("CCA_SESSION", "nosuch")])
        .code(2)
        .stderr_has("CCA_SESSION names `nosuch`")
        .stderr_has("unset CCA_SESSION");
    // Stopped before a word arrived: no partial answer to speak of.
    let mut cmd = env.command();
    cmd.args(["search", "-r", "q"])
        .env("FAKE_SCRIPT", "hang")
        .env("CCA_GRACE_MS", "100")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let cca = Guard(cmd.spawn().unwrap());
    assert!(wait_until(TIMEOUT, || env.calls().len() == 2), "the engine started");
    cca.signal(rustix::process::Signal::TERM);
    let out = cca.finish();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("interrupted (SIGTERM)"), "{stderr}");
    assert!(!stderr.contains("partial answer"), "{stderr}");
}

#[test]
fn json_always_answers_in_json() {
    let env = TestEnv::new();
    let json = |run: &Run| -> serde_json::Value {
        serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {run}"))
    };
    // An argument error.
    let run = env.run(&["search", "--json", "--no-such-flag", "q"]);
    run.code(2);
    let v = json(&run);
    assert_eq!(v["ok"], false);
    assert!(v["error"].as_str().unwrap().contains("--no-such-flag"), "{v}");
    // A settings error, and a turn that recorded nothing.
    let run = env.run_with(&["search", "--json", "q"], None, &[("CCA_NOW", "garbage")]);
    run.code(2);
    assert!(json(&run)["error"].as_str().unwrap().contains("CCA_NOW"));
    let none = TestEnv::with_engines(&[]);
    let run = none.run(&["search", "--json", "q"]);
    run.code(1);
    assert!(json(&run)["error"].as_str().unwrap().contains("not found"));
    // A failed turn: the session's figures are numbers like the turn's.
    let run =
        env.run_with(&["search", "--json", "q"], None, &[("FAKE_SCRIPT", "fail the API is down")]);
    run.code(1);
    let v = json(&run);
    assert_eq!(v["ok"], false);
    assert_eq!(v["usage"]["input_tokens"], 0, "{v}");
    assert_eq!(v["session_usage"]["input_tokens"], 0, "{v}");
    // Like an error before the turn: how cca exits, and what to do.
    assert_eq!(v["exit_code"], 1, "{v}");
    assert!(v["hint"].as_str().is_some_and(|h| h.contains("claude doctor")), "{v}");
    // `model` says what ran: the model the engine reported without -m.
    let run = env.run(&["search", "--json", "q"]);
    run.ok();
    assert_eq!(json(&run)["model"], "fake-claude");
    assert_eq!(
        (&json(&run)["exit_code"], &json(&run)["hint"]),
        (&0.into(), &serde_json::Value::Null)
    );
}

#[test]
fn a_command_engine_gets_its_model_in_a_form_that_is_no_option() {
    let env = TestEnv::new();
    env.add_engine("plain-engine");
    env.write_config(
        "[engines.long]\ncommand = [\"plain-engine\"]\nmodel_arg = \"--model\"\n\
         [engines.short]\ncommand = [\"plain-engine\"]\nmodel_arg = \"-m\"\n",
    );
    let args = |env: &TestEnv| argv_of(&env.last_call())[1..].join(" ");
    env.run_with(&["search", "-e", "long", "-m", "gpt-x", "q"], None, &[("FAKE_SCRIPT", "say a")])
        .ok();
    assert_eq!(args(&env), "--model=gpt-x");
    env.run_with(&["search", "-e", "short", "-m", "gpt-x", "q"], None, &[("FAKE_SCRIPT", "say a")])
        .ok();
    assert_eq!(args(&env), "-m gpt-x");
    env.run(&["search", "-e", "short", "--model=-x", "q"])
        .code(2)
        .stderr_has("the model name \"-x\"");
}

/// An editor's model option reaches the engine's command line like any other: a name that
/// reads as an option is refused when it is chosen.
#[test]
fn an_acp_model_option_that_reads_as_an_option_is_refused() {
    let env = TestEnv::new();
    let out = crate::acp::sdk(
        &env,
        &[
            crate::acp::new_session("s", &env.work),
            serde_json::json!({"call": "session/set_config_option", "as": "set",
                   "params": {"sessionId": "$s.sessionId", "configId": "model", "value": "--yolo"}}),
        ],
        &[],
    );
    let error = &out["results"]["set"]["error"];
    assert_eq!(error["code"], -32602, "{out}");
    assert!(error.to_string().contains("the model name"), "{error}");
}

/// Every `CCA_*` variable `cca config --help` lists, given a value cca refuses: the error names
/// the variable, whichever check refuses it, and nothing is recorded.
#[test]
fn every_cca_variable_with_a_bad_value_is_named_in_its_error() {
    let env = TestEnv::new();
    let cases: &[(&str, &str, &[&str])] = &[
        ("CCA_HOME", "relative/dir", &["search", "q"]),
        ("CCA_ENGINE", "nope", &["search", "q"]),
        ("CCA_MODEL", "-x", &["search", "q"]),
        ("CCA_PROMPT", "nope", &["search", "q"]),
        ("CCA_PROMPT", "../x", &["search", "q"]),
        ("CCA_SESSION", "nope", &["search", "-r", "q"]),
        ("CCA_CLAUDE", "/no/such/claude", &["search", "-e", "claude", "q"]),
        ("CCA_GEMINI", "/no/such/gemini", &["search", "-e", "gemini", "q"]),
        ("CCA_CODEX", "/no/such/codex", &["search", "-e", "codex", "q"]),
        ("CCA_NOW", "yesterday", &["search", "q"]),
        ("CCA_GRACE_MS", "soon", &["search", "q"]),
    ];
    for (var, value, args) in cases {
        let run = env.run_with(args, None, &[(var, value)]);
        assert_ne!(run.code, Some(0), "{var}={value}\n{run}");
        let error = run.stderr.lines().find(|l| l.starts_with("cca: error:")).unwrap_or("");
        assert!(error.contains(var), "{var}={value}: the error does not name it\n{run}");
        assert!(!run.stderr.contains(&format!("set {var} to its path")), "{run}");
    }
    nothing_recorded(&env);
    // The class: every variable the help lists is among them (CCA_COMPLETE is clap's own).
    let help = env.run(&["config", "--help"]).ok().stdout.clone();
    let listed: std::collections::BTreeSet<&str> = help
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.len() > 4 && w.starts_with("CCA_") && *w != "CCA_COMPLETE")
        .collect();
    let tested: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.0).collect();
    assert_eq!(listed, tested);
}
