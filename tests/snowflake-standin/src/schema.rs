//! Snowflake column types and the value rules of the default pipe
//! (`MATCH_BY_COLUMN_NAME`): parsing type names, mapping them to DuckDB storage
//! types, converting JSON values into a column's type (or a row error), and
//! inferring a column type for schema evolution.
//!
//! Converted cells are text handed to DuckDB through a VARCHAR staging table;
//! `staging_expr` gives the SQL that turns that text into the stored type.

use serde_json::{Map, Number, Value};
use std::fmt;

/// Iceberg table format version (`None` on a standard table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum IcebergVersion {
    V2,
    V3,
}

/// A Snowflake column type.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum SfType {
    Number {
        precision: u8,
        scale: u8,
    },
    Float,
    Varchar {
        max_len: Option<usize>,
    },
    Boolean,
    Date,
    Time,
    TimestampNtz,
    TimestampLtz,
    TimestampTz,
    Binary,
    /// Semi-structured types.
    Variant,
    Object,
    Array,
    /// Structured types (Iceberg, or standard tables that declare them).
    StructuredObject(Vec<(String, SfType)>),
    StructuredArray(Box<SfType>),
    Map(Box<SfType>, Box<SfType>),
}

impl fmt::Display for SfType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SfType::Number { precision, scale } => write!(f, "NUMBER({precision},{scale})"),
            SfType::Float => write!(f, "FLOAT"),
            SfType::Varchar { max_len: Some(n) } => write!(f, "VARCHAR({n})"),
            SfType::Varchar { max_len: None } => write!(f, "VARCHAR"),
            SfType::Boolean => write!(f, "BOOLEAN"),
            SfType::Date => write!(f, "DATE"),
            SfType::Time => write!(f, "TIME"),
            SfType::TimestampNtz => write!(f, "TIMESTAMP_NTZ"),
            SfType::TimestampLtz => write!(f, "TIMESTAMP_LTZ"),
            SfType::TimestampTz => write!(f, "TIMESTAMP_TZ"),
            SfType::Binary => write!(f, "BINARY"),
            SfType::Variant => write!(f, "VARIANT"),
            SfType::Object => write!(f, "OBJECT"),
            SfType::Array => write!(f, "ARRAY"),
            SfType::StructuredObject(fields) => {
                write!(f, "OBJECT(")?;
                for (i, (n, t)) in fields.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{n} {t}")?;
                }
                write!(f, ")")
            }
            SfType::StructuredArray(t) => write!(f, "ARRAY({t})"),
            SfType::Map(k, v) => write!(f, "MAP({k}, {v})"),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{0}")]
pub struct TypeError(pub String);

