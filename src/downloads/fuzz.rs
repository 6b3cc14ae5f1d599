//! The fuzz oracles of `downloads` (compiled only under `cfg(fuzzing)` and in unit tests; the
//! `fuzzing::write` entry points forward here). Each runs in a scratch directory its caller owns and
//! panics with an `oracle:` message when an invariant of the module doc breaks.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, OpenOptions};

use super::{DownloadRoot, SafeFileName, SaveError, is_reserved};

/// Panics (with an `oracle:` message) unless `name` is one safe component.
pub(super) fn assert_safe_component(name: &str) {
    assert!(!name.is_empty(), "oracle: a safe name is non-empty");
    assert!(
        name.len() <= SafeFileName::MAX_BYTES,
        "oracle: a safe name is at most {} bytes: {}",
        SafeFileName::MAX_BYTES,
        name.len()
    );
    assert!(
        !name
            .chars()
            .any(|c| c == '/' || c == '\\' || c == '\0' || c.is_control()),
        "oracle: a safe name has no separator, NUL or control character: {name:?}"
    );
    assert!(
        name != "." && name != ".." && !name.starts_with('.') && !name.contains(".."),
        "oracle: a safe name is not `.`/`..`, has no leading dot and no `..`: {name:?}"
    );
    assert!(
        !is_reserved(name),
        "oracle: a safe name is not a reserved device name: {name:?}"
    );
    assert!(
        Path::new(name).components().count() == 1,
        "oracle: a safe name is one path component: {name:?}"
    );
}

/// One call's sandbox: a fresh `case/` directory inside the scratch directory the caller owns
/// (the fuzz target's private tempdir, a unit test's tempdir). Nothing here reads the
/// environment or picks a path of its own.
struct Sandbox {
    path: PathBuf,
    dir: Dir,
}

