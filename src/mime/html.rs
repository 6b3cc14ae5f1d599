//! HTML → plain text for untrusted mail bodies and HTML attachments.
//!
//! Purpose: turn sender-controlled HTML into text an agent can read without being steered by
//! content a human reader would never see. Parsing is html5ever (through html2text); rendering is
//! html2text with our own [`SafeDecorator`], after a pruning pass over the DOM.
//!
//! Invariants of [`to_text`]:
//! * never panics, never fails: unparsable input yields an empty string;
//! * `<script>`, `<style>`, `<head>`, embedded objects, elements carrying `hidden`, and elements
//!   hidden by an inline `style` (`display:none`, `visibility:hidden`, zero font size or opacity,
//!   `mso-hide:all`, zero height/width with `overflow:hidden`) are dropped with their content;
//! * no link target and no image URL reaches the output: links keep their text only, images keep
//!   their `alt` text only (and not even that when it looks like a URL);
//! * invisible characters (zero-width, bidi controls, Unicode tag characters) are removed,
//!   whitespace runs within a line collapse to one space, blank-line runs to one blank line;
//! * the output never contains `<script` (ASCII case-insensitive), even when the HTML spelled it
//!   as text (`&lt;script`), so a consumer that renders it as HTML cannot be scripted;
//! * the output has at most `max_chars` Unicode scalar values, and the work is bounded: input
//!   beyond [`MAX_HTML_INPUT_BYTES`] is ignored and the DOM is flattened below
//!   [`MAX_DOM_DEPTH`] (html2text sizes tables recursively).
//!
//! Known limit: `<style>` rules are not evaluated (html2text is built without its `css`
//! feature), so text hidden through a class selector stays visible.
//!
//! Callers: `crate::mime` (HTML-only bodies) and `crate::extract` (HTML attachments).

use std::rc::Rc;

use html2text::render::TextDecorator;
use html2text::{Comment, Element, Handle, RcDom, config};

/// HTML beyond this many bytes is not parsed: it bounds parse and render time. Mail HTML is
/// markup-heavy, so the cap is generous compared to any `max_chars` we are asked for.
pub(crate) const MAX_HTML_INPUT_BYTES: usize = 4 * 1024 * 1024;

/// Elements nested deeper than this are flattened into their ancestor at this depth: html2text's
/// size estimation recurses per nesting level and must fit a 2 MiB worker-thread stack.
pub(crate) const MAX_DOM_DEPTH: usize = 96;

/// Render width. Wide, so that ordinary paragraphs are not hard-wrapped; table columns are
/// padded with spaces, which the whitespace collapse removes again.
const RENDER_WIDTH: usize = 400;

/// Elements dropped with everything inside them, by local name (any namespace, so an SVG
/// `<script>` goes too).
const DROPPED_ELEMENTS: &[&str] = &[
    "applet", "audio", "base", "canvas", "datalist", "embed", "frame", "frameset", "head",
    "iframe", "link", "meta", "noembed", "noframes", "noscript", "object", "param", "script",
    "source", "style", "template", "title", "track", "video", "xml",
];

/// HTML → plain text, bounded to `max_chars` Unicode scalar values (see the module invariants).
pub(crate) fn to_text(html: &str, max_chars: usize) -> String {
    to_text_bounded(html, max_chars).0
}

/// Like [`to_text`], and also says whether anything was cut (by `max_chars` or by
/// [`MAX_HTML_INPUT_BYTES`]).
pub(crate) fn to_text_bounded(html: &str, max_chars: usize) -> (String, bool) {
    let (input, input_cut) = prefix_at_char_boundary(html, MAX_HTML_INPUT_BYTES);
    let rendered = render(input).unwrap_or_default();
    let cleaned = clean_lines(&rendered);
    let (text, cut) = truncate_chars(cleaned, max_chars);
    (text, cut || input_cut)
}

/// Parses, prunes and renders; `None` when html2text reports an error even in raw mode.
fn render(input: &str) -> Option<String> {
    // Parsing with any config is the same html5ever call; the config only matters for rendering.
    let dom = make_config(false).parse_html(input.as_bytes()).ok()?;
    prune(&dom);
    // Table layout can fail on pathological nesting; raw mode lays every cell out as a row.
    render_dom(&dom, false).or_else(|| render_dom(&dom, true))
}

