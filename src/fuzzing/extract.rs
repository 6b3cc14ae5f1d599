//! Fuzz entry points of attachment extraction: PDF, ZIP and OOXML bytes through the parsers the
//! worker runs, each with its oracle. Compiled only under `cfg(fuzzing)`.

use std::sync::Once;

use super::KIB;

// ----------------------------------------------------------------------------------------------
// extract_pdf
// ----------------------------------------------------------------------------------------------

/// The budgets the target cycles through (by input length): none, a few words, a paragraph, the
/// default-sized answer.
const PDF_BUDGETS: [usize; 4] = [0, 7, 100, 10_000];
/// The second, larger budget an accepted input is read again with.
const PDF_LARGE_BUDGET: usize = 100_000;

/// Bytes → `extract::pdf::extract` (issue 13), as the worker calls it.
///
/// Oracles, beyond "no uncaught panic, no stack overflow, no hang": the answer is `Ok` or a
/// typed error (`Failed`, `Encrypted`; never `Unsupported` or a ZIP code); `Ok` text has at most
/// `max_chars` scalar values, says extractor `pdf`, and is normalised (no leading or trailing
/// whitespace, no control character but `\n`, no doubled space, no three newlines in a row);
/// read again with a larger budget it is a prefix of the larger answer (equal when it was not
/// truncated), so the budget only ever cuts.
pub fn extract_pdf(data: &[u8]) {
    use crate::extract::{Caps, ExtractError, pdf};
    silence_panics();
    let max_chars = PDF_BUDGETS[data.len() % PDF_BUDGETS.len()];
    let caps = |max_chars| Caps {
        max_chars,
        ..Caps::default()
    };
    let small = match pdf::extract(data, &caps(max_chars)) {
        Ok(small) => small,
        Err(ExtractError::Failed | ExtractError::Encrypted) => return,
        Err(other) => panic!("oracle: untyped PDF error {other:?}"),
    };
    let text = &small.text;
    assert!(
        text.chars().count() <= max_chars,
        "oracle: {} chars over a budget of {max_chars}",
        text.chars().count()
    );
    assert_eq!(
        (small.extractor, small.unread_parts),
        ("pdf", 0),
        "oracle: extractor"
    );
    assert_eq!(text.trim(), text, "oracle: untrimmed text");
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n')
            && !text.contains("  ")
            && !text.contains("\n\n\n"),
        "oracle: unnormalised text {text:?}"
    );
    // The larger read may fail where the small one stopped early (a later page pdf-extract
    // panics on): only two successes are compared.
    if let Ok(large) = pdf::extract(data, &caps(PDF_LARGE_BUDGET)) {
        if small.truncated {
            assert!(
                large.text.starts_with(text.as_str()),
                "oracle: {text:?} is not a prefix of the larger answer"
            );
        } else {
            assert_eq!(
                (&large.text, large.truncated),
                (text, false),
                "oracle: the budget changed an untruncated answer"
            );
        }
    }
}

/// libFuzzer's panic hook aborts before any unwinding, which would turn every panic
/// `extract::pdf` catches (pdf-extract and lopdf panic on malformed input by design; production
/// reports them as `EXTRACTION_FAILED`) into a crash. This target's process gets, once, a hook
/// that does nothing, so caught panics unwind to that `catch_unwind` as in production. A panic
/// that escapes it still reaches libfuzzer-sys's own `catch_unwind` around the target body,
/// which aborts: that is a finding (without the panic message, which a unit test with the
/// saved input shows).
fn silence_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::panic::set_hook(Box::new(|_| {})));
}

// ----------------------------------------------------------------------------------------------
// extract_zip
// ----------------------------------------------------------------------------------------------

/// Small caps, so a fuzzed archive trips them often and every run stays fast.
fn extraction_caps() -> crate::extract::Caps {
    crate::extract::Caps {
        max_chars: 512,
        max_zip_entries: 64,
        max_zip_uncompressed_bytes: 256 * KIB,
        max_container_entries: 64,
        max_container_uncompressed_bytes: 256 * KIB,
    }
}