/// What a directory tree holds: relative path → (kind, file bytes or link target).
fn snapshot(dir: &Dir) -> std::collections::BTreeMap<String, (char, Vec<u8>)> {
    fn walk(
        dir: &Dir,
        prefix: &str,
        out: &mut std::collections::BTreeMap<String, (char, Vec<u8>)>,
    ) {
        let Ok(entries) = dir.entries() else { return };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = format!("{prefix}{name}");
            let Ok(meta) = dir.symlink_metadata(&name) else {
                continue;
            };
            let kind = meta.file_type();
            if kind.is_symlink() {
                let target = dir.read_link_contents(&name).unwrap_or_default();
                out.insert(
                    path,
                    ('l', target.to_string_lossy().into_owned().into_bytes()),
                );
            } else if kind.is_dir() {
                out.insert(path.clone(), ('d', Vec::new()));
                if let Ok(sub) = dir.open_dir(&name) {
                    walk(&sub, &format!("{path}/"), out);
                }
            } else {
                let bytes = dir.read(&name).unwrap_or_default();
                #[cfg(unix)]
                let bytes = {
                    use cap_std::fs::PermissionsExt as _;
                    let mut b = bytes;
                    b.extend_from_slice(
                        format!("|mode={:o}", meta.permissions().mode()).as_bytes(),
                    );
                    b
                };
                out.insert(path, ('f', bytes));
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, "", &mut out);
    out
}

/// Builds `case/root/` (the download root) and `case/outside/` (a sentinel: a file and a
/// subfolder) in `scratch`, replacing what an earlier call left there.
fn sandbox(scratch: &Path) -> (Sandbox, DownloadRoot) {
    let parent = crate::path_guard::open_dir(scratch).expect("invariant: the scratch dir opens");
    match parent.remove_dir_all("case") {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => panic!("invariant: the previous case can be removed: {e}"),
    }
    parent
        .create_dir("case")
        .expect("invariant: scratch is writable");
    let d = parent.open_dir("case").expect("invariant: case opens");
    d.create_dir("outside")
        .expect("invariant: scratch is writable");
    d.create_dir("outside/nested")
        .expect("invariant: scratch is writable");
    d.write("outside/secret.txt", b"SENTINEL")
        .expect("invariant: scratch is writable");
    d.create_dir("root")
        .expect("invariant: scratch is writable");
    let root = DownloadRoot::new(d.open_dir("root").expect("invariant: root opens"));
    let sandbox = Sandbox {
        path: scratch.join("case"),
        dir: d,
    };
    (sandbox, root)
}

/// Fuzz entry point: the attachment-name sanitiser.
///
/// Oracles: the result is one safe component (non-empty, at most 200 bytes, no separator, NUL or
/// control character, not `.`/`..`, no leading dot, no `..`, not a device name); sanitising is
/// idempotent; saving a file under it inside a temp root creates exactly that one entry in the
/// root, with the bytes given, and leaves a sentinel directory next to the root unchanged.
pub(crate) fn safe_name(scratch: &Path, data: &[u8]) {
    let input = String::from_utf8_lossy(data);
    let safe = SafeFileName::from_untrusted(&input);
    assert_safe_component(safe.as_str());
    assert_eq!(
        SafeFileName::from_untrusted(safe.as_str()),
        safe,
        "oracle: sanitising is idempotent"
    );
    for n in [1, 999] {
        assert_safe_component(safe.numbered(n).as_str());
    }
    let (scratch, root) = sandbox(scratch);
    let outside = snapshot(&scratch.dir.open_dir("outside").expect("invariant: opens"));
    let saved = root
        .save(&safe, data)
        .expect("oracle: a safe name can be saved into an empty root");
    assert_eq!(saved.name, safe, "oracle: an empty root has no collision");
    let after = snapshot(&root.dir);
    assert_eq!(
        after.len(),
        1,
        "oracle: exactly one entry is created: {after:?}"
    );
    let (kind, bytes) = after
        .get(safe.as_str())
        .expect("oracle: the entry has the safe name");
    assert_eq!(*kind, 'f', "oracle: the entry is a regular file");
    assert!(
        bytes.starts_with(data) && bytes.ends_with(b"|mode=100600"),
        "oracle: the file holds the bytes, mode 0600"
    );
    assert_eq!(
        snapshot(&scratch.dir.open_dir("outside").expect("invariant: opens")),
        outside,
        "oracle: nothing outside the root changes"
    );
}

/// Name fragments the plan generator composes names from.
const TOKENS: &[&str] = &[
    "..",
    "/",
    "\0",
    "a",
    "b.txt",
    ".",
    "CON",
    "nul.txt",
    "\\",
    "\u{2215}",
    "\u{FF0E}\u{FF0E}\u{FF0F}",
    " ",
    "\r\n",
    "outside",
    "secret.txt",
    "\u{202E}",
    "é",
    "root",
    "x (1).txt",
    "a.txt",
];

/// Symlink targets planted inside the root: every one points outside it (relative or absolute,
/// existing or dangling).
fn link_targets(scratch: &Path) -> Vec<PathBuf> {
    vec![
        "../outside".into(),
        "../outside/secret.txt".into(),
        "../outside/created-through-link".into(),
        "../outside/nested".into(),
        scratch.join("outside"),
        scratch.join("outside/secret.txt"),
        scratch.join("outside/created-through-link"),
    ]
}

fn plant_file(dir: &Dir, name: &str, content: &[u8]) -> io::Result<()> {
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true);
    dir.open_with(name, &opts)?.write_all(content)
}

