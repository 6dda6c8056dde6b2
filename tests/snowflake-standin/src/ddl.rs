//! A small parser for the Snowflake DDL tests need, so tables are created with
//! the same statements one would run in Snowflake:
//! - `CREATE [OR REPLACE] [ICEBERG] TABLE [IF NOT EXISTS] db.schema.t (col TYPE [NOT NULL], ...)
//!    [ENABLE_SCHEMA_EVOLUTION = TRUE] [ERROR_LOGGING = TRUE] [ICEBERG_VERSION = 2|3] ...`
//! - `CREATE [OR REPLACE] PIPE db.schema.p AS COPY INTO db.schema.t ...` (always MATCH_BY_COLUMN_NAME)
//! - `ALTER TABLE db.schema.t SET ENABLE_SCHEMA_EVOLUTION|ERROR_LOGGING = TRUE|FALSE`
//! - `DROP TABLE [IF EXISTS] db.schema.t`, `DROP PIPE [IF EXISTS] db.schema.p`
//!
//! Unquoted identifiers are upper-cased; quoted ones keep their case.

use crate::catalog::{ColumnDef, ObjectName, PipeDef, TableDef};
use crate::schema::{self, IcebergVersion};

/// A parsed statement.
#[derive(Debug, Clone)]
pub enum Statement {
    CreateTable { table: TableDef, or_replace: bool, if_not_exists: bool },
    CreatePipe { pipe: PipeDef, or_replace: bool },
    AlterTableSet { name: ObjectName, evolution: Option<bool>, error_logging: Option<bool> },
    DropTable { name: ObjectName, if_exists: bool },
    DropPipe { name: ObjectName, if_exists: bool },
}

/// Normalises one identifier as Snowflake does: `"Quoted"` keeps case (`""` escapes a quote),
/// unquoted is upper-cased.
pub fn normalize_ident(raw: &str) -> String {
    let raw = raw.trim();
    if raw.len() >= 2 && raw.starts_with('"') && raw.ends_with('"') {
        raw[1..raw.len() - 1].replace("\"\"", "\"")
    } else {
        raw.to_uppercase()
    }
}

/// Splits a leading identifier (quoted or bare word) off `text`; returns it normalised and the rest.
pub fn split_identifier(text: &str) -> Result<(String, &str), String> {
    let text = text.trim_start();
    if let Some(stripped) = text.strip_prefix('"') {
        let mut i = 0;
        let b = stripped.as_bytes();
        while i < b.len() {
            if b[i] == b'"' {
                if b.get(i + 1) == Some(&b'"') {
                    i += 2;
                    continue;
                }
                return Ok((stripped[..i].replace("\"\"", "\""), &stripped[i + 1..]));
            }
            i += 1;
        }
        Err(format!("unterminated quoted identifier in '{text}'"))
    } else {
        let end = text.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$')).unwrap_or(text.len());
        if end == 0 {
            return Err(format!("expected an identifier at '{}'", text.chars().take(30).collect::<String>()));
        }
        Ok((text[..end].to_uppercase(), &text[end..]))
    }
}

/// Like `split_identifier`, but a bare word keeps its case.
pub fn split_identifier_keep_case(text: &str) -> Result<(String, &str), String> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('"') {
        return split_identifier(trimmed);
    }
    let end = trimmed.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$')).unwrap_or(trimmed.len());
    if end == 0 {
        return Err(format!("expected a field name at '{}'", trimmed.chars().take(30).collect::<String>()));
    }
    Ok((trimmed[..end].to_string(), &trimmed[end..]))
}

/// Parses `a.b.c` (1 to 3 parts), filling missing database/schema from defaults.
fn split_object_name<'a>(
    text: &'a str,
    defaults: &(Option<String>, Option<String>),
) -> Result<(ObjectName, &'a str), String> {
    let mut parts = vec![];
    let mut rest = text;
    loop {
        let (part, r) = split_identifier(rest)?;
        parts.push(part);
        rest = r;
        match rest.strip_prefix('.') {
            Some(r) => rest = r,
            None => break,
        }
    }
    let (db, sc, name) = match parts.len() {
        3 => (parts[0].clone(), parts[1].clone(), parts[2].clone()),
        2 => (defaults.0.clone().ok_or("no database given")?, parts[0].clone(), parts[1].clone()),
        1 => (
            defaults.0.clone().ok_or("no database given")?,
            defaults.1.clone().unwrap_or_else(|| "PUBLIC".into()),
            parts[0].clone(),
        ),
        _ => return Err(format!("bad object name '{text}'")),
    };
    Ok((ObjectName::new(&db, &sc, &name), rest))
}

