//! The command line: builds the stream spec from flags, then either prints the expected records
//! (`--dump`), or the avro payload's schema (`--avro-schema`), or serves the stream, printing `listening on 127.0.0.1:PORT` as its first stdout line.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Parser;

use kinesis_source::generate::Generator;
use kinesis_source::ops::{Live, Source};
use kinesis_source::server::Server;
use kinesis_source::spec::{Filler, KeyScheme, Payload, RecordCount, StreamSpec};

/// A Kinesis server for benchmarks only: serves a stream of records generated in memory.
#[derive(Debug, Parser)]
#[command(name = "kinesis-source", version)]
struct Args {
    /// Port on 127.0.0.1; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    #[arg(long, default_value = "bench-stream")]
    stream: String,
    #[arg(long, default_value_t = 4)]
    shards: u32,
    /// Kinesis records per shard (an aggregate counts as one).
    #[arg(long, conflicts_with = "records_total")]
    records_per_shard: Option<u64>,
    /// Kinesis records over the whole stream, spread evenly over the shards.
    #[arg(long)]
    records_total: Option<u64>,
    /// Bytes of data per user record (at most the stream's maximum record size).
    #[arg(long, default_value_t = 1024)]
    record_size: usize,
    /// Record sizes in turn, comma-separated (instead of --record-size): Kinesis record i of every shard has
    /// the (i mod n)-th size. Plain records only (no aggregates).
    #[arg(long, value_delimiter = ',', conflicts_with = "record_size")]
    record_sizes: Vec<usize>,
    /// What fills a record after its header: random (a slice of a pseudo-random pool of 64 letters) or repeat
    /// (its first KiB again and again, which compresses well).
    #[arg(long, default_value = "random")]
    filler: String,
    /// The stream's maximum record size in KiB (MaxRecordSizeInKiB, 1024..=10240): no record's data (a
    /// whole aggregate's included) may be longer.
    #[arg(long, default_value_t = kinesis_source::spec::DEFAULT_MAX_RECORD_SIZE_KIB)]
    max_record_size_kib: u32,
    /// Share (0..1) of the Kinesis records that are KPL aggregates.
    #[arg(long, default_value_t = 0.0)]
    aggregate_share: f64,
    /// User records per KPL aggregate.
    #[arg(long, default_value_t = 10)]
    records_per_aggregate: u32,
    /// Partition keys: shard-pool[:K] (K keys per shard, hashing into it) or unique.
    #[arg(long, default_value = "shard-pool:16")]
    keys: String,
    /// User records' bytes: ascii (text), json (one object each) or avro (a bare datum, see --avro-schema).
    #[arg(long, default_value = "ascii")]
    payload: String,
    /// Print the avro payload's schema (JSON, what an Avro reader's schema text needs) and exit.
    #[arg(long)]
    avro_schema: bool,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stream creation and first arrival time, epoch ms (default: now minus the longest shard's
    /// arrival span, so its last record arrived just now). Give it to get the same sequence numbers
    /// from two runs (e.g. a server and --dump).
    #[arg(long)]
    created_at_ms: Option<u64>,
    /// Arrival time step between consecutive records of a shard.
    #[arg(long, default_value_t = 1)]
    arrival_interval_ms: u64,
    /// Apply Kinesis' per-shard read limits (5 GetRecords/s, 2 MiB/s).
    #[arg(long)]
    limits: bool,
    /// A live stream: each shard's records arrive at this many per second from --live-start-ms on and are
    /// served only once arrived, with that ApproximateArrivalTimestamp (0 = off: every record has arrived).
    #[arg(long, default_value_t = 0.0)]
    live_rate: f64,
    /// When a live stream's first records arrive, epoch ms (default: when the server starts).
    #[arg(long)]
    live_start_ms: Option<u64>,
    /// How long a SubscribeToShard subscription lasts before its event stream ends (Kinesis: 300).
    #[arg(long, default_value_t = 300)]
    subscription_seconds: u64,
    /// Tokio worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Print every user record as a JSON line (see README.md) and exit.
    #[arg(long)]
    dump: bool,
    #[arg(long, default_value = "000000000000")]
    account_id: String,
    #[arg(long, default_value = "us-east-1")]
    region: String,
}

fn spec(args: &Args) -> Result<StreamSpec, String> {
    let records = match (args.records_per_shard, args.records_total) {
        (_, Some(total)) => RecordCount::Total(total),
        (Some(n), None) => RecordCount::PerShard(n),
        (None, None) => RecordCount::PerShard(1000),
    };
    let mut spec = StreamSpec {
        stream_name: args.stream.clone(),
        account_id: args.account_id.clone(),
        region: args.region.clone(),
        shard_count: args.shards,
        records,
        record_size: args.record_size,
        record_sizes: args.record_sizes.clone(),
        filler: Filler::parse(&args.filler).map_err(|e| e.to_string())?,
        aggregate_share: args.aggregate_share,
        records_per_aggregate: args.records_per_aggregate,
        keys: KeyScheme::parse(&args.keys).map_err(|e| e.to_string())?,
        payload: Payload::parse(&args.payload).map_err(|e| e.to_string())?,
        seed: args.seed,
        created_at_ms: 0,
        arrival_interval_ms: args.arrival_interval_ms,
        max_record_size_kib: args.max_record_size_kib,
    };
    spec.created_at_ms = match args.created_at_ms {
        Some(ms) => ms,
        None => {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
            let longest = spec.records_in(0); // shard 0 is never shorter than another
            now.saturating_sub(longest.saturating_mul(spec.arrival_interval_ms))
        }
    };
    spec.validate().map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.avro_schema {
        println!("{}", kinesis_source::generate::AVRO_SCHEMA);
        return ExitCode::SUCCESS;
    }
    let spec = match spec(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kinesis-source: {e}");
            return ExitCode::from(2);
        }
    };
    let generator = Generator::new(spec);
    if args.dump {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        return match kinesis_source::dump::write_all(&generator, &mut out) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kinesis-source: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let live = (args.live_rate > 0.0).then(|| Live {
        start_ms: args
            .live_start_ms
            .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)),
        rate: args.live_rate,
    });
    runtime.block_on(serve(generator, args.port, args.limits, live, Duration::from_secs(args.subscription_seconds)))
}

