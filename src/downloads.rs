//! The download root and the one way attachment bytes reach the local disk
//! (`download_attachments`, security.md §3).
//!
//! Purpose: [`DownloadRoot`] is a cap-std [`Dir`] opened once at startup from operator config
//! (`MAILGATE_DOWNLOAD_DIR`, default `<state>/downloads`, created 0700), and only when the write
//! gate is open. [`SafeFileName`] reduces a sender-controlled attachment name to one safe file-name
//! component. [`plan`] applies the batch budgets before anything is written.
//!
//! Invariants:
//! - Every file is created relative to the root `Dir` under a [`SafeFileName`] (no separator, no
//!   `..`, no leading dot, no control or bidi character, no reserved device name, at most
//!   [`SafeFileName::MAX_BYTES`] bytes), so a name can neither escape the root nor, being one
//!   component, traverse a symlink planted inside it.
//! - Nothing is ever overwritten: bytes go to an exclusive hidden temp file (`O_CREAT|O_EXCL`,
//!   mode 0600), are fsynced, and are published with `link(2)`, which fails when the final name
//!   exists in any form (file, directory, symlink, dangling symlink); the next free
//!   `name (n).ext` is tried instead. The temp file is removed on every path, so a failure
//!   mid-write leaves no partial file under a visible name.
//! - Returned values carry the file name relative to the root, never a host path.
//!
//! Who may call it: `startup` opens the root; the write tools save through it.

use std::io::{self, Write as _};

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt as _};
use rand::RngExt as _;
use sha2::{Digest as _, Sha256};
use unicode_normalization::UnicodeNormalization as _;

use crate::backends::AttachmentMeta;

/// Used when nothing of the sender's name survives.
const FALLBACK_NAME: &str = "attachment.bin";
/// An extension (with its dot) longer than this is treated as part of the stem.
const MAX_EXTENSION_BYTES: usize = 32;
/// `name (1).ext` … `name (1000).ext` are tried after `name.ext`.
const MAX_COLLISION_SUFFIX: u32 = 1000;

/// DOS device names Windows resolves in any directory, with or without an extension.
const RESERVED: &[&str] = &[
    "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", "COM0", "COM1", "COM2", "COM3", "COM4",
    "COM5", "COM6", "COM7", "COM8", "COM9", "LPT0", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6",
    "LPT7", "LPT8", "LPT9",
];

/// One safe file-name component derived from an untrusted name. The field is private: the only
/// constructors are [`SafeFileName::from_untrusted`] and the numbered variant used on collision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SafeFileName(String);

impl SafeFileName {
    /// Upper bound of the UTF-8 length (the temp name adds 23 bytes and stays under 255).
    pub(crate) const MAX_BYTES: usize = 200;

    /// Reduces `name` to one safe component:
    /// NFKC-normalised (fullwidth `．．／` becomes `../` and is then neutralised); `/`, `\`, their
    /// look-alikes (`∕ ⁄ ⧸ ⧹ ∖`) and the characters Windows refuses (`< > : " | ? *`) become `_`;
    /// control characters become `_` (whitespace, including CR and LF, becomes one space);
    /// invisible format characters (bidi overrides, zero-width, soft hyphen) are dropped; runs of
    /// dots collapse to one, so no `..` survives; leading dots and spaces and trailing dots and
    /// spaces are trimmed; a reserved device name (`CON`, `nul.txt`, `COM1.tar.gz`, any case)
    /// gets a `_` prefix; the result is cut to [`Self::MAX_BYTES`] bytes keeping the extension;
    /// an empty result is `attachment.bin`.
    pub(crate) fn from_untrusted(name: &str) -> SafeFileName {
        // Twice: dropping an invisible character can leave a base letter next to a combining
        // mark, which NFKC then composes; the second pass makes the result a fixed point.
        let once = clean(name.nfkc());
        let out = clean(once.nfkc());
        let trimmed = out.trim_end_matches([' ', '.']).to_owned();
        if trimmed.is_empty() {
            return SafeFileName(FALLBACK_NAME.to_owned());
        }
        let (stem, ext) = split_extension(&trimmed);
        let mut stem = stem.to_owned();
        if is_reserved(&trimmed) {
            stem.insert(0, '_');
        }
        SafeFileName(fit(&stem, ext, Self::MAX_BYTES))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// `stem (n).ext`, still within [`Self::MAX_BYTES`].
    fn numbered(&self, n: u32) -> SafeFileName {
        let (stem, ext) = split_extension(&self.0);
        let suffix = format!(" ({n}){ext}");
        SafeFileName(fit(stem, &suffix, Self::MAX_BYTES))
    }
}

/// The per-character rules of [`SafeFileName::from_untrusted`], with runs of spaces and dots
/// collapsed and leading dots and spaces dropped.
fn clean(chars: impl Iterator<Item = char>) -> String {
    let mut out = String::new();
    let mut last: Option<char> = None;
    for c in chars {
        let mapped = match c {
            '/' | '\\' | '\u{2215}' | '\u{2044}' | '\u{29F8}' | '\u{29F9}' | '\u{2216}' => '_',
            '<' | '>' | ':' | '"' | '|' | '?' | '*' => '_',
            '\u{00AD}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' => continue,
            '\u{2060}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}' => continue,
            c if c.is_whitespace() => ' ',
            c if c.is_control() => '_',
            c => c,
        };
        // Collapse runs of spaces and of dots (`..` never survives, in any position).
        if (mapped == ' ' || mapped == '.') && last == Some(mapped) {
            continue;
        }
        // Leading dots and spaces are dropped as they come.
        if out.is_empty() && (mapped == ' ' || mapped == '.') {
            continue;
        }
        out.push(mapped);
        last = Some(mapped);
    }
    out
}

/// Splits `name.ext` at its last dot when the extension is short and alphanumeric; the stem is
/// never empty.
fn split_extension(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(dot)
            if dot > 0
                && name.len() - dot <= MAX_EXTENSION_BYTES
                && name.len() - dot >= 2
                && name[dot + 1..].chars().all(char::is_alphanumeric) =>
        {
            name.split_at(dot)
        }
        _ => (name, ""),
    }
}

