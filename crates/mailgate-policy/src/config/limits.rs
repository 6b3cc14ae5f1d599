//! [`Limits`]: the resource limits of `plugin.json` (catalog.md "Limits"), each with its
//! bounds and default, declared once.
//!
//! Invariant: the struct, its defaults, the raw → validated step and the tests' table of bounds
//! are generated from one list (`limits!`), so they cannot drift apart; a value outside its
//! bounds is refused naming the key, never clamped. The rules between two limits (a store holds
//! one item, a folder one batch) are checked by `Config::from_raw`, which sees the whole file.
//!
//! Who calls it: `Config::from_raw` (`limits_from_raw`); everything else reads
//! `Config::limits`.

use super::ConfigError;
use super::raw::RawConfig;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
pub(super) const GIB: u64 = 1024 * MIB;

/// One limit key with its bounds and default, as published in catalog.md (tests check the
/// schema against it).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LimitBound {
    pub(crate) key: &'static str,
    pub(crate) min: u64,
    pub(crate) max: u64,
    pub(crate) default: u64,
}

/// Converts a bounds-checked limit into its field type.
trait FromLimit: Sized {
    fn from_limit(value: u64) -> Option<Self>;
}

impl FromLimit for u64 {
    fn from_limit(value: u64) -> Option<Self> {
        Some(value)
    }
}

impl FromLimit for usize {
    fn from_limit(value: u64) -> Option<Self> {
        usize::try_from(value).ok()
    }
}

fn limit<T: FromLimit>(
    key: &'static str,
    value: Option<u64>,
    min: u64,
    max: u64,
    default: u64,
) -> Result<T, ConfigError> {
    let value = value.unwrap_or(default);
    if value < min || value > max {
        return Err(ConfigError::schema(
            key,
            format!("must be between {min} and {max}"),
        ));
    }
    T::from_limit(value)
        .ok_or_else(|| ConfigError::schema(key, "does not fit this platform's integer size"))
}

/// Declares [`Limits`], its defaults, the `LIMIT_BOUNDS` table and the raw → validated step
/// from one list, so the three cannot drift apart.
macro_rules! limits {
    ($($field:ident: $ty:ty = $key:literal, $min:expr, $max:expr, $default:expr;)*) => {
        /// Resource limits from `plugin.json` (catalog.md "Limits"), each within its bounds.
        #[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        pub struct Limits {
            $(pub $field: $ty,)*
        }

        /// Every limit key with min, max and default, in catalog order.
        #[cfg(test)]
        pub(crate) const LIMIT_BOUNDS: &[LimitBound] = &[
            $(LimitBound { key: $key, min: $min, max: $max, default: $default },)*
        ];

        impl Default for Limits {
            fn default() -> Self {
                Limits {
                    $($field: <$ty as FromLimit>::from_limit($default)
                        .expect("invariant: every default fits its field type"),)*
                }
            }
        }

        pub(super) fn limits_from_raw(raw: &RawConfig) -> Result<Limits, ConfigError> {
            Ok(Limits {
                $($field: limit::<$ty>($key, raw.$field, $min, $max, $default)?,)*
            })
        }
    };
}

