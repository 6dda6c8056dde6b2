//! `kinesnow-ctl`: the operator's command-line tool, a thin front end over `kinesnow_core::ops`.
//! `status` shows each shard of a stream and Application Name as the lease table and Kinesis have
//! it; `audit` compares a destination table with Kinesis in a window. Both only read. `--stream`
//! takes the stream's name or its ARN, as ConsumeKinesis' Stream Name does.
//!
//! Exit codes: 0 done (and, for `audit`, the table is clean); 1 `audit` found duplicates, missing
//! or unexpected rows; 2 wrong usage or any other error (credentials, a service unreachable).

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand};
use kinesnow_core::aws::{clients, AwsClients, AwsSettings};
use kinesnow_core::config::consume_kinesis::{
    self as ck, ASSUME_ROLE_ARN, ASSUME_ROLE_EXTERNAL_ID, ASSUME_ROLE_SESSION_NAME, ASSUME_ROLE_SESSION_TIME,
    ASSUME_ROLE_STS_ENDPOINT, ASSUME_ROLE_STS_REGION, PROFILE_NAME,
};
use kinesnow_core::config::proxy::{PROXY_HOST, PROXY_PASSWORD, PROXY_PORT, PROXY_TYPE, PROXY_USER};
use kinesnow_core::config::PropertyMap;
use kinesnow_core::ops::audit::{self, Table, Window};
use kinesnow_core::ops::sql::SqlApi;
use kinesnow_core::ops::status::{self, Target};
use kinesnow_core::ops::Stream;
use kinesnow_core::snowflake::auth::KeyPairSigner;

/// The environment variable the private key's passphrase is read from (never a flag: flags show
/// in `ps`).
const PASSPHRASE_ENV: &str = "KINESNOW_PRIVATE_KEY_PASSPHRASE";
/// The environment variable the proxy user's password is read from (never a flag, as above).
const PROXY_PASSWORD_ENV: &str = "KINESNOW_PROXY_PASSWORD";

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
    /// The stream's name, or its ARN (arn:aws:kinesis:<region>:<account>:stream/<name>, a stream of another
    /// account): then every Kinesis call names the stream by the ARN, as ConsumeKinesis does.
    #[arg(long)]
    stream: String,
    /// AWS region (else the stream ARN's, else AWS_REGION, else AWS_DEFAULT_REGION); with an ARN, the ARN's region.
    #[arg(long)]
    region: Option<String>,
    /// A profile of the AWS shared config and credentials files; without it, the AWS default chain.
    #[arg(long)]
    profile: Option<String>,
    /// A role the credentials assume (AssumeRole), as ConsumeKinesis' Assume Role ARN: every call uses its session.
    #[arg(long)]
    assume_role_arn: Option<String>,
    /// The External ID the role's trust policy asks for (Assume Role External ID).
    #[arg(long, requires = "assume_role_arn")]
    assume_role_external_id: Option<String>,
    /// The role session's name (Assume Role Session Name); default nifi-kinesnow.
    #[arg(long, requires = "assume_role_arn")]
    assume_role_session_name: Option<String>,
    /// The role session's lifetime in seconds, 900-43200 (Assume Role Session Time); default 3600.
    #[arg(long, requires = "assume_role_arn")]
    assume_role_session_time: Option<u32>,
    /// STS' region (Assume Role STS Region); default --region.
    #[arg(long, requires = "assume_role_arn")]
    assume_role_sts_region: Option<String>,
    /// STS' endpoint (Assume Role STS Endpoint Override).
    #[arg(long, requires = "assume_role_arn")]
    assume_role_sts_endpoint: Option<url::Url>,
    /// An HTTP proxy every AWS call goes through (HTTPS through CONNECT), as the processors' Proxy Configuration
    /// Service of type HTTP; without it, HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and NO_PROXY decide.
    #[arg(long, requires = "proxy_port")]
    proxy_host: Option<String>,
    #[arg(long, requires = "proxy_host")]
    proxy_port: Option<u16>,
    /// The proxy's user (Basic authentication); the password is read from KINESNOW_PROXY_PASSWORD.
    #[arg(long, requires = "proxy_host")]
    proxy_user: Option<String>,
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

/// The stream the flags name, the settings, and the clients made from them.
async fn aws_clients(args: &AwsArgs) -> Result<(Stream, AwsSettings, AwsClients), String> {
    let stream = Stream::parse(&args.stream).map_err(|e| format!("--stream: {e}"))?;
    let region = region(args.region.clone(), &stream, |name| std::env::var(name).ok())?;
    let settings = aws_settings(args, region, std::env::var(PROXY_PASSWORD_ENV).ok())?;
    let clients = clients(&settings).await;
    Ok((stream, settings, clients))
}

