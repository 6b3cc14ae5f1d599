//! ZIP archives attached to mail: listing and extraction of one entry (issue 13). Stub until the
//! extraction helper lands.

use super::{Caps, ExtractError, ZipError};

/// One listed entry (files only).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ZipEntry {
    pub(crate) name: String,
    pub(crate) uncompressed_size: u64,
    pub(crate) encrypted: bool,
}

/// An archive's addressable file entries, and how many entries are not addressable.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ZipListing {
    pub(crate) entries: Vec<ZipEntry>,
    pub(crate) hidden_entries: usize,
}

/// Lists the archive's file entries.
pub(crate) fn list(_bytes: &[u8], _caps: &Caps) -> Result<ZipListing, ExtractError> {
    Err(ExtractError::Zip(ZipError::Invalid))
}

/// The bytes of the entry named exactly `name`, at most `cap` of them (counted while inflating).
pub(crate) fn read_entry(
    _bytes: &[u8],
    _name: &str,
    _password: Option<&str>,
    _cap: u64,
    _caps: &Caps,
) -> Result<Vec<u8>, ExtractError> {
    Err(ExtractError::Zip(ZipError::Invalid))
}
