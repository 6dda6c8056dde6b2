//! tinyproxy (Debian's package, unpacked into the cache by tests/proxy/tinyproxy.sh) on 127.0.0.1
//! with basic authentication, for the proxy tests; its log names every request it served.

use std::time::Duration;

/// tinyproxy (Debian's package, unpacked by tests/proxy/tinyproxy.sh) on 127.0.0.1 with basic
/// authentication; ended when dropped.
pub struct Tinyproxy {
    pub port: u16,
    dir: std::path::PathBuf,
    process: std::process::Child,
}

impl Tinyproxy {
    pub fn start(user: &str, password: &str) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/proxy/tinyproxy.sh");
        let out = std::process::Command::new(script).output().expect("tests/proxy/tinyproxy.sh runs");
        assert!(out.status.success(), "tinyproxy.sh: {}", String::from_utf8_lossy(&out.stderr));
        let binary = String::from_utf8(out.stdout).unwrap().lines().last().unwrap().to_owned();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(format!("kinesnow-tinyproxy-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 900\nLogFile \"{}\"\nLogLevel Connect\nMaxClients 100\nBasicAuth {user} {password}\n",
            dir.join("access.log").display()
        );
        std::fs::write(dir.join("tinyproxy.conf"), conf).unwrap();
        let process = std::process::Command::new(binary)
            .args(["-d", "-c"])
            .arg(dir.join("tinyproxy.conf"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "tinyproxy did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { port, dir, process }
    }

    /// (method, target) of every request line tinyproxy logged.
    pub fn requests(&self) -> Vec<(String, String)> {
        let log = std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default();
        log.lines()
            .filter_map(|l| {
                l.split_once("): ").filter(|_| l.contains("Request (file descriptor")).map(|(_, r)| r.to_owned())
            })
            .filter_map(|r| {
                let mut parts = r.split(' ');
                Some((parts.next()?.to_owned(), parts.next()?.to_owned()))
            })
            .collect()
    }
}

impl Drop for Tinyproxy {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