/// Windows treats `CON`, `con.txt` and `Con .tar.gz` alike: the part before the first dot,
/// trailing spaces ignored, case-insensitively.
fn is_reserved(name: &str) -> bool {
    let base = name.split('.').next().unwrap_or("").trim_end_matches(' ');
    RESERVED.iter().any(|r| r.eq_ignore_ascii_case(base))
}

/// `stem + tail` cut to `max` bytes by shortening the stem at a character boundary and trimming
/// the dots and spaces the cut exposes. Nothing is trimmed when nothing is cut, so sanitising
/// stays idempotent (a second pass may see an extension the first one did not). `tail` is at
/// most a few dozen bytes.
fn fit(stem: &str, tail: &str, max: usize) -> String {
    let room = max.saturating_sub(tail.len());
    if stem.len() <= room {
        return format!("{stem}{tail}");
    }
    let mut end = room;
    while !stem.is_char_boundary(end) {
        end -= 1;
    }
    let mut cut = stem[..end].trim_end_matches([' ', '.']);
    if cut.is_empty() {
        cut = "attachment";
    }
    format!("{cut}{tail}")
}

/// What was saved: the final name (relative to the root), the byte count and the SHA-256.
#[derive(Debug)]
pub(crate) struct SavedFile {
    pub(crate) name: SafeFileName,
    pub(crate) size: u64,
    pub(crate) sha256: String,
}

/// Why a save failed. No variant carries a path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SaveError {
    #[error("the file could not be written")]
    Io(#[from] io::Error),
    #[error("every candidate file name is taken")]
    NoFreeName,
}

/// One download call's hold on the folder (see [`DownloadRoot::lease`]): the lock is released
/// when the lease is dropped, after the call's last save.
pub(crate) struct FolderLease {
    _lock: std::fs::File,
    used: u64,
}

impl FolderLease {
    /// Bytes in the folder's regular files when the lease was taken.
    pub(crate) fn used(&self) -> u64 {
        self.used
    }
}

/// The operator's download folder, as a capability.
pub(crate) struct DownloadRoot {
    dir: Dir,
}

impl DownloadRoot {
    /// Wraps the folder startup opened and checked through `path_guard` (only when the write
    /// gate is open).
    pub(crate) fn new(dir: Dir) -> DownloadRoot {
        DownloadRoot { dir }
    }

