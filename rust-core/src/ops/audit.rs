//! `audit`: per shard, the destination table's rows in a window against the records Kinesis holds
//! in it, by `shardedSequenceNumber` (see `contract::exactly_once`): rows, keys loaded more than
//! once (duplicates), records of the window with no row (missing), and rows whose key Kinesis does
//! not hold in the window (unexpected). One SELECT, ordered by shard and key, read partition by
//! partition, merged with one GetRecords page of the shard at a time: the tool holds one result
//! partition, one page of records and a few example keys per shard, whatever the window's size.
//! It writes nothing.

use std::cmp::Ordering;

use aws_sdk_kinesis::error::ProvideErrorMetadata;
use aws_sdk_kinesis::types::ShardIteratorType;
use serde::Serialize;

use super::sql::{literal, ResultPages, Row, SqlApi};
use super::{OpsError, Stream};
use crate::contract::metadata as meta;
use crate::kinesis::address::{ForStream, StreamRef};
use crate::kinesis::deaggregate::deaggregate;
use crate::kinesis::position::compare_sequence_numbers;
use crate::kinesis::record::KinesisRecord;
use crate::kinesis::shards::list_shards;

/// Example keys kept per shard and kind.
pub const EXAMPLES: usize = 5;
/// Records asked of one GetRecords call.
const PAGE_RECORDS: i32 = 1000;
/// Pause between GetRecords calls on a shard (Kinesis allows 5 a second per shard, shared with
/// the consumers).
const PAGE_PAUSE: std::time::Duration = std::time::Duration::from_millis(250);

/// Which records the audit compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Window {
    /// Records whose arrival time (ms since the epoch) is in `[from_ms, to_ms)`, every shard.
    Time { from_ms: i64, to_ms: i64 },
    /// Records of one shard from sequence number `from` through `to`, both included.
    Sequence { shard: String, from: String, to: String },
}

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Window::Time { from_ms, to_ms } => write!(f, "arrival in [{from_ms}, {to_ms}) ms"),
            Window::Sequence { shard, from, to } => write!(f, "{shard} sequence numbers {from} through {to}"),
        }
    }
}

/// The destination table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub database: String,
    pub schema: String,
    pub name: String,
}

impl Table {
    fn qualified(&self) -> String {
        format!("{}.{}.{}", self.database, self.schema, self.name)
    }
}

/// One shard's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ShardTally {
    pub shard_id: String,
    /// Rows of the table in the window (duplicates included).
    pub rows: u64,
    /// User records Kinesis holds in the window (KPL sub-records counted one by one).
    pub in_kinesis: u64,
    /// Rows beyond the first with the same key.
    pub duplicates: u64,
    /// Records with no row.
    pub missing: u64,
    /// Rows whose key Kinesis does not hold in the window.
    pub unexpected: u64,
    pub duplicate_examples: Vec<String>,
    pub missing_examples: Vec<String>,
    pub unexpected_examples: Vec<String>,
    #[serde(skip)]
    last_row: Option<String>,
}

/// Which head a merge step consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    Row,
    Record,
    Both,
}

/// Keys of one shard in order: as numbers (a longer key is a larger one).
pub fn key_order(a: &str, b: &str) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn example(list: &mut Vec<String>, key: &str) {
    if list.len() < EXAMPLES {
        list.push(key.to_owned());
    }
}

impl ShardTally {
    pub fn new(shard_id: &str) -> Self {
        Self { shard_id: shard_id.to_owned(), ..Self::default() }
    }

