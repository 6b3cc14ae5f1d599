//! The import-circle check (issue 10, item 6: "no import circles"). It uses nothing from the
//! crate, so it lives among the integration tests, not in `src/` (issue 28). It reads
//! `src/**/*.rs` (and, apart, the policy crate's `crates/mailgate-policy/src/**/*.rs`), builds the
//! graph of which top-level module (`backends`, `search`, `tools`, …) names which other through a
//! `crate::` path (or a `super::` chain that reaches the crate root), and fails on any circle,
//! printing it with the files that make each step. Comments, string literals and `#[cfg(test)]`
//! code (inline items and test-only files) do not count: a test may reach up the layers, a build
//! may not. Invariant: no circle is allowed, in either crate (the backends ↔ search circle, the
//! last one allowed, went with the backend seam of issue 10). The scanner is lexical, not a Rust
//! parser; its blind spots (macros that build paths, `#[path]`) are not used in this crate
//! outside test code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Directions the backend seam forbids outright, circle or not (issue 10: the backend model
/// imports nothing from search; backends never look at tools; search never looks at tools). A
/// backend plugs in below both, so adding one touches neither. (Backends do name `policy`: a
/// transport takes the outbound policy's send permit, the only value it can send.)
const FORBIDDEN_EDGES: &[(&str, &str)] = &[
    ("backends", "search"),
    ("backends", "tools"),
    ("search", "tools"),
];

#[test]
fn the_backend_seam_points_one_way() {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let mut problems = Vec::new();
    for &(from, to) in FORBIDDEN_EDGES {
        if let Some(files) = graph.get(from).and_then(|edges| edges.get(to)) {
            problems.push(format!("{from} -> {to} (in {files:?})"));
        }
    }
    assert!(
        problems.is_empty(),
        "forbidden edges: {}",
        problems.join("; ")
    );
}

/// One top-level module naming another: `from -> to`, with the files that do it.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

