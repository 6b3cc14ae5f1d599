//! DOCX text (issue 13). Stub until the extraction helper lands.

use super::{Caps, ExtractError, Extracted, Format};

/// The text of a DOCX document, at most `caps.max_chars` Unicode scalar values.
pub(crate) fn extract(_bytes: &[u8], _caps: &Caps) -> Result<Extracted, ExtractError> {
    Err(ExtractError::Unsupported(Format::Docx))
}
