//! What a message's BODYSTRUCTURE says about its attachments (stub: lands with issue 12).

use imap_proto::BodyStructure;

use crate::backends::AttachmentMeta;

/// A part's Content-Transfer-Encoding, which decides how its fetched bytes are decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TransferEncoding {
    Identity,
    Base64,
    QuotedPrintable,
}

/// One attachment of a message: its metadata (`meta.id` is the IMAP section, e.g. `2` or
/// `1.2`) and how its section's bytes decode.
#[derive(Clone, Debug)]
pub(crate) struct PartInfo {
    pub(crate) meta: AttachmentMeta,
    pub(crate) encoding: TransferEncoding,
}

/// The attachments of a message and whether a bound stopped the walk.
#[derive(Clone, Debug, Default)]
pub(crate) struct Attachments {
    pub(crate) parts: Vec<PartInfo>,
    pub(crate) cut: bool,
}

/// The attachments of a message, in part order.
pub(crate) fn attachments(structure: &BodyStructure<'_>) -> Attachments {
    let _ = structure;
    Attachments::default()
}

/// The decoded bytes of a fetched section; `None` when the encoding is broken.
pub(crate) fn decode_part(bytes: &[u8], encoding: TransferEncoding) -> Option<Vec<u8>> {
    let _ = encoding;
    Some(bytes.to_vec())
}