/// Consumes the given keywords (case-insensitive, whitespace separated) if they come next.
fn eat<'a>(text: &'a str, words: &[&str]) -> Option<&'a str> {
    let mut rest = text.trim_start();
    for w in words {
        let head = rest.get(..w.len())?;
        let boundary = rest[w.len()..].chars().next().is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        if !head.eq_ignore_ascii_case(w) || !boundary {
            return None;
        }
        rest = rest[w.len()..].trim_start();
    }
    Some(rest)
}

/// Parses one DDL statement. `defaults` = (database, schema) for partly qualified names.
pub fn parse(sql: &str, defaults: &(Option<String>, Option<String>)) -> Result<Statement, String> {
    let sql = sql.trim().trim_end_matches(';').trim();
    if let Some(rest) = eat(sql, &["CREATE"]) {
        let (or_replace, rest) = eat(rest, &["OR", "REPLACE"]).map_or((false, rest), |r| (true, r));
        if let Some(r) = eat(rest, &["ICEBERG", "TABLE"]) {
            return create_table(r, true, or_replace, defaults);
        }
        if let Some(r) = eat(rest, &["TABLE"]) {
            return create_table(r, false, or_replace, defaults);
        }
        if let Some(r) = eat(rest, &["PIPE"]) {
            return create_pipe(r, or_replace, defaults);
        }
    }
    if let Some(rest) = eat(sql, &["ALTER", "TABLE"]) {
        return alter_table(rest, defaults);
    }
    if let Some(rest) = eat(sql, &["DROP", "TABLE"]) {
        let (if_exists, rest) = eat(rest, &["IF", "EXISTS"]).map_or((false, rest), |r| (true, r));
        let (name, _) = split_object_name(rest, defaults)?;
        return Ok(Statement::DropTable { name, if_exists });
    }
    if let Some(rest) = eat(sql, &["DROP", "PIPE"]) {
        let (if_exists, rest) = eat(rest, &["IF", "EXISTS"]).map_or((false, rest), |r| (true, r));
        let (name, _) = split_object_name(rest, defaults)?;
        return Ok(Statement::DropPipe { name, if_exists });
    }
    Err(format!("unsupported statement (supported: CREATE [ICEBERG] TABLE, CREATE PIPE, ALTER TABLE ... SET, DROP TABLE/PIPE): {}", sql.chars().take(60).collect::<String>()))
}

fn create_table(
    rest: &str,
    iceberg: bool,
    or_replace: bool,
    defaults: &(Option<String>, Option<String>),
) -> Result<Statement, String> {
    let (if_not_exists, rest) = eat(rest, &["IF", "NOT", "EXISTS"]).map_or((false, rest), |r| (true, r));
    let (name, rest) = split_object_name(rest, defaults)?;
    let rest = rest.trim_start();
    let body_start = rest.strip_prefix('(').ok_or("expected '(' after the table name")?;
    let close = matching_paren(body_start).ok_or("unbalanced parentheses in column list")?;
    let columns = schema::split_top_level(&body_start[..close], ',')
        .iter()
        .map(|c| parse_column(c))
        .collect::<Result<Vec<_>, _>>()?;
    let options = parse_options(&body_start[close + 1..]);
    let flag = |k: &str| options.iter().find(|(n, _)| n == k).map(|(_, v)| v.eq_ignore_ascii_case("TRUE"));
    let iceberg = match (iceberg, options.iter().find(|(n, _)| n == "ICEBERG_VERSION").map(|(_, v)| v.as_str())) {
        (false, _) => None,
        (true, Some("3")) => Some(IcebergVersion::V3),
        (true, _) => Some(IcebergVersion::V2),
    };
    let table = TableDef {
        name,
        columns,
        enable_schema_evolution: flag("ENABLE_SCHEMA_EVOLUTION").unwrap_or(false),
        error_logging: flag("ERROR_LOGGING").unwrap_or(false),
        iceberg,
    };
    table.validate()?;
    Ok(Statement::CreateTable { table, or_replace, if_not_exists })
}

fn matching_paren(text: &str) -> Option<usize> {
    let (mut depth, mut quote) = (0i32, None::<char>);
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') if depth == 0 => return Some(i),
            (None, ')') => depth -= 1,
            _ => {}
        }
    }
    None
}

