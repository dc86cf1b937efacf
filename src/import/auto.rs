//! cca's end-of-session hook in another tool's settings, put in and taken out: text in, text
//! out; nothing here touches a file (`cmd::import::auto` reads and writes them through `store`).
//!
//! Claude Code and gemini-cli keep hooks in a JSON settings file: `hooks.SessionEnd` is a list
//! of groups, each `{"hooks": [{"type": "command", "command": "..."}]}`. codex keeps one
//! `notify` program (an argv list) in its config.toml. The file is edited as text, not parsed
//! and written again: only cca's entry goes in or out, and the user's hooks, key order, spacing
//! and comments elsewhere stay as they were. A JSON file with comments (gemini allows them) is
//! refused: serde_json cannot read it, and a guess at its structure could break it.

use serde_json::Value;

/// Why a settings file was left alone.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Refusal {
    /// The file has `//` or `/* */` comments.
    Comments,
    /// The file is not JSON (or not TOML, for codex): what the parser said.
    NotParsed(String),
    /// A part cca would edit is not the shape the tool reads (`hooks` not an object...).
    Shape(&'static str),
}

/// Whether a hook's command is cca's for `tool`, whatever path cca was at when it went in:
/// `import --hook TOOL` run by a program called `cca` (`cca`, `'/opt/cca'`). A program of the
/// user's with the same words (`my-backup import --hook claude`, `cca-notify ...`) is not
/// cca's; `on` refuses to put in a hook whose program it would not know again.
pub(crate) fn is_ours(command: &str, tool: &str) -> bool {
    let Some(program) = command.trim_end().strip_suffix(&format!(" import --hook {tool}")) else {
        return false;
    };
    let program = program.trim_end().trim_end_matches(['\'', '"']);
    let name = program.rsplit(['/', ' ', '\'', '"']).next().unwrap_or(program);
    name == "cca"
}

/// The settings with cca's `SessionEnd` hook `command` added, or `None` when a hook of cca's
/// for `tool` is there already. `text` is the file, `None` when there is none.
pub(crate) fn json_on(
    text: Option<&str>,
    tool: &str,
    command: &str,
) -> Result<Option<String>, Refusal> {
    if let Some(layout) = text.and_then(Layout::of) {
        return layout.restore(json_on(Some(&layout.body), tool, command));
    }
    let quoted = serde_json::to_string(command).unwrap_or_default();
    let entry = format!("{{\"hooks\": [{{\"type\": \"command\", \"command\": {quoted}}}]}}");
    let text = text.unwrap_or("");
    if text.trim().is_empty() {
        return Ok(Some(format!(
            "{{\n  \"hooks\": {{\n    \"SessionEnd\": [\n      {entry}\n    ]\n  }}\n}}\n"
        )));
    }
    if let Err(Refusal::Comments) = parse(text) {
        // Not written in, but there already (put by hand, as the refusal says): nothing to do.
        let read = uncommented(text);
        if parse(&read).is_ok() && find_ours(&read, tool)?.is_some_and(|f| f.command == command) {
            return Ok(None);
        }
    }
    parse(text)?;
    if let Some(found) = find_ours(text, tool)? {
        if found.command == command {
            return Ok(None);
        }
        // cca's hook from another place (cca moved, or its home changed): replaced.
        let without = json_off(text, tool)?.ok_or(Refusal::Shape(CANNOT_TAKE_OUT))?;
        return json_on(Some(&without), tool, command);
    }
    let b = text.as_bytes();
    let root = skip_space(b, 0);
    let Some(hooks) = member(b, root, "hooks") else {
        let item = format!("\"hooks\": {{\"SessionEnd\": [{entry}]}}");
        return Ok(Some(insert(text, root, &item)));
    };
    if b[hooks] != b'{' {
        return Err(Refusal::Shape("\"hooks\" is not an object"));
    }
    let Some(end) = member(b, hooks, "SessionEnd") else {
        return Ok(Some(insert(text, hooks, &format!("\"SessionEnd\": [{entry}]"))));
    };
    if b[end] != b'[' {
        return Err(Refusal::Shape("\"hooks\".\"SessionEnd\" is not a list"));
    }
    Ok(Some(insert(text, end, &entry)))
}

