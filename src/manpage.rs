//! The man page, cca(1), as roff text: every command and flag from the clap definition, then the
//! reference sections (configuration, environment, exit status, files) from docs/REFERENCE.md,
//! so that neither can drift from what it documents. Pure: text in, text out.

use clap::{Arg, Command};

/// docs/REFERENCE.md, built in.
pub(crate) const REFERENCE: &str = include_str!("../docs/REFERENCE.md");

/// The sections of docs/REFERENCE.md the man page carries, by their `##` heading.
const REFERENCE_SECTIONS: [&str; 4] = ["Configuration", "Environment", "Exit status", "Files"];

/// The whole page for `cmd` (cca's own command line) and `reference` (docs/REFERENCE.md's text).
pub(crate) fn render(cmd: &Command, reference: &str) -> String {
    let name = cmd.get_name();
    let mut out = format!(
        ".TH {} 1 \"\" \"{name} {}\" \"User Commands\"\n",
        name.to_uppercase(),
        cmd.get_version().unwrap_or_default()
    );
    out.push_str(".SH NAME\n");
    out.push_str(&format!("{name} \\- {}\n", text(&styled(cmd.get_about()))));
    out.push_str(".SH SYNOPSIS\n");
    out.push_str(&format!("\\fB{name}\\fR \\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGS\\fR]\n"));
    out.push_str(".SH DESCRIPTION\n");
    paragraphs(&mut out, &styled(cmd.get_long_about().or(cmd.get_about())));
    out.push_str(".SH COMMANDS\n");
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        command(&mut out, name, sub);
    }
    for (title, body) in sections(reference) {
        if REFERENCE_SECTIONS.contains(&title) {
            out.push_str(&format!(".SH {}\n", title.to_uppercase()));
            markdown(&mut out, body);
        }
    }
    out.push_str(".SH SEE ALSO\n");
    out.push_str(&text("The README and docs/REFERENCE.md in cca's source; `cca COMMAND --help`."));
    out.push('\n');
    out
}

/// One command: its usage line, its description and examples, then each of its arguments.
fn command(out: &mut String, parent: &str, sub: &Command) {
    let mut usage = format!("{parent} {}", sub.get_name());
    if sub
        .get_arguments()
        .any(|a| a.get_long().is_some() && !a.is_hide_set() && a.get_id() != "help")
    {
        usage.push_str(" [OPTIONS]");
    }
    for arg in sub.get_positionals().filter(|a| !a.is_hide_set()) {
        let value = value_names(arg).unwrap_or_else(|| arg.get_id().to_string());
        let repeat =
            if arg.get_num_args().is_some_and(|n| n.max_values() > 1) { "..." } else { "" };
        match arg.is_required_set() {
            true => usage.push_str(&format!(" {value}{repeat}")),
            false => usage.push_str(&format!(" [{value}]{repeat}")),
        }
    }
    out.push_str(&format!(".SS \"{}\"\n", text(&usage)));
    paragraphs(out, &styled(sub.get_long_about().or(sub.get_about())));
    if let Some(examples) = sub.get_after_long_help() {
        out.push_str(".PP\n.nf\n");
        for line in examples.to_string().lines() {
            out.push_str(&format!("{}\n", text(line)));
        }
        out.push_str(".fi\n");
    }
    let args = sub.get_arguments().filter(|a| !a.is_hide_set());
    for arg in args.filter(|a| !matches!(a.get_id().as_str(), "help" | "version")) {
        let mut names: Vec<String> = Vec::new();
        if let Some(short) = arg.get_short() {
            names.push(format!("\\fB\\-{short}\\fR"));
        }
        if let Some(long) = arg.get_long() {
            names.push(format!("\\fB\\-\\-{}\\fR", long.replace('-', "\\-")));
        }
        let value = value_names(arg).map(|v| format!("\\fI{}\\fR", text(&v)));
        let head = match (names.is_empty(), value) {
            (true, value) => value.unwrap_or_else(|| arg.get_id().to_string()),
            (false, Some(value)) if arg.get_action().takes_values() => {
                format!("{} {value}", names.join(", "))
            }
            (false, _) => names.join(", "),
        };
        out.push_str(&format!(".TP\n{head}\n"));
        let help = styled(arg.get_long_help().or(arg.get_help()));
        let mut help = help.split("\n\n").map(text).collect::<Vec<_>>().join("\n.IP\n");
        let possible: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| v.get_name().to_string())
            .collect();
        if !possible.is_empty() && arg.get_long().is_none() {
            help.push_str(&text(&format!(" (one of: {})", possible.join(", "))));
        }
        out.push_str(&help);
        out.push('\n');
    }
}

fn value_names(arg: &Arg) -> Option<String> {
    let names = arg.get_value_names()?;
    Some(names.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(" "))
}

fn styled(s: Option<&clap::builder::StyledStr>) -> String {
    s.map(|s| s.to_string()).unwrap_or_default()
}