/// The per-entry cap of `extract_zip`'s reads.
const ZIP_ENTRY_CAP: u64 = 64 * KIB;

/// Bytes → an attached ZIP archive (issue 13): `extract::zip::list`, then `read_entry` of the
/// first listed entry without and with a password, and of a traversal name.
///
/// Oracles, beyond "no panic": every failure is a ZIP code; a listing holds at most
/// `max_zip_entries` entries (listed plus hidden) and only names `is_addressable_entry`
/// accepts; a listed entry is never `ZIP_ENTRY_NOT_FOUND`; a read returns at most the cap and
/// at most the entry's declared size; a non-addressable name is never found.
pub fn extract_zip(data: &[u8]) {
    use crate::extract::{ExtractError, ZipError, is_addressable_entry, zip};
    let caps = extraction_caps();
    let listing = match zip::list(data, &caps) {
        Ok(listing) => listing,
        Err(error) => {
            assert!(
                matches!(error, ExtractError::Zip(_)),
                "oracle: list failed with {error:?}"
            );
            return;
        }
    };
    assert!(
        listing.entries.len() + listing.hidden_entries <= caps.max_zip_entries,
        "oracle: {} listed + {} hidden entries over the cap",
        listing.entries.len(),
        listing.hidden_entries
    );
    for entry in &listing.entries {
        assert!(
            is_addressable_entry(&entry.name),
            "oracle: listed {:?}",
            entry.name
        );
    }
    if let Some(first) = listing.entries.first() {
        for password in [None, Some("fuzz-password")] {
            match zip::read_entry(data, &first.name, password, ZIP_ENTRY_CAP, &caps) {
                Ok(bytes) => {
                    let len = bytes.len() as u64;
                    assert!(len <= ZIP_ENTRY_CAP, "oracle: {len} bytes over the cap");
                    assert!(
                        len <= first.uncompressed_size,
                        "oracle: {len} bytes, {} declared",
                        first.uncompressed_size
                    );
                }
                Err(ExtractError::Zip(ZipError::EntryNotFound)) => {
                    panic!("oracle: listed entry {:?} not found", first.name)
                }
                Err(ExtractError::Zip(_)) => {}
                Err(error) => panic!("oracle: read failed with {error:?}"),
            }
        }
    }
    for name in ["../x", "/x", "a\\b"] {
        assert_eq!(
            zip::read_entry(data, name, None, ZIP_ENTRY_CAP, &caps),
            Err(ExtractError::Zip(ZipError::EntryNotFound)),
            "oracle: {name:?} was addressed"
        );
    }
}

// ----------------------------------------------------------------------------------------------
// extract_ooxml
// ----------------------------------------------------------------------------------------------

/// Bytes → `extract::docx::extract` and `extract::xlsx::extract` with small caps (issue 13).
///
/// Oracles, beyond "no panic": the text has at most `max_chars` Unicode scalar values and the
/// right extractor name; a ZIP code from a document is only a tripped container cap
/// (`ZIP_TOO_LARGE`, `ZIP_TOO_MANY_ENTRIES`), everything else being `EXTRACTION_FAILED` or
/// `ENCRYPTED`.
pub fn extract_ooxml(data: &[u8]) {
    use crate::extract::{ExtractError, Extracted, ZipError, docx, xlsx};
    let caps = extraction_caps();
    let results: [(&str, Result<Extracted, ExtractError>); 2] = [
        ("docx", docx::extract(data, &caps)),
        ("xlsx", xlsx::extract(data, &caps)),
    ];
    for (extractor, result) in results {
        match result {
            Ok(extracted) => {
                let chars = extracted.text.chars().count();
                assert!(
                    chars <= caps.max_chars,
                    "oracle: {extractor} gave {chars} chars"
                );
                assert_eq!(extracted.extractor, extractor, "oracle: extractor name");
            }
            Err(ExtractError::Zip(ZipError::TooLarge | ZipError::TooManyEntries))
            | Err(ExtractError::Failed | ExtractError::Encrypted) => {}
            Err(error) => panic!("oracle: {extractor} failed with {error:?}"),
        }
    }
}