    /// One step of the merge of the table's keys (`row`) with Kinesis' (`record`), each in
    /// [`key_order`]; at least one is present. Returns which of them it consumed.
    pub fn step(&mut self, row: Option<&str>, record: Option<&str>) -> Take {
        if let Some(r) = row {
            if self.last_row.as_deref() == Some(r) {
                self.rows += 1;
                self.duplicates += 1;
                example(&mut self.duplicate_examples, r);
                return Take::Row;
            }
        }
        let order = match (row, record) {
            (Some(r), Some(k)) => key_order(r, k),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => unreachable!("a merge step needs a row or a record"),
        };
        match order {
            Ordering::Equal => {
                self.rows += 1;
                self.in_kinesis += 1;
                self.last_row = row.map(str::to_owned);
                Take::Both
            }
            Ordering::Less => {
                let r = row.unwrap_or_default();
                self.rows += 1;
                self.unexpected += 1;
                example(&mut self.unexpected_examples, r);
                self.last_row = Some(r.to_owned());
                Take::Row
            }
            Ordering::Greater => {
                let k = record.unwrap_or_default();
                self.in_kinesis += 1;
                self.missing += 1;
                example(&mut self.missing_examples, k);
                Take::Record
            }
        }
    }

    pub fn clean(&self) -> bool {
        self.duplicates == 0 && self.missing == 0 && self.unexpected == 0
    }
}

/// The merge of two sorted key lists of one shard (what [`run`] does over pages).
pub fn tally_sorted(shard_id: &str, rows: &[&str], records: &[&str]) -> ShardTally {
    let mut tally = ShardTally::new(shard_id);
    let (mut i, mut j) = (0, 0);
    while i < rows.len() || j < records.len() {
        match tally.step(rows.get(i).copied(), records.get(j).copied()) {
            Take::Row => i += 1,
            Take::Record => j += 1,
            Take::Both => (i, j) = (i + 1, j + 1),
        }
    }
    tally
}

/// What `audit` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditReport {
    pub stream: String,
    /// The stream's ARN, when the stream was named by it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_arn: Option<String>,
    pub table: String,
    pub window: String,
    pub shards: Vec<ShardTally>,
    /// Rows in the window without a shard or `shardedSequenceNumber` (not comparable).
    pub rows_without_key: u64,
    pub clean: bool,
}

/// The SELECT the audit sends: each row's shard and key in the window, ordered as the merge
/// needs.
pub fn statement(table: &Table, stream: &str, window: &Window) -> String {
    let field = |name: &str, ty: &str| format!("{}:{name}::{ty}", meta::KEY);
    let shard = field(meta::SHARD_ID, "string");
    let key = field(meta::SHARDED_SEQUENCE_NUMBER, "string");
    let mut conditions = vec![format!("{} = {}", field(meta::STREAM, "string"), literal(stream))];
    match window {
        Window::Time { from_ms, to_ms } => {
            let arrival = field(meta::APPROXIMATE_ARRIVAL, "number");
            conditions.push(format!("{arrival} >= {from_ms}"));
            conditions.push(format!("{arrival} < {to_ms}"));
        }
        Window::Sequence { shard: id, from, to } => {
            let sequence = field(meta::SEQUENCE_NUMBER, "string");
            conditions.push(format!("{shard} = {}", literal(id)));
            conditions.push(format!(
                "(LENGTH({sequence}) > {len} OR (LENGTH({sequence}) = {len} AND {sequence} >= {lit}))",
                len = from.len(),
                lit = literal(from)
            ));
            conditions.push(format!(
                "(LENGTH({sequence}) < {len} OR (LENGTH({sequence}) = {len} AND {sequence} <= {lit}))",
                len = to.len(),
                lit = literal(to)
            ));
        }
    }
    format!(
        "SELECT {shard} AS shard_id, {key} AS sharded_sequence_number FROM {} WHERE {} ORDER BY shard_id, LENGTH(sharded_sequence_number), sharded_sequence_number",
        table.qualified(),
        conditions.join(" AND ")
    )
}

/// The table's rows, one partition at hand.
struct Rows<'a> {
    pages: ResultPages<'a>,
    page: std::vec::IntoIter<Row>,
    head: Option<(String, String)>,
    without_key: u64,
}

