//! ZIP archives attached to mail, and the ZIP containers of DOCX/XLSX (issue 13): listing an
//! archive ([`list`]), reading one entry with a hard byte cap ([`read_entry`]), and proving a
//! container small enough to hand to a document parser ([`preflight_container`]). The bytes are
//! a stranger's, so every step is bounded before the `zip` crate does work proportional to what
//! the archive claims: a cheap end-of-central-directory preflight caps the record count before
//! the crate parses the directory, and entry bytes are counted while they are inflated (declared
//! sizes are only a fast path; they can lie). Errors are the typed [`ZipError`] codes; no error,
//! log or `Debug` output carries the caller's password. Runs inside the extraction worker.

use std::io::{Cursor, Read};

use zip::CompressionMethod;
use zip::read::{ZipArchive, ZipReadOptions};
use zip::result::ZipError as CrateError;

use super::{Caps, ExtractError, ZipError, is_addressable_entry};

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

/// Largest central-directory record the preflight budgets for (46 fixed bytes plus name, extra
/// field and comment; reference §7.2). The directory may be at most this many bytes per allowed
/// record, so a directory cannot be huge while declaring few records.
const MAX_RECORD_BYTES: u64 = 4096;

/// Bytes inflated per read: large enough to be quick, small enough that overshooting the cap by
/// one chunk costs nothing.
const CHUNK: usize = 64 * 1024;

/// End of central directory record: signature and fixed length (the comment follows).
const EOCD_SIG: &[u8; 4] = b"PK\x05\x06";
const EOCD_LEN: usize = 22;
/// ZIP64 end of central directory locator (just before the EOCD) and record.
const ZIP64_LOCATOR_SIG: &[u8; 4] = b"PK\x06\x07";
const ZIP64_LOCATOR_LEN: usize = 20;
const ZIP64_EOCD_SIG: &[u8; 4] = b"PK\x06\x06";
const ZIP64_EOCD_LEN: usize = 56;
/// A local file header: the first bytes of an archive inside an archive.
const LOCAL_HEADER_SIG: &[u8; 4] = b"PK\x03\x04";

/// The `zip` crate refuses to inflate more than an entry's declared size with an `InvalidData`
/// error of this text (zip 9, `Crc32Reader::count`). Since the declared size is checked against
/// the cap first, hitting this means the headers lied about a bigger entry: `TooLarge`. The
/// lying-bomb tests fail if a new zip release changes the text.
const DECLARED_SIZE_EXCEEDED: &str = "larger than its declared uncompressed size";

/// Lists the archive's file entries.
///
/// Directories count toward `caps.max_zip_entries` but are not listed; names that are not UTF-8
/// or not [addressable](is_addressable_entry) are counted in `hidden_entries`. A declared total
/// over `caps.max_zip_uncompressed_bytes` is `TooLarge` (a fast path: [`read_entry`] counts the
/// real bytes).
pub(crate) fn list(bytes: &[u8], caps: &Caps) -> Result<ZipListing, ExtractError> {
    let archive = open(bytes, caps.max_zip_entries)?;
    let mut declared: u64 = 0;
    let mut entries = Vec::new();
    let mut hidden_entries = 0;
    for index in 0..archive.len() {
        let entry = archive.by_index_data(index).map_err(|_| invalid())?;
        declared = declared.saturating_add(entry.size());
        if entry.is_dir() {
            continue;
        }
        match std::str::from_utf8(entry.name_raw()) {
            Ok(name) if is_addressable_entry(name) => entries.push(ZipEntry {
                name: name.to_owned(),
                uncompressed_size: entry.size(),
                encrypted: entry.encrypted(),
            }),
            _ => hidden_entries += 1,
        }
    }
    if declared > caps.max_zip_uncompressed_bytes {
        return Err(ExtractError::Zip(ZipError::TooLarge));
    }
    Ok(ZipListing {
        entries,
        hidden_entries,
    })
}

