//! A small, bounded reader of the CSS in mail HTML: which classes, ids and element names a
//! `<style>` block hides, and when two colours are (nearly) the same.
//!
//! Purpose: text hidden by a stylesheet rule (`.x{display:none}`) or painted in the background
//! colour is invisible to a reader but not to an agent (issue 8, finding 12d). No CSS crate is
//! used: the well-kept ones (`cssparser`, `lightningcss`) are full engines pulling in much more
//! than the one question asked here, and a selector engine is not needed for it. Invariants:
//! linear in the input, at most [`MAX_CSS_BYTES`] of stylesheet text and [`MAX_HIDDEN_NAMES`]
//! names are kept, no recursion. The reader errs towards hiding more: a rule counts whatever its
//! selector's context (`.a .b` hides every `.b`), later overriding rules are not applied, and
//! class and id names match case-insensitively. Rules a desktop reader does not see applied are
//! left out: those inside `@media` queries with a feature test (`(max-width: …)`) or for `print`,
//! and selectors that apply only on interaction (`:hover`, `:focus`, …) or to pseudo-elements.
//! Callers: `super` (the HTML renderer) only.

use std::collections::HashSet;

/// Stylesheet text read per message; the rest is ignored (real mail has a few KiB).
pub(super) const MAX_CSS_BYTES: usize = 256 * 1024;

/// Hidden names kept per message.
pub(super) const MAX_HIDDEN_NAMES: usize = 4096;

/// Pseudo-classes that apply only while the reader interacts (or never, in a mail client).
const INTERACTION_PSEUDO: &[&str] = &[
    "hover",
    "focus",
    "focus-within",
    "focus-visible",
    "active",
    "visited",
    "target",
    "checked",
];

/// What the message's `<style>` blocks hide. Names are ASCII-lowercased.
#[derive(Debug, Default)]
pub(super) struct HiddenRules {
    classes: HashSet<String>,
    ids: HashSet<String>,
    /// Element names (`p`, `span`, or `*`) hidden by a selector of that element alone.
    elements: HashSet<String>,
}

impl HiddenRules {
    /// Reads every `<style>…</style>` of `html` (up to [`MAX_CSS_BYTES`] in all). A prescan of
    /// the raw text, so rules count wherever the block is (CSS applies document-wide) and before
    /// the parser has seen the elements they hide; a `<style>` inside a comment counts too,
    /// which can only hide more.
    pub(super) fn from_html(html: &str) -> Self {
        let mut rules = Self::default();
        let mut budget = MAX_CSS_BYTES;
        let mut rest = html;
        while budget > 0 {
            let Some(start) = find_ascii_ci(rest, "<style") else {
                break;
            };
            let after_name = &rest[start + "<style".len()..];
            // `<styles>` is not a style element.
            if !after_name.starts_with(|c: char| c == '>' || c == '/' || c.is_ascii_whitespace()) {
                rest = after_name;
                continue;
            }
            let Some(open_end) = after_name.find('>') else {
                break;
            };
            let body = &after_name[open_end + 1..];
            let end = find_ascii_ci(body, "</style").unwrap_or(body.len());
            let css = prefix(&body[..end], budget);
            budget -= css.len();
            rules.read_stylesheet(css);
            rest = &body[end..];
        }
        rules
    }

    pub(super) fn is_empty(&self) -> bool {
        self.classes.is_empty() && self.ids.is_empty() && self.elements.is_empty()
    }

    /// Whether an element named `local` with these `class` and `id` attributes is hidden.
    pub(super) fn hides(&self, local: &str, class: Option<&str>, id: Option<&str>) -> bool {
        if self.is_empty() {
            return false;
        }
        let lower = |s: &str| s.to_ascii_lowercase();
        self.elements.contains("*")
            || self.elements.contains(&lower(local))
            || id.is_some_and(|id| self.ids.contains(&lower(id.trim())))
            || class.is_some_and(|c| {
                c.split_ascii_whitespace()
                    .any(|name| self.classes.contains(&lower(name)))
            })
    }

    fn len(&self) -> usize {
        self.classes.len() + self.ids.len() + self.elements.len()
    }