/// `name TYPE [NOT NULL|NULL] [DEFAULT ..] [COMMENT '..'] [COLLATE ..]`.
fn parse_column(text: &str) -> Result<ColumnDef, String> {
    let (name, rest) = split_identifier(text)?;
    let upper = rest.to_uppercase();
    let mut type_end = rest.len();
    let mut nullable = true;
    for kw in [
        " NOT NULL",
        " NULL",
        " DEFAULT",
        " COMMENT",
        " COLLATE",
        " AUTOINCREMENT",
        " IDENTITY",
        " PRIMARY KEY",
        " UNIQUE",
    ] {
        if let Some(i) = find_top_level(&upper, kw) {
            type_end = type_end.min(i);
            if kw == " NOT NULL" {
                nullable = false;
            }
        }
    }
    let ty = schema::parse_type(&rest[..type_end]).map_err(|e| format!("column {name}: {e}"))?;
    Ok(ColumnDef { name, ty, nullable })
}

fn find_top_level(upper: &str, kw: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in upper.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth == 0 && upper[i..].starts_with(kw) => {
                let after = upper[i + kw.len()..].chars().next();
                if after.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `KEY = VALUE` pairs after the column list (keys upper-cased, values unquoted).
fn parse_options(text: &str) -> Vec<(String, String)> {
    let tokens: Vec<String> = text.replace('=', " = ").split_whitespace().map(str::to_string).collect();
    tokens
        .windows(3)
        .filter(|w| w[1] == "=")
        .map(|w| (w[0].to_uppercase(), w[2].trim_matches('\'').to_string()))
        .collect()
}

fn create_pipe(rest: &str, or_replace: bool, defaults: &(Option<String>, Option<String>)) -> Result<Statement, String> {
    let rest = eat(rest, &["IF", "NOT", "EXISTS"]).unwrap_or(rest);
    let (name, rest) = split_object_name(rest, defaults)?;
    let upper = rest.to_uppercase();
    let at = upper.find("COPY INTO").ok_or("expected AS COPY INTO <table>")?;
    let (table, _) =
        split_object_name(&rest[at + "COPY INTO".len()..], &(Some(name.database.clone()), Some(name.schema.clone())))?;
    Ok(Statement::CreatePipe { pipe: PipeDef { name, table }, or_replace })
}

fn alter_table(rest: &str, defaults: &(Option<String>, Option<String>)) -> Result<Statement, String> {
    let (name, rest) = split_object_name(rest, defaults)?;
    let rest = eat(rest, &["SET"]).ok_or("only ALTER TABLE ... SET is supported")?;
    let options = parse_options(rest);
    let flag = |k: &str| options.iter().find(|(n, _)| n == k).map(|(_, v)| v.eq_ignore_ascii_case("TRUE"));
    Ok(Statement::AlterTableSet {
        name,
        evolution: flag("ENABLE_SCHEMA_EVOLUTION"),
        error_logging: flag("ERROR_LOGGING"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_create_table() {
        let s = parse(
            r#"CREATE OR REPLACE TABLE db.public."Events" (id NUMBER(38,0) NOT NULL, "name" VARCHAR(10), meta OBJECT(a STRING, b INT)) ENABLE_SCHEMA_EVOLUTION = TRUE ERROR_LOGGING=true;"#,
            &(None, None),
        )
        .unwrap();
        let Statement::CreateTable { table, or_replace, .. } = s else { panic!() };
        assert!(or_replace);
        assert_eq!(table.name.to_string(), "DB.PUBLIC.Events");
        assert_eq!(table.columns[0].name, "ID");
        assert!(!table.columns[0].nullable);
        assert_eq!(table.columns[1].name, "name");
        assert!(table.enable_schema_evolution && table.error_logging);
    }

    #[test]
    fn parses_pipe_and_iceberg() {
        let s = parse(
            "create pipe DB.PUBLIC.P as copy into DB.PUBLIC.T from table(data_source(type => 'STREAMING'))",
            &(None, None),
        )
        .unwrap();
        let Statement::CreatePipe { pipe, .. } = s else { panic!() };
        assert_eq!(pipe.table.to_string(), "DB.PUBLIC.T");
        assert!(parse("CREATE ICEBERG TABLE DB.PUBLIC.I (v VARIANT)", &(None, None)).is_err());
        assert!(parse("CREATE ICEBERG TABLE DB.PUBLIC.I (v VARIANT) ICEBERG_VERSION = 3", &(None, None)).is_ok());
    }
}