    /// Takes the folder for one download call and measures it. Blocking: waits for an
    /// exclusive `flock` on the folder's own descriptor, so calls in this process and in other
    /// mailgate processes measure and fill the folder one at a time, then adds up the sizes of
    /// the regular files directly in it (the operator's as well as ours: the bound is on the
    /// folder, and temp files left by a crash count too).
    pub(crate) fn lease(&self) -> io::Result<FolderLease> {
        let lock = crate::dir_fd::open(&self.dir)?;
        lock.lock()?;
        let mut used = 0u64;
        for entry in self.dir.entries()? {
            let entry = entry?;
            // Not followed: a symlink's target is not in the folder.
            match entry.metadata() {
                Ok(meta) if meta.is_file() => used = used.saturating_add(meta.len()),
                Ok(_) => {}
                // Removed since it was listed.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(FolderLease { _lock: lock, used })
    }

    /// Saves `bytes` under `name`, or under the first free `name (n).ext`; never overwrites,
    /// never leaves a partial file (see the module invariants). Blocking: run it on the blocking
    /// pool.
    pub(crate) fn save(&self, name: &SafeFileName, bytes: &[u8]) -> Result<SavedFile, SaveError> {
        let random: [u8; 8] = rand::rng().random();
        let tmp = format!(".{}.{}.tmp", name.as_str(), hex::encode(random));
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true).mode(0o600);
        // A failed exclusive open created nothing, so there is nothing to clean up.
        let mut file = self.dir.open_with(&tmp, &opts)?;
        let written = file.write_all(bytes).and_then(|()| file.sync_all());
        drop(file);
        let published = match written {
            Ok(()) => self.publish(&tmp, name),
            Err(e) => Err(SaveError::Io(e)),
        };
        if let Err(e) = self.dir.remove_file(&tmp) {
            tracing::warn!(kind = ?e.kind(), "a download temp file could not be removed");
        }
        let name = published?;
        // The file itself is fsynced; this makes its new name durable too.
        crate::dir_fd::sync_best_effort(&self.dir);
        Ok(SavedFile {
            name,
            size: bytes.len() as u64,
            sha256: hex::encode(Sha256::digest(bytes)),
        })
    }

    /// Links the temp file to the first free candidate name.
    fn publish(&self, tmp: &str, name: &SafeFileName) -> Result<SafeFileName, SaveError> {
        for n in 0..=MAX_COLLISION_SUFFIX {
            let candidate = if n == 0 {
                name.clone()
            } else {
                name.numbered(n)
            };
            match self.dir.hard_link(tmp, &self.dir, candidate.as_str()) {
                Ok(()) => return Ok(candidate),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(SaveError::Io(e)),
            }
        }
        Err(SaveError::NoFreeName)
    }
}

/// Why a download batch is refused before anything is written.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PlanError {
    #[error("more attachments than maxBatchSize")]
    TooMany,
    #[error("the declared sizes add up to more than maxDownloadBatchBytes")]
    OverBudget,
    #[error("the declared sizes do not fit in what maxDownloadFolderBytes leaves in the folder")]
    FolderFull,
    #[error("an attachment id is not in this message")]
    UnknownId,
    #[error("attachment ids must be unique")]
    Duplicate,
}

/// Chooses what a download call fetches, applying the budgets before the first write
/// (reference-plugin.md §9.3): `requested = None` selects every listed attachment (inline ones
/// included); every requested id must be listed, once; the selection holds at most `max_count`
/// items; the declared sizes add up to at most `max_bytes` (the per-call budget) and to at most
/// `folder_room` (what the folder's total bound leaves, see [`DownloadRoot::lease`]), so
/// repeated calls cannot fill the disk.
pub(crate) fn plan(
    listing: &[AttachmentMeta],
    requested: Option<&[String]>,
    max_count: usize,
    max_bytes: u64,
    folder_room: u64,
) -> Result<Vec<AttachmentMeta>, PlanError> {
    let selected: Vec<AttachmentMeta> = match requested {
        None => listing.to_vec(),
        Some(ids) => {
            let mut seen = std::collections::HashSet::new();
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                if !seen.insert(id.as_str()) {
                    return Err(PlanError::Duplicate);
                }
                let meta = listing
                    .iter()
                    .find(|m| &m.id == id)
                    .ok_or(PlanError::UnknownId)?;
                out.push(meta.clone());
            }
            out
        }
    };
    if selected.len() > max_count {
        return Err(PlanError::TooMany);
    }
    let declared = selected
        .iter()
        .try_fold(0u64, |sum, m| sum.checked_add(m.size));
    match declared {
        Some(total) if total > max_bytes => Err(PlanError::OverBudget),
        None => Err(PlanError::OverBudget),
        Some(total) if total > folder_room => Err(PlanError::FolderFull),
        Some(_) => Ok(selected),
    }
}