/// Said when a hook of cca's is seen and yet cannot be taken out: never written over.
const CANNOT_TAKE_OUT: &str = "cca's hook is there but cannot be taken out";

/// The settings without cca's hooks for `tool` (every one: two homes may each have put one
/// in), or `None` when there is none. A list or object left empty by them goes too, so that a
/// file cca added `hooks` to loses it again.
pub(crate) fn json_off(text: &str, tool: &str) -> Result<Option<String>, Refusal> {
    if let Some(layout) = Layout::of(text) {
        return layout.restore(json_off(&layout.body, tool));
    }
    let Some(mut without) = json_off_one(text, tool)? else { return Ok(None) };
    while let Some(fewer) = json_off_one(&without, tool)? {
        without = fewer;
    }
    Ok(Some(without))
}

/// The settings without the first hook of cca's for `tool`.
fn json_off_one(text: &str, tool: &str) -> Result<Option<String>, Refusal> {
    parse(text)?;
    let Some(at) = find_ours(text, tool)? else { return Ok(None) };
    let b = text.as_bytes();
    // Innermost first: the hook in its group, the group in SessionEnd, SessionEnd in hooks,
    // hooks in the file; each is taken out whole when it would be left empty.
    let chain = [at.root, at.hooks, at.session_end, at.group_hooks];
    let indices = [at.hooks_index, at.session_end_index, at.group_index, at.hook_index];
    for level in (0..4).rev() {
        let (items, _) = items(b, chain[level]);
        if items.len() > 1 || level == 0 {
            return Ok(Some(remove(text, chain[level], indices[level])));
        }
    }
    unreachable!("the loop returns at level 0")
}

/// codex's config with cca's hook as `notify`: `ours` is cca's argv; a notify of the user's is
/// kept after `--`, for cca's hook to run. `None` when cca's is there already.
pub(crate) fn codex_on(text: Option<&str>, ours: &[String]) -> Result<Option<String>, Refusal> {
    if let Some(layout) = text.and_then(Layout::of) {
        return layout.restore(codex_on(Some(&layout.body), ours));
    }
    let mut doc: toml_edit::DocumentMut = text
        .unwrap_or("")
        .parse()
        .map_err(|e: toml_edit::TomlError| Refusal::NotParsed(e.to_string()))?;
    if codex_has_ours(text.unwrap_or("")) {
        let argv = doc.get("notify").map(notify_argv).transpose()?.unwrap_or_default();
        if argv.starts_with(ours) && argv.get(ours.len()).is_some_and(|a| a == "--") {
            return Ok(None);
        }
        // cca's hook from another place (cca moved, or its home changed): replaced.
        let without = codex_off(text.unwrap_or(""))?.ok_or(Refusal::Shape(CANNOT_TAKE_OUT))?;
        return codex_on(Some(&without), ours);
    }
    let head = ours.iter().map(String::as_str).chain(["--"]);
    match doc.get_mut("notify") {
        // In place, cca's words put before the user's: the key keeps its spot, and each of the
        // user's words its own line and comments.
        Some(item) => {
            notify_argv(item)?;
            let array = item.as_array_mut().ok_or(Refusal::Shape("notify is not a list"))?;
            if let Some(first) = array.get_mut(0)
                && first.decor().prefix().is_none_or(|p| p.as_str() == Some(""))
            {
                first.decor_mut().set_prefix(" ");
            }
            for (i, word) in head.enumerate() {
                array.insert(i, word);
            }
        }
        None => {
            // A key added to the root table is written after the root's other keys and before
            // any [table], where codex reads top-level keys.
            doc.insert("notify", toml_edit::value(head.collect::<toml_edit::Array>()));
        }
    }
    Ok(Some(doc.to_string()))
}