#[test]
fn top_level_modules_have_no_import_circles() {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let problems = circle_problems(&graph);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The policy crate (crates/mailgate-policy: config, gates, address types, compose, outbound) is
/// scanned the same way. The mailgate crate cannot form a circle with it (Cargo forbids a
/// dependency cycle), so the two graphs are checked apart.
#[test]
fn policy_crate_modules_have_no_import_circles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/mailgate-policy/src");
    let graph = module_graph(&src);
    assert!(
        graph.contains_key("outbound") && graph.contains_key("gates"),
        "the scan found the policy crate's modules: {graph:?}"
    );
    let problems = circle_problems(&graph);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every circle of `graph`, each with the files that make each of its steps.
/// Where a handler could act as the operator (issue 29, item 1). The types keep a person inside
/// their grants (a `GrantedAlias` is the only key to a mailbox, made only from a caller), so the
/// one way out would be code that makes the operator caller, or a test grant, for itself. Only
/// the transports and the operator's own commands may: nothing under the tool core, the
/// resources, the prompts or the search engine names either outside test code.
#[test]
fn no_handler_acts_as_the_operator() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect_rs(&src, &src, &mut files);
    let handlers = ["tools/", "resources/", "search/", "prompts.rs"];
    let mut found = Vec::new();
    for rel in files
        .iter()
        .filter(|r| handlers.iter().any(|h| r.starts_with(h)))
    {
        if rel.ends_with("tests.rs") || rel.ends_with("testutil.rs") {
            continue;
        }
        let text = std::fs::read_to_string(src.join(rel)).expect("read a source file");
        let (body, _) = without_test_code(&code_only(&text));
        for needle in ["Caller::Operator", "test_grant"] {
            if body.contains(needle) {
                found.push(format!("{rel} names {needle}"));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("; "));
}

fn circle_problems(graph: &Graph) -> Vec<String> {
    circles(graph)
        .iter()
        .map(|circle| {
            let steps: Vec<String> = circle_edges(graph, circle)
                .into_iter()
                .map(|(from, to, files)| format!("  {from} -> {to} (in {files:?})"))
                .collect();
            format!(
                "import circle {}:\n{}",
                describe(graph, circle),
                steps.join("\n")
            )
        })
        .collect()
}

/// The module graph of `src`: nodes are top-level modules (`lib.rs` and `main.rs` are the root,
/// not nodes); an edge is a reference from non-test code of one module to another.
fn module_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    collect_rs(src, src, &mut files);
    files.sort();
    let tops: BTreeSet<String> = files
        .iter()
        .map(|rel| top_of(rel))
        .filter(|top| top != "lib" && top != "main")
        .collect();
    let mut code = BTreeMap::new();
    let mut test_only = Vec::new();
    for rel in &files {
        let text = std::fs::read_to_string(src.join(rel)).expect("read a source file");
        let (body, test_mods) = without_test_code(&code_only(&text));
        for name in test_mods {
            let dir = module_dir(rel);
            test_only.push(format!("{dir}{name}.rs"));
            test_only.push(format!("{dir}{name}/"));
        }
        code.insert(rel.clone(), body);
    }
    let mut graph = Graph::new();
    for (rel, body) in &code {
        let from = top_of(rel);
        if !tops.contains(&from) || test_only.iter().any(|t| rel.starts_with(t.as_str())) {
            continue;
        }
        for to in references(body, module_depth(rel)) {
            if to != from && tops.contains(&to) {
                graph
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_default()
                    .insert(rel.clone());
            }
        }
    }
    graph
}

fn collect_rs(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let entries = std::fs::read_dir(dir).expect("list a source folder");
    for entry in entries {
        let path: PathBuf = entry.expect("a folder entry").path();
        if path.is_dir() {
            collect_rs(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("under src");
            out.push(rel.to_string_lossy().into_owned());
        }
    }
}

/// `config/mod.rs` → `config`, `cli.rs` → `cli`.
fn top_of(rel: &str) -> String {
    let first = rel.split('/').next().unwrap_or(rel);
    first.strip_suffix(".rs").unwrap_or(first).to_owned()
}

/// How many `super::` lead from this file's module to the crate root.
fn module_depth(rel: &str) -> usize {
    let parts: Vec<&str> = rel.split('/').collect();
    match parts.last() {
        Some(&"mod.rs") => parts.len() - 1,
        _ if parts.len() == 1 && (rel == "lib.rs" || rel == "main.rs") => 0,
        _ => parts.len(),
    }
}

/// Where the files of this file's child modules live, relative to `src/`.
fn module_dir(rel: &str) -> String {
    match rel.rsplit_once('/') {
        Some((dir, "mod.rs")) => format!("{dir}/"),
        _ if rel == "lib.rs" || rel == "main.rs" => String::new(),
        _ => format!("{}/", rel.strip_suffix(".rs").unwrap_or(rel)),
    }
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The source with comments removed and string and char literals emptied, so that neither a doc
/// link nor a message text counts as a dependency (and neither can unbalance a brace).
fn code_only(src: &str) -> String {
    let s: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        let prev_ident = i > 0 && is_ident(s[i - 1]);
        if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if !prev_ident && (c == 'r' || (c == 'b' && next == Some('r'))) && {
            let mut j = i + if c == 'b' { 2 } else { 1 };
            while s.get(j) == Some(&'#') {
                j += 1;
            }
            s.get(j) == Some(&'"')
        } {
            // A raw string: r"…", r#"…"#, br"…".
            i += if c == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while s[i] == '#' {
                hashes += 1;
                i += 1;
            }
            i += 1;
            while i < s.len() {
                if s[i] == '"' && (1..=hashes).all(|k| s.get(i + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < s.len() && s[i] != '"' {
                i += if s[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && next == Some('\\') {
            // An escaped char literal: '\n', '\'', '\u{..}' (skip the quote, the backslash and
            // the escaped character, which may itself be a quote).
            i += 3;
            while i < s.len() && s[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == '\'' && s.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            // Anything else, lifetimes included.
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `code` without its `#[cfg(test)]` items, and the names of `#[cfg(test)] mod name;` files.
fn without_test_code(code: &str) -> (String, Vec<String>) {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut test_mods = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let item = &rest[at + MARK.len()..];
        let start = skip_attributes(item);
        let header: Vec<&str> = item[start..]
            .split(|c: char| c.is_whitespace() || c == ';' || c == '{')
            .filter(|w| !w.is_empty())
            .take(3)
            .collect();
        let declares = match header.as_slice() {
            ["mod", name, ..] | [_, "mod", name] => Some(*name),
            _ => None,
        };
        let end = start + item_len(&item[start..]);
        if let Some(name) = declares
            && item[start..end].trim_end().ends_with(';')
        {
            test_mods.push(name.to_owned());
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    (out, test_mods)
}

/// Skips whitespace and further `#[...]` attributes; returns the offset of the item.
fn skip_attributes(s: &str) -> usize {
    let mut i = 0;
    loop {
        let trimmed = s[i..].trim_start();
        i = s.len() - trimmed.len();
        if !trimmed.starts_with("#[") {
            return i;
        }
        let mut depth = 0;
        for (k, c) in trimmed.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        i += k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
    }
}

/// The length of the item at the start of `s`: up to a `;` or `,` outside brackets, through a
/// braced body, or up to the `}` that closes the enclosing block.
fn item_len(s: &str) -> usize {
    let mut depth = 0i32;
    for (k, c) in s.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth < 0 {
                    return k;
                }
                if depth == 0 && c == '}' {
                    return k + 1;
                }
            }
            ';' | ',' if depth == 0 => return k + 1,
            _ => {}
        }
    }
    s.len()
}

/// The top-level names `code` reaches through `crate::` or a `super::` chain of `depth` steps
/// (the crate root), including `crate::{a, b::c}` groups.
fn references(code: &str, depth: usize) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let chars: Vec<(usize, char)> = code.char_indices().collect();
    let mut k = 0;
    while k < chars.len() {
        let (at, c) = chars[k];
        k += 1;
        if !is_ident(c) || (at > 0 && code[..at].ends_with(|p: char| is_ident(p) || p == '$')) {
            continue;
        }
        let word_end = code[at..]
            .find(|p: char| !is_ident(p))
            .map_or(code.len(), |n| at + n);
        let word = &code[at..word_end];
        let mut cursor = word_end;
        let reaches_root = match word {
            "crate" => true,
            "super" if depth > 0 => {
                let mut steps = 1;
                while let Some(after) = path_step(code, cursor)
                    && code[after..].starts_with("super")
                    && !code[after + 5..].starts_with(is_ident)
                {
                    steps += 1;
                    cursor = after + 5;
                }
                steps == depth
            }
            _ => false,
        };
        if reaches_root && let Some(after) = path_step(code, cursor) {
            first_segments(&code[after..], &mut found);
        }
        // Continue after the word so its own letters are not read as new words.
        while k < chars.len() && chars[k].0 < word_end {
            k += 1;
        }
    }
    found
}

/// If `code[at..]` continues with `::` (spaces allowed), the offset after it.
fn path_step(code: &str, at: usize) -> Option<usize> {
    let rest = &code[at..];
    let trimmed = rest.trim_start();
    let after = trimmed.strip_prefix("::")?;
    Some(code.len() - after.trim_start().len())
}

/// The first segment of the path at the start of `s`, or of each path in a `{…}` group.
fn first_segments(s: &str, found: &mut BTreeSet<String>) {
    if let Some(group) = s.strip_prefix('{') {
        let mut depth = 0;
        let mut start = 0;
        for (k, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    push_ident(&group[start..k], found);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    push_ident(&group[start..k], found);
                    start = k + 1;
                }
                _ => {}
            }
        }
    } else {
        push_ident(s, found);
    }
}

fn push_ident(s: &str, found: &mut BTreeSet<String>) {
    let s = s.trim_start();
    let end = s.find(|c: char| !is_ident(c)).unwrap_or(s.len());
    if end > 0 && &s[..end] != "self" {
        found.insert(s[..end].to_owned());
    }
}

/// The graph's circles: its strongly connected components with more than one module.
fn circles(graph: &Graph) -> Vec<BTreeSet<String>> {
    let nodes: BTreeSet<&String> = graph
        .iter()
        .flat_map(|(from, tos)| std::iter::once(from).chain(tos.keys()))
        .collect();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    for node in nodes {
        if out.iter().any(|c| c.contains(node)) {
            continue;
        }
        let forward = reachable(graph, node, false);
        let backward = reachable(graph, node, true);
        let component: BTreeSet<String> = forward.intersection(&backward).cloned().collect();
        if component.len() > 1 {
            out.push(component);
        }
    }
    out
}

fn reachable(graph: &Graph, start: &str, reverse: bool) -> BTreeSet<String> {
    let mut seen = BTreeSet::from([start.to_owned()]);
    let mut todo = vec![start.to_owned()];
    while let Some(node) = todo.pop() {
        let next: Vec<String> = if reverse {
            graph
                .iter()
                .filter(|(_, tos)| tos.contains_key(&node))
                .map(|(from, _)| from.clone())
                .collect()
        } else {
            graph
                .get(&node)
                .map(|tos| tos.keys().cloned().collect())
                .unwrap_or_default()
        };
        for n in next {
            if seen.insert(n.clone()) {
                todo.push(n);
            }
        }
    }
    seen
}

/// The edges inside one circle, with the files that make them.
fn circle_edges<'g>(
    graph: &'g Graph,
    circle: &BTreeSet<String>,
) -> Vec<(&'g String, &'g String, &'g BTreeSet<String>)> {
    graph
        .iter()
        .filter(|(from, _)| circle.contains(*from))
        .flat_map(|(from, tos)| {
            tos.iter()
                .filter(|(to, _)| circle.contains(*to))
                .map(move |(to, files)| (from, to, files))
        })
        .collect()
}

/// One shortest cycle through the circle's first module, e.g. `config -> gates -> config`, and
/// the other modules in the circle.
fn describe(graph: &Graph, circle: &BTreeSet<String>) -> String {
    let Some(start) = circle.first() else {
        return String::new();
    };
    let mut parent: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start.clone()]);
    let mut cycle = vec![start.clone()];
    'search: while let Some(node) = queue.pop_front() {
        for to in graph.get(&node).into_iter().flat_map(|tos| tos.keys()) {
            if !circle.contains(to) {
                continue;
            }
            if to == start {
                let mut path = vec![node.clone()];
                while let Some(p) = parent.get(path.last().expect("non-empty")) {
                    path.push(p.clone());
                }
                path.reverse();
                path.push(start.clone());
                cycle = path;
                break 'search;
            }
            if !parent.contains_key(to) && to != start {
                parent.insert(to.clone(), node.clone());
                queue.push_back(to.clone());
            }
        }
    }
    let modules: Vec<&str> = circle.iter().map(String::as_str).collect();
    format!("{} (modules: {})", cycle.join(" -> "), modules.join(", "))
}

mod scanner {
    use super::*;

    #[test]
    fn comments_strings_and_test_code_are_not_references() {
        let src = r##"
            //! See [`crate::docs_only`].
            use crate::real_a::X; // crate::in_comment
            /* crate::in_block /* nested */ crate::still_block */
            const S: &str = "crate::in_string {";
            const R: &str = r#"crate::in_raw "quote" {"#;
            const C: char = '{';
            fn f<'a>(x: &'a str) -> crate::real_b::Y { crate::real_c::z() }
            #[cfg(test)]
            use crate::test_import;
            #[cfg(test)]
            #[expect(dead_code, reason = "x")]
            mod tests { use crate::test_mod::W; fn g() { let _ = "}"; } }
            #[cfg(test)]
            mod helpers;
            fn after() { crate::real_d::run(); }
        "##;
        let (code, test_mods) = without_test_code(&code_only(src));
        assert_eq!(test_mods, ["helpers"]);
        let found: Vec<String> = references(&code, 1).into_iter().collect();
        assert_eq!(found, ["real_a", "real_b", "real_c", "real_d"]);
    }

    #[test]
    fn groups_and_super_chains_reach_the_root() {
        let code = code_only("use crate::{a::X, b, self}; use super::super::c::Y; use super::d;");
        let found: Vec<String> = references(&code, 2).into_iter().collect();
        assert_eq!(found, ["a", "b", "c"]);
        let top: Vec<String> = references(&code_only("use super::e::Z;"), 1)
            .into_iter()
            .collect();
        assert_eq!(top, ["e"]);
    }

    #[test]
    fn a_circle_is_found_and_named() {
        let mut graph = Graph::new();
        for (from, to, file) in [
            ("config", "gates", "config/mod.rs"),
            ("gates", "tools", "gates/catalog.rs"),
            ("tools", "config", "tools/mod.rs"),
            ("cli", "config", "cli.rs"),
        ] {
            graph
                .entry(from.to_owned())
                .or_default()
                .entry(to.to_owned())
                .or_default()
                .insert(file.to_owned());
        }
        let found = circles(&graph);
        assert_eq!(found.len(), 1);
        assert_eq!(
            describe(&graph, &found[0]),
            "config -> gates -> tools -> config (modules: config, gates, tools)"
        );
        assert_eq!(circle_edges(&graph, &found[0]).len(), 3);
    }
}