    /// Reads rules and descends into `@media` (screen) and `@supports` blocks; every other
    /// at-rule block is skipped. One pass, brace depth counted, no recursion.
    fn read_stylesheet(&mut self, css: &str) {
        let css = super::strip_css_comments(css);
        let bytes = css.as_bytes();
        let mut at = 0;
        // Depths of the `@media`/`@supports` blocks we are inside.
        let mut open_groups = 0usize;
        while at < bytes.len() {
            let Some(rel) = css[at..].find(['{', '}', ';']) else {
                break;
            };
            let stop = at + rel;
            let prelude = css[at..stop].trim();
            match bytes[stop] {
                b'}' => {
                    open_groups = open_groups.saturating_sub(1);
                    at = stop + 1;
                }
                // An at-rule statement (`@import …;`) or a stray declaration.
                b';' => at = stop + 1,
                _ => {
                    let block_start = stop + 1;
                    let lowered = prelude.to_ascii_lowercase();
                    if lowered.starts_with('@') {
                        if is_group_that_applies(&lowered) {
                            open_groups += 1;
                            at = block_start;
                        } else {
                            at = skip_block(bytes, block_start);
                        }
                        continue;
                    }
                    let end = skip_block(bytes, block_start);
                    // Without its closing brace when there is one (an unclosed block runs on).
                    let body_end =
                        if bytes.get(end.wrapping_sub(1)) == Some(&b'}') && end > block_start {
                            end - 1
                        } else {
                            end
                        };
                    let declarations = &css[block_start..body_end];
                    if super::style_hides(declarations) {
                        for selector in prelude.split(',') {
                            self.add_selector(selector);
                        }
                    }
                    at = end;
                }
            }
        }
    }

    /// Records what `selector` hides: the names of its rightmost compound that has a class or
    /// id, or an element name when it is a single compound.
    fn add_selector(&mut self, selector: &str) {
        if self.len() >= MAX_HIDDEN_NAMES {
            return;
        }
        let compounds: Vec<&str> = selector
            .split(|c: char| c.is_ascii_whitespace() || matches!(c, '>' | '+' | '~'))
            .filter(|s| !s.is_empty())
            .collect();
        let Some(last) = compounds.last() else {
            return;
        };
        // A pseudo-element hides generated content, not the element; an interaction state
        // anywhere (`a:hover .tip`) makes the rule apply only while the reader interacts.
        if last.contains("::")
            || compounds
                .iter()
                .any(|c| c.split(':').skip(1).any(is_interaction_pseudo))
        {
            return;
        }
        let single = compounds.len() == 1;
        for compound in compounds.iter().rev() {
            let parsed = Compound::parse(compound);
            if !parsed.classes.is_empty() || !parsed.ids.is_empty() {
                self.classes.extend(parsed.classes);
                self.ids.extend(parsed.ids);
                return;
            }
            if single {
                if let Some(element) = parsed.element {
                    self.elements.insert(element);
                }
                return;
            }
        }
    }
}

fn is_interaction_pseudo(pseudo: &str) -> bool {
    let name = pseudo
        .split(['(', '.', '#', '['])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    INTERACTION_PSEUDO.contains(&name.as_str())
}

/// `@media` without a feature test and not for print or speech, and `@supports`.
fn is_group_that_applies(prelude: &str) -> bool {
    if prelude.starts_with("@supports") {
        return true;
    }
    prelude.starts_with("@media")
        && !prelude.contains('(')
        && !prelude.contains("print")
        && !prelude.contains("speech")
}

/// The index just past the `}` closing the block that starts at `from` (or the end).
fn skip_block(bytes: &[u8], from: usize) -> usize {
    let mut depth = 1usize;
    for (i, b) in bytes.iter().enumerate().skip(from) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    bytes.len()
}

/// One compound selector's element name, classes and ids (lowercased); pseudo-classes and
/// attribute tests are cut off, which can only widen what it matches.
struct Compound {
    element: Option<String>,
    classes: Vec<String>,
    ids: Vec<String>,
}

impl Compound {
    fn parse(compound: &str) -> Self {
        let simple = compound.split([':', '[']).next().unwrap_or("");
        let mut out = Compound {
            element: None,
            classes: Vec::new(),
            ids: Vec::new(),
        };
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        let head: String = simple
            .chars()
            .take_while(|c| ident(*c) || *c == '*')
            .collect();
        if !head.is_empty() {
            out.element = Some(head.to_ascii_lowercase());
        }
        let mut rest = &simple[head.len()..];
        while let Some(marker) = rest.chars().next() {
            let tail = &rest[marker.len_utf8()..];
            let name: String = tail.chars().take_while(|c| ident(*c)).collect();
            match marker {
                '.' if !name.is_empty() => out.classes.push(name.to_ascii_lowercase()),
                '#' if !name.is_empty() => out.ids.push(name.to_ascii_lowercase()),
                _ => {}
            }
            rest = &tail[name.len()..];
        }
        out
    }
}