/// Fuzz entry point: a stateful plan of saves and plants against a temp download root.
///
/// The input is read as a sequence of operations: save a file under a name composed from
/// [`TOKENS`] (with `..`, `/`, NUL, look-alikes, control and bidi characters), or plant, at the
/// sanitised form of such a name (or one of its ` (n)` variants, so collisions happen), a
/// symlink pointing outside the root, a regular file or a directory.
///
/// Oracles: the sentinel directory outside the root is unchanged (no file created, written or
/// removed through a symlink); every planted entry is unchanged (nothing overwritten, followed
/// or replaced); every successful save is a regular 0600 file in the root, directly under the
/// safe name it reports, holding exactly its bytes; the root holds exactly the planted entries
/// and the saved files (no temp file left behind).
pub(crate) fn download_plan(scratch: &Path, data: &[u8]) {
    const MAX_OPS: usize = 48;
    let (scratch, root) = sandbox(scratch);
    let outside_dir = scratch.dir.open_dir("outside").expect("invariant: opens");
    let outside = snapshot(&outside_dir);
    let targets = link_targets(&scratch.path);
    let mut bytes = data.iter().copied();
    let mut next = move || bytes.next();
    let mut saved: Vec<(String, Vec<u8>)> = Vec::new();
    let mut planted: std::collections::BTreeMap<String, (char, Vec<u8>)> =
        std::collections::BTreeMap::new();
    for step in 0..MAX_OPS {
        let Some(op) = next() else { break };
        let len = usize::from(next().unwrap_or(1) % 8) + 1;
        let mut raw = String::new();
        for _ in 0..len {
            raw.push_str(TOKENS[usize::from(next().unwrap_or(0)) % TOKENS.len()]);
        }
        let safe = SafeFileName::from_untrusted(&raw);
        assert_safe_component(safe.as_str());
        let arg = next().unwrap_or(0);
        match op % 4 {
            0 => {
                let content = format!("save-{step}-{arg}").into_bytes();
                match root.save(&safe, &content) {
                    Ok(file) => {
                        assert_safe_component(file.name.as_str());
                        saved.push((file.name.as_str().to_owned(), content));
                    }
                    Err(SaveError::NoFreeName) => {}
                    Err(SaveError::Io(e)) => {
                        panic!("oracle: a save fails only for want of a name: {e}")
                    }
                }
            }
            kind => {
                let at = match arg % 3 {
                    0 => safe.clone(),
                    n => safe.numbered(u32::from(n)),
                };
                let target = &targets[usize::from(arg) % targets.len()];
                let content = format!("planted-{step}").into_bytes();
                let (made, expect) = match kind {
                    1 => (
                        root.dir.symlink_contents(target, at.as_str()),
                        ('l', target.to_string_lossy().into_owned().into_bytes()),
                    ),
                    // Plants only where nothing exists (the harness must not clobber a save).
                    2 => (plant_file(&root.dir, at.as_str(), &content), ('f', content)),
                    _ => (root.dir.create_dir(at.as_str()), ('d', Vec::new())),
                };
                if made.is_ok() {
                    planted.insert(at.as_str().to_owned(), expect);
                }
            }
        }
    }
    let before_check = snapshot(&root.dir);
    for (name, content) in &saved {
        let (kind, stored) = before_check
            .get(name)
            .unwrap_or_else(|| panic!("oracle: a saved file is in the root: {name:?}"));
        assert_eq!(*kind, 'f', "oracle: a saved file is a regular file");
        let mut expected = content.clone();
        expected.extend_from_slice(b"|mode=100600");
        assert_eq!(
            stored, &expected,
            "oracle: a saved file holds its bytes, mode 0600"
        );
    }
    let top: std::collections::BTreeSet<&str> = before_check
        .keys()
        .filter(|k| !k.contains('/'))
        .map(String::as_str)
        .collect();
    let expected: std::collections::BTreeSet<&str> = planted
        .keys()
        .map(String::as_str)
        .chain(saved.iter().map(|(n, _)| n.as_str()))
        .collect();
    assert_eq!(
        top, expected,
        "oracle: the root holds the planted entries and the saves only"
    );
    for (name, (kind, content)) in &planted {
        let (now_kind, now) = &before_check[name];
        assert_eq!(
            now_kind, kind,
            "oracle: a planted entry keeps its kind: {name:?}"
        );
        assert!(
            now.starts_with(content),
            "oracle: a planted entry is not overwritten or retargeted: {name:?}"
        );
    }
    assert_eq!(
        snapshot(&outside_dir),
        outside,
        "oracle: nothing outside the root changes"
    );
}