fn render_dom(dom: &RcDom, raw: bool) -> Option<String> {
    let cfg = make_config(raw);
    let tree = cfg.dom_to_render_tree(dom).ok()?;
    cfg.render_to_string(tree, RENDER_WIDTH).ok()
}

fn make_config(raw: bool) -> config::Config<SafeDecorator> {
    config::with_decorator(SafeDecorator)
        .link_footnotes(false)
        .no_table_borders()
        .allow_width_overflow()
        .raw_mode(raw)
}

/// Removes dropped and hidden elements and comments, and flattens nesting below
/// [`MAX_DOM_DEPTH`]. Iterative, so deep input cannot overflow the stack here.
fn prune(dom: &RcDom) {
    let mut stack: Vec<(Handle, usize)> = vec![(dom.document.clone(), 0)];
    while let Some((node, depth)) = stack.pop() {
        if depth >= MAX_DOM_DEPTH {
            flatten_into(&node);
            continue;
        }
        let mut children = node.children.borrow_mut();
        children.retain(|child| !is_dropped(child));
        stack.extend(children.iter().map(|child| (child.clone(), depth + 1)));
    }
}

/// Replaces the subtree below `node` by its surviving leaves (text nodes and empty elements), in
/// document order. Structure is lost, text is kept; only pathological input gets here.
fn flatten_into(node: &Handle) {
    let mut leaves: Vec<Handle> = Vec::new();
    let mut pending: Vec<Handle> = std::mem::take(&mut *node.children.borrow_mut());
    pending.reverse();
    while let Some(child) = pending.pop() {
        if is_dropped(&child) {
            continue;
        }
        let mut grandchildren = std::mem::take(&mut *child.children.borrow_mut());
        if grandchildren.is_empty() {
            child.parent.set(Some(Rc::downgrade(node)));
            leaves.push(child);
        } else {
            grandchildren.reverse();
            pending.extend(grandchildren);
        }
    }
    *node.children.borrow_mut() = leaves;
}

/// True for comments, for [`DROPPED_ELEMENTS`], and for elements a reader would not see.
fn is_dropped(node: &Handle) -> bool {
    match &node.data {
        Comment { .. } => true,
        Element { name, attrs, .. } => {
            let local: &str = &name.local;
            if DROPPED_ELEMENTS.iter().any(|d| local.eq_ignore_ascii_case(d)) {
                return true;
            }
            let attrs = attrs.borrow();
            let attr = |key: &str| {
                attrs.iter().find(|a| a.name.local.as_ref().eq_ignore_ascii_case(key)).map(|a| &*a.value)
            };
            attr("hidden").is_some()
                || attr("style").is_some_and(style_hides)
                || (local.eq_ignore_ascii_case("input")
                    && attr("type").is_some_and(|t| t.trim().eq_ignore_ascii_case("hidden")))
                || (local.eq_ignore_ascii_case("dialog") && attr("open").is_none())
        }
        _ => false,
    }
}

/// Whether an inline `style` attribute hides the element. Conservative on purpose: any hiding
/// declaration counts even if a later one would override it, since dropping visible text costs
/// less than passing hidden (possibly injected) text to an agent.
fn style_hides(style: &str) -> bool {
    let style = strip_css_comments(&style.to_ascii_lowercase());
    let mut zero_box = false;
    let mut overflow_hidden = false;
    for decl in style.split(';') {
        let Some((prop, value)) = decl.split_once(':') else { continue };
        let prop = prop.trim();
        let value = value.trim();
        let value = value.strip_suffix("!important").unwrap_or(value).trim();
        match prop {
            "display" if value == "none" => return true,
            "visibility" if value == "hidden" || value == "collapse" => return true,
            "mso-hide" if value == "all" => return true,
            "font-size" | "opacity" if is_css_zero(value) => return true,
            "height" | "max-height" | "width" | "max-width" if is_css_zero(value) => {
                zero_box = true;
            }
            "overflow" | "overflow-x" | "overflow-y" if value == "hidden" || value == "clip" => {
                overflow_hidden = true;
            }
            _ => {}
        }
    }
    zero_box && overflow_hidden
}

/// `0`, `0px`, `0.0em`, `0%`, `.0` …: a number equal to zero with an optional unit.
fn is_css_zero(value: &str) -> bool {
    let number = value.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '%');
    !number.is_empty()
        && number.chars().all(|c| c == '0' || c == '.')
        && number.contains('0')
}

