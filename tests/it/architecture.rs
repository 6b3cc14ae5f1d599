//! ARCHITECTURE.md stays true (issue 28, item 2). The map is only worth reading if it can be
//! trusted, so this test reads it the way a newcomer would and fails on the two ways it drifts:
//! a path it names that is not in the tree (a file moved or renamed), and a Rust file under
//! `src/` or the policy crate's `src/` that no code-map entry names (a module added without a
//! word on its role). A code-map entry is a heading; its backticked names are paths, a bare name
//! (`mod.rs`, `html/css.rs`) read in the directory of the path named before it in the same
//! heading. In the body, every backticked path that starts at a top-level directory, and every
//! relative link, must exist; the same existence check runs over `docs/internals.md`, which holds
//! the details the map links to. Like the layering test it is lexical, and uses nothing from
//! the crate.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Top-level directories a backticked body path starts from; anything else in backticks is code
/// (`crate::outbound`, `Backend`), not a path.
const ROOTS: &[&str] = &[
    "src/", "crates/", "tests/", "benches/", "fuzz/", "policy/", "scripts/", "vendor/", "docs/",
    ".ci/", ".notes/",
];

/// The trees whose every `.rs` file needs an entry of its own.
const MAPPED_TREES: &[&str] = &["src", "crates/mailgate-policy/src"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What one document claims: the paths its headings give an entry (resolved), and every path
/// or link it names anywhere, each with the line that names it.
#[derive(Default)]
struct Claims {
    entries: BTreeSet<String>,
    named: Vec<(usize, String)>,
    /// Links into a markdown file's heading: line, file, anchor.
    anchored: Vec<(usize, String, String)>,
    problems: Vec<String>,
}

fn is_pathlike(token: &str) -> bool {
    !token.is_empty()
        && token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
        && (token.ends_with(".rs") || token.ends_with('/') || token.contains('/'))
        && !token.contains("..")
        && !token.starts_with('/')
}

fn rooted(token: &str) -> bool {
    ROOTS.iter().any(|r| token.starts_with(r))
}

/// Backticked spans of a line (an unclosed backtick ends the scan).
fn backticked(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// Relative targets of markdown links (`](target)`) with their anchors; web links are not files.
/// An in-page link (`#anchor`) has an empty file.
fn link_targets(line: &str) -> Vec<(&str, Option<&str>)> {
    line.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &line[at + 2..];
            let target = &rest[..rest.find(')')?];
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target, None),
            };
            (!target.contains("://") && !target.starts_with("mailto:")).then_some((file, anchor))
        })
        .collect()
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, every other character that is not
/// a letter, digit, `-` or `_` dropped (so `` `src/tools/` — `mod.rs` `` is `srctools--modrs`).
fn slug(heading: &str) -> String {
    heading
        .trim_start_matches('#')
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown file's headings (fenced code skipped).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(slug(line));
        }
    }
    out
}

fn parent_dir(path: &str) -> String {
    if path.ends_with('/') {
        return path.to_owned();
    }
    match path.rfind('/') {
        Some(at) => path[..=at].to_owned(),
        None => String::new(),
    }
}

/// The one document whose headings are code-map entries.
const MAP: &str = "ARCHITECTURE.md";

fn read_claims(doc: &str) -> Claims {
    claims_of(
        doc,
        &std::fs::read_to_string(repo().join(doc)).unwrap(),
        doc == MAP,
    )
}

/// `entries`: whether headings are code-map entries (bare names resolved, coverage counted); in
/// any other document a heading is prose like the body.
fn claims_of(doc: &str, text: &str, entries: bool) -> Claims {
    let doc_dir = parent_dir(doc);
    let mut claims = Claims::default();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        for (file, anchor) in link_targets(line) {
            let file = if file.is_empty() {
                doc.to_owned()
            } else {
                normalize(&format!("{doc_dir}{file}"))
            };
            if let Some(anchor) = anchor {
                claims.anchored.push((n, file.clone(), anchor.to_owned()));
            }
            claims.named.push((n, file));
        }
        let heading = entries && line.starts_with('#');
        let mut base: Option<String> = None;
        for token in backticked(line) {
            if !is_pathlike(token) {
                continue;
            }
            let path = if rooted(token) {
                base = Some(parent_dir(token));
                token.to_owned()
            } else if heading {
                match &base {
                    Some(dir) => format!("{dir}{token}"),
                    None => {
                        claims.problems.push(format!(
                            "{doc}:{n}: `{token}` has no directory named before it in the heading"
                        ));
                        continue;
                    }
                }
            } else {
                continue;
            };
            if heading {
                claims.entries.insert(path.clone());
            }
            claims.named.push((n, path));
        }
    }
    claims
}