/// Parses a Snowflake type name such as `NUMBER(38,0)`, `VARCHAR(10)`,
/// `TIMESTAMP_NTZ(9)` or `OBJECT(a STRING, b ARRAY(INT))`.
pub fn parse_type(text: &str) -> Result<SfType, TypeError> {
    let text = text.trim();
    let (name, args) = match text.find('(') {
        Some(i) if text.ends_with(')') => (text[..i].trim(), Some(&text[i + 1..text.len() - 1])),
        Some(_) => return Err(TypeError(format!("unbalanced type '{text}'"))),
        None => (text, None),
    };
    let name = name.split_whitespace().collect::<Vec<_>>().join(" ").to_uppercase();
    let nums = || -> Result<Vec<u32>, TypeError> {
        args.map(|a| {
            a.split(',')
                .map(|p| p.trim().parse::<u32>().map_err(|_| TypeError(format!("bad type argument '{p}' in '{text}'"))))
                .collect()
        })
        .unwrap_or(Ok(vec![]))
    };
    Ok(match name.as_str() {
        "NUMBER" | "DECIMAL" | "NUMERIC" => {
            let n = nums()?;
            let precision = *n.first().unwrap_or(&38);
            let scale = *n.get(1).unwrap_or(&0);
            if !(1..=38).contains(&precision) || scale > precision {
                return Err(TypeError(format!("invalid precision/scale in '{text}'")));
            }
            SfType::Number { precision: precision as u8, scale: scale as u8 }
        }
        "INT" | "INTEGER" | "BIGINT" | "SMALLINT" | "TINYINT" | "BYTEINT" | "LONG" => {
            SfType::Number { precision: 38, scale: 0 }
        }
        "FLOAT" | "FLOAT4" | "FLOAT8" | "DOUBLE" | "DOUBLE PRECISION" | "REAL" => SfType::Float,
        "VARCHAR" | "STRING" | "TEXT" | "CHAR" | "CHARACTER" | "NVARCHAR" | "NCHAR" | "CHAR VARYING" => {
            let n = nums()?;
            let max_len = match (name.as_str(), n.first()) {
                (_, Some(&l)) => Some(l as usize),
                ("CHAR" | "CHARACTER" | "NCHAR", None) => Some(1),
                _ => None,
            };
            SfType::Varchar { max_len }
        }
        "BOOLEAN" | "BOOL" => SfType::Boolean,
        "DATE" => SfType::Date,
        "TIME" => SfType::Time,
        "TIMESTAMP" | "TIMESTAMP_NTZ" | "DATETIME" | "TIMESTAMPNTZ" | "TIMESTAMP WITHOUT TIME ZONE" => {
            SfType::TimestampNtz
        }
        "TIMESTAMP_LTZ" | "TIMESTAMPLTZ" | "TIMESTAMP WITH LOCAL TIME ZONE" => SfType::TimestampLtz,
        "TIMESTAMP_TZ" | "TIMESTAMPTZ" | "TIMESTAMP WITH TIME ZONE" => SfType::TimestampTz,
        "BINARY" | "VARBINARY" => SfType::Binary,
        "VARIANT" => SfType::Variant,
        "OBJECT" => match args {
            Some(a) if !a.trim().is_empty() => SfType::StructuredObject(parse_fields(a)?),
            _ => SfType::Object,
        },
        "ARRAY" => match args {
            Some(a) if !a.trim().is_empty() => SfType::StructuredArray(Box::new(parse_type(a)?)),
            _ => SfType::Array,
        },
        "MAP" => {
            let parts = split_top_level(args.unwrap_or(""), ',');
            if parts.len() != 2 {
                return Err(TypeError(format!("MAP needs key and value types: '{text}'")));
            }
            SfType::Map(Box::new(parse_type(&parts[0])?), Box::new(parse_type(&parts[1])?))
        }
        other => return Err(TypeError(format!("unsupported type '{other}'"))),
    })
}

/// Parses `name TYPE, name TYPE` (the inside of a structured OBJECT). Field names
/// keep their case (structured field names are case-sensitive).
fn parse_fields(text: &str) -> Result<Vec<(String, SfType)>, TypeError> {
    split_top_level(text, ',')
        .iter()
        .map(|f| {
            let f = f.trim();
            // Structured field names are case-sensitive: kept as written (quotes removed).
            let (name, rest) = crate::ddl::split_identifier_keep_case(f).map_err(TypeError)?;
            let ty = rest.trim().trim_end_matches("NOT NULL").trim_end_matches("not null");
            Ok((name, parse_type(ty)?))
        })
        .collect()
}

/// Splits on `sep` outside parentheses and quotes.
pub fn split_top_level(text: &str, sep: char) -> Vec<String> {
    let mut parts = vec![];
    let (mut depth, mut quote, mut cur) = (0i32, None::<char>, String::new());
    for c in text.chars() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => depth -= 1,
            (None, c) if c == sep && depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        parts.push(cur);
    }
    parts
}

