//! The committer: a background task that, once a batch's commit lag has passed,
//! applies schema evolution, converts its rows to the table's column types,
//! writes good rows to the table and bad ones to the error table, and then
//! advances the channel's committed offset token and counters. Until then the
//! rows are invisible, as in Snowflake where a 200 on append is not durable.

use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::catalog::{ColumnDef, TableDef};
use crate::channels::{BatchOutcome, DueBatch, ParsedRow};
use crate::schema;
use crate::state::AppState;
use crate::storage::ErrorRecord;

/// How often the committer looks for due batches: a quarter of the commit lag, from 5 to 100 ms. A batch is
/// committed at the first check at or after its commit lag has passed.
pub fn check_interval_ms(commit_lag_ms: u64) -> u64 {
    (commit_lag_ms / 4).clamp(5, 100)
}

/// Runs forever, committing due batches. The checks keep their cadence (one every `check_interval_ms`, however
/// long a round of commits took, without bursts of catch-up checks when one ran late), so a batch waits at most
/// its commit lag plus one check interval plus the commits queued before it in that round.
pub async fn run(state: Arc<AppState>) {
    let mut next = tokio::time::Instant::now();
    loop {
        let lag = state.settings.read().unwrap().commit_lag_ms;
        next += Duration::from_millis(check_interval_ms(lag));
        next = next.max(tokio::time::Instant::now());
        tokio::time::sleep_until(next).await;
        let due = state.channels.take_due(Instant::now(), |ch| state.faults.commits_withheld(ch));
        if due.is_empty() {
            continue;
        }
        let st = state.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || commit_due(&st, due)).await {
            tracing::error!("committer task failed: {e}");
        }
    }
}

/// Commits a round of due batches (in order per channel, as `take_due` gave them) and applies each to its
/// channel as soon as it is committed; then, with a state dir, persists each channel the round changed once.
pub fn commit_due(state: &AppState, due: Vec<DueBatch>) {
    let mut changed: Vec<String> = vec![];
    let mut seen = std::collections::HashSet::new();
    for item in due {
        let key = item.key.clone();
        let outcome = commit_batch(state, item);
        if state.channels.complete(&key, outcome) && seen.insert(key.clone()) {
            changed.push(key);
        }
    }
    state.persist_channels(&changed);
}

fn error_record(
    item: &DueBatch,
    row_index: usize,
    code: &str,
    message: String,
    column: Option<String>,
    record: String,
) -> ErrorRecord {
    ErrorRecord {
        pipe: item.pipe.name.clone(),
        channel: item.channel.clone(),
        offset_token: item.batch.end_offset.clone(),
        row_index: row_index as i64,
        error_code: code.into(),
        message,
        column,
        record,
    }
}

/// Commits one batch and reports what happened.
pub fn commit_batch(state: &AppState, item: DueBatch) -> BatchOutcome {
    let mut outcome = BatchOutcome {
        parsed: item.batch.rows.len() as u64,
        end_offset: item.batch.end_offset.clone(),
        accepted_ms: item.batch.accepted_ms,
        ..Default::default()
    };
    let table = match state.catalog.read().unwrap().resolve_pipe(&item.pipe) {
        Ok(t) => t.clone(),
        Err(e) => {
            outcome.errors = outcome.parsed;
            outcome.first_error = (outcome.parsed > 0).then(|| e.to_string());
            return outcome;
        }
    };
    if state.settings.read().unwrap().bench_mode {
        return count_batch(state, &table, &item, outcome);
    }
    let table = match evolve(state, &table, &item.batch.rows) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!("schema evolution of {} failed: {e}", table.name);
            table
        }
    };
    let forced = state.faults.take_row_errors(&item.channel, item.batch.rows.len());
    let lookup: HashMap<String, usize> =
        table.columns.iter().enumerate().map(|(i, c)| (c.name.to_uppercase(), i)).collect();
    let mut good = Vec::with_capacity(item.batch.rows.len());
    let mut errors = vec![];
    for (i, row) in item.batch.rows.iter().enumerate() {
        let converted = match row {
            ParsedRow::Bad { raw, error } => Err(error_record(&item, i, "100069", error.clone(), None, raw.clone())),
            ParsedRow::Counted => Err(error_record(
                &item,
                i,
                "100069",
                "Row was counted in bench mode, which has since been turned off".into(),
                None,
                String::new(),
            )),
            ParsedRow::Row(map) if i < forced => Err(error_record(
                &item,
                i,
                "100038",
                "Injected row error (fault row_errors)".into(),
                None,
                Value::Object(map.clone()).to_string(),
            )),
            ParsedRow::Row(map) => convert_row(&table, &lookup, map).map_err(|(code, msg, col)| {
                error_record(&item, i, code, msg, col, Value::Object(map.clone()).to_string())
            }),
        };
        match converted {
            Ok(cells) => good.push(cells),
            Err(e) => errors.push(e),
        }
    }
    outcome.first_error = errors.first().map(|e| e.message.clone());
    match state.store.insert(&table, &good, &errors) {
        Ok(()) => {
            outcome.inserted = good.len() as u64;
            outcome.errors = errors.len() as u64;
        }
        Err(e) => {
            tracing::error!("insert into {} failed: {e}", table.name);
            outcome.errors = outcome.parsed;
            outcome.first_error = Some(format!("Internal error while inserting: {e}"));
        }
    }
    outcome
}

