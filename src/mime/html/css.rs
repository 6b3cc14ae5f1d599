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

/// Hidden names kept per message (and, separately, painted names).
pub(super) const MAX_HIDDEN_NAMES: usize = 4096;

/// Group rules (`@media` …) nested deeper than this are skipped whole.
const MAX_GROUP_NESTING: usize = 32;

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

/// What the message's `<style>` blocks hide, and which names they paint.
#[derive(Debug, Default)]
pub(super) struct HiddenRules {
    /// Hidden classes, ids, and element names (`p`, `span`, or `*`) hidden by a selector of
    /// that element alone.
    hidden: Names,
    /// Names any rule (media queries included) gives a colour or background: their paint is
    /// unknown here, so inherited colours are not trusted on them.
    painted: Names,
}

/// Class, id and element names, ASCII-lowercased.
#[derive(Debug, Default)]
struct Names {
    classes: HashSet<String>,
    ids: HashSet<String>,
    elements: HashSet<String>,
    /// More names than [`MAX_HIDDEN_NAMES`] were offered to a set that then matches everything
    /// (`painted`: unknown paint is the safe answer). `hidden` just stops growing.
    overflow: bool,
}

impl Names {
    fn len(&self) -> usize {
        self.classes.len() + self.ids.len() + self.elements.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0 && !self.overflow
    }

    fn matches(&self, local: &str, class: Option<&str>, id: Option<&str>) -> bool {
        if self.is_empty() {
            return false;
        }
        let lower = |s: &str| s.to_ascii_lowercase();
        self.overflow
            || self.elements.contains("*")
            || self.elements.contains(&lower(local))
            || id.is_some_and(|id| self.ids.contains(&lower(id.trim())))
            || class.is_some_and(|c| {
                c.split_ascii_whitespace()
                    .any(|name| self.classes.contains(&lower(name)))
            })
    }

    fn add(&mut self, compound: Compound, element_too: bool, full_matches_all: bool) {
        let offered = compound.classes.len()
            + compound.ids.len()
            + usize::from(element_too && compound.element.is_some());
        if self.len() + offered > MAX_HIDDEN_NAMES {
            self.overflow |= full_matches_all;
            return;
        }
        self.classes.extend(compound.classes);
        self.ids.extend(compound.ids);
        if element_too && let Some(element) = compound.element {
            self.elements.insert(element);
        }
    }
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

    /// Whether an element named `local` with these `class` and `id` attributes is hidden.
    pub(super) fn hides(&self, local: &str, class: Option<&str>, id: Option<&str>) -> bool {
        self.hidden.matches(local, class, id)
    }

    /// Whether some rule may set the element's colour or background.
    pub(super) fn repaints(&self, local: &str, class: Option<&str>, id: Option<&str>) -> bool {
        self.painted.matches(local, class, id)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.hidden.len()
    }

