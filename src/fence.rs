//! Markdown code fences around text that may hold fences of its own. Pure.

/// The fence to put around `text`: backticks, one more than the longest run in it and at least
/// three, so that nothing in the text closes the fence early.
pub(crate) fn for_text(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_is_longer_than_any_backtick_run_inside() {
        assert_eq!(for_text("plain"), "```");
        assert_eq!(for_text("a ``` b"), "````");
        assert_eq!(for_text("`````x`"), "``````");
    }
}
