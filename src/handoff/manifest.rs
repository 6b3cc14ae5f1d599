//! The bundle manifest: the commit marker of a handoff and the only record of what it holds.
//!
//! Shape (version 2), serialised as pretty JSON with the keys in this order and a final newline:
//! `version`, `handoffId`, `requestFingerprint`, `keyDigest`, `sourceAlias`, `filename`,
//! `contentType`, `size`, `sha256`, `createdAt`, `mac`. `mac` is the HMAC-SHA256 of every other
//! field ([`Manifest::sealed_bytes`]) under the store key (`handoff::key`); version 1 had no
//! `mac`, and a version-1 manifest is refused like any other wrong version (its bundle reads as
//! corrupt: nothing proves it was not edited before the upgrade, so it is not re-sealed).
//!
//! Invariant: [`Manifest::parse`] accepts a byte string only when it is exactly what
//! [`Manifest::to_bytes`] produces for the value it decodes to. An extra, missing or duplicated
//! key, a wrong type or version, a field outside its rule (a digest or MAC that is not 64
//! lower-case hex characters, a file name that is not already a [`SafeFileName`], a
//! non-canonical timestamp) and even re-indented JSON are all refused, so a manifest that was
//! edited by hand in any way reads as corrupt. Whether the MAC is right is the store's check
//! (it holds the key); parsing needs no key.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use super::id::{HandoffId, KeyDigest, RequestFingerprint, is_hex_digest};
use crate::alias::Alias;
use crate::downloads::SafeFileName;

pub(crate) const VERSION: u64 = 2;
/// A manifest is a few hundred bytes; anything past this is not one of ours.
pub(crate) const MAX_BYTES: u64 = 64 * 1024;
const MAX_CONTENT_TYPE_BYTES: usize = 255;
const FALLBACK_CONTENT_TYPE: &str = "application/octet-stream";

/// A committed bundle's description (see the module doc for the rules).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub(crate) id: HandoffId,
    pub(crate) fingerprint: RequestFingerprint,
    pub(crate) key_digest: KeyDigest,
    pub(crate) source_alias: Alias,
    pub(crate) filename: SafeFileName,
    /// Already passed [`content_type`].
    pub(crate) content_type: String,
    pub(crate) size: u64,
    /// Lower-case hex SHA-256 of the payload.
    pub(crate) sha256: String,
    /// Whole seconds, UTC.
    pub(crate) created_at: DateTime<Utc>,
    /// Lower-case hex HMAC-SHA256 of [`Manifest::sealed_bytes`] under the store key.
    pub(crate) mac: String,
}

/// Why bytes are not a manifest. Names the rule, never echoes content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ManifestError {
    #[error("the manifest is larger than 64 KiB")]
    TooLarge,
    #[error("the manifest is not a JSON object of the version-2 shape")]
    Shape,
    #[error("the manifest has an unknown version")]
    Version,
    #[error("the manifest field {0} breaks its rule")]
    Field(&'static str),
    #[error("the manifest is not in canonical form")]
    NotCanonical,
}

/// Just the version of a manifest-shaped object (other keys ignored).
#[derive(Deserialize)]
struct Versioned {
    version: u64,
}

/// The wire form; every field required, nothing else allowed.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Wire {
    version: u64,
    handoff_id: String,
    request_fingerprint: String,
    key_digest: String,
    source_alias: String,
    filename: String,
    content_type: String,
    size: u64,
    sha256: String,
    created_at: String,
    /// Always present in a stored manifest (parse requires it); empty, and then left out, only
    /// in [`Manifest::sealed_bytes`].
    #[serde(skip_serializing_if = "String::is_empty")]
    mac: String,
}

