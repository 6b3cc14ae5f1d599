//! The embeddings endpoint's JSON, both ways: the request body mailgate sends and the parser of
//! the answer, which is untrusted bytes from another program (fuzzed: `fuzz/fuzz_targets/
//! embeddings.rs`). Invariant: [`parse_embeddings`] returns exactly one vector per input, in
//! input order (by each item's `index`, unique and in range), all of one dimension in
//! `1..=MAX_DIMENSION`, every number finite; anything else is [`EmbedError::Malformed`], so a
//! confused or hostile endpoint can never put a vector under the wrong message or a NaN into
//! the store.

use serde::{Deserialize, Serialize};

use super::client::EmbedError;

/// Largest vector dimension accepted (common models use 384 to 3,072).
pub(crate) const MAX_DIMENSION: usize = 4096;

/// The e5-style role of the texts of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    Query,
    Passage,
}

/// `POST …/embeddings` body. `input_type` is omitted for endpoints that refuse it.
#[derive(Debug, Serialize)]
pub(crate) struct Request<'a> {
    pub(crate) model: &'a str,
    pub(crate) input: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) input_type: Option<Role>,
    pub(crate) encoding_format: &'static str,
}

/// The answer; other members (`object`, `model`, `usage`) are ignored.
#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct Response {
    pub(crate) data: Vec<Item>,
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct Item {
    pub(crate) index: usize,
    pub(crate) embedding: Vec<f32>,
}

/// The vectors of an answer to a request of `expected_inputs` texts, in input order (see the
/// module doc for every check).
pub(crate) fn parse_embeddings(
    bytes: &[u8],
    expected_inputs: usize,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let response: Response = serde_json::from_slice(bytes)
        .map_err(|_| EmbedError::Malformed("not the expected JSON"))?;
    if response.data.len() != expected_inputs {
        return Err(EmbedError::Malformed("not one embedding per input"));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected_inputs];
    let mut dimension = None;
    for item in response.data {
        let len = item.embedding.len();
        if !(1..=MAX_DIMENSION).contains(&len) {
            return Err(EmbedError::Malformed("embedding dimension out of range"));
        }
        if *dimension.get_or_insert(len) != len {
            return Err(EmbedError::Malformed("embeddings of different dimensions"));
        }
        // serde turns an f64 beyond f32's range into an infinity; NaN is not JSON, but check.
        if !item.embedding.iter().all(|x| x.is_finite()) {
            return Err(EmbedError::Malformed("embedding with a non-finite number"));
        }
        let slot = slots
            .get_mut(item.index)
            .ok_or(EmbedError::Malformed("embedding index out of range"))?;
        if slot.replace(item.embedding).is_some() {
            return Err(EmbedError::Malformed("embedding index repeated"));
        }
    }
    // Every slot is filled: as many items as slots, each index unique and in range.
    slots
        .into_iter()
        .map(|slot| slot.ok_or(EmbedError::Malformed("embedding index missing")))
        .collect()
}

/// The answer an endpoint would give for `vectors` (tests and the fuzz oracle's round trip).
#[cfg(any(test, fuzzing))]
pub(crate) fn encode(vectors: &[Vec<f32>]) -> Vec<u8> {
    let response = Response {
        data: vectors
            .iter()
            .enumerate()
            .map(|(index, embedding)| Item {
                index,
                embedding: embedding.clone(),
            })
            .collect(),
    };
    serde_json::to_vec(&response).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn malformed(bytes: &str, expected: usize) -> &'static str {
        match parse_embeddings(bytes.as_bytes(), expected) {
            Err(EmbedError::Malformed(why)) => why,
            other => panic!("{bytes}: {other:?}"),
        }
    }

    #[test]
    fn vectors_come_back_in_input_order() {
        let body = r#"{"object":"list","model":"e5","usage":{"prompt_tokens":3},
            "data":[{"object":"embedding","index":1,"embedding":[0.5,-1]},
                    {"object":"embedding","index":0,"embedding":[1e-3,2]}]}"#;
        let vectors = parse_embeddings(body.as_bytes(), 2).expect("valid");
        assert_eq!(vectors, vec![vec![1e-3, 2.0], vec![0.5, -1.0]]);
        let again = parse_embeddings(&encode(&vectors), 2).expect("round trip");
        assert_eq!(again, vectors);
    }

    #[test]
    fn every_inconsistency_is_refused() {
        let one = r#"{"index":0,"embedding":[1,2]}"#;
        assert_eq!(malformed("[]", 0), "not the expected JSON");
        assert_eq!(malformed(r#"{"data":{}}"#, 1), "not the expected JSON");
        assert_eq!(
            malformed(&format!(r#"{{"data":[{one}]}}"#), 2),
            "not one embedding per input"
        );
        assert_eq!(
            malformed(&format!(r#"{{"data":[{one},{one}]}}"#), 2),
            "embedding index repeated"
        );
        assert_eq!(
            malformed(r#"{"data":[{"index":1,"embedding":[1]}]}"#, 1),
            "embedding index out of range"
        );
        assert_eq!(
            malformed(
                r#"{"data":[{"index":0,"embedding":[1]},{"index":1,"embedding":[1,2]}]}"#,
                2
            ),
            "embeddings of different dimensions"
        );
        assert_eq!(
            malformed(r#"{"data":[{"index":0,"embedding":[]}]}"#, 1),
            "embedding dimension out of range"
        );
        let huge = format!(
            r#"{{"data":[{{"index":0,"embedding":[{}]}}]}}"#,
            vec!["0"; MAX_DIMENSION + 1].join(",")
        );
        assert_eq!(malformed(&huge, 1), "embedding dimension out of range");
        assert_eq!(
            malformed(r#"{"data":[{"index":0,"embedding":[1e300]}]}"#, 1),
            "embedding with a non-finite number"
        );
        assert_eq!(
            malformed(r#"{"data":[{"index":0,"embedding":"AACAPw=="}]}"#, 1),
            "not the expected JSON",
            "base64 is never asked for"
        );
        assert_eq!(
            malformed(r#"{"data":[{"index":-1,"embedding":[1]}]}"#, 1),
            "not the expected JSON"
        );
    }

    #[test]
    fn the_request_names_the_role_only_when_asked_to() {
        let input = vec!["hello".to_owned()];
        let with = serde_json::to_value(Request {
            model: "e5",
            input: &input,
            input_type: Some(Role::Passage),
            encoding_format: "float",
        })
        .expect("json");
        assert_eq!(
            with,
            serde_json::json!({"model":"e5","input":["hello"],"input_type":"passage",
                               "encoding_format":"float"})
        );
        let without = serde_json::to_value(Request {
            model: "e5",
            input: &input,
            input_type: None,
            encoding_format: "float",
        })
        .expect("json");
        assert!(without.get("input_type").is_none());
    }
}