fn strip_css_comments(style: &str) -> String {
    let mut out = String::with_capacity(style.len());
    let mut rest = style;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        match rest[start + 2..].find("*/") {
            Some(end) => rest = &rest[start + 2 + end + 2..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// Characters that render as nothing (or reorder text) and are used to hide or smuggle content:
/// soft hyphen, combining grapheme joiner, zero-width and bidi controls, word joiner and invisible
/// operators, BOM, variation selectors, Unicode tag characters.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{E0000}'..='\u{E007F}'
            | '\u{E0100}'..='\u{E01EF}'
    ) || (c.is_control() && !c.is_whitespace())
}

/// Strips invisible characters, collapses whitespace runs within each line, keeps at most one
/// blank line in a row, trims, and defuses `<script`.
fn clean_lines(rendered: &str) -> String {
    let mut out = String::with_capacity(rendered.len().min(MAX_HTML_INPUT_BYTES));
    let mut pending_blank = false;
    for line in rendered.lines() {
        let mut collapsed = String::with_capacity(line.len());
        let mut in_space = false;
        for c in line.chars().filter(|c| !is_invisible(*c)) {
            if c.is_whitespace() {
                in_space = true;
            } else {
                if in_space && !collapsed.is_empty() {
                    collapsed.push(' ');
                }
                in_space = false;
                collapsed.push(c);
            }
        }
        if collapsed.is_empty() {
            pending_blank = !out.is_empty();
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
            if pending_blank {
                out.push('\n');
            }
        }
        pending_blank = false;
        out.push_str(&collapsed);
    }
    defuse_script_tags(out)
}

/// Replaces the `<` of every `<script` (ASCII case-insensitive) by U+2039 `‹`.
pub(crate) fn defuse_script_tags(text: String) -> String {
    const NEEDLE: &[u8] = b"<script";
    let bytes = text.as_bytes();
    let found = |i: usize| {
        bytes.get(i..i + NEEDLE.len()).is_some_and(|w| w.eq_ignore_ascii_case(NEEDLE))
    };
    if !(0..bytes.len()).any(found) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 8);
    for (i, c) in text.char_indices() {
        if c == '<' && found(i) {
            out.push('\u{2039}');
        } else {
            out.push(c);
        }
    }
    out
}

/// The longest prefix of `s` of at most `max_bytes` bytes that ends on a char boundary, and
/// whether anything was cut.
fn prefix_at_char_boundary(s: &str, max_bytes: usize) -> (&str, bool) {
    if s.len() <= max_bytes {
        return (s, false);
    }
    let mut end = max_bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (&s[..end], true)
}

/// The first `max_chars` Unicode scalar values of `s`, and whether anything was cut.
pub(crate) fn truncate_chars(mut s: String, max_chars: usize) -> (String, bool) {
    match s.char_indices().nth(max_chars) {
        Some((cut_at, _)) => {
            s.truncate(cut_at);
            (s, true)
        }
        None => (s, false),
    }
}

/// html2text decorator that never emits a URL: links render as their text, images as `[alt]`
/// (nothing when the alt text is empty or looks like a URL), no footnotes. List and quote
/// markers are kept because they carry meaning.
#[derive(Clone, Copy, Debug)]
struct SafeDecorator;

impl TextDecorator for SafeDecorator {
    type Annotation = ();

