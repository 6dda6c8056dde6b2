//! Local emulators for the engine's integration tests: starts kinesis-local and dynalite on free
//! ports through tests/services/local-services.sh and stops exactly those processes when dropped.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;

pub struct Emulators {
    pub kinesis: String,
    pub dynamodb: String,
    state_dir: PathBuf,
    env: Vec<(String, String)>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/services/local-services.sh")
}

impl Emulators {
    pub fn start(name: &str) -> Self {
        let state_dir = std::env::temp_dir().join(format!("kinesnow-{name}-{}", std::process::id()));
        let env = vec![
            ("KINESIS_PORT".to_owned(), free_port().to_string()),
            ("KINESIS_TLS_PORT".to_owned(), free_port().to_string()),
            ("DYNAMODB_PORT".to_owned(), free_port().to_string()),
            ("SERVICES_STATE_DIR".to_owned(), state_dir.display().to_string()),
        ];
        let status = Command::new("bash").arg(script()).arg("start").envs(env.iter().cloned()).status().expect("run local-services.sh");
        assert!(status.success(), "the emulators did not start");
        let port = |k: &str| env.iter().find(|(n, _)| n == k).unwrap().1.clone();
        Self {
            kinesis: format!("http://127.0.0.1:{}", port("KINESIS_PORT")),
            dynamodb: format!("http://127.0.0.1:{}", port("DYNAMODB_PORT")),
            state_dir,
            env,
        }
    }
}

impl Drop for Emulators {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(script()).arg("stop").envs(self.env.iter().cloned()).status();
        let _ = std::fs::remove_dir_all(&self.state_dir);
    }
}
