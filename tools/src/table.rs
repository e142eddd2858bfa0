//! Plain-text tables: a header, rows of cells, columns padded to their widest cell.
//! The first column is left aligned, the others right aligned (they hold numbers).

use std::fmt;

/// A table to print with `{}`.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells print empty, extra cells are ignored.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as Markdown (a pipe table): the first `left` columns left
    /// aligned, the others (numbers) right aligned.
    pub fn to_markdown(&self, left: usize) -> String {
        let cells = |row: &[String]| {
            (0..self.header.len())
                .map(|i| row.get(i).map_or("", String::as_str).replace('|', "\\|"))
                .collect::<Vec<_>>()
                .join(" | ")
        };
        let rule: Vec<&str> = (0..self.header.len())
            .map(|i| if i < left { "---" } else { "---:" })
            .collect();
        let mut s = format!("| {} |\n| {} |\n", cells(&self.header), rule.join(" | "));
        for r in &self.rows {
            s.push_str(&format!("| {} |\n", cells(r)));
        }
        s
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cell = |row: &[String], i: usize| row.get(i).map_or(0, |c| c.chars().count());
        let widths: Vec<usize> = (0..self.header.len())
            .map(|i| {
                self.rows
                    .iter()
                    .map(|r| cell(r, i))
                    .fold(cell(&self.header, i), usize::max)
            })
            .collect();
        let line = |f: &mut fmt::Formatter<'_>, row: &[String]| -> fmt::Result {
            for (i, w) in widths.iter().enumerate() {
                let c = row.get(i).map_or("", String::as_str);
                match i {
                    0 => write!(f, "{c:<w$}")?,
                    _ => write!(f, "  {c:>w$}")?,
                }
            }
            writeln!(f)
        };
        line(f, &self.header)?;
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line(f, &rule)?;
        for row in &self.rows {
            line(f, row)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_has_a_rule_and_escapes_pipes() {
        let mut t = Table::new(&["name", "n"]);
        t.row(vec!["a|b".into(), "1".into()]);
        assert_eq!(
            t.to_markdown(1),
            "| name | n |\n| --- | ---: |\n| a\\|b | 1 |\n"
        );
    }

    #[test]
    fn columns_are_padded() {
        let mut t = Table::new(&["name", "n"]);
        t.row(vec!["a".into(), "100".into()]);
        t.row(vec!["long name".into()]);
        assert_eq!(
            t.to_string(),
            "name         n\n---------  ---\na          100\nlong name     \n"
        );
    }
}
