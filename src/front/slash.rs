//! Slash commands typed where a message goes (`cca chat`, an editor's prompt): which is which.

/// A line typed: a slash command (without its `/`), or a message.
pub(crate) enum Input {
    Command(String),
    Message(String),
}

/// A line starting with `/` and a word (`/clear`, `/cleaar`, `/new-session`, `/fork_at2`) is a
/// command, known or not, so that a mistyped one is refused rather than sent as a paid question;
/// `//` stands for a `/` at the start of a message, and a path (`/etc/hosts`, with a second `/`
/// or a `.`) is a message. A word is letters, digits, `-`, `_` (and `?`, for `/?`).
pub(crate) fn command_or_message(message: String) -> Input {
    let start = message.len() - message.trim_start().len();
    let text = &message[start..];
    if text.starts_with("//") {
        return Input::Message(format!("{}{}", &message[..start], &text[1..]));
    }
    if let Some(command) = text.trim_end().strip_prefix('/') {
        let name = command.split(char::is_whitespace).next().unwrap_or("");
        let a_word = !name.is_empty()
            && name.chars().all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '?'));
        if a_word {
            return Input::Command(command.to_string());
        }
    }
    Input::Message(message)
}

#[cfg(test)]
mod tests {
    use super::{Input, command_or_message};

    #[test]
    fn a_message_may_start_with_a_slash() {
        let message = |text: &str| match command_or_message(text.to_string()) {
            Input::Message(m) => Some(m),
            Input::Command(_) => None,
        };
        assert_eq!(message("/fork 2"), None);
        assert_eq!(message(" /quit "), None);
        assert_eq!(
            message("/etc/hosts: what is it for?").as_deref(),
            Some("/etc/hosts: what is it for?")
        );
        assert_eq!(message("//quit is a command").as_deref(), Some("/quit is a command"));
        // A mistyped command is a command (refused), never a question sent by mistake.
        assert_eq!(message("/cleaar"), None);
        assert_eq!(message("/compact 2"), None);
        assert_eq!(message("/usr/bin/env?").as_deref(), Some("/usr/bin/env?"));
        assert_eq!(message("/tmp.txt is empty").as_deref(), Some("/tmp.txt is empty"));
        assert_eq!(message("hello /quit").as_deref(), Some("hello /quit"));
        // Words with `-`, `_` and digits are words too: refused when unknown, never sent.
        for command in ["/new-session", "/new_session", "/fork2", "/x-1_b tail", "/-", "/a_"] {
            assert_eq!(message(command), None, "{command}");
        }
        assert_eq!(message("/new-file.txt?").as_deref(), Some("/new-file.txt?"));
        assert_eq!(message("/a-b/c").as_deref(), Some("/a-b/c"));
    }
}