impl SfType {
    /// The DuckDB type that stores this Snowflake type.
    pub fn duckdb_type(&self) -> String {
        match self {
            SfType::Number { precision, scale } => format!("DECIMAL({precision},{scale})"),
            SfType::Float => "DOUBLE".into(),
            SfType::Varchar { .. } => "VARCHAR".into(),
            SfType::Boolean => "BOOLEAN".into(),
            SfType::Date => "DATE".into(),
            SfType::Time => "TIME".into(),
            SfType::TimestampNtz => "TIMESTAMP".into(),
            SfType::TimestampLtz | SfType::TimestampTz => "TIMESTAMPTZ".into(),
            SfType::Binary => "BLOB".into(),
            _ => "JSON".into(),
        }
    }

    /// SQL turning the staged text column `col` into the stored type.
    pub fn staging_expr(&self, col: &str) -> String {
        match self {
            SfType::Binary => format!("unhex({col})"),
            SfType::TimestampNtz => format!(
                "CASE WHEN starts_with({col}, '@') THEN make_timestamp(CAST(substr({col}, 2) AS BIGINT)) ELSE CAST({col} AS TIMESTAMP) END"
            ),
            SfType::TimestampLtz | SfType::TimestampTz => format!(
                "CASE WHEN starts_with({col}, '@') THEN CAST(make_timestamp(CAST(substr({col}, 2) AS BIGINT)) AS TIMESTAMPTZ) ELSE CAST({col} AS TIMESTAMPTZ) END"
            ),
            other => format!("CAST({col} AS {})", other.duckdb_type()),
        }
    }

    /// Whether a table of the given kind may have a column of this type.
    pub fn check_allowed(&self, iceberg: Option<IcebergVersion>) -> Result<(), TypeError> {
        match (iceberg, self) {
            (Some(IcebergVersion::V2), SfType::Variant) => {
                Err(TypeError("VARIANT is not supported on Iceberg v2 tables".into()))
            }
            (Some(_), SfType::Object | SfType::Array) => Err(TypeError(format!(
                "semi-structured {self} is not supported on Iceberg tables; use a structured type"
            ))),
            (_, SfType::StructuredObject(fields)) => fields.iter().try_for_each(|(_, t)| t.check_allowed(iceberg)),
            (_, SfType::StructuredArray(t)) => t.check_allowed(iceberg),
            (_, SfType::Map(k, v)) => k.check_allowed(iceberg).and(v.check_allowed(iceberg)),
            _ => Ok(()),
        }
    }
}

/// The type schema evolution gives a new column for `value`, or `None` when
/// no column is added (nulls; objects and arrays on Iceberg where not allowed).
pub fn infer_type(value: &Value, iceberg: Option<IcebergVersion>) -> Option<SfType> {
    match value {
        Value::Null => None,
        Value::Bool(_) => Some(SfType::Boolean),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(SfType::Number { precision: 38, scale: 0 }),
        Value::Number(_) => Some(SfType::Float),
        Value::String(_) => Some(SfType::Varchar { max_len: None }),
        Value::Object(_) => match iceberg {
            None | Some(IcebergVersion::V3) => Some(SfType::Variant),
            Some(IcebergVersion::V2) => None,
        },
        Value::Array(_) => match iceberg {
            None => Some(SfType::Variant),
            Some(_) => None,
        },
    }
}

fn type_error(value: &Value, ty: &SfType, why: &str) -> TypeError {
    let mut shown = value.to_string();
    if shown.len() > 80 {
        let mut cut = 80;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push('…');
    }
    TypeError(format!("{why}: value {shown} cannot be converted to {ty}"))
}

