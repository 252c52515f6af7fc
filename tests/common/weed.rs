//! A real S3-compatible server for the tests: SeaweedFS's `weed server -s3`, started on
//! free loopback ports with its data in a temporary directory, killed with the test.
//!
//! The binary is `$PATCHBOX_WEED`, else `weed` on `PATH`; without one, [`Weed::start`]
//! returns `None` and the test says it skipped (`.ci/run` builds the binary and sets
//! `PATCHBOX_WEED`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running (or killed) `weed server -s3`.
pub struct Weed {
    bin: PathBuf,
    data: PathBuf,
    ports: Vec<u16>,
    child: Option<Child>,
    /// Buckets made, written to after a restart until the server takes writes again.
    buckets: Vec<String>,
}

/// The `weed` binary, if one is to be had.
pub fn weed_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PATCHBOX_WEED").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("weed"))
            .find(|p| p.is_file())
    })
}

fn free_ports(n: usize) -> Vec<u16> {
    // Held together so no two are the same, then released for the server to take.
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

impl Weed {
    /// Starts a server with its data under `data` and waits until its S3 gateway answers;
    /// `None` (after printing why) when there is no `weed` binary.
    pub fn start(data: &Path, test: &str) -> Option<Weed> {
        let Some(bin) = weed_binary() else {
            eprintln!(
                "{test}: skipped: no weed binary (set PATCHBOX_WEED or put SeaweedFS's weed \
                 on PATH; .ci/run builds it)"
            );
            return None;
        };
        std::fs::create_dir_all(data).unwrap();
        let mut w = Weed {
            bin,
            data: data.to_path_buf(),
            ports: free_ports(8),
            child: None,
            buckets: Vec::new(),
        };
        w.restart();
        Some(w)
    }

    /// The S3 endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports[0])
    }

    /// The AWS variables a client of this server needs.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", "patchbox-test".into()),
            ("AWS_SECRET_ACCESS_KEY", "patchbox-test-secret".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }

    /// A client of this server's store for `bucket`/`prefix`, configured in code (the
    /// process's environment is not the test's to change).
    pub fn objects(&self, bucket: &str, prefix: &str) -> patchbox::store::S3Objects {
        let endpoint = self.endpoint();
        let settings = [
            ("aws_endpoint", endpoint.as_str()),
            ("aws_access_key_id", "patchbox-test"),
            ("aws_secret_access_key", "patchbox-test-secret"),
            ("aws_allow_http", "true"),
        ];
        patchbox::store::S3Objects::from_env_with(bucket, prefix, &settings).unwrap()
    }

    /// Kills the server at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server (again, on the same ports and data) and waits until it answers.
    pub fn restart(&mut self) {
        self.kill();
        let p = &self.ports;
        let log = std::fs::File::create(self.data.join("weed.log")).unwrap();
        let child = Command::new(&self.bin)
            .arg("server")
            .arg("-s3")
            .arg(format!("-dir={}", self.data.display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
            .arg(format!("-s3.port={}", p[0]))
            .arg(format!("-s3.port.grpc={}", p[1]))
            .arg(format!("-master.port={}", p[2]))
            .arg(format!("-master.port.grpc={}", p[3]))
            .arg(format!("-volume.port={}", p[4]))
            .arg(format!("-volume.port.grpc={}", p[5]))
            .arg(format!("-filer.port={}", p[6]))
            .arg(format!("-filer.port.grpc={}", p[7]))
            .args([
                "-s3.port.iceberg=0",
                "-s3.port.lance=0",
                "-master.volumeSizeLimitMB=64",
                "-volume.max=100",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        self.wait_ready();
        // The gateway answers before its volume server is back: wait until a write lands.
        for b in self.buckets.clone() {
            self.until_ok("PUT", &format!("/{b}/.patchbox-test-probe"));
        }
    }

    /// Creates `bucket` (the server has no access control configured here) and waits until
    /// it takes writes.
    ///
    /// A port found free by binding and releasing it can be taken by another test's server
    /// before this one binds it, and a server missing one of its ports never takes writes:
    /// after 45 s without a write the server is started again on other ports (three tries).
    pub fn create_bucket(&mut self, bucket: &str) {
        let wait = Duration::from_secs(45);
        for attempt in 0.. {
            if self.answers_ok("PUT", &format!("/{bucket}"), wait)
                && self.answers_ok("PUT", &format!("/{bucket}/.patchbox-test-probe"), wait)
            {
                break;
            }
            assert!(
                attempt < 2,
                "weed took no writes on three sets of ports; see {}",
                self.log_path().display()
            );
            self.ports = free_ports(8);
            self.restart();
        }
        self.buckets.push(bucket.to_string());
    }

    /// Sends the request until it is answered with 200 (bounded: two minutes).
    fn until_ok(&self, method: &str, path: &str) {
        assert!(
            self.answers_ok(method, path, Duration::from_secs(120)),
            "weed did not answer {method} {path} with 200; see {}",
            self.log_path().display()
        );
    }

    /// Sends the request until it is answered with 200, for at most `wait`; whether it was.
    fn answers_ok(&self, method: &str, path: &str, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        while self.request(method, path) != Some(200) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        true
    }

    fn log_path(&self) -> PathBuf {
        self.data.join("weed.log")
    }

    /// Waits (bounded) until the S3 gateway answers a request with an HTTP status.
    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.request("GET", "/").is_none() {
            assert!(
                Instant::now() < deadline,
                "weed did not start; see {}",
                self.log_path().display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// One plain HTTP/1.1 request with no body; the status code, or `None` when the server
    /// does not answer.
    fn request(&self, method: &str, path: &str) -> Option<u16> {
        let mut s = TcpStream::connect(("127.0.0.1", self.ports[0])).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.ports[0]
        )
        .ok()?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head).ok()?;
        std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
    }
}

impl Drop for Weed {
    fn drop(&mut self) {
        self.kill();
    }
}