impl Manifest {
    /// The canonical bytes (pretty JSON, fixed key order, trailing newline).
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        self.serialise(self.mac.clone())
    }

    /// What the MAC covers: the canonical bytes of every field but `mac` (the same form as
    /// [`Manifest::to_bytes`], without the `mac` key).
    pub(crate) fn sealed_bytes(&self) -> Vec<u8> {
        self.serialise(String::new())
    }

    fn serialise(&self, mac: String) -> Vec<u8> {
        let wire = Wire {
            version: VERSION,
            handoff_id: self.id.as_str().to_owned(),
            request_fingerprint: self.fingerprint.as_str().to_owned(),
            key_digest: self.key_digest.as_str().to_owned(),
            source_alias: self.source_alias.as_str().to_owned(),
            filename: self.filename.as_str().to_owned(),
            content_type: self.content_type.clone(),
            size: self.size,
            sha256: self.sha256.clone(),
            created_at: timestamp(&self.created_at),
            mac,
        };
        // Plain strings and integers only: serialisation cannot fail.
        let mut bytes = serde_json::to_vec_pretty(&wire).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// Strict parse (see the module invariant).
    pub(crate) fn parse(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        if bytes.len() as u64 > MAX_BYTES {
            return Err(ManifestError::TooLarge);
        }
        // The version first, on its own, so a manifest of another version (a version-1 one has
        // no `mac`) is reported as that rather than as a shape error.
        let declared: Versioned =
            serde_json::from_slice(bytes).map_err(|_| ManifestError::Shape)?;
        if declared.version != VERSION {
            return Err(ManifestError::Version);
        }
        let wire: Wire = serde_json::from_slice(bytes).map_err(|_| ManifestError::Shape)?;
        let field = ManifestError::Field;
        let filename = SafeFileName::from_untrusted(&wire.filename);
        if filename.as_str() != wire.filename {
            return Err(field("filename"));
        }
        if content_type(&wire.content_type) != wire.content_type {
            return Err(field("contentType"));
        }
        if !is_hex_digest(&wire.sha256) {
            return Err(field("sha256"));
        }
        if !is_hex_digest(&wire.mac) {
            return Err(field("mac"));
        }
        let created_at = DateTime::parse_from_rfc3339(&wire.created_at)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|_| field("createdAt"))?;
        let manifest = Manifest {
            id: HandoffId::parse(&wire.handoff_id).map_err(|_| field("handoffId"))?,
            fingerprint: RequestFingerprint::parse(&wire.request_fingerprint)
                .ok_or(field("requestFingerprint"))?,
            key_digest: KeyDigest::parse(&wire.key_digest).ok_or(field("keyDigest"))?,
            source_alias: Alias::parse(&wire.source_alias)
                .ok()
                .filter(|a| a.as_str() == wire.source_alias)
                .ok_or(field("sourceAlias"))?,
            filename,
            content_type: wire.content_type,
            size: wire.size,
            sha256: wire.sha256,
            created_at,
            mac: wire.mac,
        };
        if manifest.to_bytes() != bytes {
            return Err(ManifestError::NotCanonical);
        }
        Ok(manifest)
    }
}

