//! The account-level statements an administrator runs to set the flow up
//! (`parameter-contexts/template/snowflake-setup.sql`), as the SQL API takes them: `USE ROLE`,
//! `USE WAREHOUSE`, `CREATE DATABASE|SCHEMA|ROLE|USER … [IF NOT EXISTS]`, `CREATE WAREHOUSE`,
//! `ALTER USER … SET RSA_PUBLIC_KEY = '…'` and `GRANT` of privileges or roles. They are parsed with
//! sqlparser's Snowflake dialect, except the two forms it lacks (`CREATE WAREHOUSE` and
//! `GRANT CREATE <kind> ON SCHEMA`), read by hand below; a statement neither reads is refused.
//!
//! What the stand-in models of them is only what its other routes use or a set-up script can get
//! wrong in order: which roles, users, databases, schemas and warehouses exist (a `USE` of, or a
//! `GRANT` on or to, one that does not exist fails with 002003, as in Snowflake; the system roles
//! exist from the start, a database or schema also when a table of the catalog is in it), and a
//! user's public key (after `ALTER USER … SET RSA_PUBLIC_KEY` the user's key-pair JWT is accepted;
//! the stand-in adds the key beside earlier ones where Snowflake replaces them). It does not model
//! privileges, role hierarchies or sessions: who may create or grant what is not checked, no grant
//! opens or closes any route, and `USE` changes nothing for later requests. Kept in memory only.

use std::collections::BTreeSet;

use sqlparser::ast::helpers::key_value_options::KeyValueOptionKind;
use sqlparser::ast::{
    Action, GrantObjects, Grantee, GranteeName, GranteesType, Ident, ObjectName, ObjectNamePart, Privileges,
    SchemaName, Statement as Sql, Use, Value,
};
use sqlparser::dialect::SnowflakeDialect;
use sqlparser::parser::Parser;

use crate::ddl::{normalize_ident, split_identifier};

/// The roles every Snowflake account has.
pub const SYSTEM_ROLES: [&str; 6] = ["ACCOUNTADMIN", "SECURITYADMIN", "USERADMIN", "SYSADMIN", "ORGADMIN", "PUBLIC"];

/// Warehouse properties `CREATE WAREHOUSE` takes here (Snowflake has more; others are refused).
const WAREHOUSE_PROPERTIES: [&str; 7] = [
    "WAREHOUSE_SIZE",
    "WAREHOUSE_TYPE",
    "AUTO_SUSPEND",
    "AUTO_RESUME",
    "INITIALLY_SUSPENDED",
    "MIN_CLUSTER_COUNT",
    "MAX_CLUSTER_COUNT",
];
const WAREHOUSE_SIZES: [&str; 10] =
    ["XSMALL", "X-SMALL", "SMALL", "MEDIUM", "LARGE", "XLARGE", "X-LARGE", "XXLARGE", "X2LARGE", "2X-LARGE"];

/// An object a statement names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Object {
    Role(String),
    User(String),
    Database(String),
    Schema(String, String),
    Warehouse(String),
}

impl std::fmt::Display for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Object::Role(n) => write!(f, "Role '{n}'"),
            Object::User(n) => write!(f, "User '{n}'"),
            Object::Database(n) => write!(f, "Database '{n}'"),
            Object::Schema(d, s) => write!(f, "Schema '{d}.{s}'"),
            Object::Warehouse(n) => write!(f, "Warehouse '{n}'"),
        }
    }
}

/// One account-level statement, as the stand-in models it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Statement {
    /// `USE ROLE|WAREHOUSE x`: checks that it exists.
    Use(Object),
    /// `CREATE … [IF NOT EXISTS] x`.
    Create { object: Object, if_not_exists: bool },
    /// `ALTER USER x SET RSA_PUBLIC_KEY = '<base64 body>'`.
    SetPublicKey { user: String, key_body: String },
    /// `GRANT …`: every object named must exist.
    Grant { on: Vec<Object>, to: Vec<Object> },
}

/// Why a statement was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccountError {
    /// Not a statement this module reads (or not well formed).
    #[error("{0}")]
    Syntax(String),
    #[error("SQL compilation error:\n{0} does not exist or not authorized.")]
    Missing(Object),
    #[error("SQL compilation error:\nObject '{0}' already exists.")]
    Exists(String),
}

