//! `kinesnow-ctl`: the operator's command-line tool, a thin front end over `kinesnow_core::ops`.
//! `status` shows each shard of a stream and Application Name as the lease table and Kinesis have
//! it; `audit` compares a destination table with Kinesis in a window. Both only read.
//!
//! Exit codes: 0 done (and, for `audit`, the table is clean); 1 `audit` found duplicates, missing
//! or unexpected rows; 2 wrong usage or any other error (credentials, a service unreachable).

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand};
use kinesnow_core::aws::{clients, AwsClients, AwsSettings};
use kinesnow_core::config::consume_kinesis::{AwsCredentials, CredentialSource};
use kinesnow_core::ops::audit::{self, Table, Window};
use kinesnow_core::ops::sql::SqlApi;
use kinesnow_core::ops::status::{self, Target};
use kinesnow_core::snowflake::auth::KeyPairSigner;

/// The environment variable the private key's passphrase is read from (never a flag: flags show
/// in `ps`).
const PASSPHRASE_ENV: &str = "KINESNOW_PRIVATE_KEY_PASSPHRASE";

#[derive(Parser)]
#[command(name = "kinesnow-ctl", version, about = "Read-only views of a kinesnow consumer group and its table")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per run: the size of its variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Per shard: owner, lease counter, checkpoint, loaded position, lag; and the lease table's other rows.
    Status(StatusArgs),
    /// Per shard: rows of a table in a window against the records Kinesis holds in it.
    Audit(AuditArgs),
}

/// Where and as whom AWS is called, as ConsumeKinesis takes it.
#[derive(Args)]
struct AwsArgs {
    /// The stream's name.
    #[arg(long)]
    stream: String,
    /// AWS region (else AWS_REGION, else AWS_DEFAULT_REGION).
    #[arg(long)]
    region: Option<String>,
    /// A profile of the AWS shared config and credentials files; without it, the AWS default chain.
    #[arg(long)]
    profile: Option<String>,
    /// Endpoint override for Kinesis and DynamoDB (as the processor's Endpoint Override URL).
    #[arg(long)]
    endpoint_url: Option<url::Url>,
    /// DynamoDB's own endpoint override.
    #[arg(long)]
    dynamodb_endpoint_url: Option<url::Url>,
}

#[derive(Args)]
struct StatusArgs {
    #[command(flatten)]
    aws: AwsArgs,
    /// The Application Name: the lease table's name.
    #[arg(long)]
    application: String,
    /// Skip the GetRecords call per open shard that measures lag.
    #[arg(long)]
    no_lag: bool,
    /// JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct AuditArgs {
    #[command(flatten)]
    aws: AwsArgs,
    /// Snowflake account identifier (as PutSnowflake's Account Identifier).
    #[arg(long)]
    account: String,
    /// The account's URL; default https://<account>.snowflakecomputing.com.
    #[arg(long)]
    account_url: Option<url::Url>,
    #[arg(long)]
    user: String,
    #[arg(long)]
    role: Option<String>,
    /// Warehouse for the SELECT; default: the user's.
    #[arg(long)]
    warehouse: Option<String>,
    /// PKCS#8 private key (PEM) of the user's key pair; its passphrase, if any, in KINESNOW_PRIVATE_KEY_PASSPHRASE.
    #[arg(long)]
    private_key_file: std::path::PathBuf,
    #[arg(long)]
    database: String,
    #[arg(long)]
    schema: String,
    #[arg(long)]
    table: String,
    /// Window start: epoch milliseconds, RFC 3339 time, or a duration ago ("2h").
    #[arg(long, conflicts_with_all = ["shard", "from_sequence", "to_sequence"])]
    since: Option<String>,
    /// Window end (excluded), same forms; default now.
    #[arg(long, requires = "since")]
    until: Option<String>,
    /// Sequence window: one shard ...
    #[arg(long, requires_all = ["from_sequence", "to_sequence"])]
    shard: Option<String>,
    /// ... from this sequence number ...
    #[arg(long, requires = "shard")]
    from_sequence: Option<String>,
    /// ... through this one.
    #[arg(long, requires = "shard")]
    to_sequence: Option<String>,
    /// JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(r) => r,
        Err(e) => return fail(&format!("no runtime: {e}")),
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Status(args) => run_status(args).await,
            Command::Audit(args) => run_audit(args).await,
        }
    });
    match outcome {
        Ok(code) => code,
        Err(message) => fail(&message),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("kinesnow-ctl: {message}");
    ExitCode::from(2)
}