/// The region the calls go to: --region, else the stream ARN's, else the environment's; with an
/// ARN it must be the ARN's region (the SDK sends every call to the client's region).
fn region(flag: Option<String>, stream: &Stream, env: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let region = flag
        .or_else(|| stream.arn.as_ref().map(|a| a.region.clone()))
        .or_else(|| env("AWS_REGION"))
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .ok_or("no region: pass --region or set AWS_REGION")?;
    stream.check_region(&region).map_err(|e| e.to_string())?;
    Ok(region)
}

/// The flags as ConsumeKinesis' properties (and its proxy service's facts), read by the processor's
/// own code: the same checks, the same credentials chain and proxy client.
fn aws_settings(args: &AwsArgs, region: String, proxy_password: Option<String>) -> Result<AwsSettings, String> {
    let mut props: Vec<(&str, String)> = Vec::new();
    let mut set = |name, value: Option<String>| props.extend(value.map(|v| (name, v)));
    set(PROFILE_NAME, args.profile.clone());
    set(ASSUME_ROLE_ARN, args.assume_role_arn.clone());
    set(ASSUME_ROLE_EXTERNAL_ID, args.assume_role_external_id.clone());
    set(ASSUME_ROLE_SESSION_NAME, args.assume_role_session_name.clone());
    set(ASSUME_ROLE_SESSION_TIME, args.assume_role_session_time.map(|s| s.to_string()));
    set(ASSUME_ROLE_STS_REGION, args.assume_role_sts_region.clone());
    set(ASSUME_ROLE_STS_ENDPOINT, args.assume_role_sts_endpoint.as_ref().map(|u| u.to_string()));
    if args.proxy_host.is_some() {
        set(PROXY_TYPE, Some("HTTP".to_owned()));
        set(PROXY_HOST, args.proxy_host.clone());
        set(PROXY_PORT, args.proxy_port.map(|p| p.to_string()));
        set(PROXY_USER, args.proxy_user.clone());
        if args.proxy_user.is_some() {
            set(PROXY_PASSWORD, Some(proxy_password.ok_or(format!("--proxy-user needs {PROXY_PASSWORD_ENV}"))?));
        }
    }
    let (credentials, proxy) = ck::aws_access(&PropertyMap::from_pairs(props)).map_err(|e| e.to_string())?;
    Ok(AwsSettings {
        region,
        credentials,
        endpoint_override: args.endpoint_url.clone(),
        dynamodb_endpoint_override: args.dynamodb_endpoint_url.clone(),
        proxy,
    })
}