    fn decorate_link_start(&mut self, _url: &str) -> (String, Self::Annotation) {
        (String::new(), ())
    }
    fn decorate_link_end(&mut self) -> String {
        String::new()
    }
    fn decorate_em_start(&self) -> (String, Self::Annotation) {
        (String::new(), ())
    }
    fn decorate_em_end(&self) -> String {
        String::new()
    }
    fn decorate_strong_start(&self) -> (String, Self::Annotation) {
        (String::new(), ())
    }
    fn decorate_strong_end(&self) -> String {
        String::new()
    }
    fn decorate_strikeout_start(&self) -> (String, Self::Annotation) {
        (String::new(), ())
    }
    fn decorate_strikeout_end(&self) -> String {
        String::new()
    }
    fn decorate_code_start(&self) -> (String, Self::Annotation) {
        (String::new(), ())
    }
    fn decorate_code_end(&self) -> String {
        String::new()
    }
    fn decorate_preformat_first(&self) -> Self::Annotation {}
    fn decorate_preformat_cont(&self) -> Self::Annotation {}
    fn decorate_image(&mut self, _src: &str, title: &str) -> (String, Self::Annotation) {
        let alt = title.trim();
        if alt.is_empty() || alt.contains("://") || alt.to_ascii_lowercase().starts_with("www.") {
            (String::new(), ())
        } else {
            (format!("[{alt}]"), ())
        }
    }
    fn header_prefix(&self, _level: usize) -> String {
        String::new()
    }
    fn quote_prefix(&self) -> String {
        "> ".to_owned()
    }
    fn unordered_item_prefix(&self) -> String {
        "* ".to_owned()
    }
    fn ordered_item_prefix(&self, i: i64) -> String {
        format!("{i}. ")
    }
    fn make_subblock_decorator(&self) -> Self {
        SafeDecorator
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 10_000;

    #[test]
    fn keeps_visible_text_and_drops_script_style_head() {
        let html = "<html><head><title>Title here</title><style>p{color:red}</style>\
            <script>var leaked = 1;</script></head><body><p>Hello <b>Ann</b>,</p>\
            <script type=\"text/javascript\">alert('x')</script><p>see you</p></body></html>";
        let text = to_text(html, MAX);
        assert!(text.contains("Hello Ann,"), "{text}");
        assert!(text.contains("see you"), "{text}");
        for bad in ["Title here", "color:red", "leaked", "alert"] {
            assert!(!text.contains(bad), "{bad} in {text}");
        }
    }

    #[test]
    fn drops_hidden_elements() {
        let html = "<p>shown one</p>\
            <div hidden>attr-hidden</div>\
            <div style=\"display:none\">display-none</div>\
            <span style=\"DISPLAY : None !important\">upper-none</span>\
            <p style=\"color:red; visibility: hidden\">vis-hidden</p>\
            <p style=\"font-size:0px\">zero-font</p>\
            <p style=\"opacity:0\">zero-opacity</p>\
            <p style=\"mso-hide:all\">mso-hidden</p>\
            <div style=\"max-height:0;overflow:hidden\">collapsed-box</div>\
            <p style=\"display:/*x*/none\">commented-none</p>\
            <input type=\"hidden\" value=\"hidden-input\">\
            <dialog>closed-dialog</dialog>\
            <noscript>no-script-text</noscript>\
            <p style=\"font-size:10px\">shown two</p>";
        let text = to_text(html, MAX);
        assert!(text.contains("shown one"), "{text}");
        assert!(text.contains("shown two"), "{text}");
        for bad in [
            "attr-hidden",
            "display-none",
            "upper-none",
            "vis-hidden",
            "zero-font",
            "zero-opacity",
            "mso-hidden",
            "collapsed-box",
            "commented-none",
            "hidden-input",
            "closed-dialog",
            "no-script-text",
        ] {
            assert!(!text.contains(bad), "{bad} in {text}");
        }
    }

    #[test]
    fn no_image_or_link_url_survives() {
        let html = "<p>Click <a href=\"https://track.example.com/c?id=42&u=ann\">here</a> now.</p>\
            <img src=\"https://img.example.com/pixel.gif?u=ann\" width=1 height=1>\
            <img src=\"http://img.example.net/logo.png\" alt=\"Company logo\">\
            <img src=\"https://img.example.net/x.png\" alt=\"https://img.example.net/x.png\">\
            <a href=\"https://example.org/x\"><img src=\"cid:part1\" alt=\"\"></a>";
        let text = to_text(html, MAX);
        assert!(text.contains("Click here now."), "{text}");
        assert!(text.contains("[Company logo]"), "{text}");
        for bad in ["track.example.com", "img.example.com", "img.example.net", "example.org", "://"]
        {
            assert!(!text.contains(bad), "{bad} in {text}");
        }
    }

    #[test]
    fn link_text_that_is_a_url_is_kept_as_text() {
        let text = to_text("<a href=\"https://t.example.com/r\">www.example.org</a>", MAX);
        assert_eq!(text, "www.example.org");
    }

    #[test]
    fn collapses_whitespace_and_blank_lines() {
        let html = "<p>a  \t  b&nbsp;&nbsp;c</p><br><br><br><br><p>d</p>";
        let text = to_text(html, MAX);
        assert_eq!(text, "a b c\n\nd");
    }

    #[test]
    fn strips_invisible_characters() {
        let html = "<p>pay\u{200B}ment \u{E0041}\u{E0042}now\u{202E}\u{FEFF}</p>";
        assert_eq!(to_text(html, MAX), "payment now");
    }

    #[test]
    fn defuses_script_written_as_text() {
        let text = to_text("<p>&lt;script&gt;alert(1)&lt;/SCRIPT&gt; and &lt;ScRiPt src=x&gt;</p>", MAX);
        assert!(!text.to_ascii_lowercase().contains("<script"), "{text}");
        assert!(text.contains("\u{2039}script>alert(1)</SCRIPT>"), "{text}");
    }

    #[test]
    fn bounded_by_max_chars_in_scalar_values() {
        let html = format!("<p>{}</p>", "é".repeat(500));
        let (text, cut) = to_text_bounded(&html, 100);
        assert_eq!(text.chars().count(), 100);
        assert!(cut);
        let (text, cut) = to_text_bounded("<p>short</p>", 100);
        assert_eq!(text, "short");
        assert!(!cut);
        assert_eq!(to_text("<p>anything</p>", 0), "");
    }

    #[test]
    fn lists_and_tables_render_readably() {
        let html = "<ul><li>one</li><li>two</li></ul><ol><li>first</li></ol>\
            <table><tr><td>Invoice</td><td>INV-7</td></tr><tr><td>Total</td><td>12 EUR</td></tr>\
            </table>";
        let text = to_text(html, MAX);
        assert!(text.contains("* one\n* two"), "{text}");
        assert!(text.contains("1. first"), "{text}");
        assert!(text.contains("Invoice INV-7"), "{text}");
        assert!(text.contains("Total 12 EUR"), "{text}");
    }

    #[test]
    fn deep_nesting_is_flattened_not_overflowing() {
        // Run on a 2 MiB stack, like a tokio worker, to prove the depth cap is enough.
        let handle = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(|| {
                let depth = 20_000;
                let mut html = String::new();
                for _ in 0..depth {
                    html.push_str("<div><table><tr><td>");
                }
                html.push_str("deep text<script>x()</script><span hidden>gone</span>");
                let text = to_text(&html, MAX);
                let nested_spans = format!("{}deep spans{}", "<span>".repeat(50_000), "");
                let text2 = to_text(&nested_spans, MAX);
                (text, text2)
            })
            .expect("spawn test thread");
        let (text, text2) = handle.join().expect("no stack overflow");
        assert!(text.contains("deep text"), "{text}");
        assert!(!text.contains("x()") && !text.contains("gone"), "{text}");
        assert_eq!(text2, "deep spans");
    }

    #[test]
    fn garbage_and_empty_input() {
        assert_eq!(to_text("", MAX), "");
        assert_eq!(to_text("<<<>>></p></div><", MAX), "<<<>>><");
        let junk = String::from_utf8_lossy(&[0xff, 0x00, 0x3c, 0x01, 0x7f, 0x80]).into_owned();
        let text = to_text(&junk, MAX);
        assert!(!text.chars().any(|c| c.is_control()), "{text:?}");
    }

    #[test]
    fn large_input_is_capped() {
        let html = format!("<p>{}</p>", "word ".repeat(MAX_HTML_INPUT_BYTES / 4));
        let (text, cut) = to_text_bounded(&html, usize::MAX);
        assert!(cut);
        assert!(text.len() <= MAX_HTML_INPUT_BYTES);
    }

    #[test]
    fn css_zero_detection() {
        for zero in ["0", "0px", "0.0em", ".0", "0%", "00"] {
            assert!(is_css_zero(zero), "{zero}");
        }
        for non_zero in ["", "px", "10px", "0.5", "1", "auto", "."] {
            assert!(!is_css_zero(non_zero), "{non_zero}");
        }
    }

    #[test]
    fn truncate_chars_is_exact() {
        assert_eq!(truncate_chars("añb".to_owned(), 2), ("añ".to_owned(), true));
        assert_eq!(truncate_chars("añb".to_owned(), 3), ("añb".to_owned(), false));
        assert_eq!(truncate_chars(String::new(), 0), (String::new(), false));
    }
}