/// Converts a JSON value into the staged text of a column of type `ty`
/// (`None` = SQL NULL), or explains why the row must be rejected.
pub fn convert(value: &Value, ty: &SfType) -> Result<Option<String>, TypeError> {
    if value.is_null() {
        return Ok(None);
    }
    let text = match ty {
        SfType::Number { precision, scale } => {
            convert_number(value, *precision, *scale).map_err(|w| type_error(value, ty, w))?
        }
        SfType::Float => convert_float(value).map_err(|w| type_error(value, ty, w))?,
        SfType::Varchar { max_len } => {
            let s = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if let Some(max) = max_len {
                if s.chars().count() > *max {
                    return Err(type_error(value, ty, "String is too long"));
                }
            }
            s
        }
        SfType::Boolean => {
            convert_bool(value).ok_or_else(|| type_error(value, ty, "Boolean value is not recognized"))?.to_string()
        }
        SfType::Date => convert_date(value).ok_or_else(|| type_error(value, ty, "Date is not recognized"))?,
        SfType::Time => convert_time(value).ok_or_else(|| type_error(value, ty, "Time is not recognized"))?,
        SfType::TimestampNtz | SfType::TimestampLtz | SfType::TimestampTz => {
            convert_timestamp(value, *ty != SfType::TimestampNtz)
                .ok_or_else(|| type_error(value, ty, "Timestamp is not recognized"))?
        }
        SfType::Binary => match value {
            Value::String(s) if s.len() % 2 == 0 && s.bytes().all(|b| b.is_ascii_hexdigit()) => s.clone(),
            _ => return Err(type_error(value, ty, "Binary value is not valid hex")),
        },
        SfType::Variant => value.to_string(),
        SfType::Object if value.is_object() => value.to_string(),
        SfType::Array if value.is_array() => value.to_string(),
        SfType::Object | SfType::Array => return Err(type_error(value, ty, "Wrong semi-structured type")),
        SfType::StructuredObject(_) | SfType::StructuredArray(_) | SfType::Map(..) => {
            structured(value, ty)?.to_string()
        }
    };
    Ok(Some(text))
}

/// Converts a value into a structured type, enforcing declared fields: every
/// declared OBJECT field must be present (send null explicitly), undeclared keys
/// are dropped, nested values are converted recursively.
fn structured(value: &Value, ty: &SfType) -> Result<Value, TypeError> {
    match (ty, value) {
        (_, Value::Null) => Ok(Value::Null),
        (SfType::StructuredObject(fields), Value::Object(obj)) => {
            let mut out = Map::new();
            for (name, fty) in fields {
                let v = obj
                    .get(name)
                    .ok_or_else(|| TypeError(format!("Missing field '{name}' required by {ty}; structured OBJECT fields must all be present (pad with null)")))?;
                out.insert(name.clone(), structured(v, fty)?);
            }
            Ok(Value::Object(out))
        }
        (SfType::StructuredArray(elem), Value::Array(items)) => {
            items.iter().map(|v| structured(v, elem)).collect::<Result<Vec<_>, _>>().map(Value::Array)
        }
        (SfType::Map(_, vt), Value::Object(obj)) => obj
            .iter()
            .map(|(k, v)| Ok((k.clone(), structured(v, vt)?)))
            .collect::<Result<Map<_, _>, TypeError>>()
            .map(Value::Object),
        (SfType::StructuredObject(_) | SfType::StructuredArray(_) | SfType::Map(..), _) => {
            Err(type_error(value, ty, "Wrong structured type"))
        }
        (scalar, v) => {
            let text = convert(v, scalar)?.unwrap_or_default();
            Ok(match scalar {
                SfType::Number { .. } | SfType::Float => {
                    text.parse::<Number>().map(Value::Number).unwrap_or(Value::String(text))
                }
                SfType::Boolean => Value::Bool(text == "true"),
                SfType::Variant | SfType::Object | SfType::Array => v.clone(),
                _ => Value::String(text),
            })
        }
    }
}

fn convert_number(value: &Value, precision: u8, scale: u8) -> Result<String, &'static str> {
    let text = match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if !(n.is_i64() || n.is_u64()) => {
                if !f.is_finite() {
                    return Err("Numeric value is not finite");
                }
                format!("{f}")
            }
            _ => n.to_string(),
        },
        Value::String(s) => {
            let s = s.trim();
            if is_plain_decimal(s) {
                s.to_string()
            } else {
                match s.parse::<f64>() {
                    Ok(f) if f.is_finite() && s.chars().any(|c| c == 'e' || c == 'E') => format!("{f}"),
                    _ => return Err("Numeric value is not recognized"),
                }
            }
        }
        _ => return Err("Numeric value is not recognized"),
    };
    let unsigned = text.trim_start_matches(['-', '+']);
    let int_part = unsigned.split('.').next().unwrap_or("").trim_start_matches('0');
    if int_part.len() > (precision - scale) as usize {
        return Err("Numeric value out of range");
    }
    Ok(text)
}

