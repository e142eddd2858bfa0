//! Reading a scenario: TOML text, `--set table.key=value` overrides, then the schema.

use super::error::ScenarioError;
use super::schema::Scenario;
use serde::Deserialize;
use toml::{Table, Value};

/// One `--set table.key=value` override.
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    /// The dotted key, split (`["transport", "reorder_buffer_kb"]`); a number indexes
    /// an array (`topology.paths.0.gbps`).
    pub path: Vec<String>,
    /// The value: TOML syntax (`32`, `true`, `"rondo"`, `[1, 2]`), or a bare word,
    /// taken as a string.
    pub value: Value,
    /// The override as given, for messages.
    pub given: String,
}

impl Override {
    /// Parses `table.key=value`.
    pub fn parse(given: &str) -> Result<Override, ScenarioError> {
        let bad = |reason: &str| ScenarioError::Override {
            given: given.to_owned(),
            reason: reason.to_owned(),
        };
        let (key, raw) = given.split_once('=').ok_or_else(|| {
            bad("expected table.key=value, for example transport.scheduler=false")
        })?;
        let path: Vec<String> = key.trim().split('.').map(str::to_owned).collect();
        if path.iter().any(String::is_empty) {
            return Err(bad(
                "the key has an empty part; write it as table.key=value",
            ));
        }
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(bad("the value is empty; write it as table.key=value"));
        }
        // One TOML value, or else the text itself as a string.
        let value = match format!("v = {raw}").parse::<Table>() {
            Ok(mut t) if t.len() == 1 => t
                .remove("v")
                .unwrap_or_else(|| Value::String(raw.to_owned())),
            _ => Value::String(raw.to_owned()),
        };
        Ok(Override {
            path,
            value,
            given: given.to_owned(),
        })
    }

    /// Writes the value into `table`, creating tables on the way.
    pub fn apply(&self, table: &mut Table) -> Result<(), ScenarioError> {
        let bad = |reason: String| ScenarioError::Override {
            given: self.given.clone(),
            reason,
        };
        let Some((last, parents)) = self.path.split_last() else {
            return Err(bad("the key is empty".to_owned()));
        };
        let Some((first, middle)) = parents.split_first() else {
            table.insert(last.clone(), self.value.clone());
            return Ok(());
        };
        let mut here = table
            .entry(first.clone())
            .or_insert_with(|| Value::Table(Table::new()));
        for part in middle {
            here = step(here, part).map_err(bad)?;
        }
        match here {
            Value::Table(t) => {
                t.insert(last.clone(), self.value.clone());
            }
            Value::Array(a) => *index(a, last).map_err(bad)? = self.value.clone(),
            _ => {
                return Err(bad(format!(
                    "`{last}` is inside a value that is not a table"
                )))
            }
        }
        Ok(())
    }
}

/// One step down a dotted key: into a table (created when missing) or an array.
fn step<'a>(here: &'a mut Value, part: &str) -> Result<&'a mut Value, String> {
    match here {
        Value::Table(t) => Ok(t
            .entry(part.to_owned())
            .or_insert_with(|| Value::Table(Table::new()))),
        Value::Array(a) => index(a, part),
        _ => Err(format!("`{part}` is inside a value that is not a table")),
    }
}

fn index<'a>(a: &'a mut [Value], part: &str) -> Result<&'a mut Value, String> {
    let len = a.len();
    let i: usize = part.parse().map_err(|_| {
        format!(
            "`{part}` indexes an array: use a number from 0 to {}",
            len.saturating_sub(1)
        )
    })?;
    a.get_mut(i)
        .ok_or_else(|| format!("index {i} is past the end of an array of {len}"))
}

/// Parses scenario text named `file` (a path or `builtin:NAME`, for messages),
/// applies `overrides` in order, and checks it against the schema.
///
/// Does not check ranges; [`Scenario::check`] does.
pub fn parse(file: &str, text: &str, overrides: &[Override]) -> Result<Scenario, ScenarioError> {
    let mut table: Table = text
        .parse()
        .map_err(|e: toml::de::Error| ScenarioError::Syntax {
            file: file.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
    for o in overrides {
        o.apply(&mut table)?;
    }
    if let Some(v) = table.get("topology") {
        check_variant(file, "topology", v)?;
    }
    match table.get("workload") {
        Some(Value::Array(all)) => {
            for (i, v) in all.iter().enumerate() {
                check_variant(file, &format!("workload[{i}]"), v)?;
            }
        }
        Some(v) => check_variant(file, "workload", v)?,
        None => {}
    }
    Scenario::deserialize(Value::Table(table)).map_err(|e| schema_error(file, "", &e))
}

/// Checks a table selected by `kind` against that kind's own schema, so that an
/// error names the key inside it (serde's tagged enums lose it).
fn check_variant(file: &str, key: &str, value: &Value) -> Result<(), ScenarioError> {
    use super::schema::*;
    let Value::Table(t) = value else {
        return Ok(()); // the full parse reports the wrong type
    };
    let mut rest = t.clone();
    let Some(Value::String(kind)) = rest.remove("kind") else {
        return Ok(()); // likewise for a missing or mistyped kind
    };
    let rest = Value::Table(rest);
    let root = key.split('[').next().unwrap_or(key);
    let checked = match (root, kind.as_str()) {
        ("topology", "parallel") => ParallelSpec::deserialize(rest).map(drop),
        ("topology", "fig2") => Fig2Spec::deserialize(rest).map(drop),
        ("topology", "clos3") => Clos3Spec::deserialize(rest).map(drop),
        ("topology", "fattree") => FatTreeSpec::deserialize(rest).map(drop),
        ("workload", "long_flows") => LongFlowsSpec::deserialize(rest).map(drop),
        ("workload", "incast") => IncastSpec::deserialize(rest).map(drop),
        ("workload", "permutation") => PermutationSpec::deserialize(rest).map(drop),
        ("workload", "all_to_all") => AllToAllSpec::deserialize(rest).map(drop),
        ("workload", "poisson") => PoissonSpec::deserialize(rest).map(drop),
        ("workload", "background") => BackgroundSpec::deserialize(rest).map(drop),
        _ => Ok(()), // an unknown kind: the full parse lists the kinds
    };
    checked.map_err(|e| schema_error(file, key, &e))
}

/// Turns a schema error into one that names the file and the key (`prefix` is the
/// table the deserialised value sits in, empty for the whole file).
fn schema_error(file: &str, prefix: &str, e: &toml::de::Error) -> ScenarioError {
    // Without a span, toml prints the message, then "in `a.b`" when it knows the key.
    let text = e.to_string();
    let text = text.trim_end();
    let (message, inner) = match text.rsplit_once("\nin `") {
        Some((message, key)) => (message, key.trim_end_matches('`')),
        None => (text, ""),
    };
    let key = match (prefix, inner) {
        ("", "") => "(top level)".to_owned(),
        ("", k) | (k, "") => k.to_owned(),
        (p, k) => format!("{p}.{k}"),
    };
    ScenarioError::Schema {
        file: file.to_owned(),
        key,
        message: message.replace('\n', " ").replace('`', "\""),
    }
}

/// Reads and parses the scenario file at `path` (see [`parse`]).
pub fn load(path: &std::path::Path, overrides: &[Override]) -> Result<Scenario, ScenarioError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::Read {
        file: file.clone(),
        reason: e.to_string(),
    })?;
    let mut scenario = parse(&file, &text, overrides)?;
    if scenario.name.is_none() {
        scenario.name = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    }
    Ok(scenario)
}