/// The bytes of the entry named exactly `name`, at most `cap` of them (counted while inflating).
///
/// Only a listed name can be read: a name that is not addressable (`../x`, `/abs`, `a\b`) or
/// that no file entry carries byte for byte is `EntryNotFound`. An entry named `*.zip` or whose
/// bytes start with a local file header is `Nested`. The password is used only for an encrypted
/// entry; a wrong one (the ZipCrypto check byte, the AES verifier, or a stream or CRC failure
/// after decryption) is `PasswordIncorrect`.
pub(crate) fn read_entry(
    bytes: &[u8],
    name: &str,
    password: Option<&str>,
    cap: u64,
    caps: &Caps,
) -> Result<Vec<u8>, ExtractError> {
    if !is_addressable_entry(name) {
        return Err(ExtractError::Zip(ZipError::EntryNotFound));
    }
    let mut archive = open(bytes, caps.max_zip_entries)?;
    // By raw bytes, not `index_for_name`: that one falls back to a CP437 reading of the names,
    // and the caller may only address what `list` showed.
    let index = (0..archive.len())
        .find(|&index| {
            archive
                .by_index_data(index)
                .is_ok_and(|entry| entry.name_raw() == name.as_bytes() && !entry.is_dir())
        })
        .ok_or(ExtractError::Zip(ZipError::EntryNotFound))?;
    let entry = archive.by_index_data(index).map_err(|_| invalid())?;
    if has_zip_extension(name) {
        return Err(ExtractError::Zip(ZipError::Nested));
    }
    if entry.size() > cap {
        return Err(ExtractError::Zip(ZipError::TooLarge));
    }
    if !is_supported_method(entry.compression()) {
        return Err(ExtractError::Zip(ZipError::Unsupported));
    }
    let encrypted = entry.encrypted();
    let password = match (encrypted, password) {
        (false, _) => None,
        (true, None) => return Err(ExtractError::Zip(ZipError::Encrypted)),
        (true, Some(password)) => Some(password.as_bytes()),
    };
    let file = archive
        .by_index_with_options(index, ZipReadOptions::new().password(password))
        .map_err(|error| ExtractError::Zip(open_error(&error, encrypted)))?;
    let out = read_capped(file, cap, encrypted)?;
    if out.starts_with(LOCAL_HEADER_SIG) {
        return Err(ExtractError::Zip(ZipError::Nested));
    }
    Ok(out)
}

/// Proves a DOCX/XLSX container safe to hand to a document parser: at most
/// `caps.max_container_entries` records (`TooManyEntries`) and at most
/// `caps.max_container_uncompressed_bytes` real bytes when every entry is inflated (`TooLarge`,
/// counted while streaming, nothing kept). An encrypted entry is [`ExtractError::Encrypted`];
/// an unreadable container, an unsupported method or a stream error is
/// [`ExtractError::Failed`] (a malformed document, not an archive the caller addressed).
pub(crate) fn preflight_container(bytes: &[u8], caps: &Caps) -> Result<(), ExtractError> {
    let as_document = |error: ExtractError| match error {
        ExtractError::Zip(ZipError::TooManyEntries | ZipError::TooLarge) => error,
        ExtractError::Encrypted => error,
        _ => ExtractError::Failed,
    };
    let cap = caps.max_container_uncompressed_bytes;
    let mut archive = open(bytes, caps.max_container_entries).map_err(as_document)?;
    let mut declared: u64 = 0;
    for index in 0..archive.len() {
        let entry = archive
            .by_index_data(index)
            .map_err(|_| ExtractError::Failed)?;
        if entry.encrypted() {
            return Err(ExtractError::Encrypted);
        }
        if !is_supported_method(entry.compression()) {
            return Err(ExtractError::Failed);
        }
        declared = declared.saturating_add(entry.size());
    }
    if declared > cap {
        return Err(ExtractError::Zip(ZipError::TooLarge));
    }
    let mut total: u64 = 0;
    let mut buf = vec![0u8; CHUNK];
    for index in 0..archive.len() {
        let mut file = archive
            .by_index(index)
            .map_err(|error| as_document(ExtractError::Zip(open_error(&error, false))))?;
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(error) => {
                    return Err(as_document(ExtractError::Zip(read_error(&error, false))));
                }
            };
            total = total.saturating_add(n as u64);
            if total > cap {
                return Err(ExtractError::Zip(ZipError::TooLarge));
            }
        }
    }
    Ok(())
}