/// RFC 3339, whole seconds, `Z`.
pub(crate) fn timestamp(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A sender-declared content type made safe to store and echo (as the reference): control
/// characters removed, trimmed, at most 255 bytes (cut on a character boundary), and
/// `application/octet-stream` when nothing is left. Idempotent.
pub(crate) fn content_type(raw: &str) -> String {
    let cleaned: String = raw.chars().filter(|c| !c.is_control()).collect();
    let mut out = cleaned.trim();
    while out.len() > MAX_CONTENT_TYPE_BYTES {
        let mut end = MAX_CONTENT_TYPE_BYTES;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out = out[..end].trim_end();
    }
    if out.is_empty() {
        FALLBACK_CONTENT_TYPE.to_owned()
    } else {
        out.to_owned()
    }
}

/// Fuzz oracle for [`Manifest::parse`]: parse → serialise → parse is the identity, the accepted
/// bytes are exactly the canonical serialisation, and an accepted manifest has exactly the eleven
/// version-2 keys.
#[cfg(fuzzing)]
pub(crate) fn fuzz_manifest(data: &[u8]) {
    const KEYS: [&str; 11] = [
        "version",
        "handoffId",
        "requestFingerprint",
        "keyDigest",
        "sourceAlias",
        "filename",
        "contentType",
        "size",
        "sha256",
        "createdAt",
        "mac",
    ];
    // Raw bytes exercise the parser's refusals; most accepted manifests come from the mutator
    // editing seeds in fuzz/corpus/handoff_manifest.
    let Ok(manifest) = Manifest::parse(data) else {
        return;
    };
    let bytes = manifest.to_bytes();
    assert_eq!(bytes, data, "oracle: accepted bytes must be canonical");
    assert_eq!(
        Manifest::parse(&bytes).as_ref(),
        Ok(&manifest),
        "oracle: round trip"
    );
    let value: serde_json::Value = serde_json::from_slice(data).expect("oracle: JSON");
    let object = value.as_object().expect("oracle: an object");
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut expected = KEYS.to_vec();
    expected.sort_unstable();
    assert_eq!(keys, expected, "oracle: exact shape");
    assert_eq!(object["version"], serde_json::json!(VERSION));
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::handoff::id::HandoffRequest;

    /// A valid manifest for tests elsewhere in the crate.
    pub(crate) fn sample() -> Manifest {
        let request = HandoffRequest::new(
            Alias::parse("finance").expect("alias"),
            "msg-1",
            "att-1",
            "0f8fad5b-d9cb-469f-a165-70867728950e",
        );
        Manifest {
            id: HandoffId::random(),
            fingerprint: request.fingerprint(),
            key_digest: request.key_digest(),
            source_alias: request.alias.clone(),
            filename: SafeFileName::from_untrusted("invoice.pdf"),
            content_type: "application/pdf".into(),
            size: 5,
            sha256: "a".repeat(64),
            created_at: DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z")
                .expect("time")
                .with_timezone(&Utc),
            mac: "c".repeat(64),
        }
    }

    fn edit(f: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) -> Vec<u8> {
        let mut value: serde_json::Value =
            serde_json::from_slice(&sample().to_bytes()).expect("json");
        f(value.as_object_mut().expect("object"));
        let mut bytes = serde_json::to_vec_pretty(&value).expect("json");
        bytes.push(b'\n');
        bytes
    }

    /// The fuzz seed must be accepted, or the fuzzer starts from refusals only.
    #[test]
    fn the_fuzz_seed_is_a_valid_manifest() {
        let seed = include_bytes!("../../fuzz/corpus/handoff_manifest/valid.json");
        let manifest = Manifest::parse(seed).expect("the seed parses");
        assert_eq!(manifest.to_bytes(), seed);
        // The seed's MAC was computed outside Rust (Python's hmac) under an all-zero key: a
        // known-answer test of what `key` seals.
        let zero = crate::handoff::key::StoreKey::for_tests([0; crate::handoff::key::KEY_LEN]);
        assert!(zero.verifies(&manifest));
    }

    #[test]
    fn round_trips() {
        let manifest = sample();
        assert_eq!(Manifest::parse(&manifest.to_bytes()), Ok(manifest));
    }

    #[test]
    fn the_sealed_bytes_are_the_manifest_without_its_mac() {
        let manifest = sample();
        let sealed: serde_json::Value =
            serde_json::from_slice(&manifest.sealed_bytes()).expect("json");
        let mut full: serde_json::Value =
            serde_json::from_slice(&manifest.to_bytes()).expect("json");
        full.as_object_mut().expect("object").remove("mac");
        assert_eq!(sealed, full);
        let mut other = manifest.clone();
        other.mac = "d".repeat(64);
        assert_eq!(other.sealed_bytes(), manifest.sealed_bytes());
        assert!(Manifest::parse(&manifest.sealed_bytes()).is_err());
    }

    #[test]
    fn any_change_of_shape_is_refused() {
        use serde_json::json;
        let cases: Vec<(&str, Vec<u8>, ManifestError)> = vec![
            (
                "extra field",
                edit(|m| {
                    m.insert("path".into(), json!("/tmp/x"));
                }),
                ManifestError::Shape,
            ),
            (
                "missing field",
                edit(|m| {
                    m.remove("sha256");
                }),
                ManifestError::Shape,
            ),
            (
                "wrong type",
                edit(|m| {
                    m.insert("size".into(), json!("5"));
                }),
                ManifestError::Shape,
            ),
            (
                "negative size",
                edit(|m| {
                    m.insert("size".into(), json!(-1));
                }),
                ManifestError::Shape,
            ),
            (
                "version",
                edit(|m| {
                    m.insert("version".into(), json!(3));
                }),
                ManifestError::Version,
            ),
            (
                "version 1 (no MAC)",
                edit(|m| {
                    m.insert("version".into(), json!(1));
                    m.remove("mac");
                }),
                ManifestError::Version,
            ),
            (
                "missing mac",
                edit(|m| {
                    m.remove("mac");
                }),
                ManifestError::Shape,
            ),
            (
                "short mac",
                edit(|m| {
                    m.insert("mac".into(), json!("c".repeat(63)));
                }),
                ManifestError::Field("mac"),
            ),
            (
                "upper-case digest",
                edit(|m| {
                    m.insert("sha256".into(), json!("A".repeat(64)));
                }),
                ManifestError::Field("sha256"),
            ),
            (
                "unsafe name",
                edit(|m| {
                    m.insert("filename".into(), json!("../x.pdf"));
                }),
                ManifestError::Field("filename"),
            ),
            (
                "bad id",
                edit(|m| {
                    m.insert("handoffId".into(), json!("oh_short"));
                }),
                ManifestError::Field("handoffId"),
            ),
            (
                "content type with CR",
                edit(|m| {
                    m.insert("contentType".into(), json!("text/plain\r"));
                }),
                ManifestError::Field("contentType"),
            ),
            (
                "non-canonical time",
                edit(|m| {
                    m.insert("createdAt".into(), json!("2026-12-01T11:00:00+01:00"));
                }),
                ManifestError::NotCanonical,
            ),
        ];
        for (what, bytes, want) in cases {
            assert_eq!(Manifest::parse(&bytes), Err(want), "{what}");
        }
    }

    #[test]
    fn reformatted_duplicated_or_truncated_json_is_refused() {
        let bytes = sample().to_bytes();
        let compact =
            serde_json::to_vec(&serde_json::from_slice::<serde_json::Value>(&bytes).expect("json"))
                .expect("json");
        assert_eq!(Manifest::parse(&compact), Err(ManifestError::NotCanonical));
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 3] {
            assert!(Manifest::parse(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let text = String::from_utf8(bytes).expect("utf8");
        let duplicated = text.replacen("\"size\": 5,", "\"size\": 5,\n  \"size\": 5,", 1);
        assert_eq!(
            Manifest::parse(duplicated.as_bytes()),
            Err(ManifestError::Shape)
        );
        assert_eq!(
            Manifest::parse(&vec![b' '; 70_000]),
            Err(ManifestError::TooLarge)
        );
    }

    #[test]
    fn content_types_are_cleaned_like_the_reference() {
        assert_eq!(
            content_type("application/pdf\r\nmalicious"),
            "application/pdfmalicious"
        );
        assert_eq!(content_type("  \u{7}  "), FALLBACK_CONTENT_TYPE);
        let long = format!("text/{}", "é".repeat(200));
        let cut = content_type(&long);
        assert!(cut.len() <= MAX_CONTENT_TYPE_BYTES);
        assert_eq!(content_type(&cut), cut);
    }
}