fn is_plain_decimal(s: &str) -> bool {
    let body = s.strip_prefix(['-', '+']).unwrap_or(s);
    let mut parts = body.splitn(2, '.');
    let int = parts.next().unwrap_or("");
    let frac = parts.next().unwrap_or("");
    !(int.is_empty() && frac.is_empty())
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
}

fn convert_float(value: &Value) -> Result<String, &'static str> {
    match value {
        Value::Number(n) => Ok(n.to_string()),
        Value::String(s) => {
            let t = s.trim();
            match t.to_ascii_lowercase().as_str() {
                "nan" => Ok("NaN".into()),
                "inf" | "infinity" | "+inf" => Ok("Infinity".into()),
                "-inf" | "-infinity" => Ok("-Infinity".into()),
                _ => t.parse::<f64>().map(|f| format!("{f:?}")).map_err(|_| "Numeric value is not recognized"),
            }
        }
        _ => Err("Numeric value is not recognized"),
    }
}

fn convert_bool(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => n.as_f64().map(|f| f != 0.0),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "t" | "yes" | "y" | "on" | "1" => Some(true),
            "false" | "f" | "no" | "n" | "off" | "0" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// `YYYY-MM-DD` with valid month/day, returned as-is.
fn parse_date(s: &str) -> Option<&str> {
    let b = s.as_bytes();
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| {
        s.get(r).filter(|p| p.bytes().all(|c| c.is_ascii_digit())).and_then(|p| p.parse::<u32>().ok())
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    ((1..=12).contains(&m) && d >= 1 && d <= days[(m - 1) as usize]).then(|| &s[..10])
}

/// `HH:MM[:SS[.fffffffff]]`.
fn parse_time(s: &str) -> Option<String> {
    let (hms, frac) = match s.split_once('.') {
        Some((a, f)) if !f.is_empty() && f.len() <= 9 && f.bytes().all(|c| c.is_ascii_digit()) => (a, Some(f)),
        Some(_) => return None,
        None => (s, None),
    };
    let parts: Vec<&str> = hms.split(':').collect();
    if !(2..=3).contains(&parts.len()) || parts.iter().any(|p| p.len() != 2 || !p.bytes().all(|c| c.is_ascii_digit())) {
        return None;
    }
    let v: Vec<u32> = parts.iter().map(|p| p.parse().unwrap()).collect();
    if v[0] > 23 || v[1] > 59 || v.get(2).copied().unwrap_or(0) > 59 {
        return None;
    }
    let mut out = format!("{:02}:{:02}:{:02}", v[0], v[1], v.get(2).copied().unwrap_or(0));
    if let Some(f) = frac {
        out.push('.');
        out.push_str(&f[..f.len().min(6)]);
    }
    Some(out)
}

fn convert_date(value: &Value) -> Option<String> {
    let s = value.as_str()?.trim();
    let date = parse_date(s)?;
    match &s[10..] {
        "" => Some(date.to_string()),
        rest if rest.starts_with('T') || rest.starts_with(' ') => {
            convert_timestamp(value, false).map(|_| date.to_string())
        }
        _ => None,
    }
}

fn convert_time(value: &Value) -> Option<String> {
    parse_time(value.as_str()?.trim())
}

/// ISO-8601 timestamps (`T` or space, optional fraction, optional `Z`/offset),
/// or epoch numbers scaled by magnitude as Snowflake does (s, ms, µs, ns).
/// Epoch values are staged as `@<microseconds>`.
fn convert_timestamp(value: &Value, keep_zone: bool) -> Option<String> {
    let s = match value {
        Value::Number(n) => return epoch_micros(n.as_i64()?).map(|us| format!("@{us}")),
        Value::String(s) => s.trim(),
        _ => return None,
    };
    if !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()) {
        return epoch_micros(s.parse().ok()?).map(|us| format!("@{us}"));
    }
    let date = parse_date(s)?;
    let rest = &s[10..];
    if rest.is_empty() {
        return Some(format!("{date} 00:00:00"));
    }
    let rest = rest.strip_prefix('T').or_else(|| rest.strip_prefix(' '))?;
    let zone_at = rest.find(['Z', 'z', '+', '-']).unwrap_or(rest.len());
    let (time, zone) = rest.split_at(zone_at);
    let time = parse_time(time.trim())?;
    let zone = match zone.trim() {
        "" => "",
        "Z" | "z" => "+00:00",
        z if valid_offset(z) => z,
        _ => return None,
    };
    Some(if keep_zone { format!("{date} {time}{zone}") } else { format!("{date} {time}") })
}

fn valid_offset(z: &str) -> bool {
    let digits: String = z[1..].chars().filter(|c| *c != ':').collect();
    (digits.len() == 2 || digits.len() == 4) && digits.bytes().all(|c| c.is_ascii_digit())
}

fn epoch_micros(v: i64) -> Option<i64> {
    let a = v.unsigned_abs();
    if a < 31_536_000_000 {
        v.checked_mul(1_000_000)
    } else if a < 31_536_000_000_000 {
        v.checked_mul(1000)
    } else if a < 31_536_000_000_000_000 {
        Some(v)
    } else {
        Some(v / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_types() {
        assert_eq!(parse_type("number(10, 2)").unwrap(), SfType::Number { precision: 10, scale: 2 });
        assert_eq!(parse_type("STRING").unwrap(), SfType::Varchar { max_len: None });
        assert_eq!(
            parse_type("OBJECT(stream STRING, subSequenceNumber INTEGER)").unwrap(),
            SfType::StructuredObject(vec![
                ("stream".into(), SfType::Varchar { max_len: None }),
                ("subSequenceNumber".into(), SfType::Number { precision: 38, scale: 0 })
            ])
        );
        assert_eq!(parse_type("MAP(VARCHAR, VARCHAR)").unwrap().to_string(), "MAP(VARCHAR, VARCHAR)");
    }

    #[test]
    fn converts_values() {
        let num = SfType::Number { precision: 5, scale: 2 };
        assert_eq!(convert(&json!(123.456), &num).unwrap(), Some("123.456".into()));
        assert!(convert(&json!(1234.5), &num).is_err());
        assert!(convert(&json!("abc"), &num).is_err());
        assert_eq!(convert(&json!("2024-10-15"), &SfType::Date).unwrap(), Some("2024-10-15".into()));
        assert!(convert(&json!("2024-02-30"), &SfType::Date).is_err());
        assert_eq!(
            convert(&json!("2024-10-15T01:02:03.5Z"), &SfType::TimestampTz).unwrap(),
            Some("2024-10-15 01:02:03.5+00:00".into())
        );
        assert_eq!(convert(&json!(1700000000), &SfType::TimestampNtz).unwrap(), Some("@1700000000000000".into()));
        assert_eq!(convert(&json!(true), &SfType::Varchar { max_len: None }).unwrap(), Some("true".into()));
        assert!(convert(&json!("abcd"), &SfType::Varchar { max_len: Some(3) }).is_err());
        let obj = parse_type("OBJECT(a STRING, b INT)").unwrap();
        assert!(convert(&json!({"a": "x"}), &obj).is_err());
        assert_eq!(convert(&json!({"a": "x", "b": 2, "c": 3}), &obj).unwrap(), Some(r#"{"a":"x","b":2}"#.into()));
    }
}