/// Preflights the end of central directory, then lets the `zip` crate parse the archive.
fn open(bytes: &[u8], max_records: usize) -> Result<ZipArchive<Cursor<&[u8]>>, ExtractError> {
    preflight_directory(bytes, max_records).map_err(ExtractError::Zip)?;
    let archive = ZipArchive::new(Cursor::new(bytes)).map_err(|_| invalid())?;
    // Two records with one name would let the listing show one entry and the reader open
    // another; such an archive is refused rather than guessed at.
    if archive.has_duplicate_names() {
        return Err(invalid());
    }
    // The crate's own count, in case it found a different directory than the preflight did.
    if archive.len() > max_records {
        return Err(ExtractError::Zip(ZipError::TooManyEntries));
    }
    Ok(archive)
}

/// Reads the end of central directory record (and its ZIP64 twin when the record defers to
/// it) without parsing the directory: the declared record count must be at most `max_records`
/// and the directory at most `max_records * MAX_RECORD_BYTES` long. The record must be the one
/// whose comment ends exactly at the end of the bytes; multi-disk archives are `Invalid`.
fn preflight_directory(bytes: &[u8], max_records: usize) -> Result<(), ZipError> {
    let eocd = find_eocd(bytes).ok_or(ZipError::Invalid)?;
    let field16 = |at: usize| u16_at(bytes, eocd + at).ok_or(ZipError::Invalid);
    let field32 = |at: usize| u32_at(bytes, eocd + at).ok_or(ZipError::Invalid);
    let (this_disk, directory_disk) = (field16(4)?, field16(6)?);
    let (on_disk, records) = (field16(8)?, field16(10)?);
    let directory_size = field32(12)?;
    let directory_offset = field32(16)?;
    let (records, directory_size) =
        if records == u16::MAX || directory_size == u32::MAX || directory_offset == u32::MAX {
            zip64_directory(bytes, eocd)?
        } else {
            if this_disk != 0 || directory_disk != 0 || on_disk != records {
                return Err(ZipError::Invalid);
            }
            (u64::from(records), u64::from(directory_size))
        };
    let max = u64::try_from(max_records).unwrap_or(u64::MAX);
    if records > max {
        return Err(ZipError::TooManyEntries);
    }
    if directory_size > max.saturating_mul(MAX_RECORD_BYTES) {
        return Err(ZipError::TooLarge);
    }
    Ok(())
}

/// The record count and directory size of a ZIP64 archive, from the locator just before the
/// end of central directory record and the ZIP64 record it points at.
fn zip64_directory(bytes: &[u8], eocd: usize) -> Result<(u64, u64), ZipError> {
    let locator = eocd
        .checked_sub(ZIP64_LOCATOR_LEN)
        .ok_or(ZipError::Invalid)?;
    if bytes.get(locator..locator + 4) != Some(ZIP64_LOCATOR_SIG.as_slice()) {
        return Err(ZipError::Invalid);
    }
    let disk = u32_at(bytes, locator + 4).ok_or(ZipError::Invalid)?;
    let disks = u32_at(bytes, locator + 16).ok_or(ZipError::Invalid)?;
    if disk != 0 || disks > 1 {
        return Err(ZipError::Invalid);
    }
    let record = u64_at(bytes, locator + 8)
        .and_then(|offset| usize::try_from(offset).ok())
        .ok_or(ZipError::Invalid)?;
    let end = record
        .checked_add(ZIP64_EOCD_LEN)
        .ok_or(ZipError::Invalid)?;
    if end > locator || bytes.get(record..record + 4) != Some(ZIP64_EOCD_SIG.as_slice()) {
        return Err(ZipError::Invalid);
    }
    let field = |at: usize| u64_at(bytes, record + at).ok_or(ZipError::Invalid);
    let (on_disk, records, size) = (field(24)?, field(32)?, field(40)?);
    if on_disk != records {
        return Err(ZipError::Invalid);
    }
    Ok((records, size))
}

/// Where the end of central directory record starts: the last signature in the final
/// 22 + 65,535 bytes whose comment ends exactly at the end of the bytes.
fn find_eocd(bytes: &[u8]) -> Option<usize> {
    let last = bytes.len().checked_sub(EOCD_LEN)?;
    let first = last.saturating_sub(usize::from(u16::MAX));
    (first..=last).rev().find(|&at| {
        bytes.get(at..at + 4) == Some(EOCD_SIG.as_slice())
            && u16_at(bytes, at + 20)
                .is_some_and(|comment| at + EOCD_LEN + usize::from(comment) == bytes.len())
    })
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    let field = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes(field.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let field = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(field.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    let field = bytes.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(field.try_into().ok()?))
}

/// Inflates `file` into memory, refusing (`TooLarge`) as soon as more than `cap` bytes came out:
/// at most one chunk past the cap is ever held.
fn read_capped(mut file: impl Read, cap: u64, encrypted: bool) -> Result<Vec<u8>, ExtractError> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(error) => return Err(ExtractError::Zip(read_error(&error, encrypted))),
        };
        let chunk = buf.get(..n).ok_or(invalid())?;
        if (out.len() as u64).saturating_add(n as u64) > cap {
            return Err(ExtractError::Zip(ZipError::TooLarge));
        }
        out.extend_from_slice(chunk);
    }
}