/// codex's config without cca's hook: the user's own notify back in its place, or no notify.
/// `None` when cca's is not there.
pub(crate) fn codex_off(text: &str) -> Result<Option<String>, Refusal> {
    if let Some(layout) = Layout::of(text) {
        return layout.restore(codex_off(&layout.body));
    }
    let mut doc: toml_edit::DocumentMut =
        text.parse().map_err(|e: toml_edit::TomlError| Refusal::NotParsed(e.to_string()))?;
    let Some(item) = doc.get("notify") else { return Ok(None) };
    let argv = notify_argv(item)?;
    // cca's words end at `--`; a notify written by hand without it may be cca's alone.
    let cut = argv.iter().position(|a| a == "--").unwrap_or(argv.len());
    if !is_ours(&argv[..cut].join(" "), "codex") {
        return Ok(None);
    }
    if cut + 1 >= argv.len() {
        doc.remove("notify");
    } else if let Some(array) = doc.get_mut("notify").and_then(toml_edit::Item::as_array_mut) {
        // cca's words taken out; the user's stay as they are written.
        for _ in 0..=cut {
            array.remove(0);
        }
        if let Some(first) = array.get_mut(0)
            && first.decor().prefix().and_then(|p| p.as_str()) == Some(" ")
        {
            first.decor_mut().set_prefix("");
        }
    }
    Ok(Some(doc.to_string()))
}

/// A byte-order mark and CRLF line ends, which serde_json and toml_edit do not keep: taken off
/// before an edit and put back after, so that the edit changes cca's entry alone. (A file
/// whose lines end both ways is edited as it is: the entry's line ends in LF.)
struct Layout {
    bom: bool,
    crlf: bool,
    body: String,
}

impl Layout {
    fn of(text: &str) -> Option<Layout> {
        let (bom, body) = match text.strip_prefix('\u{feff}') {
            Some(body) => (true, body),
            None => (false, text),
        };
        let crlf =
            body.contains("\r\n") && body.matches('\n').count() == body.matches("\r\n").count();
        let body = if crlf { body.replace("\r\n", "\n") } else { body.to_string() };
        (bom || crlf).then_some(Layout { bom, crlf, body })
    }

    fn restore(&self, edited: Result<Option<String>, Refusal>) -> Result<Option<String>, Refusal> {
        Ok(edited?.map(|text| {
            let text = if self.crlf { text.replace('\n', "\r\n") } else { text };
            if self.bom { format!("\u{feff}{text}") } else { text }
        }))
    }
}

/// Whether codex's config has cca's notify.
pub(crate) fn codex_has_ours(text: &str) -> bool {
    let text = text.trim_start_matches('\u{feff}');
    let Ok(doc) = text.parse::<toml_edit::DocumentMut>() else { return false };
    doc.get("notify").and_then(|item| notify_argv(item).ok()).is_some_and(|argv| {
        let head = argv.iter().position(|a| a == "--").unwrap_or(argv.len());
        is_ours(&argv[..head].join(" "), "codex")
    })
}

/// The program cca's hook for `tool` runs and the `CCA_HOME` it gives it, if the settings
/// (`codex`: its config.toml) have cca's hook: for `cca doctor` to say whether it still works.
pub(crate) fn hook_runs(text: &str, tool: &str) -> Option<(String, Option<String>)> {
    let text = text.trim_start_matches('\u{feff}');
    let words = match tool {
        "codex" => {
            let doc = text.parse::<toml_edit::DocumentMut>().ok()?;
            let argv = notify_argv(doc.get("notify")?).ok()?;
            let head = argv.iter().position(|a| a == "--").unwrap_or(argv.len());
            argv[..head].to_vec()
        }
        tool => {
            let text = uncommented(text);
            parse(&text).ok()?;
            sh_words(&find_ours(&text, tool).ok()??.command)
        }
    };
    let program = words.len().checked_sub(4).and_then(|i| words.get(i))?;
    (is_ours(&format!("{} import --hook {tool}", program), tool)).then_some(())?;
    let home = words.iter().find_map(|w| w.strip_prefix("CCA_HOME=")).map(String::from);
    Some((program.clone(), home))
}

