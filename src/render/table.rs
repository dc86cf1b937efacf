//! Markdown tables: a row's cells, the delimiter row that makes a table and aligns its columns,
//! and the whole table drawn with its columns lined up, cells wrapped to fit the terminal.

use super::Style;
use super::inline::{Attr, Span, inline, spans_width, wrap, write_line};

pub(super) struct Table {
    pub(super) indent: usize,
    pub(super) head: Vec<String>,
    pub(super) aligns: Vec<Align>,
    pub(super) rows: Vec<Vec<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Align {
    Left,
    Center,
    Right,
}

/// Columns narrower than this are not worth wrapping a table into: the terminal wraps it.
const MIN_COLUMN: usize = 4;

/// A table row's cells: outer pipes dropped, split at pipes not escaped, trimmed.
pub(crate) fn cells(line: &str) -> Vec<String> {
    let t = line.trim();
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = match t.strip_suffix('|') {
        Some(inner) if !inner.ends_with('\\') => inner,
        _ => t,
    };
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cell.push('|');
                chars.next();
            }
            '|' => cells.push(std::mem::take(&mut cell).trim().to_string()),
            c => cell.push(c),
        }
    }
    cells.push(cell.trim().to_string());
    cells
}

/// `|---|:--:|--:|` with as many cells as the header: the columns' alignment.
pub(super) fn delimiter_row(line: &str, columns: usize) -> Option<Vec<Align>> {
    if !line.contains('-') {
        return None;
    }
    let cells = cells(line);
    if cells.len() != columns {
        return None;
    }
    cells
        .iter()
        .map(|c| {
            let core = c.trim_start_matches(':').trim_end_matches(':');
            if core.is_empty() || !core.bytes().all(|b| b == b'-') {
                return None;
            }
            Some(match (c.starts_with(':'), c.ends_with(':')) {
                (true, true) => Align::Center,
                (false, true) => Align::Right,
                _ => Align::Left,
            })
        })
        .collect()
}

/// The whole table, its columns lined up; cells wrap where it would be wider than the terminal.
pub(super) fn render_table(table: &Table, style: &Style, out: &mut String) {
    let n = table.head.len();
    let head_look = Attr { bold: true, ..Attr::default() };
    let head: Vec<Vec<Span>> = table.head.iter().map(|c| inline(c, &head_look, style)).collect();
    let rows: Vec<Vec<Vec<Span>>> = table
        .rows
        .iter()
        .map(|row| {
            (0..n)
                .map(|i| inline(row.get(i).map_or("", String::as_str), &Attr::default(), style))
                .collect()
        })
        .collect();
    let natural: Vec<usize> = (0..n)
        .map(|i| {
            std::iter::once(&head[i])
                .chain(rows.iter().map(|r| &r[i]))
                .map(|cell| spans_width(cell))
                .max()
                .unwrap_or(0)
                .max(1)
        })
        .collect();
    let room = style.width.saturating_sub(table.indent + 3 * n.saturating_sub(1));
    let widths = fit(&natural, room);
    table_row(&head, &widths, &table.aligns, table.indent, style, out);
    let rule: Vec<String> = widths.iter().map(|&w| "─".repeat(w)).collect();
    let rule = format!("{}{}", " ".repeat(table.indent), rule.join("─┼─"));
    write_line(&[Span::new(&rule, Attr::dim())], style, out);
    for row in &rows {
        table_row(row, &widths, &table.aligns, table.indent, style, out);
    }
}

fn table_row(
    cells: &[Vec<Span>],
    widths: &[usize],
    aligns: &[Align],
    indent: usize,
    style: &Style,
    out: &mut String,
) {
    let wrapped: Vec<Vec<Vec<Span>>> =
        cells.iter().zip(widths).map(|(cell, &w)| wrap(cell, w)).collect();
    let height = wrapped.iter().map(Vec::len).max().unwrap_or(1).max(1);
    for k in 0..height {
        let mut spans = vec![Span::new(&" ".repeat(indent), Attr::default())];
        for (i, cell) in wrapped.iter().enumerate() {
            if i > 0 {
                spans.push(Span::new(" │ ", Attr::dim()));
            }
            let part: &[Span] = cell.get(k).map_or(&[], Vec::as_slice);
            let pad = widths[i].saturating_sub(spans_width(part));
            let last = i + 1 == wrapped.len();
            let (before, after) = match aligns.get(i).copied().unwrap_or(Align::Left) {
                Align::Left => (0, if last { 0 } else { pad }),
                Align::Right => (pad, 0),
                Align::Center => (pad / 2, if last { 0 } else { pad - pad / 2 }),
            };
            spans.push(Span::new(&" ".repeat(before), Attr::default()));
            spans.extend(part.iter().cloned());
            spans.push(Span::new(&" ".repeat(after), Attr::default()));
        }
        while spans.last().is_some_and(|s| s.text.trim().is_empty()) {
            spans.pop();
        }
        if let Some(last) = spans.last_mut() {
            last.text.truncate(last.text.trim_end().len());
        }
        write_line(&spans, style, out);
    }
}

/// Column widths that fit `room`: the widest columns give way first, none narrower than
/// MIN_COLUMN; where even that cannot fit, the natural widths (the terminal wraps).
fn fit(natural: &[usize], room: usize) -> Vec<usize> {
    if natural.iter().sum::<usize>() <= room || room < natural.len() * MIN_COLUMN {
        return natural.to_vec();
    }
    let total = |cap: usize| natural.iter().map(|&w| w.min(cap)).sum::<usize>();
    let mut cap = natural.iter().copied().max().unwrap_or(MIN_COLUMN);
    while cap > MIN_COLUMN && total(cap) > room {
        cap -= 1;
    }
    let mut widths: Vec<usize> = natural.iter().map(|&w| w.min(cap)).collect();
    let mut spare = room.saturating_sub(widths.iter().sum());
    for (w, &nat) in widths.iter_mut().zip(natural) {
        if spare > 0 && *w < nat {
            *w += 1;
            spare -= 1;
        }
    }
    widths
}