limits! {
    max_concurrent_mailboxes: usize = "maxConcurrentMailboxes", 1, 8, 3;
    max_mailboxes_per_search: usize = "maxMailboxesPerSearch", 1, 32, 8;
    max_results_per_mailbox: usize = "maxResultsPerMailbox", 1, 100, 20;
    max_body_chars: usize = "maxBodyChars", 1, 12_000, 12_000;
    max_attachment_input_bytes: u64 = "maxAttachmentInputBytes", KIB, 50 * MIB, 15 * MIB;
    max_extracted_chars: usize = "maxExtractedChars", 1_000, 1_000_000, 200_000;
    max_raw_attachment_bytes: u64 = "maxRawAttachmentBytes", KIB, MIB, 256 * KIB;
    max_concurrent_extractions: usize = "maxConcurrentExtractions", 1, 8, 2;
    max_batch_size: usize = "maxBatchSize", 1, 100, 25;
    max_download_batch_bytes: u64 = "maxDownloadBatchBytes", KIB, 500 * MIB, 50 * MIB;
    max_download_folder_bytes: u64 = "maxDownloadFolderBytes", KIB, 1024 * GIB, GIB;
    max_handoff_attachment_bytes: u64 = "maxHandoffAttachmentBytes", KIB, 100 * MIB, 25 * MIB;
    max_handoff_store_bytes: u64 = "maxHandoffStoreBytes", KIB, 5 * GIB, 500 * MIB;
    max_handoff_store_entries: usize = "maxHandoffStoreEntries", 1, 10_000, 1_000;
    max_queries_per_batch: usize = "maxQueriesPerBatch", 1, 25, 10;
    max_batch_result_messages: usize = "maxBatchResultMessages", 1, 5_000, 500;
    max_batch_result_bytes: u64 = "maxBatchResultBytes", KIB, 10 * MIB, 2 * MIB;
    max_batch_context_chars: usize = "maxBatchContextChars", 1_000, 5_000_000, 500_000;
    max_batch_attachments: usize = "maxBatchAttachments", 1, 10_000, 1_000;
    max_zip_entries: usize = "maxZipEntries", 1, 1_000, 200;
    max_zip_uncompressed_bytes: u64 = "maxZipUncompressedBytes", KIB, 200 * MIB, 50 * MIB;
    max_container_entries: usize = "maxContainerEntries", 1, 20_000, 1_000;
    max_container_uncompressed_bytes: u64 =
        "maxContainerUncompressedBytes", KIB, 500 * MIB, 100 * MIB;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::fixtures::{FINANCE, parse, refusal, with_mailboxes};

    #[test]
    fn every_limit_is_bounded_on_both_sides() {
        assert_eq!(LIMIT_BOUNDS.len(), 23);
        for bound in LIMIT_BOUNDS {
            for value in [bound.min - 1, bound.max + 1] {
                let json = with_mailboxes(FINANCE, &format!(r#", "{}": {value}"#, bound.key));
                let (path, rule) = refusal(&json);
                assert_eq!(path, bound.key, "{} = {value}", bound.key);
                assert_eq!(
                    rule,
                    format!("must be between {} and {}", bound.min, bound.max)
                );
            }
            for value in [bound.min, bound.max, bound.default] {
                let mut extra = format!(r#", "{}": {value}"#, bound.key);
                if bound.key == "maxHandoffStoreBytes" {
                    extra.push_str(r#", "maxHandoffAttachmentBytes": 1024"#);
                }
                if bound.key == "maxDownloadFolderBytes" {
                    extra.push_str(r#", "maxDownloadBatchBytes": 1024"#);
                }
                let json = with_mailboxes(FINANCE, &extra);
                assert!(
                    parse(&json).is_ok(),
                    "{} = {value} must be accepted",
                    bound.key
                );
            }
        }
    }

    /// The published limits (docs/operator.md "plugin.json", spec catalog.md), written out as
    /// literals so the `limits!` table is checked against the documents rather than against
    /// itself: (key, default, min, max).
    const PUBLISHED_LIMITS: [(&str, u64, u64, u64); 23] = [
        ("maxConcurrentMailboxes", 3, 1, 8),
        ("maxMailboxesPerSearch", 8, 1, 32),
        ("maxResultsPerMailbox", 20, 1, 100),
        ("maxBodyChars", 12_000, 1, 12_000),
        ("maxAttachmentInputBytes", 15_728_640, 1_024, 52_428_800),
        ("maxExtractedChars", 200_000, 1_000, 1_000_000),
        ("maxRawAttachmentBytes", 262_144, 1_024, 1_048_576),
        ("maxConcurrentExtractions", 2, 1, 8),
        ("maxBatchSize", 25, 1, 100),
        ("maxDownloadBatchBytes", 52_428_800, 1_024, 524_288_000),
        (
            "maxDownloadFolderBytes",
            1_073_741_824,
            1_024,
            1_099_511_627_776,
        ),
        ("maxHandoffAttachmentBytes", 26_214_400, 1_024, 104_857_600),
        ("maxHandoffStoreBytes", 524_288_000, 1_024, 5_368_709_120),
        ("maxHandoffStoreEntries", 1_000, 1, 10_000),
        ("maxQueriesPerBatch", 10, 1, 25),
        ("maxBatchResultMessages", 500, 1, 5_000),
        ("maxBatchResultBytes", 2_097_152, 1_024, 10_485_760),
        ("maxBatchContextChars", 500_000, 1_000, 5_000_000),
        ("maxBatchAttachments", 1_000, 1, 10_000),
        ("maxZipEntries", 200, 1, 1_000),
        ("maxZipUncompressedBytes", 52_428_800, 1_024, 209_715_200),
        ("maxContainerEntries", 1_000, 1, 20_000),
        (
            "maxContainerUncompressedBytes",
            104_857_600,
            1_024,
            524_288_000,
        ),
    ];

    #[test]
    fn limit_table_matches_the_struct_and_the_defaults() {
        let table: Vec<(&str, u64, u64, u64)> = LIMIT_BOUNDS
            .iter()
            .map(|b| (b.key, b.default, b.min, b.max))
            .collect();
        assert_eq!(table, PUBLISHED_LIMITS);
        // The struct's defaults, as serialized (the names a config file uses), are the same.
        let defaults = serde_json::to_value(Limits::default()).expect("serializes");
        let defaults: Vec<(&str, u64)> = defaults
            .as_object()
            .expect("object")
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_u64().expect("a number")))
            .collect();
        let mut published: Vec<(&str, u64)> = PUBLISHED_LIMITS
            .iter()
            .map(|(k, d, _, _)| (*k, *d))
            .collect();
        published.sort();
        let mut defaults = defaults;
        defaults.sort();
        assert_eq!(defaults, published);
        // Each bound is enforced by the parser: min and max accepted, one beyond refused.
        for (key, _, min, max) in PUBLISHED_LIMITS {
            // The store and folder bounds must also hold one item / one batch.
            let mut pair = String::new();
            if key == "maxHandoffStoreBytes" {
                pair.push_str(r#", "maxHandoffAttachmentBytes": 1024"#);
            }
            if key == "maxDownloadFolderBytes" {
                pair.push_str(r#", "maxDownloadBatchBytes": 1024"#);
            }
            for (value, ok) in [(min, true), (max, true), (min - 1, false), (max + 1, false)] {
                let json = with_mailboxes(FINANCE, &format!(r#", "{key}": {value}{pair}"#));
                assert_eq!(parse(&json).is_ok(), ok, "{key} = {value}");
            }
        }
    }
}