/// A CSS colour as far as hiding is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Color {
    Transparent,
    Rgb(u8, u8, u8),
}

/// Parses `#rgb`, `#rgba`, `#rrggbb`, `#rrggbbaa`, `rgb()`/`rgba()` (numbers or percentages),
/// `transparent` and the basic named colours; anything else is unknown.
pub(super) fn parse_color(value: &str) -> Option<Color> {
    let value = value.trim().to_ascii_lowercase();
    if let Some(hex) = value.strip_prefix('#') {
        return parse_hex(hex);
    }
    if let Some(args) = value
        .strip_prefix("rgba(")
        .or_else(|| value.strip_prefix("rgb("))
    {
        return parse_rgb_function(args.strip_suffix(')')?);
    }
    let named = match value.as_str() {
        "transparent" => return Some(Color::Transparent),
        "white" => (255, 255, 255),
        "black" => (0, 0, 0),
        "red" => (255, 0, 0),
        "lime" => (0, 255, 0),
        "green" => (0, 128, 0),
        "blue" => (0, 0, 255),
        "yellow" => (255, 255, 0),
        "gray" | "grey" => (128, 128, 128),
        "silver" => (192, 192, 192),
        "whitesmoke" => (245, 245, 245),
        "snow" => (255, 250, 250),
        "ivory" => (255, 255, 240),
        _ => return None,
    };
    Some(Color::Rgb(named.0, named.1, named.2))
}

fn parse_hex(hex: &str) -> Option<Color> {
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let digit = |i: usize| u8::from_str_radix(&hex[i..=i], 16).ok();
    let pair = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).ok();
    let (r, g, b, a) = match hex.len() {
        3 | 4 => {
            let short = |i: usize| digit(i).map(|d| d * 17);
            let a = if hex.len() == 4 { short(3)? } else { 255 };
            (short(0)?, short(1)?, short(2)?, a)
        }
        6 | 8 => {
            let a = if hex.len() == 8 { pair(6)? } else { 255 };
            (pair(0)?, pair(2)?, pair(4)?, a)
        }
        _ => return None,
    };
    Some(if a == 0 {
        Color::Transparent
    } else {
        Color::Rgb(r, g, b)
    })
}

fn parse_rgb_function(args: &str) -> Option<Color> {
    let parts: Vec<&str> = args
        .split(|c: char| c == ',' || c == '/' || c.is_ascii_whitespace())
        .filter(|s| !s.is_empty())
        .collect();
    if !(3..=4).contains(&parts.len()) {
        return None;
    }
    let channel = |s: &str| -> Option<u8> {
        let (number, scale) = match s.strip_suffix('%') {
            Some(p) => (p, 2.55),
            None => (s, 1.0),
        };
        let v: f64 = number.parse().ok()?;
        // Clamped to 0..=255 and rounded first, so the cast is exact.
        Some((v * scale).clamp(0.0, 255.0).round() as u8)
    };
    if let Some(alpha) = parts.get(3) {
        let a: f64 = alpha.trim_end_matches('%').parse().ok()?;
        if a <= 0.0 {
            return Some(Color::Transparent);
        }
    }
    Some(Color::Rgb(
        channel(parts[0])?,
        channel(parts[1])?,
        channel(parts[2])?,
    ))
}

/// Whether text in `fg` on `bg` cannot be read: transparent text, or colours whose channels all
/// differ by at most 16 (near-white on white is as hidden as white on white).
pub(super) fn invisible_on(fg: Color, bg: Option<Color>) -> bool {
    match (fg, bg) {
        (Color::Transparent, _) => true,
        (Color::Rgb(r, g, b), Some(Color::Rgb(br, bgr, bb))) => {
            r.abs_diff(br) <= 16 && g.abs_diff(bgr) <= 16 && b.abs_diff(bb) <= 16
        }
        _ => false,
    }
}

