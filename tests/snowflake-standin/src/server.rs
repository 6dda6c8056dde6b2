//! Start-up: storage and state (restored from the state dir, then the config
//! file), the committer task, and one listener on 127.0.0.1 that serves every
//! route over TLS (with a CA generated here and written to `ca.pem`) or plain HTTP.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::routes;
use crate::state::{AppState, Settings};
use crate::storage::Store;
use crate::tls;

/// Everything needed to start a stand-in.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// 0 = pick a free port.
    pub port: u16,
    pub tls: bool,
    /// Where `ca.pem`, `port`, `url` and the DuckDB files go (in memory if `None`).
    pub state_dir: Option<PathBuf>,
    /// JSON file with users, DDL, tables and pipes applied at start.
    pub config: Option<PathBuf>,
    pub settings: Settings,
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
    #[error(transparent)]
    State(#[from] crate::state::StateError),
}

/// A started stand-in.
pub struct Running {
    pub url: String,
    pub port: u16,
    /// The CA that signed the server certificate (TLS only).
    pub ca_pem: Option<String>,
    pub ca_path: Option<PathBuf>,
    pub state: Arc<AppState>,
    stop: Arc<Notify>,
    server: JoinHandle<std::io::Result<()>>,
    committer: JoinHandle<()>,
}

impl Running {
    /// Stops serving, checkpoints DuckDB and waits for the listener to close.
    pub async fn shutdown(self) {
        self.stop.notify_one();
        let _ = tokio::time::timeout(Duration::from_secs(3), self.server).await;
        self.committer.abort();
        let st = self.state.clone();
        let _ = tokio::task::spawn_blocking(move || st.store.checkpoint()).await;
    }

    /// Waits until the server stops by itself (it does not, unless it fails).
    pub async fn wait(&mut self) -> std::io::Result<()> {
        (&mut self.server).await.unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }
}

fn write_file(dir: &Option<PathBuf>, name: &str, text: &str) -> std::io::Result<Option<PathBuf>> {
    match dir {
        Some(d) => {
            let p = d.join(name);
            std::fs::write(&p, text)?;
            Ok(Some(p))
        }
        None => Ok(None),
    }
}

/// Starts a stand-in and returns once it accepts connections.
pub async fn start(opts: Options) -> Result<Running, ServerError> {
    if let Some(dir) = &opts.state_dir {
        std::fs::create_dir_all(dir)?;
    }
    let store = Store::open(opts.state_dir.as_deref())?;
    let state = Arc::new(AppState::new(opts.settings.clone(), store));
    if opts.state_dir.is_some() {
        state.restore()?;
    }
    if let Some(cfg) = &opts.config {
        state.load_config_file(cfg)?;
    }

    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, opts.port)))?;
    listener.set_nonblocking(true)?;
    let port = listener.local_addr()?.port();
    let app = routes::router(state.clone());
    let stop = Arc::new(Notify::new());

    let (url, ca_pem, server) = if opts.tls {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let material = tls::generate()?;
        let config = axum_server::tls_rustls::RustlsConfig::from_pem(
            material.cert_chain_pem.into_bytes(),
            material.key_pem.into_bytes(),
        )
        .await?;
        let handle = axum_server::Handle::new();
        let h = handle.clone();
        let s = stop.clone();
        tokio::spawn(async move {
            s.notified().await;
            h.graceful_shutdown(Some(Duration::from_secs(1)));
        });
        let server =
            tokio::spawn(axum_server::from_tcp_rustls(listener, config)?.handle(handle).serve(app.into_make_service()));
        (format!("https://127.0.0.1:{port}"), Some(material.ca_pem), server)
    } else {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let s = stop.clone();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).with_graceful_shutdown(async move { s.notified().await }).await
        });
        (format!("http://127.0.0.1:{port}"), None, server)
    };

    let ca_path = match &ca_pem {
        Some(pem) => write_file(&opts.state_dir, "ca.pem", pem)?,
        None => None,
    };
    write_file(&opts.state_dir, "port", &port.to_string())?;
    write_file(&opts.state_dir, "url", &url)?;
    let committer = tokio::spawn(crate::commit::run(state.clone()));
    Ok(Running { url, port, ca_pem, ca_path, state, stop, server, committer })
}