/// Bench mode: the batch's counted rows are committed as inserted (added to the table's count), its bad lines
/// as errors; nothing is converted or stored. The commit is recorded for `GET /admin/bench-commits`.
fn count_batch(state: &AppState, table: &TableDef, item: &DueBatch, mut outcome: BatchOutcome) -> BatchOutcome {
    let bad: Vec<&str> = item
        .batch
        .rows
        .iter()
        .filter_map(|r| if let ParsedRow::Bad { error, .. } = r { Some(error.as_str()) } else { None })
        .collect();
    outcome.errors = bad.len() as u64;
    outcome.inserted = outcome.parsed - outcome.errors;
    outcome.first_error = bad.first().map(|e| e.to_string());
    *state.bench_counts.lock().unwrap().entry(table.name.to_string()).or_default() += outcome.inserted;
    let mut commits = state.bench_commits.lock().unwrap();
    if commits.0.len() < crate::state::BENCH_COMMITS_MAX {
        commits.0.push(crate::state::BenchCommit {
            table: table.name.to_string(),
            channel: item.channel.clone(),
            offset_token: item.batch.end_offset.clone(),
            rows: outcome.inserted,
            accepted_ms: item.batch.accepted_ms,
            committed_ms: crate::channels::now_ms(),
        });
    } else {
        commits.1 += 1;
    }
    drop(commits);
    outcome
}

/// Converts one JSON object into the table's cells (MATCH_BY_COLUMN_NAME,
/// case-insensitive). Unknown keys are ignored (evolution already added them).
/// Why a row was rejected: (Snowflake error code, message, column).
type RowError = (&'static str, String, Option<String>);

fn convert_row(
    table: &TableDef,
    lookup: &HashMap<String, usize>,
    map: &Map<String, Value>,
) -> Result<Vec<Option<String>>, RowError> {
    let mut cells: Vec<Option<String>> = vec![None; table.columns.len()];
    for (key, value) in map {
        let Some(&idx) = lookup.get(&key.to_uppercase()) else { continue };
        let col = &table.columns[idx];
        cells[idx] = schema::convert(value, &col.ty)
            .map_err(|e| ("100038", format!("{} (column {})", e.0, col.name), Some(col.name.clone())))?;
    }
    for (idx, col) in table.columns.iter().enumerate() {
        if !col.nullable && cells[idx].is_none() {
            return Err((
                "100072",
                format!("NULL result in a non-nullable column {}", col.name),
                Some(col.name.clone()),
            ));
        }
    }
    Ok(cells)
}

/// Schema evolution for a batch: adds columns for unknown keys (type inferred
/// from the first non-null value) and drops NOT NULL from columns a row lacks.
/// Returns the (possibly changed) table definition.
fn evolve(state: &AppState, table: &TableDef, rows: &[ParsedRow]) -> Result<TableDef, crate::state::StateError> {
    if !table.enable_schema_evolution {
        return Ok(table.clone());
    }
    let mut new_cols: Vec<ColumnDef> = vec![];
    let mut relax: Vec<String> = vec![];
    for row in rows {
        let ParsedRow::Row(map) = row else { continue };
        for (key, value) in map {
            let known = table.column_index(key).is_some() || new_cols.iter().any(|c| c.name.eq_ignore_ascii_case(key));
            if known {
                continue;
            }
            if let Some(ty) = schema::infer_type(value, table.iceberg) {
                new_cols.push(ColumnDef { name: key.to_uppercase(), ty, nullable: true });
            }
        }
        for col in table.columns.iter().filter(|c| !c.nullable) {
            let present = map.iter().any(|(k, v)| k.eq_ignore_ascii_case(&col.name) && !v.is_null());
            if !present && !relax.contains(&col.name) {
                relax.push(col.name.clone());
            }
        }
    }
    if new_cols.is_empty() && relax.is_empty() {
        return Ok(table.clone());
    }
    for c in &new_cols {
        state.store.add_column(&table.name, c)?;
    }
    for c in &relax {
        state.store.drop_not_null(&table.name, c)?;
    }
    let updated = {
        let mut cat = state.catalog.write().unwrap();
        let t = cat
            .table_mut(&table.name)
            .ok_or_else(|| crate::catalog::CatalogError::TableNotFound(table.name.to_string()))?;
        for c in new_cols {
            if t.column_index(&c.name).is_none() {
                t.columns.push(c);
            }
        }
        for c in t.columns.iter_mut().filter(|c| relax.contains(&c.name)) {
            c.nullable = true;
        }
        t.clone()
    };
    state.persist_catalog()?;
    Ok(updated)
}
