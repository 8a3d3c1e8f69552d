//! The printed tables, laid out by comfy-table: no borders, the first column left-aligned,
//! the others right-aligned, at least two spaces apart; each column as wide as its widest
//! cell, header included, so that a header always stands over its data.

use comfy_table::{CellAlignment, Table, presets};

/// A table with this header row; rows are added with `add_row`.
pub fn new(header: &[&str]) -> Table {
    let mut table = Table::new();
    table
        .load_style(presets::NOTHING)
        .set_header(header.to_vec());
    for column in table.column_iter_mut() {
        if column.index == 0 {
            column.set_padding((0, 0));
        } else {
            column.set_padding((2, 0));
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

/// The table's lines, each ending in a newline, without trailing spaces.
pub fn render(table: &Table) -> String {
    table
        .lines()
        .map(|line| format!("{}\n", line.trim_end()))
        .collect()
}

/// The cells of `row` under their headers, in `text`, a table [`render`]ed; checks that they
/// line up: the first cell starts where its header starts, every other ends where its header
/// ends. The lines are found by their start: the first that starts with `row`, and the
/// nearest above it that starts with `header`.
#[cfg(test)]
pub fn aligned_cells(text: &str, header: &str, row: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|line| line.starts_with(row))
        .unwrap_or_else(|| panic!("no line starts with {row:?} in\n{text}"));
    let header = lines[..at]
        .iter()
        .rev()
        .find(|line| line.starts_with(header))
        .unwrap_or_else(|| panic!("no line above {row:?} starts with {header:?} in\n{text}"));
    let row = lines[at];
    let (header_spans, row_spans) = (spans(header), spans(row));
    assert_eq!(
        header_spans.len(),
        row_spans.len(),
        "as many cells as headers in\n{text}"
    );
    assert_eq!(
        header_spans[0].0, row_spans[0].0,
        "the first column in\n{text}"
    );
    for (column, (h, r)) in header_spans.iter().zip(&row_spans).enumerate().skip(1) {
        assert_eq!(h.1, r.1, "column {column} in\n{text}");
    }
    let cell = |line: &str, (start, end): (usize, usize)| -> String {
        line.chars().skip(start).take(end - start).collect()
    };
    header_spans
        .into_iter()
        .zip(row_spans)
        .map(|(h, r)| (cell(header, h), cell(row, r)))
        .collect()
}

/// The cells of a rendered line, as (start, end) in characters: text between runs of two
/// or more spaces.
#[cfg(test)]
fn spans(line: &str) -> Vec<(usize, usize)> {
    let chars: Vec<char> = line.chars().collect();
    let mut spans = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        if chars[at] == ' ' {
            at += 1;
            continue;
        }
        let start = at;
        while at < chars.len() && !(chars[at] == ' ' && chars.get(at + 1).is_none_or(|c| *c == ' '))
        {
            at += 1;
        }
        spans.push((start, at));
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_stand_over_their_columns() {
        let mut table = new(&["name", "a long header", "n"]);
        table.add_row(["x", "1", "123456"]);
        table.add_row(["a longer name", "± 2", "3"]);
        let text = render(&table);
        assert_eq!(
            text,
            "name           a long header       n\n\
             x                          1  123456\n\
             a longer name            ± 2       3\n"
        );
        let cells = aligned_cells(&text, "name", "a longer name");
        assert_eq!(
            cells,
            [
                ("name", "a longer name"),
                ("a long header", "± 2"),
                ("n", "3")
            ]
            .map(|(h, c)| (h.to_owned(), c.to_owned()))
        );
        aligned_cells(&text, "name", "x ");
    }

    #[test]
    fn cells_are_split_at_two_spaces() {
        assert_eq!(spans("ab c  d   e f"), [(0, 4), (6, 7), (10, 13)]);
        assert_eq!(spans("  x"), [(2, 3)]);
    }
}