/// The code for a failure to open an entry's stream.
fn open_error(error: &CrateError, encrypted: bool) -> ZipError {
    match error {
        CrateError::InvalidPassword if encrypted => ZipError::PasswordIncorrect,
        CrateError::UnsupportedArchive(CrateError::PASSWORD_REQUIRED) => ZipError::Encrypted,
        CrateError::UnsupportedArchive(_) | CrateError::CompressionMethodNotSupported(_) => {
            ZipError::Unsupported
        }
        _ => ZipError::Invalid,
    }
}

/// The code for a failure while inflating: an entry bigger than it declared is `TooLarge`; on an
/// encrypted entry any other failure means the password decrypted garbage (ZipCrypto accepts 1
/// wrong password in 256, AES authenticates only at the end), so `PasswordIncorrect`.
fn read_error(error: &std::io::Error, encrypted: bool) -> ZipError {
    if error.kind() == std::io::ErrorKind::InvalidData
        && error.to_string().contains(DECLARED_SIZE_EXCEEDED)
    {
        ZipError::TooLarge
    } else if encrypted {
        ZipError::PasswordIncorrect
    } else {
        ZipError::Invalid
    }
}

/// Stored and deflated: the methods the `zip` build here inflates (bzip2, LZMA, zstd… are off).
fn is_supported_method(method: CompressionMethod) -> bool {
    matches!(
        method,
        CompressionMethod::Stored | CompressionMethod::Deflated
    )
}

fn has_zip_extension(name: &str) -> bool {
    name.rsplit_once('.')
        .is_some_and(|(_, ext)| ext.eq_ignore_ascii_case("zip"))
}

