//! The destination table as Snowflake's SQL API describes it (`DESCRIBE TABLE`, `SHOW TABLES`),
//! read into columns and settings, and the two verification steps made of them: the columns, and
//! whether ENABLE_SCHEMA_EVOLUTION, ERROR_LOGGING and Iceberg agree with the processor's settings.
//! Pure: the rows come from `SnowflakeApi::sql`.

use std::collections::HashMap;

use super::Step;

pub const COLUMNS_STEP: &str = "Table Columns";
pub const SETTINGS_STEP: &str = "Table Settings";

pub type Row = HashMap<String, Option<String>>;

/// A name as a SQL identifier: as it is when already quoted or a plain identifier (Snowflake
/// upper-cases it, as it does in the REST paths), else quoted.
pub fn ident(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if plain || (name.len() >= 2 && name.starts_with('"') && name.ends_with('"')) {
        name.to_owned()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// The `SHOW TABLES LIKE '…'` pattern naming exactly this table (quotes stripped, `'`, `_`, `%`
/// and `\` escaped).
pub fn like_pattern(name: &str) -> String {
    let bare = unquoted(name);
    let mut out = String::new();
    for c in bare.chars() {
        match c {
            '\'' => out.push_str("''"),
            '_' | '%' | '\\' => {
                out.push('\\');
                out.push(c)
            }
            c => out.push(c),
        }
    }
    out
}

fn unquoted(name: &str) -> &str {
    if name.len() >= 2 && name.starts_with('"') && name.ends_with('"') {
        &name[1..name.len() - 1]
    } else {
        name
    }
}

/// Whether SHOW TABLES' `name` is this table: exact for a quoted name, else case-insensitive.
fn same_name(shown: &str, name: &str) -> bool {
    if name.starts_with('"') {
        shown == unquoted(name)
    } else {
        shown.eq_ignore_ascii_case(name)
    }
}

pub fn describe_statement(database: &str, schema: &str, table: &str) -> String {
    format!("DESCRIBE TABLE {}.{}.{}", ident(database), ident(schema), ident(table))
}

pub fn show_statement(database: &str, schema: &str, table: &str) -> String {
    format!("SHOW TABLES LIKE '{}' IN SCHEMA {}.{}", like_pattern(table), ident(database), ident(schema))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub ty: String,
    pub nullable: bool,
}

/// Columns of `DESCRIBE TABLE` rows (`name`, `type`, `null?`).
pub fn columns(rows: &[Row]) -> Vec<Column> {
    let get = |r: &Row, k: &str| r.get(k).cloned().flatten().unwrap_or_default();
    rows.iter()
        .filter(|r| !get(r, "name").is_empty())
        .map(|r| Column { name: get(r, "name"), ty: get(r, "type"), nullable: get(r, "null?") != "N" })
        .collect()
}

/// What `SHOW TABLES` says of the table; `None` for a setting the answer does not carry (the
/// `error_logging` column exists only from Snowflake's 2026_03 behaviour change bundle on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSettings {
    pub schema_evolution: Option<bool>,
    pub error_logging: Option<bool>,
    pub iceberg: Option<bool>,
}

fn flag(row: &Row, key: &str) -> Option<bool> {
    let value = row.get(key)?.as_deref()?.trim().to_ascii_uppercase();
    match value.as_str() {
        "Y" | "YES" | "TRUE" | "ON" => Some(true),
        "N" | "NO" | "FALSE" | "OFF" | "" => Some(false),
        _ => None,
    }
}

/// The settings of `table` among `SHOW TABLES` rows, or None when no row is that table.
pub fn settings(rows: &[Row], table: &str) -> Option<TableSettings> {
    let row = rows.iter().find(|r| r.get("name").cloned().flatten().is_some_and(|n| same_name(&n, table)))?;
    Some(TableSettings {
        schema_evolution: flag(row, "enable_schema_evolution"),
        error_logging: flag(row, "error_logging"),
        iceberg: flag(row, "is_iceberg"),
    })
}

/// The columns step from DESCRIBE TABLE's answer.
pub fn columns_step(table: &str, described: &Result<Vec<Row>, String>) -> Step {
    match described {
        Err(e) => Step::failed(COLUMNS_STEP, format!("DESCRIBE TABLE {table} failed: {e}")),
        Ok(rows) => {
            let cols = columns(rows);
            if cols.is_empty() {
                return Step::failed(COLUMNS_STEP, format!("DESCRIBE TABLE {table} returned no column"));
            }
            let list: Vec<String> = cols
                .iter()
                .map(|c| format!("{} {}{}", c.name, c.ty, if c.nullable { "" } else { " NOT NULL" }))
                .collect();
            Step::successful(COLUMNS_STEP, format!("{} column(s): {}", cols.len(), list.join(", ")))
        }
    }
}

/// What the processor's properties claim of the table.
#[derive(Debug, Clone, Copy)]
pub struct Claimed {
    pub schema_evolution: bool,
    pub iceberg: bool,
}

/// The settings step: FAILED when the table contradicts Schema Evolution Enabled (claimed on, off
/// on the table: new keys would be dropped) or Iceberg Enabled; SUCCESSFUL with a warning when
/// ERROR_LOGGING is off (rejected rows are then only counted, never kept).
pub fn settings_step(table: &str, shown: &Result<Vec<Row>, String>, claimed: Claimed) -> Step {
    let rows = match shown {
        Err(e) => return Step::failed(SETTINGS_STEP, format!("SHOW TABLES for {table} failed: {e}")),
        Ok(rows) => rows,
    };
    let Some(s) = settings(rows, table) else {
        return Step::failed(
            SETTINGS_STEP,
            format!("SHOW TABLES does not list {table}: it does not exist or the role may not see it"),
        );
    };
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    match s.schema_evolution {
        Some(true) => notes.push("ENABLE_SCHEMA_EVOLUTION is on (new top-level keys become columns)".to_owned()),
        Some(false) if claimed.schema_evolution => problems.push(
            "ENABLE_SCHEMA_EVOLUTION is off, but Schema Evolution Enabled is true: keys without a column would be dropped \
             (ALTER TABLE … SET ENABLE_SCHEMA_EVOLUTION = TRUE, or set the property to false)"
                .to_owned(),
        ),
        Some(false) => notes.push("ENABLE_SCHEMA_EVOLUTION is off (keys without a column are dropped)".to_owned()),
        None => notes.push("whether ENABLE_SCHEMA_EVOLUTION is on is not shown".to_owned()),
    }
    match (s.iceberg, claimed.iceberg) {
        (Some(true), false) => problems.push("the table is an Iceberg table, but Iceberg Enabled is false".to_owned()),
        (Some(false), true) => {
            problems.push("Iceberg Enabled is true, but the table is not an Iceberg table".to_owned())
        }
        (Some(true), true) => notes.push("an Iceberg table".to_owned()),
        _ => {}
    }
    let warning = match s.error_logging {
        Some(true) => {
            notes.push("ERROR_LOGGING is on (rejected rows are kept in ERROR_TABLE)".to_owned());
            None
        }
        Some(false) => Some(
            "Warning: ERROR_LOGGING is off: rows Snowflake rejects are only counted, their content is lost \
             (ALTER TABLE … SET ERROR_LOGGING = TRUE)",
        ),
        None => Some("Warning: whether ERROR_LOGGING is on is not shown (Snowflake's 2026_03 bundle adds it to SHOW TABLES); turn it on with ALTER TABLE … SET ERROR_LOGGING = TRUE"),
    };
    if !problems.is_empty() {
        let mut text = problems.join("; ");
        if let Some(w) = warning {
            text.push_str(". ");
            text.push_str(w);
        }
        return Step::failed(SETTINGS_STEP, text);
    }
    let mut text = format!("{table}: {}", notes.join("; "));
    if let Some(w) = warning {
        text.push_str(". ");
        text.push_str(w);
    }
    Step::successful(SETTINGS_STEP, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::Outcome;

    fn row(pairs: &[(&str, Option<&str>)]) -> Row {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned))).collect()
    }

    fn shown(evolution: &str, logging: Option<&str>, iceberg: &str) -> Result<Vec<Row>, String> {
        let mut pairs =
            vec![("name", Some("EVENTS")), ("enable_schema_evolution", Some(evolution)), ("is_iceberg", Some(iceberg))];
        if let Some(l) = logging {
            pairs.push(("error_logging", Some(l)));
        }
        Ok(vec![row(&[("name", Some("EVENTSX"))]), row(&pairs)])
    }

    const PLAIN: Claimed = Claimed { schema_evolution: true, iceberg: false };

    #[test]
    fn names_become_sql_identifiers_and_patterns() {
        assert_eq!(describe_statement("KINESNOW", "PUBLIC", "EVENTS"), "DESCRIBE TABLE KINESNOW.PUBLIC.EVENTS");
        assert_eq!(ident("my table"), "\"my table\"");
        assert_eq!(ident("\"Mixed\""), "\"Mixed\"");
        assert_eq!(ident("we\"ird-name"), "\"we\"\"ird-name\"");
        assert_eq!(show_statement("DB", "SC", "RAW_EVENTS"), "SHOW TABLES LIKE 'RAW\\_EVENTS' IN SCHEMA DB.SC");
        assert_eq!(like_pattern("o'k%"), "o''k\\%");
    }

    #[test]
    fn columns_are_listed_with_nullability() {
        let rows = vec![
            row(&[("name", Some("ID")), ("type", Some("NUMBER(38,0)")), ("null?", Some("N"))]),
            row(&[("name", Some("V")), ("type", Some("VARIANT")), ("null?", Some("Y"))]),
        ];
        let step = columns_step("DB.SC.T", &Ok(rows));
        assert_eq!(step.outcome, Outcome::Successful);
        assert_eq!(step.explanation, "2 column(s): ID NUMBER(38,0) NOT NULL, V VARIANT");
        assert_eq!(columns_step("DB.SC.T", &Ok(vec![])).outcome, Outcome::Failed);
        let missing = columns_step("DB.SC.T", &Err("002003: Table 'T' does not exist or not authorized.".into()));
        assert!(missing.outcome == Outcome::Failed && missing.explanation.contains("does not exist"));
    }

    #[test]
    fn error_logging_off_is_a_warning_not_a_failure() {
        let on = settings_step("EVENTS", &shown("Y", Some("Y"), "N"), PLAIN);
        assert_eq!(on.outcome, Outcome::Successful);
        assert!(
            on.explanation.contains("ERROR_LOGGING is on") && !on.explanation.contains("Warning"),
            "{}",
            on.explanation
        );
        let off = settings_step("EVENTS", &shown("Y", Some("N"), "N"), PLAIN);
        assert_eq!(off.outcome, Outcome::Successful);
        assert!(off.explanation.contains("Warning: ERROR_LOGGING is off"), "{}", off.explanation);
        let unknown = settings_step("EVENTS", &shown("Y", None, "N"), PLAIN);
        assert!(
            unknown.outcome == Outcome::Successful && unknown.explanation.contains("not shown"),
            "{}",
            unknown.explanation
        );
    }

    #[test]
    fn a_table_contradicting_the_properties_fails() {
        let no_evolution = settings_step("EVENTS", &shown("N", Some("Y"), "N"), PLAIN);
        assert_eq!(no_evolution.outcome, Outcome::Failed);
        assert!(no_evolution.explanation.contains("ENABLE_SCHEMA_EVOLUTION is off"), "{}", no_evolution.explanation);
        let ok =
            settings_step("EVENTS", &shown("N", Some("Y"), "N"), Claimed { schema_evolution: false, iceberg: false });
        assert_eq!(ok.outcome, Outcome::Successful, "{}", ok.explanation);
        let iceberg = settings_step("EVENTS", &shown("Y", Some("Y"), "Y"), PLAIN);
        assert!(iceberg.outcome == Outcome::Failed && iceberg.explanation.contains("Iceberg"));
    }

    #[test]
    fn the_table_is_found_by_its_exact_name() {
        assert_eq!(settings(&shown("Y", None, "N").unwrap(), "events").unwrap().schema_evolution, Some(true));
        assert!(settings(&shown("Y", None, "N").unwrap(), "\"events\"").is_none(), "a quoted name keeps its case");
        let missing = settings_step("OTHER", &shown("Y", Some("Y"), "N"), PLAIN);
        assert!(missing.outcome == Outcome::Failed && missing.explanation.contains("does not list"));
    }
}