/// The objects that exist.
#[derive(Debug)]
pub struct Account {
    roles: BTreeSet<String>,
    users: BTreeSet<String>,
    databases: BTreeSet<String>,
    schemas: BTreeSet<(String, String)>,
    warehouses: BTreeSet<String>,
}

impl Default for Account {
    fn default() -> Self {
        Self {
            roles: SYSTEM_ROLES.iter().map(|r| (*r).to_owned()).collect(),
            users: BTreeSet::new(),
            databases: BTreeSet::new(),
            schemas: BTreeSet::new(),
            warehouses: BTreeSet::new(),
        }
    }
}

impl Account {
    /// Whether `object` exists; `catalog_has` answers for the databases and schemas of the
    /// catalog's tables.
    pub fn exists(&self, object: &Object, catalog_has: &dyn Fn(&Object) -> bool) -> bool {
        match object {
            Object::Role(n) => self.roles.contains(n),
            Object::User(n) => self.users.contains(n),
            Object::Database(n) => self.databases.contains(n) || catalog_has(object),
            Object::Schema(d, s) => self.schemas.contains(&(d.clone(), s.clone())) || catalog_has(object),
            Object::Warehouse(n) => self.warehouses.contains(n),
        }
    }

    /// Applies a parsed statement (but the key of `SetPublicKey`, which the caller registers);
    /// returns the SQL API's status text.
    pub fn apply(
        &mut self,
        statement: &Statement,
        catalog_has: &dyn Fn(&Object) -> bool,
    ) -> Result<String, AccountError> {
        let need =
            |o: &Object| if self.exists(o, catalog_has) { Ok(()) } else { Err(AccountError::Missing(o.clone())) };
        match statement {
            Statement::Use(object) => {
                need(object)?;
                Ok("Statement executed successfully.".into())
            }
            Statement::SetPublicKey { user, .. } => {
                need(&Object::User(user.clone()))?;
                Ok("Statement executed successfully.".into())
            }
            Statement::Grant { on, to } => {
                on.iter().chain(to).try_for_each(need)?;
                Ok("Statement executed successfully.".into())
            }
            Statement::Create { object, if_not_exists } => {
                if let Object::Schema(db, _) = object {
                    need(&Object::Database(db.clone()))?;
                }
                if self.exists(object, catalog_has) {
                    return if *if_not_exists {
                        Ok(format!("{object} already exists, statement succeeded."))
                    } else {
                        Err(AccountError::Exists(object.to_string()))
                    };
                }
                match object.clone() {
                    Object::Role(n) => self.roles.insert(n),
                    Object::User(n) => self.users.insert(n),
                    Object::Database(n) => self.databases.insert(n),
                    Object::Schema(d, s) => self.schemas.insert((d, s)),
                    Object::Warehouse(n) => self.warehouses.insert(n),
                };
                Ok(format!("{object} successfully created."))
            }
        }
    }
}

/// Reads one statement; `Ok(None)` when it is none of the kinds this module takes (the SQL API
/// then tries its others). `database` fills a schema name without one, as the request's default.
pub fn parse(sql: &str, database: Option<&str>) -> Result<Option<Statement>, AccountError> {
    let text = sql.trim().trim_end_matches(';').trim();
    let words: Vec<String> = text.split_whitespace().take(3).map(str::to_ascii_uppercase).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["CREATE", "WAREHOUSE", ..] => return create_warehouse(text).map(Some),
        ["GRANT", "CREATE", ..] => return grant_create_on_schema(text, database).map(Some),
        ["USE", ..] | ["GRANT", ..] | ["ALTER", "USER", ..] => {}
        ["CREATE", "DATABASE" | "SCHEMA" | "ROLE" | "USER", ..] => {}
        ["CREATE", "OR", "REPLACE", ..] if !words.contains(&"TABLE") => {}
        _ => return Ok(None),
    }
    let mut parsed = Parser::parse_sql(&SnowflakeDialect {}, text).map_err(|e| syntax(text, &e.to_string()))?;
    if parsed.len() != 1 {
        return Err(syntax(text, "one statement per request"));
    }
    statement(parsed.remove(0), text, database)
}

fn syntax(text: &str, why: &str) -> AccountError {
    AccountError::Syntax(format!("SQL compilation error: syntax error in '{text}': {why}"))
}