fn invalid() -> ExtractError {
    ExtractError::Zip(ZipError::Invalid)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write;
    use std::time::{Duration, Instant};

    use zip::unstable::write::FileOptionsExt;
    use zip::write::SimpleFileOptions;
    use zip::{AesMode, ZipWriter};

    use super::*;

    const CLAIMS_ZIP: &[u8] = include_bytes!("../demo/fixtures/claims-bundle-2026-Q2.zip");
    const SECURE_ZIP: &[u8] = include_bytes!("../demo/fixtures/secure-statements-2026.zip");

    /// How an entry is written.
    #[derive(Clone, Copy)]
    pub(crate) enum Put<'a> {
        Stored(&'a [u8]),
        Deflated(&'a [u8]),
        ZipCrypto(&'a [u8], &'a str),
        Aes(&'a [u8], &'a str),
        Dir,
    }

    /// An archive made by the `zip` crate's writer.
    pub(crate) fn build(entries: &[(&str, Put<'_>)]) -> Vec<u8> {
        let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
        let stored = SimpleFileOptions::default().compression_method(CompressionMethod::Stored);
        let deflated = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
        for (name, put) in entries {
            let data = match *put {
                Put::Dir => {
                    writer.add_directory(*name, stored).expect("dir");
                    continue;
                }
                Put::Stored(data) => {
                    writer.start_file(*name, stored).expect("start");
                    data
                }
                Put::Deflated(data) => {
                    writer.start_file(*name, deflated).expect("start");
                    data
                }
                Put::ZipCrypto(data, password) => {
                    let options = deflated
                        .with_deprecated_encryption(password.as_bytes())
                        .expect("zipcrypto");
                    writer.start_file(*name, options).expect("start");
                    data
                }
                Put::Aes(data, password) => {
                    let options = deflated.with_aes_encryption(AesMode::Aes256, password);
                    writer.start_file(*name, options).expect("start");
                    data
                }
            };
            writer.write_all(data).expect("write");
        }
        writer.finish().expect("finish").into_inner()
    }

    pub(crate) fn caps() -> Caps {
        Caps {
            max_chars: 10_000,
            max_zip_entries: 200,
            max_zip_uncompressed_bytes: 1024 * 1024,
            max_container_entries: 200,
            max_container_uncompressed_bytes: 1024 * 1024,
        }
    }

    fn zip_err(code: ZipError) -> ExtractError {
        ExtractError::Zip(code)
    }

    fn read(bytes: &[u8], name: &str, password: Option<&str>) -> Result<Vec<u8>, ExtractError> {
        read_entry(bytes, name, password, 1024 * 1024, &caps())
    }

    /// Rewrites every occurrence of `from` (same length as `to`) in the archive bytes.
    pub(crate) fn patch(bytes: &mut [u8], from: &[u8], to: &[u8]) {
        assert_eq!(from.len(), to.len());
        let mut hits = 0;
        for at in 0..=bytes.len() - from.len() {
            if &bytes[at..at + from.len()] == from {
                bytes[at..at + from.len()].copy_from_slice(to);
                hits += 1;
            }
        }
        assert!(hits > 0, "nothing to patch");
    }

    /// Offsets of the local file headers and central directory records.
    fn headers(bytes: &[u8]) -> (Vec<usize>, Vec<usize>) {
        let find = |sig: &[u8; 4]| {
            (0..bytes.len().saturating_sub(3))
                .filter(|&at| &bytes[at..at + 4] == sig)
                .collect::<Vec<_>>()
        };
        (find(b"PK\x03\x04"), find(b"PK\x01\x02"))
    }

    /// Sets the declared uncompressed size of every entry (local header and central record).
    pub(crate) fn lie_about_size(bytes: &mut [u8], size: u32) {
        let (locals, centrals) = headers(bytes);
        for at in locals {
            bytes[at + 22..at + 26].copy_from_slice(&size.to_le_bytes());
        }
        for at in centrals {
            bytes[at + 24..at + 28].copy_from_slice(&size.to_le_bytes());
        }
    }

    /// A deflated entry of `len` zeros: a few kilobytes that inflate to `len` bytes.
    pub(crate) fn bomb(name: &str, len: usize) -> Vec<u8> {
        let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
        let options = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Deflated)
            .large_file(len as u64 >= u64::from(u32::MAX));
        writer.start_file(name, options).expect("start");
        let zeros = vec![0u8; 1024 * 1024];
        let mut left = len;
        while left > 0 {
            let n = left.min(zeros.len());
            writer.write_all(&zeros[..n]).expect("write");
            left -= n;
        }
        writer.finish().expect("finish").into_inner()
    }

    #[test]
    fn lists_files_hides_unaddressable_names_and_flags_encryption() {
        let mut bytes = build(&[
            ("a.txt", Put::Deflated(b"alpha")),
            ("dir/", Put::Dir),
            ("dir/report..v2.txt", Put::Stored(b"beta")),
            ("../x", Put::Stored(b"up")),
            ("/abs", Put::Stored(b"root")),
            ("a\\b", Put::Stored(b"back")),
            ("Zx.txt", Put::Stored(b"not utf-8")),
            ("sec.txt", Put::ZipCrypto(b"secret", "pw")),
            ("aes.txt", Put::Aes(b"secret", "pw")),
        ]);
        patch(&mut bytes, b"Zx.txt", b"\xFFx.txt");
        let listing = list(&bytes, &caps()).expect("list");
        let names: Vec<_> = listing.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a.txt", "dir/report..v2.txt", "sec.txt", "aes.txt"]);
        assert_eq!(
            listing.hidden_entries, 4,
            "../x, /abs, a\\b and the non-UTF-8 name"
        );
        assert_eq!(
            listing.entries[0],
            ZipEntry {
                name: "a.txt".into(),
                uncompressed_size: 5,
                encrypted: false
            }
        );
        assert!(listing.entries[2].encrypted && listing.entries[3].encrypted);
        assert!(
            listing
                .entries
                .iter()
                .all(|e| is_addressable_entry(&e.name))
        );
        // Listed names read; hidden ones (traversal attempts) are not found.
        assert_eq!(read(&bytes, "a.txt", None), Ok(b"alpha".to_vec()));
        assert_eq!(
            read(&bytes, "dir/report..v2.txt", None),
            Ok(b"beta".to_vec())
        );
        for name in [
            "../x", "/abs", "a\\b", "x.txt", "A.TXT", "dir/", "dir", "", "missing",
        ] {
            assert_eq!(
                read(&bytes, name, None),
                Err(zip_err(ZipError::EntryNotFound)),
                "{name:?}"
            );
        }
    }

    #[test]
    fn entry_cap_counts_directories_and_is_checked_before_parsing() {
        let bytes = build(&[
            ("d/", Put::Dir),
            ("d/a", Put::Stored(b"a")),
            ("d/b", Put::Stored(b"b")),
        ]);
        let three = Caps {
            max_zip_entries: 3,
            ..caps()
        };
        assert_eq!(list(&bytes, &three).map(|l| l.entries.len()), Ok(2));
        let two = Caps {
            max_zip_entries: 2,
            ..caps()
        };
        assert_eq!(list(&bytes, &two), Err(zip_err(ZipError::TooManyEntries)));
        assert_eq!(
            read_entry(&bytes, "d/a", None, 10, &two),
            Err(zip_err(ZipError::TooManyEntries))
        );
    }

    #[test]
    fn a_hundred_thousand_entries_are_refused_fast() {
        let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
        let stored = SimpleFileOptions::default().compression_method(CompressionMethod::Stored);
        for i in 0..100_000 {
            writer.start_file(format!("{i}"), stored).expect("start");
        }
        let bytes = writer.finish().expect("finish").into_inner();
        let started = Instant::now();
        assert_eq!(
            list(&bytes, &caps()),
            Err(zip_err(ZipError::TooManyEntries))
        );
        assert_eq!(
            read_entry(&bytes, "1", None, 10, &caps()),
            Err(zip_err(ZipError::TooManyEntries))
        );
        // The preflight reads the (ZIP64) end record only; parsing 100k records takes far longer.
        assert!(
            started.elapsed() < Duration::from_millis(250),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            preflight_directory(&bytes, 200),
            Err(ZipError::TooManyEntries)
        );
        assert_eq!(preflight_directory(&bytes, 100_000), Ok(()));
    }

    #[test]
    fn a_directory_too_big_for_its_record_count_is_refused() {
        let long = "n".repeat(5000);
        let bytes = build(&[(long.as_str(), Put::Stored(b"x"))]);
        assert_eq!(preflight_directory(&bytes, 1), Err(ZipError::TooLarge));
        assert_eq!(preflight_directory(&bytes, 2), Ok(()));
    }

    #[test]
    fn declared_sizes_over_the_cap_are_too_large() {
        let big = vec![b'x'; 3000];
        let bytes = build(&[("a", Put::Deflated(&big)), ("b", Put::Deflated(&big))]);
        let small = Caps {
            max_zip_uncompressed_bytes: 5000,
            ..caps()
        };
        assert_eq!(list(&bytes, &small), Err(zip_err(ZipError::TooLarge)));
        assert_eq!(list(&bytes, &caps()).map(|l| l.entries.len()), Ok(2));
        assert_eq!(
            read_entry(&bytes, "a", None, 2999, &caps()),
            Err(zip_err(ZipError::TooLarge))
        );
        assert_eq!(read_entry(&bytes, "a", None, 3000, &caps()), Ok(big));
    }

    #[test]
    fn a_zip_bomb_is_too_large_without_inflating_it() {
        let bytes = bomb("zeros.bin", 200 * 1024 * 1024);
        assert!(bytes.len() < 1024 * 1024, "{}", bytes.len());
        let started = Instant::now();
        assert_eq!(list(&bytes, &caps()), Err(zip_err(ZipError::TooLarge)));
        assert_eq!(
            read(&bytes, "zeros.bin", None),
            Err(zip_err(ZipError::TooLarge))
        );
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_bomb_that_lies_about_its_size_is_too_large_by_counting() {
        let mut bytes = bomb("zeros.bin", 8 * 1024 * 1024);
        lie_about_size(&mut bytes, 100);
        let listing = list(&bytes, &caps()).expect("the declared sizes look harmless");
        assert_eq!(listing.entries[0].uncompressed_size, 100);
        let started = Instant::now();
        assert_eq!(
            read(&bytes, "zeros.bin", None),
            Err(zip_err(ZipError::TooLarge))
        );
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        // Declared size at the cap, real bytes far over it.
        lie_about_size(&mut bytes, 4096);
        assert_eq!(
            read_entry(&bytes, "zeros.bin", None, 4096, &caps()),
            Err(zip_err(ZipError::TooLarge))
        );
    }

    #[test]
    fn real_bytes_are_counted_whatever_the_reader_says() {
        // Our own count, independent of the zip crate's declared-size guard.
        assert_eq!(
            read_capped(std::io::repeat(0), 1000, false),
            Err(zip_err(ZipError::TooLarge))
        );
        assert_eq!(
            read_capped(&[7u8; 1000][..], 1000, false),
            Ok(vec![7u8; 1000])
        );
    }

    #[test]
    fn nested_archives_are_refused() {
        let inner = build(&[("x.txt", Put::Stored(b"x"))]);
        let bytes = build(&[
            ("inner.zip", Put::Stored(b"not even a zip")),
            ("INNER.ZIP", Put::Stored(b"x")),
            ("data.bin", Put::Deflated(&inner)),
            ("ok.bin", Put::Stored(b"PK\x05\x06 fine")),
        ]);
        for name in ["inner.zip", "INNER.ZIP", "data.bin"] {
            assert_eq!(
                read(&bytes, name, None),
                Err(zip_err(ZipError::Nested)),
                "{name}"
            );
        }
        assert!(read(&bytes, "ok.bin", None).is_ok());
    }

    #[test]
    fn zipcrypto_and_aes_passwords() {
        let bytes = build(&[
            ("zc.txt", Put::ZipCrypto(b"zipcrypto secret", "right")),
            ("aes.txt", Put::Aes(b"aes secret", "right")),
            ("plain.txt", Put::Stored(b"plain")),
        ]);
        assert_eq!(
            read(&bytes, "zc.txt", Some("right")),
            Ok(b"zipcrypto secret".to_vec())
        );
        assert_eq!(
            read(&bytes, "aes.txt", Some("right")),
            Ok(b"aes secret".to_vec())
        );
        for name in ["zc.txt", "aes.txt"] {
            assert_eq!(read(&bytes, name, None), Err(zip_err(ZipError::Encrypted)));
            // ZipCrypto's check byte passes 1 wrong password in 256: the CRC catches those.
            for wrong in ["wrong", "Right", "", "right ", "x1", "x2", "x3", "x4", "x5"] {
                let result = read(&bytes, name, Some(wrong));
                assert_eq!(
                    result,
                    Err(zip_err(ZipError::PasswordIncorrect)),
                    "{name} {wrong}"
                );
                assert!(!format!("{result:?}").contains(wrong) || wrong.is_empty());
            }
        }
        // A password given for an unencrypted entry is ignored.
        assert_eq!(
            read(&bytes, "plain.txt", Some("any")),
            Ok(b"plain".to_vec())
        );
    }

    #[test]
    fn zipcrypto_wrong_passwords_that_pass_the_check_byte_are_still_incorrect() {
        let bytes = build(&[("zc.txt", Put::ZipCrypto(&[b'z'; 2000], "right"))]);
        for i in 0..2000 {
            let wrong = format!("w{i}");
            assert_eq!(
                read(&bytes, "zc.txt", Some(&wrong)),
                Err(zip_err(ZipError::PasswordIncorrect)),
                "{wrong}"
            );
        }
    }

    #[test]
    fn unsupported_methods_are_reported() {
        let mut bytes = build(&[("a.txt", Put::Stored(b"abc"))]);
        let (locals, centrals) = headers(&bytes);
        for at in locals {
            bytes[at + 8..at + 10].copy_from_slice(&12u16.to_le_bytes());
        }
        for at in centrals {
            bytes[at + 10..at + 12].copy_from_slice(&12u16.to_le_bytes());
        }
        assert_eq!(list(&bytes, &caps()).map(|l| l.entries.len()), Ok(1));
        assert_eq!(
            read(&bytes, "a.txt", None),
            Err(zip_err(ZipError::Unsupported))
        );
    }

    #[test]
    fn truncated_and_random_bytes_are_invalid() {
        let bytes = build(&[("a.txt", Put::Deflated(b"alpha beta gamma"))]);
        for cut in [1, 10, 22, bytes.len() / 2, bytes.len() - 1] {
            let short = &bytes[..bytes.len() - cut];
            assert_eq!(
                list(short, &caps()),
                Err(zip_err(ZipError::Invalid)),
                "cut {cut}"
            );
            assert_eq!(read(short, "a.txt", None), Err(zip_err(ZipError::Invalid)));
        }
        // The end record survives but the entry's data is cut short.
        let mut gap = bytes.clone();
        let (locals, _) = headers(&gap);
        gap[locals[0] + 30 + 5] ^= 0xFF;
        assert_eq!(read(&gap, "a.txt", None), Err(zip_err(ZipError::Invalid)));
        let mut state = 0x2545_f491_u32;
        for len in [0, 3, 22, 100, 5000] {
            let noise: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    state as u8
                })
                .collect();
            assert_eq!(list(&noise, &caps()), Err(zip_err(ZipError::Invalid)));
            assert_eq!(read(&noise, "a", None), Err(zip_err(ZipError::Invalid)));
        }
        // An end record with a comment that does not reach the end of the bytes.
        let mut trailing = bytes.clone();
        trailing.extend_from_slice(b"junk");
        assert_eq!(list(&trailing, &caps()), Err(zip_err(ZipError::Invalid)));
    }

    #[test]
    fn container_preflight_counts_real_bytes_across_entries() {
        let part = vec![b'x'; 600];
        let bytes = build(&[
            ("a.xml", Put::Deflated(&part)),
            ("b.xml", Put::Deflated(&part)),
        ]);
        let cap = |bytes: u64, entries: usize| Caps {
            max_container_uncompressed_bytes: bytes,
            max_container_entries: entries,
            ..caps()
        };
        assert_eq!(preflight_container(&bytes, &cap(1200, 2)), Ok(()));
        assert_eq!(
            preflight_container(&bytes, &cap(1199, 2)),
            Err(zip_err(ZipError::TooLarge))
        );
        assert_eq!(
            preflight_container(&bytes, &cap(1200, 1)),
            Err(zip_err(ZipError::TooManyEntries))
        );
        // Lying sizes: declared 10 each, real 600 each.
        let mut lying = bytes.clone();
        lie_about_size(&mut lying, 10);
        assert_eq!(
            preflight_container(&lying, &cap(1199, 2)),
            Err(zip_err(ZipError::TooLarge))
        );
        let mut bomb = bomb("word/document.xml", 8 * 1024 * 1024);
        lie_about_size(&mut bomb, 100);
        assert_eq!(
            preflight_container(&bomb, &cap(1024 * 1024, 10)),
            Err(zip_err(ZipError::TooLarge))
        );
        let encrypted = build(&[("a.xml", Put::ZipCrypto(b"x", "pw"))]);
        assert_eq!(
            preflight_container(&encrypted, &caps()),
            Err(ExtractError::Encrypted)
        );
        assert_eq!(
            preflight_container(b"PK\x03\x04 not a zip", &caps()),
            Err(ExtractError::Failed)
        );
    }

    #[test]
    fn demo_claims_bundle_lists_its_files() {
        let listing = list(CLAIMS_ZIP, &caps()).expect("list");
        let names: Vec<_> = listing.entries.iter().map(|e| e.name.as_str()).collect();
        for expected in [
            "README.txt",
            "claims/claim-summary.txt",
            "claims/claim-lines.csv",
            "claims/report..v2.txt",
            "notes/handover.md",
        ] {
            assert!(names.contains(&expected), "{expected} in {names:?}");
        }
        assert_eq!(listing.hidden_entries, 0);
        for entry in &listing.entries {
            let bytes = read(CLAIMS_ZIP, &entry.name, None).expect("read");
            assert_eq!(bytes.len() as u64, entry.uncompressed_size);
        }
    }

    #[test]
    fn demo_secure_statements_open_with_the_documented_password() {
        let listing = list(SECURE_ZIP, &caps()).expect("list");
        assert!(
            listing
                .entries
                .iter()
                .any(|e| e.name == "secret.txt" && e.encrypted)
        );
        let secret = read(SECURE_ZIP, "secret.txt", Some("demo-zip-2026")).expect("read");
        assert!(secret.starts_with(b"ZIPCRYPTO-DEMO-SECRET-7781"));
        assert_eq!(
            read(SECURE_ZIP, "secret.txt", None),
            Err(zip_err(ZipError::Encrypted))
        );
        assert_eq!(
            read(SECURE_ZIP, "secret.txt", Some("demo-zip-2025")),
            Err(zip_err(ZipError::PasswordIncorrect))
        );
    }
}