/// `docs/../ARCHITECTURE.md` as `ARCHITECTURE.md`: links climb out of `docs/`.
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            ".." => {
                parts.pop();
            }
            "." | "" => {}
            part => parts.push(part),
        }
    }
    let joined = parts.join("/");
    if path.ends_with('/') && !joined.is_empty() {
        format!("{joined}/")
    } else {
        joined
    }
}

fn missing_paths(doc: &str, claims: &Claims) -> Vec<String> {
    let mut problems: Vec<String> = claims
        .named
        .iter()
        .filter(|(_, path)| !repo().join(path).exists())
        .map(|(n, path)| format!("{doc}:{n}: `{path}` does not exist"))
        .collect();
    for (n, file, anchor) in &claims.anchored {
        let Ok(text) = std::fs::read_to_string(repo().join(file)) else {
            continue;
        };
        if file.ends_with(".md") && !anchors(&text).contains(anchor) {
            problems.push(format!("{doc}:{n}: `{file}` has no heading `#{anchor}`"));
        }
    }
    problems
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A unit-test file split off its module (`store/tests.rs`, `honesty_tests.rs`) is part of the
/// entry of the module it tests.
fn is_test_file(path: &str) -> bool {
    path.ends_with("/tests.rs") || path.ends_with("_tests.rs")
}

/// Files under the mapped trees that no heading names.
fn unmapped(claims: &Claims) -> Vec<String> {
    let mut files = Vec::new();
    for tree in MAPPED_TREES {
        rust_files(&repo().join(tree), &mut files);
    }
    let mut missing: Vec<String> = files
        .iter()
        .map(|f| {
            f.strip_prefix(repo())
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        })
        .filter(|f| !claims.entries.contains(f) && !is_test_file(f))
        .collect();
    missing.sort();
    missing
}

#[test]
fn every_path_the_architecture_names_exists() {
    let claims = read_claims(MAP);
    let mut problems = claims.problems.clone();
    problems.extend(missing_paths(MAP, &claims));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_module_has_an_entry_in_the_architecture() {
    let missing = unmapped(&read_claims(MAP));
    assert!(
        missing.is_empty(),
        "no code-map heading in ARCHITECTURE.md names these files (add each to the entry of \
         the module it belongs to, with a word on its role):\n{}",
        missing.join("\n")
    );
}

/// The guides the map links to, and the pages that link into them: each names only paths and
/// headings that exist.
const GUIDES: &[&str] = &[
    "docs/internals.md",
    "docs/operator.md",
    "docs/security-review.md",
    "docs/attacks.md",
    "docs/remote.md",
    "fuzz/README.md",
    "README.md",
    "CONTRIBUTING.md",
    "SECURITY.md",
];

#[test]
fn every_path_the_guides_name_exists() {
    let mut problems = Vec::new();
    for doc in GUIDES {
        let claims = read_claims(doc);
        problems.extend(claims.problems.iter().cloned());
        problems.extend(missing_paths(doc, &claims));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The most lines a file under the mapped trees may hold before its unit tests (issue 28, item
/// 4: a file that long mixes jobs; split it along them). A split-off test file is all tests.
const MAX_CODE_LINES: usize = 1_000;

/// Lines of a Rust file before its `#[cfg(test)] mod tests` (with the attributes between the
/// two), or all of them when it has none.
fn code_lines(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    let is_tests = |l: &str| {
        ["mod tests", "pub(crate) mod tests", "pub(super) mod tests"]
            .iter()
            .any(|p| l.starts_with(p))
    };
    let Some(at) = lines.iter().position(|l| is_tests(l)) else {
        return lines.len();
    };
    let mut start = at;
    while start > 0 {
        let above = lines[start - 1];
        if above.starts_with("#[") || above.starts_with(")]") || above.starts_with(' ') {
            start -= 1;
        } else {
            break;
        }
    }
    start
}

#[test]
fn no_source_file_holds_more_than_a_thousand_lines_of_code() {
    let mut files = Vec::new();
    for tree in MAPPED_TREES {
        rust_files(&repo().join(tree), &mut files);
    }
    let mut long: Vec<String> = files
        .iter()
        .filter(|f| !is_test_file(&f.to_string_lossy()))
        .filter_map(|f| {
            let n = code_lines(&std::fs::read_to_string(f).unwrap());
            (n > MAX_CODE_LINES).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    long.sort();
    assert!(
        long.is_empty(),
        "over {MAX_CODE_LINES} lines before their tests (split them along their jobs):\n{}",
        long.join("\n")
    );
}

/// The internals guide's list of integration-test modules is complete: every `tests/it/` module
/// is named (in backticks) in it, so a new test file gets a word on its concern.
#[test]
fn every_integration_test_module_is_in_the_internals_guide() {
    let text = std::fs::read_to_string(repo().join("docs/internals.md")).unwrap();
    let named: BTreeSet<&str> = text.lines().flat_map(backticked).collect();
    let mut missing: Vec<String> = std::fs::read_dir(repo().join("tests/it"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let stem = p.file_stem()?.to_string_lossy().into_owned();
            (p.is_dir() || p.extension().is_some_and(|e| e == "rs")).then_some(stem)
        })
        .filter(|m| {
            m != "main"
                && !named.contains(m.as_str())
                && !named.contains(format!("{m}.rs").as_str())
        })
        .collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "docs/internals.md (section `tests/it/`) does not name these test modules: {}",
        missing.join(", ")
    );
}

/// The reader is what the other tests trust, so it is tested on a made-up map: bare names in a
/// heading resolve in the directory before them, body paths only count from a root, links are
/// followed, fenced code is skipped, a bare name with no directory is a problem.
#[test]
fn the_map_reader_resolves_headings_bodies_and_links() {
    let map = "## Code Map\n\
        ### `src/mime/` — `mod.rs`, `html/css.rs`; `crates/x/src/a.rs` and `b.rs`\n\
        Body: `src/lib.rs`, `mod.rs`, `crate::outbound`, `policy/<name>.json`, \
        [guide](internals.md#text), [web](https://example.com).\n\
        ```\n`src/fenced.rs`\n```\n\
        ### `lonely.rs`\n";
    let claims = claims_of("docs/map.md", map, true);
    let entries: Vec<&str> = claims.entries.iter().map(String::as_str).collect();
    assert_eq!(
        entries,
        [
            "crates/x/src/a.rs",
            "crates/x/src/b.rs",
            "src/mime/",
            "src/mime/html/css.rs",
            "src/mime/mod.rs"
        ]
    );
    let named: Vec<&str> = claims.named.iter().map(|(_, p)| p.as_str()).collect();
    assert!(named.contains(&"src/lib.rs") && named.contains(&"docs/internals.md"));
    assert_eq!(
        claims.anchored,
        [(3, "docs/internals.md".to_owned(), "text".to_owned())]
    );
    assert_eq!(normalize("docs/../ARCHITECTURE.md"), "ARCHITECTURE.md");
    let code = "fn a() {}\n\n#[cfg(test)]\n#[expect(\n    dead_code,\n)]\nmod tests {\n}\n";
    assert_eq!(code_lines(code), 2);
    assert_eq!(code_lines("fn a() {}\nfn b() {}\n"), 2);
    assert_eq!(
        slug("### `src/tools/read/` — `mod.rs`, `search.rs`"),
        "srctoolsread--modrs-searchrs"
    );
    assert!(
        !named
            .iter()
            .any(|p| p.contains("fenced") || *p == "mod.rs" || p.contains("example"))
    );
    assert_eq!(claims.problems.len(), 1, "{:?}", claims.problems);
}
