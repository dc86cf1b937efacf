//! A home of the engine's own ([`Arg::Home`](super::Arg::Home)): a folder of cca's (one per
//! session, made afresh at each start: `store::engine_home` says where and how), holding the
//! engine's configuration folder with links to the user's own files in it, the files the engine
//! writes of itself left out (so they stay in cca's folder), and its settings with cca's put
//! over the user's.
//!
//! Why: gemini has no switch to keep its own copy of a run, its project list or its temporary
//! files, and takes a settings file of cca's only from a place that root owns (0.61.0: any
//! other is skipped with a "Security Warning"). As its home (`GEMINI_CLI_HOME`) it takes this
//! folder, and the user's settings, sign-in and context files through it. codex writes its
//! databases, logs and installed skills in its folder (`CODEX_HOME`) at every run: given this
//! one, it writes them here, and reads the user's sign-in and settings through the links.
//!
//! Pure: what the folder holds and how the settings are merged. `store` makes it.

use serde_json::Value;

/// What goes in an engine's home for a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Home {
    /// The engine's name: its homes are `engines/NAME/ID/` in cca's folder.
    pub engine: &'static str,
    /// The configuration folder's name in the home (`.gemini`), as in the user's home.
    pub config_dir: &'static str,
    /// Which entries of the user's configuration folder are linked; the others the engine
    /// writes of itself for a run (its session copies, its project list, its databases), in the
    /// run's home.
    pub links: Links,
    /// Files in the user's home itself the engine reads (`.env`): linked where they are.
    pub home_files: &'static [&'static str],
    /// The settings file, written with cca's settings put over the user's; `None`: linked as
    /// the others.
    pub settings: Option<Settings>,
    /// What the argument names: the home, or the configuration folder in it.
    pub arg: HomeArg,
    /// Where the user's own configuration folder is, whose entries the home links.
    pub user: UserFolder,
}

/// Where the user's configuration folder (`.gemini`, `.codex`) is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UserFolder {
    /// In the user's home folder.
    Home,
    /// gemini's: in `GEMINI_CLI_HOME` when it is set, else in the user's home folder.
    GeminiCliHome,
    /// codex's: `CODEX_HOME` itself when it is set, else in the user's home folder.
    CodexHome,
}

/// Which entries of the user's configuration folder an engine's home links to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Links {
    /// All but these (gemini: all but what it writes of itself).
    AllBut(&'static [&'static str]),
    /// These alone (codex, whose own files change names from version to version).
    Only(&'static [&'static str]),
}

impl Links {
    /// Whether the user's entry `name` is linked.
    pub fn linked(&self, name: &std::ffi::OsStr) -> bool {
        match self {
            Links::AllBut(own) => !own.iter().any(|o| name == *o),
            Links::Only(linked) => linked.iter().any(|l| name == *l),
        }
    }
}

/// What an [`Arg::Home`](super::Arg::Home) argument is the path of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HomeArg {
    /// The home, holding the configuration folder (`GEMINI_CLI_HOME`).
    Home,
    /// The configuration folder itself (`CODEX_HOME`).
    ConfigDir,
}

/// A settings file of cca's over the user's.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Its name in the configuration folder.
    pub file: &'static str,
    /// Objects merged key by key into the user's objects of the same name.
    pub merged: Value,
    /// Keys set whole, whatever the user's hold.
    pub replaced: Value,
}

impl Settings {
    /// The settings file's text: the user's (`user`, JSON with comments allowed, as gemini reads
    /// it) with cca's put over it. A file that does not read as a JSON object is left out: cca's
    /// settings alone, rather than none.
    pub fn over(&self, user: Option<&str>) -> String {
        let user =
            user.and_then(|text| serde_json::from_str::<Value>(&without_comments(text)).ok());
        let mut settings = match user {
            Some(Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        for (key, ours) in self.merged.as_object().into_iter().flatten() {
            match (settings.get_mut(key), ours) {
                (Some(Value::Object(theirs)), Value::Object(ours)) => {
                    theirs.extend(ours.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                _ => {
                    settings.insert(key.clone(), ours.clone());
                }
            }
        }
        for (key, ours) in self.replaced.as_object().into_iter().flatten() {
            settings.insert(key.clone(), ours.clone());
        }
        Value::Object(settings).to_string()
    }
}

/// JSON text without its `//` and `/* */` comments (outside strings), as settings files that
/// people edit hold them.
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => out.extend(chars.next()),
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => while chars.next_if(|&c| c != '\n').is_some() {},
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ours() -> Settings {
        Settings {
            file: "settings.json",
            merged: json!({"general": {"maxAttempts": 1}, "ui": {"showCompatibilityWarnings": false}}),
            replaced: json!({"mcpServers": {"cca": {"command": "cca"}}}),
        }
    }

    #[test]
    fn cca_s_settings_go_over_the_user_s_and_keep_the_rest() {
        let user = r#"{
            // how I sign in
            "security": {"auth": {"selectedType": "oauth-personal"}},
            "general": {"vimMode": true, "maxAttempts": 5}, /* mine */
            "mcpServers": {"mine": {"command": "x // not a comment"}}
        }"#;
        let merged: Value = serde_json::from_str(&ours().over(Some(user))).unwrap();
        assert_eq!(
            merged,
            json!({
                "security": {"auth": {"selectedType": "oauth-personal"}},
                "general": {"vimMode": true, "maxAttempts": 1},
                "ui": {"showCompatibilityWarnings": false},
                "mcpServers": {"cca": {"command": "cca"}},
            })
        );
    }

    #[test]
    fn without_a_readable_file_of_the_user_s_cca_s_settings_stand_alone() {
        let alone = json!({
            "general": {"maxAttempts": 1},
            "ui": {"showCompatibilityWarnings": false},
            "mcpServers": {"cca": {"command": "cca"}},
        });
        for user in [None, Some("not json"), Some("[1]"), Some(""), Some("{\"a\": \"\\\"/*\"")] {
            let merged: Value = serde_json::from_str(&ours().over(user)).unwrap();
            assert_eq!(merged, alone, "{user:?}");
        }
    }

    #[test]
    fn comments_go_and_strings_stay() {
        assert_eq!(without_comments("{\"a\": \"//x\"} // c"), "{\"a\": \"//x\"} ");
        assert_eq!(without_comments("[1, /* two */ 3]"), "[1,   3]");
        assert_eq!(without_comments(r#""\"/*" /* x */"#), r#""\"/*"  "#);
        assert_eq!(without_comments("/* never closed"), " ");
    }
}