async fn serve(
    generator: Generator,
    port: u16,
    limits: bool,
    live: Option<Live>,
    subscription_lifetime: Duration,
) -> ExitCode {
    let spec = generator.spec().clone();
    let listener = match Server::bind(port).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("kinesis-source: cannot listen on 127.0.0.1:{port}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let addr = listener.local_addr().expect("a bound socket has an address");
    println!("listening on {addr}");
    let _ = std::io::stdout().flush();
    eprintln!(
        "kinesis-source: stream {} ({}), {} shards, {} records in shard 0, {} B {} records ({} filler), aggregates {} of {}, keys {:?}, seed {}, created at {} ms, limits {}, live {}",
        spec.stream_name,
        spec.stream_arn(),
        spec.shard_count,
        spec.records_in(0),
        if spec.record_sizes.is_empty() {
            spec.record_size.to_string()
        } else {
            format!("{:?}", spec.record_sizes)
        },
        spec.payload.name(),
        spec.filler.name(),
        spec.aggregate_share,
        spec.records_per_aggregate,
        spec.keys,
        spec.seed,
        spec.created_at_ms,
        if limits { "on" } else { "off" },
        live.map_or("off".to_string(), |l| format!("{} records/s per shard from {} ms", l.rate, l.start_ms))
    );
    let source = Source::new(generator, limits);
    let server = Server::new(if let Some(l) = live { source.with_live(l) } else { source }, subscription_lifetime);
    let running = tokio::spawn(Arc::clone(&server).run(listener));
    shutdown_signal().await;
    running.abort();
    eprintln!("kinesis-source: stopping; stats {}", server.stats.to_json());
    ExitCode::SUCCESS
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