fn statement(sql: Sql, text: &str, database: Option<&str>) -> Result<Option<Statement>, AccountError> {
    let unsupported = |what: &str| Err(syntax(text, &format!("{what} is not taken by the stand-in")));
    Ok(Some(match sql {
        Sql::Use(Use::Role(n)) => Statement::Use(Object::Role(single(&n, text)?)),
        Sql::Use(Use::Warehouse(n)) => Statement::Use(Object::Warehouse(single(&n, text)?)),
        Sql::Use(_) => return unsupported("this USE"),
        Sql::CreateDatabase { db_name, if_not_exists, .. } => {
            Statement::Create { object: Object::Database(single(&db_name, text)?), if_not_exists }
        }
        Sql::CreateSchema { schema_name: SchemaName::Simple(n), if_not_exists, .. } => {
            Statement::Create { object: schema(&n, text, database)?, if_not_exists }
        }
        Sql::CreateRole(r) if r.names.len() == 1 => {
            Statement::Create { object: Object::Role(single(&r.names[0], text)?), if_not_exists: r.if_not_exists }
        }
        Sql::CreateUser(u) => {
            Statement::Create { object: Object::User(ident(&u.name)), if_not_exists: u.if_not_exists }
        }
        Sql::AlterUser(a) => {
            let key = a.set_props.options.iter().find(|o| o.option_name.eq_ignore_ascii_case("RSA_PUBLIC_KEY"));
            match (key, a.set_props.options.len(), &a.rename_to) {
                (Some(o), 1, None) => match &o.option_value {
                    KeyValueOptionKind::Single(Value::SingleQuotedString(body)) => {
                        Statement::SetPublicKey { user: ident(&a.name), key_body: body.clone() }
                    }
                    _ => return Err(syntax(text, "RSA_PUBLIC_KEY takes a quoted string")),
                },
                _ => return unsupported("an ALTER USER other than SET RSA_PUBLIC_KEY"),
            }
        }
        Sql::Grant(g) => {
            let mut on = match g.objects {
                None => vec![],
                Some(GrantObjects::Databases(names)) => {
                    names.iter().map(|n| single(n, text).map(Object::Database)).collect::<Result<_, _>>()?
                }
                Some(GrantObjects::Schemas(names)) => {
                    names.iter().map(|n| schema(n, text, database)).collect::<Result<_, _>>()?
                }
                Some(GrantObjects::Warehouses(names)) => {
                    names.iter().map(|n| single(n, text).map(Object::Warehouse)).collect::<Result<_, _>>()?
                }
                // Tables and pipes are the catalog's: the stand-in does not check grants on them.
                Some(GrantObjects::Tables(_)) => vec![],
                Some(_) => return unsupported("a GRANT on this kind of object"),
            };
            if let Privileges::Actions(actions) = &g.privileges {
                for action in actions {
                    if let Action::Role { role } = action {
                        on.push(Object::Role(single(role, text)?));
                    }
                }
            }
            let to = g.grantees.iter().map(|grantee| grantee_object(grantee, text)).collect::<Result<_, _>>()?;
            Statement::Grant { on, to }
        }
        _ => return unsupported("this statement"),
    }))
}

fn grantee_object(g: &Grantee, text: &str) -> Result<Object, AccountError> {
    let Some(GranteeName::ObjectName(name)) = &g.name else {
        return Err(syntax(text, "a GRANT names a role or a user"));
    };
    let name = single(name, text)?;
    match g.grantee_type {
        GranteesType::Role => Ok(Object::Role(name)),
        GranteesType::User => Ok(Object::User(name)),
        _ => Err(syntax(text, "a GRANT here goes TO ROLE or TO USER")),
    }
}

fn ident(i: &Ident) -> String {
    match i.quote_style {
        Some(_) => i.value.clone(),
        None => i.value.to_uppercase(),
    }
}

fn parts(n: &ObjectName, text: &str) -> Result<Vec<String>, AccountError> {
    n.0.iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => Ok(ident(i)),
            _ => Err(syntax(text, "a name here is an identifier")),
        })
        .collect()
}

fn single(n: &ObjectName, text: &str) -> Result<String, AccountError> {
    match parts(n, text)?.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(syntax(text, &format!("'{n}' is not a single name"))),
    }
}