impl Rows<'_> {
    /// The next row's (shard, key), skipping (and counting) rows without one.
    async fn peek(&mut self) -> Result<Option<&(String, String)>, OpsError> {
        while self.head.is_none() {
            match self.page.next() {
                Some(row) => match (row.first().cloned().flatten(), row.get(1).cloned().flatten()) {
                    (Some(shard), Some(key)) => self.head = Some((shard, key)),
                    _ => self.without_key += 1,
                },
                None => match self.pages.next_partition().await.map_err(|e| OpsError::Snowflake(e.to_string()))? {
                    Some(page) => self.page = page.into_iter(),
                    None => return Ok(None),
                },
            }
        }
        Ok(self.head.as_ref())
    }

    /// The key of the next row if it belongs to `shard`.
    async fn key_in(&mut self, shard: &str) -> Result<Option<String>, OpsError> {
        Ok(self.peek().await?.filter(|(s, _)| s == shard).map(|(_, k)| k.clone()))
    }
}

/// One shard's records in the window, one GetRecords page at hand.
struct Records<'a> {
    client: &'a aws_sdk_kinesis::Client,
    stream: StreamRef<'a>,
    shard: String,
    window: &'a Window,
    iterator: Option<String>,
    page: std::vec::IntoIter<String>,
    head: Option<String>,
    done: bool,
}

impl<'a> Records<'a> {
    async fn open(
        client: &'a aws_sdk_kinesis::Client,
        stream: StreamRef<'a>,
        shard: &str,
        window: &'a Window,
    ) -> Result<Records<'a>, OpsError> {
        let request = client.get_shard_iterator().for_stream(stream).shard_id(shard);
        let request = match window {
            Window::Time { from_ms, .. } => request
                .shard_iterator_type(ShardIteratorType::AtTimestamp)
                .timestamp(aws_smithy_types::DateTime::from_millis(*from_ms)),
            Window::Sequence { from, .. } => {
                request.shard_iterator_type(ShardIteratorType::AtSequenceNumber).starting_sequence_number(from)
            }
        };
        let iterator = request.send().await.map_err(|e| kinesis_error(stream.as_str(), shard, &e, e.code()))?;
        Ok(Records {
            client,
            stream,
            shard: shard.to_owned(),
            window,
            iterator: iterator.shard_iterator().map(str::to_owned),
            page: Vec::new().into_iter(),
            head: None,
            done: false,
        })
    }

    async fn peek(&mut self) -> Result<Option<String>, OpsError> {
        while self.head.is_none() {
            if let Some(key) = self.page.next() {
                self.head = Some(key);
                break;
            }
            if self.done {
                return Ok(None);
            }
            self.fetch().await?;
        }
        Ok(self.head.clone())
    }

    /// One GetRecords page: its keys in the window; `done` once the window (or the shard, or the
    /// tip) is reached.
    async fn fetch(&mut self) -> Result<(), OpsError> {
        let Some(iterator) = self.iterator.take() else {
            self.done = true;
            return Ok(());
        };
        let out = loop {
            let request = self.client.get_records().shard_iterator(&iterator).limit(PAGE_RECORDS);
            match request.for_stream(self.stream).send().await {
                Ok(out) => break out,
                Err(e) => {
                    let error = kinesis_error(self.stream.as_str(), &self.shard, &e, e.code());
                    if !matches!(&error, OpsError::Kinesis(crate::kinesis::KinesisError::Throttled { .. })) {
                        return Err(error);
                    }
                    tokio::time::sleep(PAGE_PAUSE * 4).await;
                }
            }
        };
        let mut keys = Vec::new();
        for record in out.records() {
            if self.past_window(record) {
                self.done = true;
                break;
            }
            let whole = KinesisRecord {
                sequence_number: record.sequence_number().to_owned(),
                sub_sequence_number: None,
                partition_key: record.partition_key().unwrap_or_default().into(),
                approximate_arrival_ms: record
                    .approximate_arrival_timestamp()
                    .map_or(0, |t| t.to_millis().unwrap_or(0)),
                data: record.data().as_ref().to_vec(),
            };
            keys.extend(deaggregate(whole).records.iter().map(KinesisRecord::sharded_sequence_number));
        }
        let caught_up = out.records().is_empty() && out.millis_behind_latest().unwrap_or(0) == 0;
        self.iterator = out.next_shard_iterator().map(str::to_owned);
        if caught_up || self.iterator.is_none() {
            self.done = true;
        }
        self.page = keys.into_iter();
        if !self.done {
            tokio::time::sleep(PAGE_PAUSE).await;
        }
        Ok(())
    }

    fn past_window(&self, record: &aws_sdk_kinesis::types::Record) -> bool {
        match self.window {
            Window::Time { to_ms, .. } => {
                record.approximate_arrival_timestamp().and_then(|t| t.to_millis().ok()).is_some_and(|t| t >= *to_ms)
            }
            Window::Sequence { to, .. } => compare_sequence_numbers(record.sequence_number(), to) == Ordering::Greater,
        }
    }
}