async fn run_status(args: StatusArgs) -> Result<ExitCode, String> {
    let (stream, _, c) = aws_clients(&args.aws).await?;
    let target = Target { kinesis: &c.kinesis, dynamodb: &c.dynamodb, stream: &stream, application: &args.application };
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
    let (stream, settings, c) = aws_clients(&args.aws).await?;
    // Snowflake's calls go through the same proxy as AWS', as PutSnowflake's through its proxy service.
    let sql = SqlApi::new(base, signer, args.role.clone(), args.warehouse.clone(), None, &settings.proxy)
        .map_err(|e| e.to_string())?;
    let table = Table { database: args.database.clone(), schema: args.schema.clone(), name: args.table.clone() };
    let report = audit::run(&c.kinesis, &stream, &sql, &table, &window).await.map_err(|e| e.to_string())?;
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

    fn aws_args(flags: &[&str]) -> AwsArgs {
        let mut argv = vec!["kinesnow-ctl", "status", "--application", "app", "--stream", "s"];
        argv.extend_from_slice(flags);
        match Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{e}")).command {
            Command::Status(args) => args.aws,
            Command::Audit(_) => unreachable!(),
        }
    }

    #[test]
    fn an_assumed_role_with_an_external_id_is_read_as_the_processor_reads_it() {
        use kinesnow_core::config::consume_kinesis::CredentialSource;
        let args = aws_args(&[
            "--profile",
            "base",
            "--assume-role-arn",
            "arn:aws:iam::123456789012:role/kinesis-reader",
            "--assume-role-external-id",
            "ext-kinesnow-1",
            "--assume-role-sts-endpoint",
            "http://127.0.0.1:4599",
        ]);
        let settings = aws_settings(&args, "eu-west-1".into(), None).unwrap();
        assert_eq!(settings.credentials.source, CredentialSource::Profile { name: Some("base".into()), file: None });
        let role = settings.credentials.role.expect("a role");
        assert_eq!(role.role_arn, "arn:aws:iam::123456789012:role/kinesis-reader");
        assert_eq!(role.external_id.as_deref(), Some("ext-kinesnow-1"));
        assert_eq!(role.session_name, "nifi-kinesnow", "the processor's default");
        assert_eq!(role.session_time, Duration::from_secs(3600), "the processor's default");
        assert_eq!(role.sts_endpoint.map(|u| u.to_string()).as_deref(), Some("http://127.0.0.1:4599/"));
        assert_eq!(aws_settings(&aws_args(&[]), "eu-west-1".into(), None).unwrap().credentials.role, None);
    }

    #[test]
    fn role_settings_get_the_processor_s_checks() {
        let bad_arn = aws_args(&["--assume-role-arn", "kinesis-reader"]);
        let e = aws_settings(&bad_arn, "eu-west-1".into(), None).unwrap_err();
        assert!(e.contains("Assume Role ARN") && e.contains("is not an IAM role ARN"), "{e}");
        let short =
            aws_args(&["--assume-role-arn", "arn:aws:iam::123456789012:role/r", "--assume-role-session-time", "60"]);
        let e = aws_settings(&short, "eu-west-1".into(), None).unwrap_err();
        assert!(e.contains("Assume Role Session Time"), "{e}");
        assert!(
            Cli::try_parse_from([
                "kinesnow-ctl",
                "status",
                "--application",
                "a",
                "--stream",
                "s",
                "--assume-role-external-id",
                "x"
            ])
            .is_err(),
            "an External ID without a role"
        );
    }

    #[test]
    fn a_proxy_takes_its_password_from_the_environment_and_never_shows_it() {
        use kinesnow_core::config::proxy::Proxy;
        let args = aws_args(&["--proxy-host", "127.0.0.1", "--proxy-port", "3128", "--proxy-user", "nifi"]);
        let e = aws_settings(&args, "eu-west-1".into(), None).unwrap_err();
        assert!(e.contains(PROXY_PASSWORD_ENV), "{e}");
        let settings = aws_settings(&args, "eu-west-1".into(), Some("proxy-pw".into())).unwrap();
        let Proxy::Http(http) = &settings.proxy else { panic!("{:?}", settings.proxy) };
        assert_eq!((http.host.as_str(), http.port), ("127.0.0.1", 3128));
        let credentials = http.credentials.as_ref().expect("basic credentials");
        assert_eq!((credentials.user.as_str(), credentials.password.expose()), ("nifi", "proxy-pw"));
        assert!(!format!("{settings:?}").contains("proxy-pw"), "the password never prints");
        assert!(!settings.proxy.describe().contains("proxy-pw"));
        let open = aws_settings(&aws_args(&["--proxy-host", "::1", "--proxy-port", "3128"]), "r".into(), None).unwrap();
        assert!(matches!(&open.proxy, Proxy::Http(h) if h.credentials.is_none()), "{:?}", open.proxy);
        assert_eq!(aws_settings(&aws_args(&[]), "eu-west-1".into(), None).unwrap().proxy, Proxy::FromEnvironment);
        assert!(
            Cli::try_parse_from(["kinesnow-ctl", "status", "--application", "a", "--stream", "s", "--proxy-host", "h"])
                .is_err(),
            "a host without a port"
        );
    }

    #[test]
    fn a_stream_arn_names_the_region_unless_told_and_must_agree_with_it() {
        let arn = Stream::parse("arn:aws:kinesis:eu-west-1:210987654321:stream/orders").unwrap();
        let env = |name: &str| (name == "AWS_REGION").then(|| "us-east-1".to_owned());
        assert_eq!(region(None, &arn, env), Ok("eu-west-1".to_owned()), "the ARN's region before the environment's");
        assert_eq!(region(Some("eu-west-1".into()), &arn, env), Ok("eu-west-1".to_owned()));
        let e = region(Some("us-east-1".into()), &arn, env).unwrap_err();
        assert!(e.contains("region 'eu-west-1' is not the region 'us-east-1'"), "{e}");
        let name = Stream::parse("orders").unwrap();
        assert_eq!(region(None, &name, env), Ok("us-east-1".to_owned()));
        assert!(region(None, &name, |_| None).unwrap_err().contains("no region"));
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