/// A command's words as sh splits them: `'...'` taken as written, `"..."` and `\` with their
/// escapes (enough for what cca writes, and what a person writes by hand in its place).
fn sh_words(command: &str) -> Vec<String> {
    let (mut words, mut word, mut started) = (Vec::new(), String::new(), false);
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                started = true;
                word.extend(chars.by_ref().take_while(|&c| c != '\''));
            }
            '"' => {
                started = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                started = true;
                word.extend(chars.next());
            }
            c if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                }
                started = false;
            }
            c => {
                started = true;
                word.push(c);
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

/// Whether a JSON settings file has cca's hook for `tool`.
#[cfg(test)]
fn json_has_ours(text: &str, tool: &str) -> bool {
    let text = text.trim_start_matches('\u{feff}');
    parse(text).is_ok() && find_ours(text, tool).ok().flatten().is_some()
}

fn notify_argv(item: &toml_edit::Item) -> Result<Vec<String>, Refusal> {
    let array = item.as_array().ok_or(Refusal::Shape("notify is not a list"))?;
    array
        .iter()
        .map(|v| v.as_str().map(String::from).ok_or(Refusal::Shape("notify holds a non-string")))
        .collect()
}

fn parse(text: &str) -> Result<Value, Refusal> {
    let value: Value = serde_json::from_str(text).map_err(|e| match has_comments(text) {
        true => Refusal::Comments,
        false => Refusal::NotParsed(e.to_string()),
    })?;
    if value.is_object() { Ok(value) } else { Err(Refusal::Shape("the file is not a JSON object")) }
}

/// Whether the text has `//` or `/*` outside its strings (a URL in a string is no comment).
fn has_comments(text: &str) -> bool {
    uncommented(text) != text
}

/// The text with each comment outside its strings (`// ...` to the line's end, `/* ... */`)
/// made spaces, byte for byte: what JSON with comments (gemini's settings) says, read at the
/// same places.
fn uncommented(text: &str) -> String {
    let mut b = text.as_bytes().to_vec();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if matches!(b.get(i + 1), Some(b'/' | b'*')) => {
                let block = b[i + 1] == b'*';
                let end = match block {
                    true => text[i + 2..].find("*/").map_or(b.len(), |at| i + 2 + at + 2),
                    false => text[i..].find('\n').map_or(b.len(), |at| i + at),
                };
                // Spaces for its bytes, its line ends kept.
                b[i..end].iter_mut().filter(|c| **c != b'\n').for_each(|c| *c = b' ');
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    // Only ASCII bytes were replaced, by ASCII spaces, each whole comment: still UTF-8.
    String::from_utf8(b).unwrap_or_else(|_| text.to_string())
}

/// A JSON settings file's value, comments aside: for reading what it says, never for writing.
pub(crate) fn settings_value(text: &str) -> Option<Value> {
    serde_json::from_str(&uncommented(text.trim_start_matches('\u{feff}'))).ok()
}

/// Where cca's hook sits: each container's opening byte, and the index in it of what holds
/// the hook.
struct Found {
    root: usize,
    hooks_index: usize,
    hooks: usize,
    session_end_index: usize,
    session_end: usize,
    group_index: usize,
    group_hooks: usize,
    hook_index: usize,
    /// The hook's command as it is.
    command: String,
}

fn find_ours(text: &str, tool: &str) -> Result<Option<Found>, Refusal> {
    let b = text.as_bytes();
    let root = skip_space(b, 0);
    let member_index =
        |at: usize, key: &str| items(b, at).0.iter().rposition(|i| i.key.as_deref() == Some(key));
    let (root_items, _) = items(b, root);
    let Some(hooks_index) = member_index(root, "hooks") else { return Ok(None) };
    let hooks = root_items[hooks_index].value;
    if b[hooks] != b'{' {
        return Ok(None);
    }
    let Some(session_end_index) = member_index(hooks, "SessionEnd") else { return Ok(None) };
    let session_end = items(b, hooks).0[session_end_index].value;
    if b[session_end] != b'[' {
        return Ok(None);
    }
    for (group_index, group) in items(b, session_end).0.iter().enumerate() {
        if b[group.value] != b'{' {
            continue;
        }
        let Some(i) = member_index(group.value, "hooks") else { continue };
        let group_hooks = items(b, group.value).0[i].value;
        if b[group_hooks] != b'[' {
            continue;
        }
        for (hook_index, hook) in items(b, group_hooks).0.iter().enumerate() {
            let value: Value = serde_json::from_str(&text[hook.value..hook.end])
                .map_err(|e| Refusal::NotParsed(e.to_string()))?;
            if let Some(command) = value["command"].as_str().filter(|c| is_ours(c, tool)) {
                return Ok(Some(Found {
                    command: command.to_string(),
                    root,
                    hooks_index,
                    hooks,
                    session_end_index,
                    session_end,
                    group_index,
                    group_hooks,
                    hook_index,
                }));
            }
        }
    }
    Ok(None)
}

/// An object member or list element: where it starts (its key, for a member), where its value
/// starts and where it ends.
struct Item {
    start: usize,
    key: Option<String>,
    value: usize,
    end: usize,
}

/// The value of the last member `key` of the object opening at `open` (the last, as serde_json
/// and JavaScript read a repeated key).
fn member(b: &[u8], open: usize, key: &str) -> Option<usize> {
    items(b, open).0.into_iter().rev().find(|i| i.key.as_deref() == Some(key)).map(|i| i.value)
}

/// The items of the object or list opening at `open`, and where it closes. The text is JSON
/// serde_json has read, so every index found is in it.
fn items(b: &[u8], open: usize) -> (Vec<Item>, usize) {
    let object = b[open] == b'{';
    let mut out = Vec::new();
    let mut i = skip_space(b, open + 1);
    while b[i] != b'}' && b[i] != b']' {
        let start = i;
        let mut key = None;
        if object {
            let key_end = skip_value(b, i);
            key = serde_json::from_slice(&b[i..key_end]).ok();
            i = skip_space(b, skip_space(b, key_end) + 1);
        }
        let end = skip_value(b, i);
        out.push(Item { start, key, value: i, end });
        i = skip_space(b, end);
        if b[i] == b',' {
            i = skip_space(b, i + 1);
        }
    }
    (out, i)
}

fn skip_space(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// Where the value starting at `i` ends.
fn skip_value(b: &[u8], i: usize) -> usize {
    match b[i] {
        b'"' => {
            let mut j = i + 1;
            while b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            j + 1
        }
        b'{' | b'[' => {
            let mut depth = 0;
            let mut j = i;
            loop {
                match b[j] {
                    b'"' => {
                        j = skip_value(b, j);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return j + 1;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']') && !b[j].is_ascii_whitespace()
            {
                j += 1;
            }
            j
        }
    }
}

/// The spaces before `at` when nothing else is before it on its line.
fn indent_before(text: &str, at: usize) -> Option<&str> {
    let line = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[line..at];
    before.bytes().all(|c| c == b' ' || c == b'\t').then_some(before)
}

/// `item` added last to the object or list opening at `open`, laid out as its siblings are: on
/// a line of its own at their indent, or after a comma and a space.
fn insert(text: &str, open: usize, item: &str) -> String {
    let (items, close) = items(text.as_bytes(), open);
    let (at, to, piece) = match items.last() {
        Some(last) => {
            let piece = match indent_before(text, last.start) {
                Some(indent) => format!(",\n{indent}{item}"),
                None => format!(", {item}"),
            };
            (last.end, last.end, piece)
        }
        None => {
            let line = text[..open].rfind('\n').map_or(0, |i| i + 1);
            let indent: String =
                text[line..].chars().take_while(|c| *c == ' ' || *c == '\t').collect();
            (open + 1, close, format!("\n{indent}  {item}\n{indent}"))
        }
    };
    format!("{}{piece}{}", &text[..at], &text[to..])
}

/// The object or list opening at `open` without its item `index`, and the comma that went
/// with it.
fn remove(text: &str, open: usize, index: usize) -> String {
    let (items, close) = items(text.as_bytes(), open);
    let (from, to) = match index {
        0 if items.len() == 1 => (open + 1, close),
        0 => (items[0].start, items[1].start),
        i => (items[i - 1].end, items[i].end),
    };
    format!("{}{}", &text[..from], &text[to..])
}

#[cfg(test)]
mod tests {
    use super::*;

    const CMD: &str = "'/usr/local/bin/cca' import --hook claude";

    fn on(text: Option<&str>) -> String {
        json_on(text, "claude", CMD).unwrap().expect("changed")
    }

    fn round_trip(before: &str) -> String {
        let with = on(Some(before));
        let value: Value = serde_json::from_str(with.trim_start_matches('\u{feff}')).unwrap();
        assert!(json_has_ours(&with, "claude"), "{with}");
        assert_eq!(json_on(Some(&with), "claude", CMD).unwrap(), None, "added once");
        let commands: Vec<&str> = value["hooks"]["SessionEnd"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["hooks"].as_array().unwrap())
            .filter_map(|h| h["command"].as_str())
            .collect();
        assert_eq!(commands.last(), Some(&CMD), "{with}");
        assert_eq!(json_off(&with, "claude").unwrap().as_deref(), Some(before), "{with}");
        with
    }

    #[test]
    fn a_missing_or_empty_file_gets_hooks_alone() {
        let fresh = on(None);
        assert_eq!(on(Some("  \n")), fresh);
        let value: Value = serde_json::from_str(&fresh).unwrap();
        assert_eq!(value["hooks"]["SessionEnd"][0]["hooks"][0]["command"], CMD);
        assert_eq!(json_off(&fresh, "claude").unwrap().as_deref(), Some("{}\n"));
    }

    #[test]
    fn the_users_hooks_and_layout_stay_and_off_takes_out_exactly_cca() {
        round_trip("{}");
        round_trip("{\"model\":\"opus\"}\n");
        let with = round_trip("{\n  \"model\": \"opus\",\n  \"env\": {\"A\": \"}\"}\n}\n");
        assert!(with.contains("\"env\": {\"A\": \"}\"},\n  \"hooks\": {\"SessionEnd\""), "{with}");
        let users = r#"{
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}],
        "SessionEnd": [
            {"hooks": [{"type": "command", "command": "echo \"bye\" >> ~/log"}]}
        ]
    },
    "cleanupPeriodDays": 90
}"#;
        let with = round_trip(users);
        assert!(with.contains("~/log\"}]},\n            {\"hooks\": [{\"type\": \"command\""));
        round_trip(r#"{"hooks": {"PreToolUse": []}}"#);
        // An empty list the user left is not told from one cca's hook was alone in: it goes.
        let with = on(Some(r#"{"hooks": {"SessionEnd": []}}"#));
        assert_eq!(json_off(&with, "claude").unwrap().as_deref(), Some("{}"));
    }

    #[test]
    fn off_leaves_a_hook_the_user_put_in_caas_group() {
        let text = format!(
            r#"{{"hooks": {{"SessionEnd": [{{"hooks": [{{"command": "mine"}}, {{"command": "{}"}}]}}]}}}}"#,
            CMD
        );
        let off = json_off(&text, "claude").unwrap().unwrap();
        assert_eq!(off, r#"{"hooks": {"SessionEnd": [{"hooks": [{"command": "mine"}]}]}}"#);
        assert_eq!(json_off(&off, "claude").unwrap(), None);
        assert!(!json_has_ours(&off, "claude"));
        assert!(!json_has_ours(&text, "gemini"), "another tool's entry is not this one's");
    }

    #[test]
    fn only_a_program_called_cca_is_cca() {
        for ours in [
            CMD,
            "cca import --hook claude",
            "CCA_HOME='/a b' '/it'\\''s/cca' import --hook claude",
            "/opt/cca import --hook claude  ",
        ] {
            assert!(is_ours(ours, "claude"), "{ours}");
        }
        for theirs in [
            "my-backup import --hook claude",
            "import --hook claude",
            "/bin/ccat import --hook claude",
            "~/bin/cca-notify import --hook claude",
            CMD.trim_end_matches("claude"),
        ] {
            assert!(!is_ours(theirs, "claude"), "{theirs}");
        }
        let users = r#"{"hooks": {"SessionEnd": [{"hooks": [{"type": "command", "command": "my-backup import --hook claude"}]}]}}"#;
        assert!(!json_has_ours(users, "claude"));
        assert_eq!(json_off(users, "claude").unwrap(), None);
        assert_eq!(json_off(&on(Some(users)), "claude").unwrap().as_deref(), Some(users));
    }

    #[test]
    fn a_byte_order_mark_and_crlf_line_ends_are_kept() {
        for before in ["\u{feff}{\r\n  \"model\": \"opus\"\r\n}\r\n", "{\r\n  \"a\": 1\r\n}\r\n"] {
            let with = round_trip(before);
            assert_eq!(with.matches('\n').count(), with.matches("\r\n").count(), "{with:?}");
            assert_eq!(with.starts_with('\u{feff}'), before.starts_with('\u{feff}'));
            assert!(hook_runs(&with, "claude").is_some());
        }
        let toml = "\u{feff}model = \"o3\"\r\n[tui]\r\nnotify = true\r\n";
        let with = codex_on(Some(toml), &ours()).unwrap().unwrap();
        assert!(with.starts_with("\u{feff}model = \"o3\"\r\nnotify = ["), "{with:?}");
        assert_eq!(with.matches('\n').count(), with.matches("\r\n").count(), "{with:?}");
        assert!(codex_has_ours(&with) && hook_runs(&with, "codex").is_some());
        assert_eq!(codex_off(&with).unwrap().as_deref(), Some(toml));
    }

    #[test]
    fn what_a_hook_runs_is_read_back_as_sh_and_codex_would() {
        let cmd = "CCA_HOME='/a b/it'\\''s' '/opt/my cca/cca' import --hook claude";
        let with = on(Some("{}"));
        assert_eq!(hook_runs(&with, "claude"), Some(("/usr/local/bin/cca".into(), None)));
        let with = json_on(Some("{}"), "claude", cmd).unwrap().unwrap();
        let runs = hook_runs(&with, "claude");
        assert_eq!(runs, Some(("/opt/my cca/cca".into(), Some("/a b/it's".into()))));
        assert_eq!(hook_runs("{}", "claude"), None);
        let argv = ["/usr/bin/env", "CCA_HOME=/h", "/bin/cca", "import", "--hook", "codex"];
        let with = codex_on(Some(""), &argv.map(String::from)).unwrap().unwrap();
        assert_eq!(hook_runs(&with, "codex"), Some(("/bin/cca".into(), Some("/h".into()))));
        assert_eq!(sh_words(r#"a "b \" c" d\ e"#), ["a", "b \" c", "d e"]);
    }

    #[test]
    fn a_hook_put_by_hand_in_settings_with_comments_is_found_there() {
        let gemini = "'/usr/local/bin/cca' import --hook gemini";
        let text = format!(
            "// my settings\n{{\"url\": \"http://x/*y*/\", /* a note */\n \"hooks\": {{\"SessionEnd\": [{{\"hooks\": [{{\"type\": \"command\", \"command\": {}}}]}}]}}}}\n",
            serde_json::to_string(gemini).unwrap()
        );
        let read = uncommented(&text);
        assert_eq!(read.len(), text.len(), "comments are spaces, byte for byte");
        assert!(read.contains("\"http://x/*y*/\"") && !read.contains("a note"), "{read}");
        assert_eq!(settings_value(&text).unwrap()["url"], "http://x/*y*/");
        assert_eq!(hook_runs(&text, "gemini"), Some(("/usr/local/bin/cca".into(), None)));
        assert_eq!(json_on(Some(&text), "gemini", gemini), Ok(None));
        assert_eq!(json_on(Some(&text), "gemini", CMD), Err(Refusal::Comments));
        assert_eq!(uncommented("[1] /* cut"), "[1]       ");
    }

    #[test]
    fn every_hook_of_cca_goes_out_and_a_notify_of_cca_s_alone_too() {
        let two = r#"{"hooks":{"SessionEnd":[{"hooks":[{"type":"command","command":"/old/cca import --hook claude"}]},{"hooks":[{"type":"command","command":"CCA_HOME=/x /usr/bin/cca import --hook claude"}]}]}}"#;
        assert_eq!(json_off(two, "claude").unwrap().as_deref(), Some("{}"));
        let with = on(Some(two));
        assert_eq!(json_off(&with, "claude").unwrap().as_deref(), Some("{}"));
        // A notify of cca's with no `--` (written by hand): taken out, and replaced whole by
        // `on`, never the rest of the file with it.
        let by_hand = "# mine\nmodel = \"o3\"\nnotify = [\"/usr/local/bin/cca\", \"import\", \"--hook\", \"codex\"]\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n";
        assert!(codex_has_ours(by_hand));
        let off = codex_off(by_hand).unwrap().unwrap();
        assert_eq!(off, "# mine\nmodel = \"o3\"\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n");
        let with = codex_on(Some(by_hand), &ours()).unwrap().unwrap();
        assert!(with.contains("model = \"o3\"") && with.contains("[mcp_servers.docs]"), "{with}");
        assert_eq!(codex_off(&with).unwrap().as_deref(), Some(off.as_str()));
    }

    #[test]
    fn a_hook_of_cca_from_elsewhere_is_replaced_not_doubled() {
        let old = on(Some("{\"model\": \"x\"}"));
        let moved = "'/opt/cca' import --hook claude";
        let new = json_on(Some(&old), "claude", moved).unwrap().unwrap();
        assert_eq!(new, json_on(Some("{\"model\": \"x\"}"), "claude", moved).unwrap().unwrap());
        let moved = ["/opt/cca", "import", "--hook", "codex"].map(String::from);
        let with = codex_on(Some("model = \"o3\"\n"), &ours()).unwrap().unwrap();
        let again = codex_on(Some(&with), &moved).unwrap().unwrap();
        assert_eq!(again, codex_on(Some("model = \"o3\"\n"), &moved).unwrap().unwrap());
    }

    #[test]
    fn comments_and_wrong_shapes_are_refused() {
        let commented = "{\n  // mine\n  \"model\": \"x\"\n}";
        assert_eq!(json_on(Some(commented), "gemini", CMD), Err(Refusal::Comments));
        assert_eq!(json_off(commented, "gemini"), Err(Refusal::Comments));
        assert!(matches!(json_on(Some("{"), "claude", CMD), Err(Refusal::NotParsed(_))));
        assert!(matches!(json_on(Some("[]"), "claude", CMD), Err(Refusal::Shape(_))));
        assert!(matches!(json_on(Some(r#"{"hooks": 1}"#), "claude", CMD), Err(Refusal::Shape(_))));
        let url = "{\"url\": \"https://example.org\",}";
        assert!(matches!(json_on(Some(url), "claude", CMD), Err(Refusal::NotParsed(_))));
        assert_eq!(json_on(Some("{\"a\": \"x\" /* no */}"), "claude", CMD), Err(Refusal::Comments));
        let list = r#"{"hooks": {"SessionEnd": {}}}"#;
        assert!(matches!(json_on(Some(list), "claude", CMD), Err(Refusal::Shape(_))));
    }

    fn ours() -> Vec<String> {
        ["/bin/cca", "import", "--hook", "codex"].map(String::from).to_vec()
    }

    #[test]
    fn codex_notify_goes_in_before_tables_and_keeps_the_users_after_cca() {
        let before = "# mine\nmodel = \"o3\"\n\n[model_providers.x]\nname = \"x\"\n";
        let with = codex_on(Some(before), &ours()).unwrap().unwrap();
        assert!(codex_has_ours(&with));
        let doc: toml::Table = with.parse().unwrap();
        assert_eq!(doc["notify"].as_array().unwrap().len(), 5, "{with}");
        assert!(with.starts_with("# mine\nmodel = \"o3\"\nnotify = ["), "{with}");
        assert_eq!(codex_on(Some(&with), &ours()).unwrap(), None);
        assert_eq!(codex_off(&with).unwrap().as_deref(), Some(before));

        let theirs = "notify = [\"notify-send\", \"-a\"] # desktop\nmodel = \"o3\"\n";
        let with = codex_on(Some(theirs), &ours()).unwrap().unwrap();
        let doc: toml::Table = with.parse().unwrap();
        let argv: Vec<&str> =
            doc["notify"].as_array().unwrap().iter().filter_map(|v| v.as_str()).collect();
        assert_eq!(argv, ["/bin/cca", "import", "--hook", "codex", "--", "notify-send", "-a"]);
        assert!(with.ends_with("# desktop\nmodel = \"o3\"\n"), "{with}");
        assert_eq!(codex_off(&with).unwrap().as_deref(), Some(theirs));
        assert_eq!(codex_off(theirs).unwrap(), None);
        // A notify over several lines, with comments: the user's words keep theirs, whatever
        // else changed in the file meanwhile.
        let lines = "notify = [\n  \"a\", # the program\n  \"b\",\n]\n";
        let with = codex_on(Some(lines), &ours()).unwrap().unwrap();
        assert!(with.contains("\"--\",\n  \"a\", # the program\n  \"b\",\n]"), "{with}");
        let edited = format!("model = \"o3\"\n{with}");
        assert_eq!(codex_off(&edited).unwrap().unwrap(), format!("model = \"o3\"\n{lines}"));
        assert_eq!(codex_on(None, &ours()).unwrap().unwrap().lines().count(), 1);
        assert!(matches!(codex_on(Some("notify = 1"), &ours()), Err(Refusal::Shape(_))));
        assert!(matches!(codex_on(Some("= ="), &ours()), Err(Refusal::NotParsed(_))));
    }
}