fn kinesis_error(stream: &str, shard: &str, e: &(dyn std::error::Error + 'static), code: Option<&str>) -> OpsError {
    crate::kinesis::KinesisError::from_sdk(
        stream,
        Some(shard),
        crate::kinesis::sdk_error_text(e),
        code.map(str::to_owned),
    )
    .into()
}

/// Audits `table` against `stream` in `window`: the table's rows of the stream's name against the
/// records Kinesis holds, read by the name or the ARN as the stream was named.
pub async fn run(
    kinesis: &aws_sdk_kinesis::Client,
    stream: &Stream,
    sql: &SqlApi,
    table: &Table,
    window: &Window,
) -> Result<AuditReport, OpsError> {
    let mut shards: Vec<String> = match window {
        Window::Time { .. } => {
            list_shards(kinesis, stream.reference()).await?.into_iter().map(|s| s.shard_id).collect()
        }
        Window::Sequence { shard, .. } => vec![shard.clone()],
    };
    shards.sort();
    let pages =
        sql.query(&statement(table, &stream.name, window)).await.map_err(|e| OpsError::Snowflake(e.to_string()))?;
    let mut rows = Rows { pages, page: Vec::new().into_iter(), head: None, without_key: 0 };
    let mut listed = shards.into_iter().peekable();
    let mut tallies = Vec::new();
    loop {
        // The next shard in order: the next one Kinesis lists, or a shard only the table has.
        let from_table = rows.peek().await?.map(|(s, _)| s.clone());
        let (shard, in_kinesis) = match (listed.peek(), from_table) {
            (Some(l), Some(t)) if t < *l => (t, false),
            (Some(_), _) => (listed.next().unwrap_or_default(), true),
            (None, Some(t)) => (t, false),
            (None, None) => break,
        };
        let mut records = match in_kinesis {
            true => Some(Records::open(kinesis, stream.reference(), &shard, window).await?),
            false => None,
        };
        tallies.push(merge_shard(&shard, &mut rows, records.as_mut()).await?);
    }
    let clean = tallies.iter().all(ShardTally::clean);
    Ok(AuditReport {
        stream: stream.name.clone(),
        stream_arn: stream.arn.as_ref().map(ToString::to_string),
        table: table.qualified(),
        window: window.to_string(),
        shards: tallies,
        rows_without_key: rows.without_key,
        clean,
    })
}

async fn merge_shard(
    shard: &str,
    rows: &mut Rows<'_>,
    mut records: Option<&mut Records<'_>>,
) -> Result<ShardTally, OpsError> {
    let mut tally = ShardTally::new(shard);
    loop {
        let row = rows.key_in(shard).await?;
        let record = match records.as_deref_mut() {
            Some(r) => r.peek().await?,
            None => None,
        };
        if row.is_none() && record.is_none() {
            return Ok(tally);
        }
        match tally.step(row.as_deref(), record.as_deref()) {
            Take::Row => rows.head = None,
            Take::Record => take_record(&mut records),
            Take::Both => {
                rows.head = None;
                take_record(&mut records);
            }
        }
    }
}

fn take_record(records: &mut Option<&mut Records<'_>>) {
    if let Some(r) = records.as_deref_mut() {
        r.head = None;
    }
}

/// The report as text: one line per shard, then the examples of what is wrong.
pub fn render(report: &AuditReport) -> String {
    let arn = super::status::arn_note(&report.stream_arn);
    let mut out = format!("STREAM {}{arn}  TABLE {}  WINDOW {}\n\n", report.stream, report.table, report.window);
    out.push_str("SHARD                   ROWS  IN KINESIS  DUPLICATES  MISSING  UNEXPECTED\n");
    for s in &report.shards {
        out.push_str(&format!(
            "{:<22} {:>5}  {:>10}  {:>10}  {:>7}  {:>10}\n",
            s.shard_id, s.rows, s.in_kinesis, s.duplicates, s.missing, s.unexpected
        ));
    }
    for s in report.shards.iter().filter(|s| !s.clean()) {
        for (what, keys) in [
            ("duplicate", &s.duplicate_examples),
            ("missing", &s.missing_examples),
            ("unexpected", &s.unexpected_examples),
        ] {
            for key in keys {
                out.push_str(&format!("{} {what} shardedSequenceNumber {key}\n", s.shard_id));
            }
        }
    }
    if report.rows_without_key > 0 {
        out.push_str(&format!(
            "{} rows without shardId or shardedSequenceNumber were not compared\n",
            report.rows_without_key
        ));
    }
    out.push_str(if report.clean { "CLEAN\n" } else { "PROBLEMS FOUND\n" });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_shard_matches_key_for_key() {
        let t = tally_sorted("s", &["10", "11", "12"], &["10", "11", "12"]);
        assert!(t.clean());
        assert_eq!((t.rows, t.in_kinesis), (3, 3));
    }

    #[test]
    fn duplicates_gaps_and_strays_are_counted_with_examples() {
        let t = tally_sorted("s", &["10", "10", "10", "12", "13", "13"], &["10", "11", "12", "13", "14"]);
        assert_eq!((t.rows, t.in_kinesis, t.duplicates, t.missing, t.unexpected), (6, 5, 3, 2, 0));
        assert_eq!(t.duplicate_examples, ["10", "10", "13"]);
        assert_eq!(t.missing_examples, ["11", "14"]);
        let stray = tally_sorted("s", &["9", "10", "99"], &["10"]);
        assert_eq!((stray.unexpected, stray.unexpected_examples.clone()), (2, vec!["9".to_owned(), "99".to_owned()]));
        assert!(!stray.clean());
    }

    #[test]
    fn keys_compare_as_numbers() {
        assert_eq!(key_order("9", "10"), Ordering::Less);
        let t = tally_sorted("s", &["9", "10"], &["9", "10"]);
        assert!(t.clean(), "{t:?}");
    }

    #[test]
    fn examples_are_bounded() {
        let rows: Vec<String> = (0..100).map(|_| "7".to_owned()).collect();
        let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
        let t = tally_sorted("s", &rows, &["7"]);
        assert_eq!((t.duplicates, t.duplicate_examples.len()), (99, EXAMPLES));
    }

    #[test]
    fn the_statement_reads_metadata_in_the_window_in_merge_order() {
        let table = Table { database: "DB".into(), schema: "PUBLIC".into(), name: "EVENTS".into() };
        let s = statement(&table, "orders", &Window::Time { from_ms: 5, to_ms: 9 });
        assert_eq!(
            s,
            "SELECT kinesisMetadata:shardId::string AS shard_id, kinesisMetadata:shardedSequenceNumber::string AS \
             sharded_sequence_number FROM DB.PUBLIC.EVENTS WHERE kinesisMetadata:stream::string = 'orders' AND \
             kinesisMetadata:approximateArrival::number >= 5 AND kinesisMetadata:approximateArrival::number < 9 \
             ORDER BY shard_id, LENGTH(sharded_sequence_number), sharded_sequence_number"
        );
        let s = statement(
            &table,
            "o'x",
            &Window::Sequence { shard: "shardId-1".into(), from: "100".into(), to: "2000".into() },
        );
        assert!(s.contains("'o''x'") && s.contains("kinesisMetadata:shardId::string = 'shardId-1'"), "{s}");
        assert!(s.contains("LENGTH(kinesisMetadata:sequenceNumber::string) = 4 AND kinesisMetadata:sequenceNumber::string <= '2000'"), "{s}");
    }
}