/// Help text to roff: paragraphs split at blank lines; indented lines stay as they are.
fn paragraphs(out: &mut String, help: &str) {
    for para in help.split("\n\n").filter(|p| !p.trim().is_empty()) {
        if para.lines().skip(1).any(|l| l.starts_with("  ")) {
            out.push_str(".PP\n.nf\n");
            for line in para.lines() {
                out.push_str(&format!("{}\n", text(line)));
            }
            out.push_str(".fi\n");
        } else {
            out.push_str(&format!(".PP\n{}\n", text(para)));
        }
    }
}

/// `## ` sections of a markdown text, as (heading, body).
fn sections(markdown: &str) -> Vec<(&str, &str)> {
    let mut found = Vec::new();
    let mut rest = markdown;
    while let Some(at) = rest.find("\n## ") {
        let from = &rest[at + 4..];
        let title_end = from.find('\n').unwrap_or(from.len());
        let body = &from[title_end..];
        let body_end = body.find("\n## ").unwrap_or(body.len());
        found.push((from[..title_end].trim(), &body[..body_end]));
        rest = &body[body_end..];
    }
    found
}

/// The markdown of docs/REFERENCE.md (paragraphs, bullets, tables, fenced code) as roff.
fn markdown(out: &mut String, body: &str) {
    let mut lines = body.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with("```") {
            out.push_str(".PP\n.nf\n");
            for code in lines.by_ref().take_while(|l| !l.starts_with("```")) {
                out.push_str(&format!("{}\n", text(code)));
            }
            out.push_str(".fi\n");
        } else if line.starts_with('|') {
            // A table: each row after the header is a tagged paragraph, its first cell the tag.
            let mut rows = vec![line];
            while let Some(row) = lines.next_if(|l| l.starts_with('|')) {
                rows.push(row);
            }
            for row in rows.into_iter().skip(2) {
                let cells = crate::render::cells(row);
                let (tag, rest) =
                    cells.split_first().map_or(("", &[][..]), |(t, r)| (t.as_str(), r));
                out.push_str(&format!(".TP\n{}\n{}\n", inline(tag), inline(&rest.join("; "))));
            }
        } else {
            let bullet = line.strip_prefix("- ");
            let mut para = bullet.unwrap_or(line).to_string();
            while let Some(next) = lines
                .next_if(|l| !l.trim().is_empty() && !l.starts_with("- ") && !l.starts_with('|'))
            {
                para.push(' ');
                para.push_str(next.trim());
            }
            out.push_str(if bullet.is_some() { ".IP \\(bu 2\n" } else { ".PP\n" });
            out.push_str(&inline(&para));
            out.push('\n');
        }
    }
}

/// Inline markdown: `code` in bold, links as their text; the rest escaped.
fn inline(md: &str) -> String {
    let mut out = String::new();
    let mut rest = md;
    while !rest.is_empty() {
        if let Some(code) = rest.strip_prefix('`') {
            let end = code.find('`').unwrap_or(code.len());
            out.push_str(&format!("\\fB{}\\fR", escape(&code[..end])));
            rest = code.get(end + 1..).unwrap_or("");
        } else if let Some(link) = rest.strip_prefix('[').filter(|l| l.contains("](")) {
            let end = link.find("](").unwrap_or(0);
            out.push_str(&escape(&link[..end]));
            let after = &link[end + 2..];
            rest = after.get(after.find(')').map_or(after.len(), |i| i + 1)..).unwrap_or("");
        } else {
            let next = rest[1..].find(['`', '[']).map_or(rest.len(), |i| i + 1);
            out.push_str(&escape(&rest[..next]));
            rest = &rest[next..];
        }
    }
    line_start_safe(out)
}

/// Plain text as roff: escaped, `` `code` `` in bold.
fn text(s: &str) -> String {
    inline(s.trim_end())
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\e").replace('-', "\\-")
}

/// A line that starts with `.` or `'` would be read as a request.
fn line_start_safe(s: String) -> String {
    let lines: Vec<String> = s
        .split('\n')
        .map(|l| match l.starts_with(['.', '\'']) {
            true => format!("\\&{l}"),
            false => l.to_string(),
        })
        .collect();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_roff() {
        let mut out = String::new();
        markdown(
            &mut out,
            "Some `code-x` and [a link](http://x).\n.dot\n\n| k | v |\n| --- | --- |\n| `a = 1` | one \\| two |\n\n- item\n  more\n",
        );
        assert_eq!(
            out,
            ".PP\nSome \\fBcode\\-x\\fR and a link. .dot\n.TP\n\\fBa = 1\\fR\none | two\n.IP \\(bu 2\nitem more\n"
        );
    }

    #[test]
    fn sections_by_heading() {
        let found = sections("# t\n\nintro\n\n## One\n\na\n\n## Two\nb\n");
        assert_eq!(found, [("One", "\n\na\n"), ("Two", "\nb\n")]);
    }
}