/// The first match of an ASCII `needle` in `haystack`, ignoring ASCII case.
fn find_ascii_ci(haystack: &str, needle: &str) -> Option<usize> {
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    if n.is_empty() || h.len() < n.len() {
        return None;
    }
    (0..=h.len() - n.len()).find(|&i| h[i] == n[0] && h[i..i + n.len()].eq_ignore_ascii_case(n))
}

/// The longest prefix of `s` of at most `max` bytes ending on a char boundary.
fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(css: &str) -> HiddenRules {
        HiddenRules::from_html(&format!("<html><head><style>{css}</style></head></html>"))
    }

    #[test]
    fn reads_hiding_rules_by_class_id_and_element() {
        let r = rules(
            ".a{display:none} #b { visibility : hidden !important } span.c, .d > .e{font-size:0}\
             .f .g{opacity:0} .shown{color:red} em{display:none} .h i{display:none}\
             .col{color:#fff;background:#ffffff}",
        );
        for class in ["a", "c", "e", "g", "h", "col"] {
            assert!(r.hides("div", Some(class), None), "{class}");
        }
        assert!(
            r.hides("div", Some("x A"), None),
            "case-insensitive, any class"
        );
        assert!(r.hides("div", None, Some("b")));
        assert!(r.hides("em", None, None));
        assert!(!r.hides("i", None, None), "`.h i` hides .h, not every <i>");
        assert!(!r.hides("div", Some("shown d f"), None));
        assert!(!r.hides("span", None, None));
    }

    #[test]
    fn skips_rules_a_desktop_reader_does_not_see() {
        let r = rules(
            "@media (max-width:600px){.mobile-only{display:none}} @media print{.p{display:none}}\
             @media screen{.s{display:none}} @supports (display:grid){.g{display:none}}\
             .m:hover{display:none} .n::before{display:none} .o:first-child{display:none}\
             @font-face{font-family:x;src:url(a)} @import url(x.css); .q{display:none}",
        );
        for shown in ["mobile-only", "p", "m", "n"] {
            assert!(!r.hides("div", Some(shown), None), "{shown}");
        }
        for hidden in ["s", "g", "o", "q"] {
            assert!(r.hides("div", Some(hidden), None), "{hidden}");
        }
    }

    #[test]
    fn finds_every_style_block_and_stays_bounded() {
        let html = "<p>x</p><STYLE type=text/css>.a{display:none}</STYLE><styles>.b{display:none}\
            </styles><body><style>.c{display:none}";
        let r = HiddenRules::from_html(html);
        assert!(r.hides("p", Some("a"), None));
        assert!(!r.hides("p", Some("b"), None));
        assert!(r.hides("p", Some("c"), None));
        let many: String = (0..MAX_HIDDEN_NAMES + 100)
            .map(|i| format!(".c{i}{{display:none}}"))
            .collect();
        let r = rules(&many);
        assert_eq!(r.len(), MAX_HIDDEN_NAMES);
        let huge = format!("{}.late{{display:none}}", " ".repeat(MAX_CSS_BYTES));
        assert!(!rules(&huge).hides("p", Some("late"), None));
        for garbage in [
            "{{{{",
            "}}}}.a{",
            "@media{",
            ".a{display:none",
            "::{}",
            "\u{e9}{}",
        ] {
            let _ = rules(garbage);
        }
    }

    #[test]
    fn parses_colours() {
        let white = Some(Color::Rgb(255, 255, 255));
        for spelling in [
            "#fff",
            "#FFFFFF",
            "white",
            "rgb(255,255,255)",
            "rgb(100% 100% 100%)",
        ] {
            assert_eq!(parse_color(spelling), white, "{spelling}");
        }
        for clear in ["transparent", "#0000", "#ffffff00", "rgba(0,0,0,0)"] {
            assert_eq!(parse_color(clear), Some(Color::Transparent), "{clear}");
        }
        for unknown in ["", "#ff", "#ggg", "hsl(0,0%,100%)", "inherit", "rgb(1,2)"] {
            assert_eq!(parse_color(unknown), None, "{unknown}");
        }
        assert!(invisible_on(Color::Rgb(250, 250, 250), white));
        assert!(!invisible_on(Color::Rgb(200, 200, 200), white));
        assert!(!invisible_on(Color::Rgb(255, 255, 255), None));
        assert!(invisible_on(Color::Transparent, None));
    }
}
