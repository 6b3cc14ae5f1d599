//! Handoff ids and the two digests a bundle is keyed by.
//!
//! A [`HandoffId`] is `oh_` followed by 43 url-safe base64 characters. New ids come only from
//! [`HandoffId::random`] (256 bits from the OS-seeded thread RNG), never from the caller's
//! idempotency key as in the reference, so knowing a key does not let anyone guess the bundle's
//! name. [`HandoffId::parse`] checks the shape only; it is what makes an id safe to use as a
//! single directory name under the handoff root (no separator, no dot, no NUL).
//!
//! [`RequestFingerprint`] binds a bundle to the request that made it; [`KeyDigest`] maps an
//! idempotency key to its bundle without storing the key itself.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngExt as _;
use sha2::{Digest as _, Sha256};

const PREFIX: &str = "oh_";
/// 32 random bytes in unpadded base64url.
const BODY_LEN: usize = 43;

/// A well-formed handoff id (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct HandoffId(String);

/// Why a string is not a handoff id. Never echoes the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a handoff id is oh_ followed by 43 characters from A-Z a-z 0-9 _ -")]
pub(crate) struct BadHandoffId;

impl HandoffId {
    /// A fresh id with 256 bits of randomness.
    pub(crate) fn random() -> HandoffId {
        let bytes: [u8; 32] = rand::rng().random();
        HandoffId(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// Accepts exactly `^oh_[A-Za-z0-9_-]{43}$` (the published input pattern).
    pub(crate) fn parse(s: &str) -> Result<HandoffId, BadHandoffId> {
        let body = s.strip_prefix(PREFIX).ok_or(BadHandoffId)?;
        let ok = body.len() == BODY_LEN
            && body
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok {
            Ok(HandoffId(s.to_owned()))
        } else {
            Err(BadHandoffId)
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for HandoffId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a create call asked for; its fingerprint is stored in the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HandoffRequest {
    pub(crate) alias: crate::alias::Alias,
    pub(crate) message_id: String,
    pub(crate) attachment_id: String,
    /// Lower-cased UUIDv4 (keys are case-insensitive, as in the reference).
    key: String,
}

impl HandoffRequest {
    pub(crate) fn new(
        alias: crate::alias::Alias,
        message_id: &str,
        attachment_id: &str,
        idempotency_key: &str,
    ) -> HandoffRequest {
        HandoffRequest {
            alias,
            message_id: message_id.to_owned(),
            attachment_id: attachment_id.to_owned(),
            key: idempotency_key.to_ascii_lowercase(),
        }
    }

    /// SHA-256 over a length-prefixed encoding of the four fields, so no two different requests
    /// share an encoding (a separator could appear inside a message id).
    pub(crate) fn fingerprint(&self) -> RequestFingerprint {
        let mut hasher = Sha256::new();
        hasher.update(b"mailgate-handoff-request-v1\0");
        for field in [
            self.alias.as_str(),
            &self.message_id,
            &self.attachment_id,
            &self.key,
        ] {
            hasher.update((field.len() as u64).to_be_bytes());
            hasher.update(field.as_bytes());
        }
        RequestFingerprint(hex::encode(hasher.finalize()))
    }

    pub(crate) fn key_digest(&self) -> KeyDigest {
        KeyDigest::of(&self.key)
    }
}

/// Lower-case hex SHA-256 of a request (see [`HandoffRequest::fingerprint`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RequestFingerprint(String);

/// Lower-case hex SHA-256 of an idempotency key, domain-separated from the fingerprint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyDigest(String);

impl KeyDigest {
    fn of(lowercased_key: &str) -> KeyDigest {
        let mut hasher = Sha256::new();
        hasher.update(b"mailgate-handoff-key-v1\0");
        hasher.update(lowercased_key.as_bytes());
        KeyDigest(hex::encode(hasher.finalize()))
    }
}

/// Both digests are stored as 64 lower-case hex characters; parsing checks exactly that.
macro_rules! hex_digest {
    ($ty:ident) => {
        impl $ty {
            pub(crate) fn parse(s: &str) -> Option<$ty> {
                is_hex_digest(s).then(|| $ty(s.to_owned()))
            }

            pub(crate) fn as_str(&self) -> &str {
                &self.0
            }
        }
    };
}
hex_digest!(RequestFingerprint);
hex_digest!(KeyDigest);

/// 64 lower-case hex characters.
pub(crate) fn is_hex_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Fuzz oracle for [`HandoffId::parse`]: accepted ids match the published pattern exactly and
/// round-trip; an accepted id is always one safe path component.
#[cfg(fuzzing)]
pub(crate) fn fuzz_handoff_id(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    static PATTERN: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^oh_[A-Za-z0-9_-]{43}$").expect("oracle: pattern compiles")
    });
    let pattern = &*PATTERN;
    match HandoffId::parse(s) {
        Ok(id) => {
            assert!(
                pattern.is_match(s),
                "oracle: accepted an id off the pattern"
            );
            assert_eq!(id.as_str(), s, "oracle: parse must not rewrite");
            assert!(
                !s.contains(['/', '\\', '.', '\0']),
                "oracle: an id must be one path component"
            );
            assert_eq!(HandoffId::parse(id.as_str()), Ok(id.clone()));
        }
        Err(BadHandoffId) => assert!(!pattern.is_match(s), "oracle: refused a valid id"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alias::Alias;
    use proptest::prelude::*;

    fn request(key: &str) -> HandoffRequest {
        HandoffRequest::new(Alias::parse("finance").expect("alias"), "msg", "att-1", key)
    }

    #[test]
    fn random_ids_parse_and_differ() {
        let a = HandoffId::random();
        let b = HandoffId::random();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 3 + BODY_LEN);
        assert_eq!(HandoffId::parse(a.as_str()), Ok(a));
    }

    #[test]
    fn hostile_ids_are_refused() {
        let ok = format!("oh_{}", "A".repeat(43));
        assert!(HandoffId::parse(&ok).is_ok());
        for bad in [
            "../payload.bin".to_owned(),
            "/tmp/bundle".to_owned(),
            format!("oh_{}", "A".repeat(42)),
            format!("oh_{}", "A".repeat(44)),
            format!("oh_{}.", "A".repeat(42)),
            format!("oh_{}/", "A".repeat(42)),
            format!("OH_{}", "A".repeat(43)),
            format!("oh_{}\0", "A".repeat(42)),
            format!("oh_{}é", "A".repeat(41)),
        ] {
            assert_eq!(HandoffId::parse(&bad), Err(BadHandoffId), "{bad:?}");
        }
    }

    #[test]
    fn keys_are_case_insensitive_and_bind_the_request() {
        let key = "0f8fad5b-d9cb-469f-a165-70867728950e";
        let upper = request(&key.to_uppercase());
        assert_eq!(request(key).fingerprint(), upper.fingerprint());
        assert_eq!(request(key).key_digest(), upper.key_digest());
        let mut other = request(key);
        other.attachment_id = "att-2".into();
        assert_ne!(other.fingerprint(), request(key).fingerprint());
        assert_eq!(other.key_digest(), request(key).key_digest());
        assert!(is_hex_digest(request(key).fingerprint().as_str()));
        assert_ne!(
            request(key).fingerprint().as_str(),
            request(key).key_digest().as_str()
        );
    }

    proptest! {
        #[test]
        fn field_boundaries_cannot_be_shifted(a in "[a-z]{1,6}", b in "[a-z]{0,6}", c in "[a-z]{0,6}") {
            // Moving characters from one field to the next must change the fingerprint.
            let alias = Alias::parse("finance").expect("alias");
            let one = HandoffRequest::new(alias.clone(), &format!("{a}{b}"), &c, "k");
            let two = HandoffRequest::new(alias, &a, &format!("{b}{c}"), "k");
            prop_assume!(!b.is_empty());
            prop_assert_ne!(one.fingerprint(), two.fingerprint());
        }

        #[test]
        fn parse_accepts_exactly_the_pattern(s in "(oh_)?[A-Za-z0-9_./-]{40,46}") {
            let pattern = regex::Regex::new(r"^oh_[A-Za-z0-9_-]{43}$").expect("pattern");
            prop_assert_eq!(HandoffId::parse(&s).is_ok(), pattern.is_match(&s));
        }
    }
}