    /// Reads rules, descending into conditional group rules (`@media`, `@supports`, …): their
    /// rules count for hiding only when the group applies on a desktop screen, and always for
    /// painting. Other at-rule blocks are skipped. One pass, brace depth counted, no recursion.
    fn read_stylesheet(&mut self, css: &str) {
        let css = super::strip_css_comments(css);
        let bytes = css.as_bytes();
        let mut at = 0;
        // Whether each group rule we are inside applies.
        let mut groups: Vec<bool> = Vec::new();
        while at < bytes.len() {
            let Some(rel) = css[at..].find(['{', '}', ';']) else {
                break;
            };
            let stop = at + rel;
            let prelude = css[at..stop].trim();
            match bytes[stop] {
                b'}' => {
                    groups.pop();
                    at = stop + 1;
                }
                // An at-rule statement (`@import …;`) or a stray declaration.
                b';' => at = stop + 1,
                _ => {
                    let block_start = stop + 1;
                    let lowered = prelude.to_ascii_lowercase();
                    if lowered.starts_with('@') {
                        if is_group_rule(&lowered) && groups.len() < MAX_GROUP_NESTING {
                            groups.push(is_group_that_applies(&lowered));
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
                    let applies = groups.iter().all(|g| *g);
                    if applies && super::style_hides(declarations) {
                        for selector in prelude.split(',') {
                            self.add_selector(selector);
                        }
                    }
                    let lowered_declarations = declarations.to_ascii_lowercase();
                    if lowered_declarations.contains("color")
                        || lowered_declarations.contains("background")
                    {
                        for compound in prelude.split(|c: char| {
                            c == ',' || c.is_ascii_whitespace() || matches!(c, '>' | '+' | '~')
                        }) {
                            self.painted.add(Compound::parse(compound), true, true);
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
        if self.hidden.len() >= MAX_HIDDEN_NAMES {
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
                self.hidden.add(parsed, false, false);
                return;
            }
            if single {
                self.hidden.add(parsed, true, false);
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

/// Conditional group rules, whose blocks hold ordinary rules.
fn is_group_rule(prelude: &str) -> bool {
    [
        "@media",
        "@supports",
        "@document",
        "@layer",
        "@container",
        "@scope",
    ]
    .iter()
    .any(|g| prelude.starts_with(g))
}

/// `@media` without a feature test and not for print or speech, and `@supports` and `@layer`.
fn is_group_that_applies(prelude: &str) -> bool {
    if prelude.starts_with("@supports") || prelude.starts_with("@layer") {
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

/// Text and background colour in effect at an element, as far as the HTML itself declares them
/// (inline styles and presentational attributes, inherited). `None` is unknown: undeclared,
/// unparseable, an image, or possibly set by a stylesheet rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Paint {
    fg: Option<Color>,
    bg: Option<Color>,
}

impl Paint {
    /// The paint inside an element whose parent has `self`, and whether text there cannot be
    /// read. Precedence as in CSS: presentational attributes, then stylesheet rules (which make
    /// the paint unknown), then the inline style.
    pub(super) fn enter<'a>(
        self,
        local: &str,
        attr: impl Fn(&str) -> Option<&'a str>,
        rules: &HiddenRules,
    ) -> (Paint, bool) {
        let mut next = self;
        if local.eq_ignore_ascii_case("font")
            && let Some(color) = attr("color")
        {
            next.fg = parse_color(color);
        }
        if local.eq_ignore_ascii_case("body")
            && let Some(color) = attr("text")
        {
            next.fg = parse_color(color);
        }
        if let Some(color) = attr("bgcolor") {
            next.bg = parse_color(color);
        }
        if attr("background").is_some() {
            // A background image: whatever is under the text is unknown.
            next.bg = None;
        }
        if rules.repaints(local, attr("class"), attr("id")) {
            next = Paint::default();
        }
        if let Some(style) = attr("style") {
            next.apply_style(style);
        }
        (next, next.unreadable())
    }

    /// Whether text in this paint cannot be read.
    pub(super) fn unreadable(self) -> bool {
        self.fg.is_some_and(|fg| invisible_on(fg, self.bg))
    }

    fn apply_style(&mut self, style: &str) {
        let style = super::strip_css_comments(&style.to_ascii_lowercase());
        for declaration in style.split(';') {
            let Some((property, value)) = declaration.split_once(':') else {
                continue;
            };
            let value = value.trim();
            let value = value.strip_suffix("!important").unwrap_or(value).trim();
            match property.trim() {
                "color" => self.fg = parse_color(value),
                "background-color" => self.bg = parse_color(value),
                "background" => {
                    self.bg = if value.contains("url(") || value.contains("gradient(") {
                        None
                    } else {
                        parse_color(value)
                            .or_else(|| value.split_ascii_whitespace().find_map(parse_color))
                    };
                }
                "background-image" if value != "none" => self.bg = None,
                _ => {}
            }
        }
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
    fn painted_names_make_colours_unknown() {
        let r = rules(
            ".btn{background:#1a73e8} @media (prefers-color-scheme: dark){.x td{color:#fff}}\
             @font-face{color:red} .plain{margin:0}",
        );
        for (local, class) in [("a", "btn"), ("p", "x"), ("td", "")] {
            assert!(r.repaints(local, Some(class), None), "{local}.{class}");
        }
        assert!(!r.repaints("p", Some("plain"), None));
        let white_page = Paint {
            fg: None,
            bg: Some(Color::Rgb(255, 255, 255)),
        };
        let attrs = |style: &'static str| move |k: &str| (k == "style").then_some(style);
        let (_, hidden) = white_page.enter("span", attrs("color:#fff"), &r);
        assert!(hidden);
        let (_, hidden) = white_page.enter(
            "a",
            |k: &str| match k {
                "class" => Some("btn"),
                "style" => Some("color:#fff"),
                _ => None,
            },
            &r,
        );
        assert!(!hidden, "a stylesheet may paint .btn");
        let (inner, hidden) = white_page.enter("div", attrs("background-image:url(x.png)"), &r);
        assert!(!hidden && inner.bg.is_none());
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