fn schema(n: &ObjectName, text: &str, database: Option<&str>) -> Result<Object, AccountError> {
    match parts(n, text)?.as_slice() {
        [d, s] => Ok(Object::Schema(d.clone(), s.clone())),
        [s] => match database {
            Some(d) => Ok(Object::Schema(normalize_ident(d), s.clone())),
            None => Err(syntax(text, "a schema name needs its database (db.schema) or the request's database")),
        },
        _ => Err(syntax(text, &format!("'{n}' is not a schema name"))),
    }
}

/// `CREATE WAREHOUSE [IF NOT EXISTS] name [WITH] [property = value ...]`, with the properties
/// above (sqlparser has no warehouse statement).
fn create_warehouse(text: &str) -> Result<Statement, AccountError> {
    let bad = |why: &str| syntax(text, why);
    let rest = text.split_once(char::is_whitespace).map(|(_, r)| r.trim_start()).unwrap_or_default();
    let rest = rest.get("WAREHOUSE".len()..).unwrap_or_default();
    let (if_not_exists, rest) = match strip_words(rest, &["IF", "NOT", "EXISTS"]) {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let (name, rest) = split_identifier(rest).map_err(|e| bad(&e))?;
    let rest = strip_words(rest, &["WITH"]).unwrap_or(rest);
    let tokens: Vec<&str> = rest.split(|c: char| c.is_whitespace() || c == '=').filter(|t| !t.is_empty()).collect();
    if rest.matches('=').count() * 2 != tokens.len() {
        return Err(bad("properties are written property = value"));
    }
    for pair in tokens.chunks(2) {
        let (property, value) = (pair[0].to_ascii_uppercase(), pair[1].trim_matches('\'').to_ascii_uppercase());
        if !WAREHOUSE_PROPERTIES.contains(&property.as_str()) {
            return Err(bad(&format!("unknown warehouse property {property}")));
        }
        let valid = match property.as_str() {
            "WAREHOUSE_SIZE" => WAREHOUSE_SIZES.contains(&value.as_str()),
            "WAREHOUSE_TYPE" => ["STANDARD", "SNOWPARK-OPTIMIZED"].contains(&value.as_str()),
            "AUTO_RESUME" | "INITIALLY_SUSPENDED" => ["TRUE", "FALSE"].contains(&value.as_str()),
            _ => value.parse::<u32>().is_ok() || (property == "AUTO_SUSPEND" && value == "NULL"),
        };
        if !valid {
            return Err(bad(&format!("invalid value {value} for {property}")));
        }
    }
    Ok(Statement::Create { object: Object::Warehouse(name), if_not_exists })
}

/// `GRANT CREATE <object kind> ON SCHEMA [db.]schema TO ROLE role` (sqlparser reads no CREATE
/// privilege with an object kind).
fn grant_create_on_schema(text: &str, database: Option<&str>) -> Result<Statement, AccountError> {
    let bad = || syntax(text, "expected GRANT CREATE <TABLE | PIPE | VIEW | STAGE> ON SCHEMA <schema> TO ROLE <role>");
    let rest = strip_words(text, &["GRANT", "CREATE"]).ok_or_else(bad)?;
    let rest = ["TABLE", "PIPE", "VIEW", "STAGE", "ICEBERG TABLE"]
        .iter()
        .rev()
        .find_map(|kind| strip_words(rest, &kind.split(' ').collect::<Vec<_>>()))
        .ok_or_else(bad)?;
    let rest = strip_words(rest, &["ON", "SCHEMA"]).ok_or_else(bad)?;
    let (first, mut rest) = split_identifier(rest).map_err(|_| bad())?;
    let object = match rest.strip_prefix('.') {
        Some(after) => {
            let (second, r) = split_identifier(after).map_err(|_| bad())?;
            rest = r;
            Object::Schema(first, second)
        }
        None => Object::Schema(normalize_ident(database.ok_or_else(bad)?), first),
    };
    let rest = strip_words(rest, &["TO", "ROLE"]).ok_or_else(bad)?;
    let (role, rest) = split_identifier(rest).map_err(|_| bad())?;
    if !rest.trim().is_empty() {
        return Err(bad());
    }
    Ok(Statement::Grant { on: vec![object], to: vec![Object::Role(role)] })
}

/// Strips leading keywords (case-insensitive, each followed by whitespace or the end).
fn strip_words<'a>(text: &'a str, words: &[&str]) -> Option<&'a str> {
    let mut rest = text.trim_start();
    for word in words {
        let head = rest.get(..word.len())?;
        let after = &rest[word.len()..];
        if !head.eq_ignore_ascii_case(word) || !(after.is_empty() || after.starts_with(char::is_whitespace)) {
            return None;
        }
        rest = after.trim_start();
    }
    Some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &Object) -> bool {
        false
    }

    #[test]
    fn reads_the_kinds_a_set_up_script_uses() {
        let p = |sql| parse(sql, None).unwrap().unwrap();
        assert_eq!(p("use role SYSADMIN"), Statement::Use(Object::Role("SYSADMIN".into())));
        assert_eq!(
            p("CREATE SCHEMA IF NOT EXISTS db.s"),
            Statement::Create { object: Object::Schema("DB".into(), "S".into()), if_not_exists: true }
        );
        assert_eq!(
            p("GRANT ROLE r TO ROLE SYSADMIN"),
            Statement::Grant { on: vec![Object::Role("R".into())], to: vec![Object::Role("SYSADMIN".into())] }
        );
        assert_eq!(
            p("GRANT CREATE TABLE ON SCHEMA db.s TO ROLE r"),
            Statement::Grant { on: vec![Object::Schema("DB".into(), "S".into())], to: vec![Object::Role("R".into())] }
        );
        assert_eq!(
            p("CREATE WAREHOUSE IF NOT EXISTS wh WAREHOUSE_SIZE = XSMALL AUTO_SUSPEND = 60 AUTO_RESUME = TRUE"),
            Statement::Create { object: Object::Warehouse("WH".into()), if_not_exists: true }
        );
        assert_eq!(
            p("ALTER USER u SET RSA_PUBLIC_KEY = 'MIIB'"),
            Statement::SetPublicKey { user: "U".into(), key_body: "MIIB".into() }
        );
        assert_eq!(parse("CREATE TABLE db.s.t (a INT)", None).unwrap(), None, "the catalog's DDL");
        assert_eq!(parse("DESCRIBE TABLE db.s.t", None).unwrap(), None);
    }

    #[test]
    fn refuses_malformed_statements() {
        for sql in [
            "CREATE ROLE",
            "GRANT USAGE ON DATABASE TO ROLE r",
            "GRANT ROLE r TO",
            "CREATE WAREHOUSE wh WAREHOUSE_SIZE = HUGE",
            "CREATE WAREHOUSE wh AUTO_SUSPEND 60",
            "CREATE WAREHOUSE wh COLOUR = BLUE",
            "GRANT CREATE TABLE ON SCHEMA s TO ROLE r",
            "GRANT CREATE TABLE ON SCHEMA db.s TO r",
            "ALTER USER u SET RSA_PUBLIC_KEY = 42",
            "USE ROLE a b",
        ] {
            assert!(matches!(parse(sql, None), Err(AccountError::Syntax(_))), "{sql}: {:?}", parse(sql, None));
        }
    }

    #[test]
    fn a_statement_on_what_does_not_exist_yet_fails_as_in_snowflake() {
        let mut account = Account::default();
        let run = |a: &mut Account, sql| a.apply(&parse(sql, None).unwrap().unwrap(), &none);
        assert_eq!(
            run(&mut account, "GRANT USAGE ON DATABASE db TO ROLE r"),
            Err(AccountError::Missing(Object::Database("DB".into())))
        );
        assert_eq!(run(&mut account, "CREATE SCHEMA db.s"), Err(AccountError::Missing(Object::Database("DB".into()))));
        assert_eq!(run(&mut account, "USE ROLE r"), Err(AccountError::Missing(Object::Role("R".into()))));
        run(&mut account, "CREATE DATABASE db").unwrap();
        run(&mut account, "CREATE ROLE r").unwrap();
        run(&mut account, "GRANT USAGE ON DATABASE db TO ROLE r").unwrap();
        assert_eq!(run(&mut account, "CREATE ROLE r"), Err(AccountError::Exists("Role 'R'".into())));
        assert!(run(&mut account, "CREATE ROLE IF NOT EXISTS r").unwrap().contains("already exists"));
        run(&mut account, "USE ROLE r").unwrap();
    }
}