// The fuzz oracles of this module: only in fuzz and test builds, never in what ships.
#[cfg(any(test, fuzzing))]
pub(crate) mod fuzz;

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "tests plant and inspect fixtures with std::fs inside a tempdir"
)]
mod tests {
    use super::fuzz::assert_safe_component;
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::Path;

    fn root_in(tmp: &tempfile::TempDir) -> DownloadRoot {
        std::fs::create_dir(tmp.path().join("root")).unwrap();
        DownloadRoot::new(crate::path_guard::open_dir(&tmp.path().join("root")).unwrap())
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn adversarial_names_become_one_safe_component() {
        let long = format!("{}.pdf", "x".repeat(10_000));
        let cases: &[(&str, &str)] = &[
            ("../../etc/passwd", "_._etc_passwd"),
            ("/abs", "_abs"),
            ("a/../../b", "a_._._b"),
            ("CON", "_CON"),
            ("con", "_con"),
            ("nul.txt", "_nul.txt"),
            ("COM1.tar.gz", "_COM1.tar.gz"),
            ("LPT9 .log", "_LPT9 .log"),
            ("CONSOLE.txt", "CONSOLE.txt"),
            ("a\0b.txt", "a_b.txt"),
            (
                "report\r\nBcc: x@evil.example.net.pdf",
                "report Bcc_ x@evil.example.net.pdf",
            ),
            ("\u{2215}etc\u{2215}passwd", "_etc_passwd"),
            ("\u{FF0E}\u{FF0E}\u{FF0F}\u{FF0E}\u{FF0E}\u{FF0F}x", "_._x"),
            ("invoice\u{202E}fdp.exe", "invoicefdp.exe"),
            (".hidden", "hidden"),
            ("...", "attachment.bin"),
            ("", "attachment.bin"),
            ("\0\0", "__"),
            ("trailing. . ", "trailing"),
            ("report..v2.txt", "report.v2.txt"),
            ("relatório-faturas-março.csv", "relatório-faturas-março.csv"),
            ("C:\\Windows\\system32", "C__Windows_system32"),
        ];
        for (input, expected) in cases {
            let safe = SafeFileName::from_untrusted(input);
            assert_eq!(safe.as_str(), *expected, "{input:?}");
            assert_safe_component(safe.as_str());
        }
        let safe = SafeFileName::from_untrusted(&long);
        assert_eq!(safe.as_str().len(), SafeFileName::MAX_BYTES);
        assert!(safe.as_str().ends_with(".pdf"), "the extension is kept");
        let wide = format!("{}.txt", "é".repeat(5_000));
        let safe = SafeFileName::from_untrusted(&wide);
        assert!(safe.as_str().len() <= SafeFileName::MAX_BYTES);
        assert!(safe.as_str().ends_with("é.txt"), "cut at a char boundary");
    }

    #[test]
    fn numbered_names_keep_the_extension_and_the_bound() {
        let safe = SafeFileName::from_untrusted("ledger.csv");
        assert_eq!(safe.numbered(1).as_str(), "ledger (1).csv");
        assert_eq!(safe.numbered(1000).as_str(), "ledger (1000).csv");
        let long = SafeFileName::from_untrusted(&format!("{}.csv", "y".repeat(400)));
        let n = long.numbered(7);
        assert!(n.as_str().len() <= SafeFileName::MAX_BYTES);
        assert!(n.as_str().ends_with(" (7).csv"));
        assert_eq!(
            SafeFileName::from_untrusted("CON").numbered(2).as_str(),
            "_CON (2)"
        );
    }

    #[test]
    fn saves_exclusively_with_0600_and_suffixes_collisions() {
        let tmp = tempfile::tempdir().unwrap();
        let root = root_in(&tmp);
        let dir = tmp.path().join("root");
        let name = SafeFileName::from_untrusted("ledger.csv");
        let a = root.save(&name, b"first").unwrap();
        let b = root.save(&name, b"second").unwrap();
        assert_eq!(a.name.as_str(), "ledger.csv");
        assert_eq!(b.name.as_str(), "ledger (1).csv");
        assert_eq!(std::fs::read(dir.join("ledger.csv")).unwrap(), b"first");
        assert_eq!(
            std::fs::read(dir.join("ledger (1).csv")).unwrap(),
            b"second"
        );
        let mode = std::fs::metadata(dir.join("ledger.csv"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(a.size, 5);
        assert_eq!(
            a.sha256,
            "a7937b64b8caa58f03721bb6bacf5c78cb235febe0e70b1b84cd99541461a08e"
        );
        assert_eq!(
            listing(&dir),
            ["ledger (1).csv", "ledger.csv"],
            "no temp left"
        );
    }

    #[test]
    fn a_symlink_at_the_target_name_is_never_followed_or_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let root = root_in(&tmp);
        let dir = tmp.path().join("root");
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("passwd"), b"SENTINEL").unwrap();
        std::os::unix::fs::symlink(outside.join("passwd"), dir.join("passwd")).unwrap();
        std::os::unix::fs::symlink(outside.join("absent"), dir.join("absent.txt")).unwrap();
        std::os::unix::fs::symlink("../outside", dir.join("etc")).unwrap();

        for input in [
            "passwd",
            "../../etc/passwd",
            "/etc/passwd",
            "absent.txt",
            "etc",
        ] {
            let saved = root
                .save(&SafeFileName::from_untrusted(input), b"evil")
                .unwrap();
            assert_safe_component(saved.name.as_str());
            let meta = std::fs::symlink_metadata(dir.join(saved.name.as_str())).unwrap();
            assert!(meta.file_type().is_file(), "{input}: a new regular file");
        }
        assert_eq!(std::fs::read(outside.join("passwd")).unwrap(), b"SENTINEL");
        assert!(
            !outside.join("absent").exists(),
            "no file created through a dangling link"
        );
        assert_eq!(listing(&outside), ["passwd"]);
        assert!(
            std::fs::symlink_metadata(dir.join("passwd"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(listing(&dir).contains(&"passwd (1)".to_owned()));
        assert!(listing(&dir).contains(&"absent (1).txt".to_owned()));
        assert!(listing(&dir).contains(&"etc (1)".to_owned()));
    }

    #[test]
    fn a_failed_publish_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let root = root_in(&tmp);
        let dir = tmp.path().join("root");
        let name = SafeFileName::from_untrusted("busy.txt");
        std::fs::create_dir(dir.join("busy.txt")).unwrap();
        for n in 1..=MAX_COLLISION_SUFFIX {
            std::fs::create_dir(dir.join(name.numbered(n).as_str())).unwrap();
        }
        assert!(matches!(root.save(&name, b"x"), Err(SaveError::NoFreeName)));
        assert_eq!(
            listing(&dir).len(),
            1001,
            "only the planted directories; no temp"
        );
    }

    fn meta(id: &str, size: u64, inline: bool) -> AttachmentMeta {
        AttachmentMeta {
            id: id.into(),
            name: Some(format!("{id}.bin")),
            content_type: "application/octet-stream".into(),
            size,
            size_is_estimate: false,
            is_inline: inline,
        }
    }

    #[test]
    fn the_folder_bound_is_applied_before_anything_is_written() {
        let list = vec![meta("att-0", 10, false), meta("att-1", 20, false)];
        // The call's own budget has room; the folder has 29 bytes left, the batch needs 30.
        assert_eq!(
            plan(&list, None, 5, 1_000, 29).err(),
            Some(PlanError::FolderFull)
        );
        assert_eq!(plan(&list, None, 5, 1_000, 30).unwrap().len(), 2);
        let one = vec!["att-0".to_owned()];
        assert_eq!(plan(&list, Some(&one), 5, 1_000, 10).unwrap().len(), 1);
        assert_eq!(
            plan(&list, Some(&one), 5, 1_000, 0).err(),
            Some(PlanError::FolderFull)
        );
        // The per-call budget is still named first when both are exceeded.
        assert_eq!(
            plan(&list, None, 5, 29, 0).err(),
            Some(PlanError::OverBudget)
        );
    }

    #[test]
    fn a_lease_measures_the_folder_and_serialises_calls() {
        let tmp = tempfile::tempdir().unwrap();
        let root = root_in(&tmp);
        assert_eq!(root.lease().unwrap().used(), 0);
        root.save(&SafeFileName::from_untrusted("a.bin"), &[1; 100])
            .unwrap();
        std::fs::write(tmp.path().join("root/operator.txt"), [2; 23]).unwrap();
        std::fs::create_dir(tmp.path().join("root/sub")).unwrap();
        std::fs::write(tmp.path().join("outside.bin"), [3; 1000]).unwrap();
        std::os::unix::fs::symlink(
            tmp.path().join("outside.bin"),
            tmp.path().join("root/link.bin"),
        )
        .unwrap();
        let lease = root.lease().unwrap();
        assert_eq!(
            lease.used(),
            123,
            "regular files only, symlinks not followed"
        );
        // While a lease is held, another descriptor of the folder cannot take the lock.
        let other = crate::dir_fd::open(&root.dir).unwrap();
        assert!(other.try_lock().is_err());
        drop(lease);
        other.try_lock().expect("released with the lease");
    }

    #[test]
    fn the_plan_applies_the_budgets_before_anything_is_written() {
        let list = vec![
            meta("att-0", 10, false),
            meta("att-1", 20, true),
            meta("att-2", 30, false),
        ];
        let all = plan(&list, None, 3, 60, u64::MAX).unwrap();
        assert_eq!(
            all.len(),
            3,
            "omitted ids select everything, inline included"
        );
        assert_eq!(
            plan(&list, None, 2, 1_000, u64::MAX).err(),
            Some(PlanError::TooMany)
        );
        assert_eq!(
            plan(&list, None, 3, 59, u64::MAX).err(),
            Some(PlanError::OverBudget)
        );
        let ids = vec!["att-2".to_owned(), "att-0".to_owned()];
        let some = plan(&list, Some(&ids), 2, 40, u64::MAX).unwrap();
        assert_eq!(
            some.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
            ["att-2", "att-0"]
        );
        assert_eq!(
            plan(&list, Some(&ids), 1, 40, u64::MAX).err(),
            Some(PlanError::TooMany)
        );
        assert_eq!(
            plan(&list, Some(&ids), 2, 39, u64::MAX).err(),
            Some(PlanError::OverBudget)
        );
        let dup = vec!["att-0".to_owned(), "att-0".to_owned()];
        assert_eq!(
            plan(&list, Some(&dup), 5, 100, u64::MAX).err(),
            Some(PlanError::Duplicate)
        );
        let unknown = vec!["att-9".to_owned()];
        assert_eq!(
            plan(&list, Some(&unknown), 5, 100, u64::MAX).err(),
            Some(PlanError::UnknownId)
        );
        let huge = vec![meta("att-0", u64::MAX, false), meta("att-1", 1, false)];
        assert_eq!(
            plan(&huge, None, 5, u64::MAX, u64::MAX).err(),
            Some(PlanError::OverBudget),
            "no overflow"
        );
    }

    #[test]
    fn fuzz_entry_points_hold_on_fixed_inputs() {
        let scratch = tempfile::tempdir().unwrap();
        for input in [
            &b"../../etc/passwd"[..],
            b"",
            b"\0",
            b"CON",
            "\u{FF0E}\u{FF0E}\u{FF0F}x".as_bytes(),
            &[0xff, 0xfe, b'.', b'.'],
        ] {
            fuzz::safe_name(scratch.path(), input);
        }
        // Plants a symlink to outside at "a" and saves "a" twice; plants a dir at "b.txt (1)"...
        fuzz::download_plan(
            scratch.path(),
            &[1, 0, 3, 0, 0, 0, 3, 0, 0, 0, 3, 0, 3, 1, 4, 1, 0, 1, 4, 0],
        );
        fuzz::download_plan(
            scratch.path(),
            &[
                1, 1, 13, 14, 1, 0, 1, 13, 14, 2, 0, 1, 13, 14, 0, 0, 1, 13, 14, 0,
            ],
        );
        fuzz::download_plan(scratch.path(), &(0u8..=255).collect::<Vec<_>>());
    }

    proptest::proptest! {
        #[test]
        fn from_untrusted_always_yields_a_safe_component(s in "\\PC{0,300}|[./\\\\\\x00-\\x1f CONulx]{0,40}") {
            let safe = SafeFileName::from_untrusted(&s);
            assert_safe_component(safe.as_str());
            proptest::prop_assert_eq!(SafeFileName::from_untrusted(safe.as_str()), safe.clone());
            assert_safe_component(safe.numbered(12).as_str());
        }

        #[test]
        fn the_extension_survives_any_stem(stem in "[a-zA-Z0-9]\\PC{0,400}", ext in "[a-z0-9]{1,8}") {
            let safe = SafeFileName::from_untrusted(&format!("{stem}.{ext}"));
            assert_safe_component(safe.as_str());
            let suffix = format!(".{ext}");
            proptest::prop_assert!(safe.as_str().ends_with(&suffix), "{:?}", safe);
        }

        #[test]
        fn random_plans_never_escape(data in proptest::collection::vec(proptest::num::u8::ANY, 0..120)) {
            let scratch = tempfile::tempdir().unwrap();
            fuzz::download_plan(scratch.path(), &data);
        }
    }
}
