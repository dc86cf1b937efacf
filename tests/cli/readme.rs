//! The README is a manual, and every command in it must work: each `cca` command line in its
//! shell examples parses with the real CLI, and every setting it should document is there.

use clap::Parser;

fn readme() -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .unwrap()
}

/// Shell words of a line: quotes group, `#` outside quotes starts a comment.
fn words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (None, '#') if !any => break,
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, ' ' | '\t') => {
                if any {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (_, c) => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(word);
    }
    words
}

/// Every `cca ...` invocation on a line: at its start, after a pipe, or inside `$(...)`.
fn invocations(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let line = line.trim();
    if let Some(rest) = line.strip_prefix(", ") {
        found.push(format!("cca , {rest}"));
    }
    for (i, _) in line.match_indices("cca ") {
        let before = line[..i].trim_end();
        let starts_command =
            i == 0 || before.ends_with('|') || before.ends_with("$(") || before.ends_with("&&");
        if !starts_command {
            continue;
        }
        let mut text = &line[i..];
        if before.ends_with("$(") {
            text = &text[..text.find(')').unwrap_or(text.len())];
        }
        for stop in [" | ", " && ", " > ", "; "] {
            if let Some(at) = text.find(stop) {
                text = &text[..at];
            }
        }
        found.push(text.to_string());
    }
    found
}

#[test]
fn every_cca_command_in_the_readme_parses() {
    let text = readme();
    let mut checked = 0;
    let mut in_shell = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_shell = line.trim() == "```sh";
            continue;
        }
        if !in_shell {
            continue;
        }
        for invocation in invocations(line) {
            let args = words(&invocation);
            if let Err(e) = cca::cli::Cli::try_parse_from(&args) {
                panic!("README: `{invocation}` does not parse:\n{e}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} commands found in the README's examples");
}

#[test]
fn the_readme_documents_every_setting_and_command() {
    use clap::CommandFactory;
    let text = readme();
    for var in cca::vars::ALL {
        assert!(text.contains(var), "README lacks {var}");
    }
    assert!(text.contains("CCA_COMPLETE"));
    for key in cca::config::FILE_KEYS
        .iter()
        .chain(cca::config::ENGINE_KEYS)
        .chain(cca::config::COMPACTION_KEYS)
    {
        assert!(text.contains(&format!("{key} =")), "README lacks the config key {key}");
    }
    for sub in cca::cli::Cli::command().get_subcommands() {
        let name = sub.get_name();
        assert!(text.contains(&format!("cca {name}")), "README lacks `cca {name}`");
    }
    for code in ["| 0 |", "| 1 |", "| 2 |", "| 75 |", "130"] {
        assert!(text.contains(code), "README lacks exit code {code}");
    }
}

#[test]
fn config_help_lists_every_key_and_variable() {
    use clap::CommandFactory;
    let mut cmd = cca::cli::Cli::command();
    let help = cmd.find_subcommand_mut("config").unwrap().render_long_help().to_string();
    for var in cca::vars::ALL {
        assert!(help.contains(var), "cca config --help lacks {var}");
    }
    for key in cca::config::FILE_KEYS
        .iter()
        .chain(cca::config::ENGINE_KEYS)
        .chain(cca::config::COMPACTION_KEYS)
    {
        assert!(help.contains(key), "cca config --help lacks {key}");
    }
}
