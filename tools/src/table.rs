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