async fn aws_clients(args: &AwsArgs) -> Result<AwsClients, String> {
    let region = args
        .region
        .clone()
        .or_else(|| std::env::var("AWS_REGION").ok())
        .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
        .ok_or("no region: pass --region or set AWS_REGION")?;
    let source = match &args.profile {
        Some(name) => CredentialSource::Profile { name: Some(name.clone()), file: None },
        None => CredentialSource::DefaultChain,
    };
    let settings = AwsSettings {
        region,
        credentials: AwsCredentials { source, role: None },
        endpoint_override: args.endpoint_url.clone(),
        dynamodb_endpoint_override: args.dynamodb_endpoint_url.clone(),
        proxy: Default::default(),
    };
    Ok(clients(&settings).await)
}

async fn run_status(args: StatusArgs) -> Result<ExitCode, String> {
    let c = aws_clients(&args.aws).await?;
    let target =
        Target { kinesis: &c.kinesis, dynamodb: &c.dynamodb, stream: &args.aws.stream, application: &args.application };
    let report = status::read(&target, !args.no_lag).await.map_err(|e| e.to_string())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print!("{}", status::render(&report));
    }
    Ok(ExitCode::SUCCESS)
}

async fn run_audit(args: AuditArgs) -> Result<ExitCode, String> {
    let window = window(&args, now_ms())?;
    let pem = std::fs::read_to_string(&args.private_key_file)
        .map_err(|e| format!("cannot read the private key file {}: {e}", args.private_key_file.display()))?;
    let passphrase = std::env::var(PASSPHRASE_ENV).ok();
    let signer = KeyPairSigner::new(&args.account, &args.user, args.role.as_deref(), &pem, passphrase.as_deref())
        .map_err(|e| e.to_string())?;
    let base = match &args.account_url {
        Some(url) => url.clone(),
        None => format!("https://{}.snowflakecomputing.com", args.account.to_lowercase())
            .parse()
            .map_err(|e| format!("account URL: {e}"))?,
    };
    let sql = SqlApi::new(base, signer, args.role.clone(), args.warehouse.clone(), None).map_err(|e| e.to_string())?;
    let c = aws_clients(&args.aws).await?;
    let table = Table { database: args.database.clone(), schema: args.schema.clone(), name: args.table.clone() };
    let report = audit::run(&c.kinesis, &args.aws.stream, &sql, &table, &window).await.map_err(|e| e.to_string())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print!("{}", audit::render(&report));
    }
    Ok(if report.clean { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The window the flags name.
fn window(args: &AuditArgs, now: i64) -> Result<Window, String> {
    match (&args.since, &args.shard, &args.from_sequence, &args.to_sequence) {
        (Some(since), None, None, None) => {
            let from_ms = instant(since, now)?;
            let to_ms = args.until.as_deref().map(|u| instant(u, now)).transpose()?.unwrap_or(now);
            if from_ms >= to_ms {
                return Err(format!("the window is empty: --since {from_ms} ms is not before --until {to_ms} ms"));
            }
            Ok(Window::Time { from_ms, to_ms })
        }
        (None, Some(shard), Some(from), Some(to)) => {
            if !from.chars().chain(to.chars()).all(|c| c.is_ascii_digit()) || from.is_empty() || to.is_empty() {
                return Err("sequence numbers are decimal digits".into());
            }
            Ok(Window::Sequence { shard: shard.clone(), from: from.clone(), to: to.clone() })
        }
        _ => Err("name a window: --since [--until], or --shard with --from-sequence and --to-sequence".into()),
    }
}

/// Epoch milliseconds, an RFC 3339 time, or a duration before `now`.
fn instant(text: &str, now: i64) -> Result<i64, String> {
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit()) {
        return text.parse().map_err(|e| format!("'{text}': {e}"));
    }
    if let Ok(ago) = humantime::parse_duration(text) {
        return Ok(now - i64::try_from(ago.as_millis()).unwrap_or(i64::MAX));
    }
    let at = humantime::parse_rfc3339_weak(text)
        .map_err(|_| format!("'{text}' is neither epoch milliseconds, an RFC 3339 time nor a duration"))?;
    Ok(at.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_take_three_forms() {
        assert_eq!(instant("1700000000000", 0), Ok(1_700_000_000_000));
        assert_eq!(instant("2h", 10_000_000), Ok(10_000_000 - 7_200_000));
        assert_eq!(instant("1970-01-01T00:00:01Z", 0), Ok(1000));
        assert!(instant("yesterday", 0).is_err());
    }

    #[test]
    fn usage_errors_are_caught_by_the_parser() {
        assert!(Cli::try_parse_from(["kinesnow-ctl", "status", "--stream", "s"]).is_err(), "no application");
        let both = Cli::try_parse_from([
            "kinesnow-ctl",
            "audit",
            "--stream",
            "s",
            "--account",
            "a",
            "--user",
            "u",
            "--private-key-file",
            "k",
            "--database",
            "d",
            "--schema",
            "s",
            "--table",
            "t",
            "--since",
            "1h",
            "--shard",
            "x",
            "--from-sequence",
            "1",
            "--to-sequence",
            "2",
        ]);
        assert!(both.is_err(), "a time window and a sequence window at once");
    }
}
