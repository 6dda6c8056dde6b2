//! Command line of the stand-in: parses flags, starts the server, prints one
//! ready line (`snowflake-standin ready url=… port=… ca=…`) and runs until
//! SIGINT/SIGTERM, then checkpoints DuckDB.

use clap::Parser;
use std::io::Write;
use std::path::PathBuf;

use snowflake_standin::{start, Options, Settings};

/// Local stand-in for Snowflake's Snowpipe Streaming v2 REST API, backed by DuckDB.
#[derive(Parser, Debug)]
#[command(name = "snowflake-standin", version)]
struct Cli {
    /// Port on 127.0.0.1 (0 = pick a free one; it is printed and written to <state-dir>/port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Serve HTTPS with a CA generated at start, written to <state-dir>/ca.pem (default).
    #[arg(long, conflicts_with = "plain")]
    tls: bool,
    /// Serve plain HTTP instead of HTTPS.
    #[arg(long)]
    plain: bool,
    /// Directory for ca.pem, port, url and the DuckDB files (in-memory storage if absent).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// JSON config file: {"users":[…], "sql":["CREATE TABLE …"], "tables":[…], "pipes":[…]}.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Delay before appended rows are committed (visible, offset token advanced), ms: fixed (`1000`) or a range
    /// (`4000-10000`) each append of a channel draws from uniformly, committed in append order per channel.
    #[arg(long, default_value = "1000", value_parser = snowflake_standin::state::parse_commit_lag)]
    commit_lag_ms: (u64, u64),
    /// The commit lag range's high end, ms (the same as `--commit-lag-ms LOW-HIGH`; overrides its high end).
    #[arg(long)]
    commit_lag_max_ms: Option<u64>,
    /// Per-channel append rate limit in requests/s (0 = off), by default Snowflake's.
    #[arg(long, default_value_t = snowflake_standin::limits::SNOWFLAKE_REQUESTS_PER_SECOND)]
    rate_limit_per_channel: u32,
    /// Per-channel throughput limit in bytes of rows (uncompressed) per second (0 = off), by default Snowflake's.
    #[arg(long, default_value_t = snowflake_standin::limits::SNOWFLAKE_BYTES_PER_SECOND)]
    throughput_limit_per_channel: u64,
    /// How long an open takes (a concurrent open gets 409 ERR_OPEN_CHANNEL_IN_PROGRESS).
    #[arg(long, default_value_t = 0)]
    open_latency_ms: u64,
    /// Text answered by GET /v2/streaming/hostname.
    #[arg(long, default_value = "127.0.0.1")]
    hostname: String,
    /// Cap on the request body as sent (compressed), bytes.
    #[arg(long, default_value_t = 4 * 1024 * 1024)]
    max_wire_bytes: usize,
    /// Cap on the decoded request body, bytes.
    #[arg(long, default_value_t = 16 * 1024 * 1024)]
    max_body_bytes: usize,
    /// Lifetime of scoped tokens from /oauth/token, seconds.
    #[arg(long, default_value_t = 3600)]
    scoped_token_ttl_s: i64,
    /// Benchmark mode: check the protocol and count rows, never parse or store them (see `Settings::bench_mode`).
    #[arg(long)]
    bench_mode: bool,
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("STANDIN_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let opts = Options {
        port: cli.port,
        tls: !cli.plain,
        state_dir: cli.state_dir,
        config: cli.config,
        settings: Settings {
            commit_lag_ms: cli.commit_lag_ms.0,
            commit_lag_max_ms: cli.commit_lag_max_ms.unwrap_or(cli.commit_lag_ms.1),
            rate_limit_per_channel: cli.rate_limit_per_channel,
            throughput_limit_per_channel: cli.throughput_limit_per_channel,
            open_latency_ms: cli.open_latency_ms,
            hostname: cli.hostname,
            max_wire_bytes: cli.max_wire_bytes,
            max_body_bytes: cli.max_body_bytes,
            scoped_token_ttl_s: cli.scoped_token_ttl_s,
            bench_mode: cli.bench_mode,
        },
    };
    let _ = cli.tls;
    let mut running = match start(opts).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("snowflake-standin: cannot start: {e}");
            std::process::exit(1);
        }
    };
    let ca = running.ca_path.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "-".into());
    println!("snowflake-standin ready url={} port={} ca={}", running.url, running.port, ca);
    let _ = std::io::stdout().flush();

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        r = running.wait() => {
            eprintln!("snowflake-standin: server stopped: {r:?}");
            std::process::exit(1);
        }
    }
    running.shutdown().await;
}
