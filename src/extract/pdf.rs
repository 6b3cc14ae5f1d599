//! PDF text (issue 13, reference §7.1): pdf-extract (on lopdf) interprets the pages in order and
//! a [`Sink`] keeps only the text (never images or paths), words joined by one space, lines by a
//! newline and pages by a blank line, and stops the interpretation as soon as `max_chars` is
//! reached (`truncated`), so later pages are never read. The bytes are hostile: both libraries
//! panic on malformed input (caught here, reported as [`ExtractError::Failed`]), and the two
//! recursions they would follow without end into a stack overflow, which no `catch_unwind`
//! stops (a `/Parent` cycle, a form XObject that draws itself), are refused before they start.
//! An encrypted PDF is [`ExtractError::Encrypted`] unless it opens with the empty user password
//! (lopdf decrypts those on load, as pdf.js, the reference's parser, does: such a file only
//! restricts permissions, anyone can read it). Memory and time are the isolated worker's to
//! bound (rlimits, a wall-clock kill): a Flate bomb inflates inside lopdf, out of our reach.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};

use pdf_extract::content::{Content, Operation};
use pdf_extract::{
    Dictionary, Document, MediaBox, Object, ObjectId, OutputDev, OutputError, Stream,
};

use super::{Caps, ExtractError, Extracted};

/// Longest `/Parent` chain followed from a page; lopdf's page-tree walk stops at depth 256, so a
/// real tree is never deeper.
const MAX_TREE_DEPTH: usize = 300;
/// Deepest nesting of form XObjects (a form drawing a form ...) pdf-extract may follow.
const MAX_FORM_DEPTH: usize = 32;
/// Form XObjects one page may draw, nested ones included: a few forms each drawing the next
/// twice would otherwise make pdf-extract interpret 2^depth streams.
const MAX_FORM_CALLS: u64 = 10_000;

/// The text of a PDF document, at most `caps.max_chars` Unicode scalar values.
pub(crate) fn extract(bytes: &[u8], caps: &Caps) -> Result<Extracted, ExtractError> {
    // pdf-extract 0.12 answers malformed input with `unwrap`, `expect`, `assert!` and `panic!`
    // (a missing /MediaBox, an unknown encoding, an operator short of operands, a bad CMap ...),
    // and lopdf has a few of its own: a panic is a document we cannot read, not a dead worker.
    let outcome = catch_unwind(AssertUnwindSafe(|| text_of(bytes, caps.max_chars)));
    let (text, truncated) = outcome.unwrap_or(Err(ExtractError::Failed))?;
    Ok(Extracted {
        text,
        truncated,
        extractor: "pdf",
        unread_parts: 0,
    })
}

/// The text and whether some was left out.
fn text_of(bytes: &[u8], max_chars: usize) -> Result<(String, bool), ExtractError> {
    let doc = match Document::load_mem(bytes) {
        Ok(doc) => doc,
        Err(pdf_extract::Error::Decryption(_) | pdf_extract::Error::InvalidPassword) => {
            return Err(ExtractError::Encrypted);
        }
        Err(_) => return Err(ExtractError::Failed),
    };
    // lopdf tries the empty user password on load and, when it opens the file, decrypts every
    // object and drops /Encrypt from the trailer. One still there needs a password we do not
    // have (lopdf then loads no objects at all).
    if doc.trailer.has(b"Encrypt") {
        return Err(ExtractError::Encrypted);
    }
    let pages = doc.get_pages();
    check_parents(&doc, &pages)?;
    check_font_programs(&doc)?;
    let mut doc = doc;
    rewrite_quote_operators(&mut doc, &pages);
    let doc = doc;
    let mut sink = Sink::new(&doc, pages, max_chars);
    let result = pdf_extract::output_doc(&doc, &mut sink);
    match (sink.stop, result) {
        (Some(Stop::Full), _) => Ok((sink.text, true)),
        (Some(Stop::Refused), _) | (None, Err(_)) => Err(ExtractError::Failed),
        (None, Ok(())) => Ok((sink.text, false)),
    }
}

/// pdf-extract shows text for `Tj` and `TJ` but ignores `'` and `"` (move to the next line,
/// then show a string), so text a generator drew with them would vanish from a document that
/// looks wholly read: an absence mailgate did not prove. Each page's content and each form's is
/// rewritten to the equivalent `T*` + `Tj` (`"` also sets `Tw` and `Tc` first) before pdf-extract
/// runs; a stream that does not decode is left for pdf-extract to fail on.
fn rewrite_quote_operators(doc: &mut Document, pages: &BTreeMap<u32, ObjectId>) {
    let mut streams: Vec<ObjectId> = pages
        .values()
        .flat_map(|page| doc.get_page_contents(*page))
        .collect();
    streams.extend(doc.objects.iter().filter_map(|(id, object)| match object {
        Object::Stream(s)
            if s.dict.get(b"Subtype").and_then(Object::as_name).ok() == Some(b"Form") =>
        {
            Some(*id)
        }
        _ => None,
    }));
    for id in streams {
        let Some(Object::Stream(stream)) = doc.objects.get_mut(&id) else {
            continue;
        };
        let content = form_content(stream);
        if !content.iter().any(|b| *b == b'\'' || *b == b'"') {
            continue;
        }
        let Ok(mut decoded) = Content::decode(&content) else {
            continue;
        };
        if !decoded
            .operations
            .iter()
            .any(|op| op.operator == "'" || op.operator == "\"")
        {
            continue;
        }
        let mut rewritten = Vec::with_capacity(decoded.operations.len() + 8);
        for op in decoded.operations.drain(..) {
            match (op.operator.as_str(), op.operands.as_slice()) {
                ("'", [text]) => {
                    rewritten.push(Operation::new("T*", vec![]));
                    rewritten.push(Operation::new("Tj", vec![text.clone()]));
                }
                ("\"", [word, char_spacing, text]) => {
                    rewritten.push(Operation::new("Tw", vec![word.clone()]));
                    rewritten.push(Operation::new("Tc", vec![char_spacing.clone()]));
                    rewritten.push(Operation::new("T*", vec![]));
                    rewritten.push(Operation::new("Tj", vec![text.clone()]));
                }
                _ => rewritten.push(op),
            }
        }
        decoded.operations = rewritten;
        if let Ok(encoded) = decoded.encode() {
            stream.set_plain_content(encoded);
        }
    }
}

/// Refuses a page whose `/Parent` chain loops or runs deeper than [`MAX_TREE_DEPTH`].
/// pdf-extract looks up inherited keys (`/MediaBox`, `/Resources`) by recursing up `/Parent`
/// until it finds them, so a cycle without the key is a stack overflow. Stricter than needed (a
/// cycle above a page that has its own keys is harmless), but no real file has one.
fn check_parents(doc: &Document, pages: &BTreeMap<u32, ObjectId>) -> Result<(), ExtractError> {
    let mut sound: HashSet<ObjectId> = HashSet::new();
    for &page in pages.values() {
        let mut path = Vec::new();
        let mut node = page;
        while !sound.contains(&node) {
            if path.contains(&node) || path.len() > MAX_TREE_DEPTH {
                return Err(ExtractError::Failed);
            }
            path.push(node);
            // As pdf-extract follows it: a reference to a dictionary, else the chain ends.
            let parent = doc
                .get_dictionary(node)
                .and_then(|dict| dict.get(b"Parent"))
                .and_then(Object::as_reference);
            match parent {
                Ok(parent) if doc.get_dictionary(parent).is_ok() => node = parent,
                _ => break,
            }
        }
        sound.extend(path);
    }
    Ok(())
}

/// Refuses a document with a stream pdf-extract would hand to a parser that cannot take it:
/// `/ToUnicode` and Type0 `/Encoding` CMaps go to adobe-cmap-parser, a Type1 `/FontFile` to
/// type1-encoding-parser. Both are recursive-descent (pom) parsers without a depth limit, so
/// 100,000 `[` are a stack overflow ([`MAX_SYNTAX_DEPTH`]); and adobe-cmap-parser fills a map
/// entry for every code of a `bfrange`, so `<00000000> <FFFFFFFF> <0000>` is four billion of
/// them ([`MAX_CMAP_CODES`]). Such streams are found wherever they sit (fonts may be direct
/// objects inside resource dictionaries), each checked once.
fn check_font_programs(doc: &Document) -> Result<(), ExtractError> {
    let mut found = HashSet::new();
    for object in doc.objects.values() {
        find_font_programs(doc, object, 0, &mut found);
    }
    for id in found {
        let Ok(Object::Stream(program)) = doc.get_object(id) else {
            continue;
        };
        let bytes = form_content(program);
        if !syntax_is_shallow(&bytes) || cmap_codes(&bytes).is_none_or(|n| n > MAX_CMAP_CODES) {
            return Err(ExtractError::Failed);
        }
    }
    Ok(())
}

/// Nesting of arrays, procedures, dictionaries and literal strings a font program or CMap may
/// have (real ones nest two or three levels).
const MAX_SYNTAX_DEPTH: usize = 64;
/// Codes the `bfrange` sections of one CMap may span: two-byte codes are 65,536, twice that
/// leaves room for overlaps.
const MAX_CMAP_CODES: u64 = 1 << 17;
/// How deep [`find_font_programs`] follows direct objects; lopdf's parser already stops at 100.
const MAX_OBJECT_DEPTH: usize = 128;

/// Collects the ids of streams under a `/ToUnicode`, `/Encoding` or `/FontFile` key in `object`
/// and the direct objects inside it.
fn find_font_programs(
    doc: &Document,
    object: &Object,
    depth: usize,
    found: &mut HashSet<ObjectId>,
) {
    if depth > MAX_OBJECT_DEPTH {
        return;
    }
    let dict = match object {
        Object::Dictionary(dict) => dict,
        Object::Stream(stream) => &stream.dict,
        Object::Array(items) => {
            for item in items {
                find_font_programs(doc, item, depth + 1, found);
            }
            return;
        }
        _ => return,
    };
    for (key, value) in dict.iter() {
        if matches!(key.as_slice(), b"ToUnicode" | b"Encoding" | b"FontFile")
            && let Ok((Some(id), Object::Stream(_))) = doc.dereference(value)
        {
            found.insert(id);
        }
        find_font_programs(doc, value, depth + 1, found);
    }
}

/// Whether PostScript-like `bytes` nest arrays, procedures, dictionaries and literal strings
/// (counted together) at most [`MAX_SYNTAX_DEPTH`] deep, up to `eexec` (a Type1 font's
/// encrypted, binary part, where the parsers stop). Closers only count outside literal strings,
/// as for the parsers, so a string full of `]` cannot pay for more `[`.
fn syntax_is_shallow(bytes: &[u8]) -> bool {
    let end = bytes
        .windows(5)
        .position(|w| w == b"eexec")
        .unwrap_or(bytes.len());
    let bytes = &bytes[..end];
    let (mut depth, mut in_string, mut i) = (0usize, 0usize, 0);
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        if in_string > 0 {
            match b {
                b'\\' => i += 1,
                b'(' => {
                    in_string += 1;
                    depth += 1;
                }
                b')' => {
                    in_string -= 1;
                    depth = depth.saturating_sub(1);
                }
                _ => {}
            }
        } else {
            match b {
                b'(' => {
                    in_string = 1;
                    depth += 1;
                }
                b'[' | b'{' => depth += 1,
                b'<' if bytes.get(i) == Some(&b'<') => {
                    i += 1;
                    depth += 1;
                }
                b'>' if bytes.get(i) == Some(&b'>') => {
                    i += 1;
                    depth = depth.saturating_sub(1);
                }
                b']' | b'}' | b')' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        if depth > MAX_SYNTAX_DEPTH {
            return false;
        }
    }
    true
}

/// The codes the `bfrange` sections of a CMap span, as adobe-cmap-parser reads them (ranges of
/// hex strings, their codes the bytes read big-endian into a `u32`); `None` for a range this
/// reading cannot follow (a literal string, a missing bound), which is refused rather than
/// guessed at.
fn cmap_codes(bytes: &[u8]) -> Option<u64> {
    let mut total: u64 = 0;
    let mut rest = bytes;
    while let Some(start) = rest.windows(12).position(|w| w == b"beginbfrange") {
        rest = &rest[start + 12..];
        let end = rest
            .windows(10)
            .position(|w| w == b"endbfrange")
            .unwrap_or(rest.len());
        let (section, after) = rest.split_at(end);
        rest = after;
        // Hex strings with arrays (a range's destinations) skipped whole.
        let mut bounds = Vec::new();
        let mut i = 0;
        while i < section.len() {
            match section[i] {
                b'<' => {
                    let close = section[i..].iter().position(|&b| b == b'>')? + i;
                    bounds.push(hex_code(&section[i + 1..close]));
                    i = close + 1;
                }
                b'[' => {
                    let close = section[i..].iter().position(|&b| b == b']')? + i;
                    bounds.push(None);
                    i = close + 1;
                }
                b'(' => return None,
                _ => i += 1,
            }
        }
        for range in bounds.chunks(3) {
            let [Some(lo), Some(hi), _] = range else {
                return None;
            };
            if hi >= lo {
                total = total.saturating_add(u64::from(hi - lo) + 1);
            }
        }
    }
    Some(total)
}

/// A hex string's bytes read big-endian into a `u32` (adobe-cmap-parser's `as_code`: earlier
/// bytes shift out).
fn hex_code(hex: &[u8]) -> Option<u32> {
    let digits: Vec<u8> = hex
        .iter()
        .filter(|b| !b.is_ascii_whitespace())
        .map(|&b| {
            char::from(b)
                .to_digit(16)
                .and_then(|d| u8::try_from(d).ok())
        })
        .collect::<Option<_>>()?;
    Some(digits.chunks(2).fold(0u32, |code, pair| {
        let byte = pair[0] << 4 | pair.get(1).copied().unwrap_or(0);
        code << 8 | u32::from(byte)
    }))
}

/// Why the sink stopped pdf-extract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// `max_chars` reached with more text to come.
    Full,
    /// A page draws form XObjects in a cycle, too deep or too often.
    Refused,
}

/// What separates the next character from the text before it; the widest gap seen wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Gap {
    None,
    Space,
    Line,
    Page,
}

impl Gap {
    fn as_str(self) -> &'static str {
        match self {
            Gap::None => "",
            Gap::Space => " ",
            Gap::Line => "\n",
            Gap::Page => "\n\n",
        }
    }
}

/// pdf-extract's `PlainTextOutput` (its word and line heuristics, from glyph positions) writing
/// normalised text into a budget: whitespace and control characters only widen the gap before
/// the next visible character, so runs collapse and nothing trails. Returning an error from an
/// [`OutputDev`] method is the one way to stop `output_doc`; [`Sink::stop`] says why.
struct Sink<'a> {
    doc: &'a Document,
    /// Page number → page object, as `output_doc` numbers them.
    pages: BTreeMap<u32, ObjectId>,
    forms: Forms<'a>,
    text: String,
    /// Unicode scalar values in `text`.
    chars: usize,
    max_chars: usize,
    gap: Gap,
    stop: Option<Stop>,
    flip_ctm: pdf_extract::Transform,
    last_end: f64,
    last_y: f64,
    first_char: bool,
}

impl<'a> Sink<'a> {
    fn new(doc: &'a Document, pages: BTreeMap<u32, ObjectId>, max_chars: usize) -> Self {
        Self {
            doc,
            pages,
            forms: Forms {
                doc,
                memo: HashMap::new(),
                open: Vec::new(),
            },
            text: String::new(),
            chars: 0,
            max_chars,
            gap: Gap::None,
            stop: None,
            flip_ctm: pdf_extract::Transform::identity(),
            // PlainTextOutput's start values.
            last_end: 100_000.,
            last_y: 0.,
            first_char: false,
        }
    }

    fn halt(&mut self, why: Stop) -> OutputError {
        self.stop = Some(why);
        OutputError::FormatError(std::fmt::Error)
    }

    fn push(&mut self, c: char) -> Result<(), OutputError> {
        if c.is_whitespace() || c.is_control() {
            self.gap = self.gap.max(Gap::Space);
            return Ok(());
        }
        let gap = if self.text.is_empty() {
            ""
        } else {
            self.gap.as_str()
        };
        // The gap is ASCII: its bytes are its scalar values.
        let need = gap.len() + 1;
        if self.chars.saturating_add(need) > self.max_chars {
            return Err(self.halt(Stop::Full));
        }
        self.text.push_str(gap);
        self.text.push(c);
        self.chars += need;
        self.gap = Gap::None;
        Ok(())
    }
}

impl OutputDev for Sink<'_> {
    fn begin_page(
        &mut self,
        page_num: u32,
        media_box: &MediaBox,
        _art_box: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), OutputError> {
        self.flip_ctm =
            pdf_extract::Transform::row_major(1., 0., 0., -1., 0., media_box.ury - media_box.lly);
        self.gap = Gap::Page;
        // pdf-extract interprets the page right after this call: check its forms first.
        let Some(&page) = self.pages.get(&page_num) else {
            return Err(self.halt(Stop::Refused));
        };
        let resources = inherited_resources(self.doc, page);
        let content = self.doc.get_page_content(page).unwrap_or_default();
        if self.forms.calls(&content, resources).is_err() {
            return Err(self.halt(Stop::Refused));
        }
        Ok(())
    }

    fn end_page(&mut self) -> Result<(), OutputError> {
        Ok(())
    }

    fn output_character(
        &mut self,
        trm: &pdf_extract::Transform,
        width: f64,
        _spacing: f64,
        font_size: f64,
        char: &str,
    ) -> Result<(), OutputError> {
        // PlainTextOutput::output_character, with `transform_vector` written out (euclid is not
        // ours to name) and `abs` so that mirrored text does not take the square root of a
        // negative number.
        let position = trm.post_transform(&self.flip_ctm);
        let size_x = font_size * (trm.m11 + trm.m21);
        let size_y = font_size * (trm.m12 + trm.m22);
        let size = (size_x * size_y).abs().sqrt();
        let (x, y) = (position.m31, position.m32);
        if self.first_char {
            let dy = (y - self.last_y).abs();
            if dy > size * 1.5 || (x < self.last_end && dy > size * 0.5) {
                self.gap = self.gap.max(Gap::Line);
            }
            if x > self.last_end + size * 0.1 {
                self.gap = self.gap.max(Gap::Space);
            }
        }
        for c in char.chars() {
            self.push(c)?;
        }
        self.first_char = false;
        self.last_y = y;
        self.last_end = x + width * size;
        Ok(())
    }

    fn begin_word(&mut self) -> Result<(), OutputError> {
        self.first_char = true;
        Ok(())
    }

    fn end_word(&mut self) -> Result<(), OutputError> {
        Ok(())
    }

    fn end_line(&mut self) -> Result<(), OutputError> {
        Ok(())
    }
}

/// The object `object` refers to (through reference chains), or `object` itself.
fn deref<'a>(doc: &'a Document, object: &'a Object) -> Option<&'a Object> {
    doc.dereference(object).ok().map(|(_, object)| object)
}

/// `key` of `dict` as a dictionary, as pdf-extract's `get::<Option<&Dictionary>>` reads it.
fn dict_at<'a>(doc: &'a Document, dict: &'a Dictionary, key: &[u8]) -> Option<&'a Dictionary> {
    dict.get(key)
        .ok()
        .and_then(|object| deref(doc, object))
        .and_then(|object| object.as_dict().ok())
}

/// A page's `/Resources`, looked up the page tree as pdf-extract does (the chain was checked by
/// [`check_parents`]; the bound is a second guard).
fn inherited_resources(doc: &Document, page: ObjectId) -> Option<&Dictionary> {
    let mut dict = doc.get_dictionary(page).ok()?;
    for _ in 0..=MAX_TREE_DEPTH {
        if let Some(resources) = dict_at(doc, dict, b"Resources") {
            return Some(resources);
        }
        dict = dict
            .get(b"Parent")
            .and_then(Object::as_reference)
            .and_then(|parent| doc.get_dictionary(parent))
            .ok()?;
    }
    None
}

/// The form XObjects pdf-extract would interpret for a content stream. Its `Do` operator
/// recurses into the named XObject (any stream: it does not look at `/Subtype`) with the
/// form's own `/Resources` or else the caller's, and knows no depth: a form that draws itself
/// is a stack overflow, a chain of forms each drawing the next twice an exponential amount of
/// work. Results are kept per (form, resources) pair, so a letterhead form drawn on every page
/// is decoded once.
struct Forms<'a> {
    doc: &'a Document,
    /// Form invocations (itself included) per (form, resources address).
    memo: HashMap<(ObjectId, usize), u64>,
    /// The forms being expanded, outermost first.
    open: Vec<(ObjectId, usize)>,
}

impl<'a> Forms<'a> {
    /// How many form XObjects drawing `content` with `resources` invokes, nested ones included;
    /// `Err` on a cycle, nesting deeper than [`MAX_FORM_DEPTH`] or more than [`MAX_FORM_CALLS`].
    fn calls(&mut self, content: &[u8], resources: Option<&'a Dictionary>) -> Result<u64, ()> {
        let doc = self.doc;
        let Some(resources) = resources else {
            return Ok(0);
        };
        let Some(xobjects) = dict_at(doc, resources, b"XObject") else {
            return Ok(0);
        };
        if !content.windows(2).any(|pair| pair == b"Do") {
            return Ok(0);
        }
        // What does not decode here makes pdf-extract panic (caught) when it gets there.
        let Ok(decoded) = Content::decode(content) else {
            return Ok(0);
        };
        let mut total: u64 = 0;
        for op in decoded.operations.iter().filter(|op| op.operator == "Do") {
            let Some(name) = op.operands.first().and_then(|o| o.as_name().ok()) else {
                continue;
            };
            let Ok(target) = xobjects.get(name) else {
                continue;
            };
            let Ok((Some(id), Object::Stream(form))) = doc.dereference(target) else {
                continue;
            };
            let inner = dict_at(doc, &form.dict, b"Resources").unwrap_or(resources);
            let key = (id, std::ptr::from_ref(inner) as usize);
            let n = match self.memo.get(&key) {
                Some(&n) => n,
                None => {
                    if self.open.contains(&key) || self.open.len() >= MAX_FORM_DEPTH {
                        return Err(());
                    }
                    self.open.push(key);
                    let n = 1 + self.calls(&form_content(form), Some(inner))?;
                    self.open.pop();
                    self.memo.insert(key, n);
                    n
                }
            };
            total = total.saturating_add(n);
            if total > MAX_FORM_CALLS {
                return Err(());
            }
        }
        Ok(total)
    }
}

/// A form's content as pdf-extract's `get_contents` reads it: decompressed when it can be.
fn form_content(form: &Stream) -> Vec<u8> {
    if form.filters().is_ok() {
        form.decompressed_content()
            .unwrap_or_else(|_| form.content.clone())
    } else {
        form.content.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::tests::caps;
    use std::time::{Duration, Instant};

    /// A PDF file of `objects` (object `i + 1` is `objects[i]`, the text between `obj` and
    /// `endobj`) with a correct xref table and `trailer` (the dictionary's inside).
    fn raw_pdf(objects: &[&[u8]], trailer: &str) -> Vec<u8> {
        let mut out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
        let mut offsets = Vec::new();
        for (i, body) in objects.iter().enumerate() {
            offsets.push(out.len());
            out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
            out.extend_from_slice(body);
            out.extend_from_slice(b"\nendobj\n");
        }
        let xref = out.len();
        out.extend_from_slice(
            format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
        );
        for offset in offsets {
            out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
        }
        out.extend_from_slice(
            format!(
                "trailer\n<< /Size {} {trailer} >>\nstartxref\n{xref}\n%%EOF\n",
                objects.len() + 1
            )
            .as_bytes(),
        );
        out
    }

    /// A content stream object holding `content`.
    fn stream(content: &str) -> Vec<u8> {
        format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        )
        .into_bytes()
    }

    /// A document of pages with the given content streams, Helvetica as /F1, and `extra`
    /// objects from number `4 + 2 * pages.len()` on.
    fn pdf_with(pages: &[&str], extra: &[&[u8]]) -> Vec<u8> {
        let font =
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>";
        let kids: Vec<String> = (0..pages.len())
            .map(|i| format!("{} 0 R", 4 + 2 * i))
            .collect();
        let tree = format!(
            "<< /Type /Pages /Kids [{}] /Count {} /MediaBox [0 0 612 792] >>",
            kids.join(" "),
            pages.len()
        );
        let mut objects: Vec<Vec<u8>> = vec![
            b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
            tree.into_bytes(),
            font.to_vec(),
        ];
        let first_extra = 4 + 2 * pages.len();
        let xobjects: String = (0..extra.len())
            .map(|i| format!("/X{} {} 0 R ", i + first_extra, i + first_extra))
            .collect();
        for (i, content) in pages.iter().enumerate() {
            objects.push(
                format!(
                    "<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 3 0 R >> \
                     /XObject << {xobjects}>> >> /Contents {} 0 R >>",
                    5 + 2 * i
                )
                .into_bytes(),
            );
            objects.push(stream(content));
        }
        objects.extend(extra.iter().map(|o| o.to_vec()));
        let refs: Vec<&[u8]> = objects.iter().map(Vec::as_slice).collect();
        raw_pdf(&refs, "/Root 1 0 R")
    }

    /// Content drawing `lines` top-down, 16 points apart.
    fn lines(lines: &[&str]) -> String {
        lines
            .iter()
            .enumerate()
            .map(|(i, line)| format!("BT /F1 12 Tf 72 {} Td ({line}) Tj ET\n", 760 - 16 * i))
            .collect()
    }

    fn text(bytes: &[u8], max_chars: usize) -> Result<Extracted, ExtractError> {
        extract(bytes, &caps(max_chars))
    }

    /// `f` finishes well within the worker's wall clock.
    fn quick<T>(what: &str, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{what} took {:?}",
            start.elapsed()
        );
        out
    }

    #[test]
    fn extract_pdf_demo_fixtures() {
        let proposal = include_bytes!("../demo/fixtures/proposal-PROP-1001.pdf");
        let e = text(proposal, 10_000).expect("proposal");
        for needle in ["PROP-1001", "Orchard Bakery Ltd", "Northwind Mutual"] {
            assert!(e.text.contains(needle), "{needle} not in {:?}", e.text);
        }
        assert_eq!(
            (e.extractor, e.truncated, e.unread_parts),
            ("pdf", false, 0)
        );
        let invoice = include_bytes!("../demo/fixtures/invoice-INV-2026-0042.pdf");
        let e = text(invoice, 10_000).expect("invoice");
        assert!(e.text.contains("INV-2026-0042"), "{:?}", e.text);
        let notice = include_bytes!("../demo/fixtures/payment-notice-INV-2026-0077.pdf");
        let e = text(notice, 10_000).expect("notice");
        assert_eq!(
            e.text,
            "Payment notice\nSupplier: Paper Trail Supplies\nInvoice INV-2026-0077\n\
             Amount due: EUR 312.40\nThis document is fictional demo data for mailgate."
        );
        // Through the dispatcher, by magic bytes whatever the name says.
        let e = super::super::extract_text(Some("scan.tmp"), "", notice, &caps(10_000))
            .expect("dispatch");
        assert_eq!(e.extractor, "pdf");
    }

    #[test]
    fn extract_pdf_joins_words_lines_and_pages() {
        let page1 = format!(
            "{}BT /F1 12 Tf 72 700 Td (tab\tand  spaces\x01here) Tj ET\n",
            lines(&["  Hello   world ", "Second line"])
        );
        let doc = pdf_with(&[&page1, &lines(&["Page two"]), &lines(&[" "])], &[]);
        let e = text(&doc, 10_000).expect("text");
        assert_eq!(
            e.text,
            "Hello world\nSecond line\ntab and spaces here\n\nPage two"
        );
        assert!(!e.truncated);
    }

    #[test]
    fn extract_pdf_reads_text_shown_with_the_quote_operators() {
        // `'` and `"` move to the next line and show a string; pdf-extract skips them.
        let content = "BT /F1 12 Tf 14 TL 72 760 Td (first) Tj (second) ' 1 0.5 (third) \" ET";
        let out = text(&pdf_with(&[content], &[]), 1_000).expect("text");
        for word in ["first", "second", "third"] {
            assert!(out.text.contains(word), "{word} in {:?}", out.text);
        }
    }

    #[test]
    fn extract_pdf_stops_at_max_chars() {
        let doc = pdf_with(&[&lines(&["abcdef"]), &lines(&["ghi"])], &[]);
        let full = "abcdef\n\nghi";
        assert_eq!(
            text(&doc, 11).map(|e| (e.text, e.truncated)),
            Ok((full.into(), false))
        );
        for max in 0..11 {
            let e = text(&doc, max).expect("cut");
            assert!(e.truncated, "max {max}");
            assert!(e.text.chars().count() <= max, "max {max}");
            assert!(full.starts_with(&e.text), "max {max}: {:?}", e.text);
            assert!(!e.text.ends_with('\n'), "max {max}: {:?}", e.text);
        }
        // Pages past the budget are not interpreted: the second page's font is not declared,
        // which pdf-extract panics on, but only when it gets there.
        let broken = "BT /F9 12 Tf 72 700 Td (never) Tj ET";
        let doc = pdf_with(&[&lines(&["first page"]), broken], &[]);
        assert_eq!(text(&doc, 10_000), Err(ExtractError::Failed));
        let e = text(&doc, 5).expect("stops before page two");
        assert_eq!((e.text.as_str(), e.truncated), ("first", true));
    }

    #[test]
    fn extract_pdf_huge_text_small_budget() {
        let line = "All work and no play makes Jack a dull boy. ".repeat(20);
        let page = lines(&vec![line.as_str(); 40]);
        let pages = vec![page.as_str(); 50];
        let doc = pdf_with(&pages, &[]);
        let e = quick("huge text", || text(&doc, 1_000)).expect("text");
        assert!(e.truncated);
        assert_eq!(e.text.chars().count(), 1_000 - 1, "{:?}", &e.text[..40]);
        assert!(e.text.starts_with("All work and no play"));
        let e = quick("huge text, big budget", || text(&doc, 10_000_000)).expect("all");
        assert!(!e.truncated);
        assert!(e.text.chars().count() > 1_000_000);
    }

    #[test]
    fn extract_pdf_garbage_is_a_typed_error() {
        for bytes in [
            &b"%PDF"[..],
            b"%PDF-1.7\n",
            b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n",
            b"%PDF-1.4\nstartxref\n999999\n%%EOF",
            b"%PDF-1.4\nxref\n0 4000000000\n0000000000 65535 f \n\
              trailer\n<< /Root 1 0 R >>\nstartxref\n9\n%%EOF",
        ] {
            assert_eq!(text(bytes, 100), Err(ExtractError::Failed), "{bytes:?}");
        }
        // Random bytes after the magic (a fixed LCG, so the test is deterministic).
        let mut seed: u64 = 0x5eed;
        for _ in 0..200 {
            let mut bytes = b"%PDF-1.4\n".to_vec();
            for _ in 0..2_000 {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                bytes.push((seed >> 56) as u8);
            }
            if let Ok(e) = quick("random bytes", || text(&bytes, 100)) {
                assert!(e.text.chars().count() <= 100);
            }
        }
    }

    #[test]
    fn extract_pdf_truncated_file() {
        let doc = pdf_with(&[&lines(&["complete"])], &[]);
        let xref = doc
            .windows(6)
            .rposition(|w| w == b"\nxref\n")
            .expect("xref")
            + 1;
        // Cut inside the xref table, before the trailer, and with no trailer at all.
        for cut in [xref + 20, doc.len() - 40, xref] {
            let e = quick("truncated", || text(&doc[..cut], 100));
            assert!(
                matches!(&e, Err(ExtractError::Failed))
                    || e.as_ref().is_ok_and(|e| e.text.len() <= 100),
                "cut {cut}: {e:?}"
            );
        }
        let no_trailer = [&doc[..xref], b"startxref\n9\n%%EOF\n"].concat();
        assert_eq!(text(&no_trailer, 100), Err(ExtractError::Failed));
    }

    #[test]
    fn extract_pdf_parent_cycles_are_refused() {
        // The page is its own /Parent and has no /MediaBox: pdf-extract would recurse forever.
        let objects: [&[u8]; 3] = [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 3 0 R >>",
        ];
        let doc = raw_pdf(&objects, "/Root 1 0 R");
        assert_eq!(
            quick("self parent", || text(&doc, 100)),
            Err(ExtractError::Failed)
        );
        // Two nodes that are each other's parent.
        let objects: [&[u8]; 4] = [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 /Parent 4 0 R >>",
            b"<< /Type /Page /Parent 2 0 R >>",
            b"<< /Type /Pages /Kids [] /Parent 2 0 R >>",
        ];
        let doc = raw_pdf(&objects, "/Root 1 0 R");
        assert_eq!(
            quick("parent loop", || text(&doc, 100)),
            Err(ExtractError::Failed)
        );
    }

    #[test]
    fn extract_pdf_kids_cycles_and_self_references_end() {
        // /Kids that contain the tree itself, then a page twice.
        let content = stream(&lines(&["looped"]));
        let objects: [&[u8]; 5] = [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R 2 0 R 3 0 R] /Count 1 /MediaBox [0 0 612 792] >>",
            b"<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 5 0 R >> >> \
              /Contents 4 0 R >>",
            &content,
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        ];
        let doc = raw_pdf(&objects, "/Root 1 0 R");
        let e = quick("kids cycle", || text(&doc, 1_000)).expect("bounded");
        assert!(e.text.starts_with("looped"), "{:?}", e.text);
        assert!(e.text.len() <= 1_000);
        // A /Length that refers to itself, and an object that is a reference to itself.
        let objects: [&[u8]; 4] = [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 /MediaBox [0 0 612 792] >>",
            b"<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources 5 0 R >>",
            b"<< /Length 4 0 R >>\nstream\nBT ET\nendstream",
        ];
        let mut with_self_ref = objects.to_vec();
        with_self_ref.push(b"5 0 R");
        let doc = raw_pdf(&with_self_ref, "/Root 1 0 R");
        let e = quick("self references", || text(&doc, 100));
        assert!(
            matches!(&e, Err(ExtractError::Failed)) || e.as_ref().is_ok_and(|e| e.text.is_empty()),
            "{e:?}"
        );
    }

    #[test]
    fn extract_pdf_deep_nesting_does_not_overflow() {
        // lopdf's parser stops at MAX_NESTING_DEPTH (100) levels, in objects and in content
        // streams alike, so no pre-scan of the raw bytes is needed.
        let deep = 100_000;
        let arrays = format!("{}{}", "[".repeat(deep), "]".repeat(deep));
        let dicts = format!("{}{}", "<< /A ".repeat(deep), ">>".repeat(deep));
        for nested in [&arrays, &dicts] {
            let in_object = format!("<< /Type /Catalog /Pages 2 0 R /Deep {nested} >>");
            let objects: [&[u8]; 2] = [
                in_object.as_bytes(),
                b"<< /Type /Pages /Kids [] /Count 0 >>",
            ];
            let doc = raw_pdf(&objects, "/Root 1 0 R");
            let e = quick("deep object", || text(&doc, 100));
            assert!(
                matches!(&e, Err(ExtractError::Failed))
                    || e.as_ref().is_ok_and(|e| e.text.is_empty()),
                "{e:?}"
            );
            let doc = pdf_with(&[&format!("{nested} pop\n{}", lines(&["after"]))], &[]);
            let e = quick("deep content", || text(&doc, 100));
            assert!(
                matches!(&e, Err(ExtractError::Failed))
                    || e.as_ref().is_ok_and(|e| e.text.len() <= 100),
                "{e:?}"
            );
        }
    }

    #[test]
    fn extract_pdf_form_cycles_and_explosions_are_refused() {
        // Page 1 draws form 6, which draws itself (resources inherited from the page).
        let form = stream("/X6 Do");
        let doc = pdf_with(&["/X6 Do"], &[&form]);
        assert_eq!(
            quick("self-drawing form", || text(&doc, 100)),
            Err(ExtractError::Failed)
        );
        // Forms 6 → 7 → 6 through their own /Resources.
        let a =
            "<< /Resources << /XObject << /B 7 0 R >> >> /Length 5 >>\nstream\n/B Do\nendstream";
        let b =
            "<< /Resources << /XObject << /A 6 0 R >> >> /Length 5 >>\nstream\n/A Do\nendstream";
        let doc = pdf_with(&["/X6 Do"], &[a.as_bytes(), b.as_bytes()]);
        assert_eq!(
            quick("form cycle", || text(&doc, 100)),
            Err(ExtractError::Failed)
        );
        // 24 forms, each drawing the next twice: 2^24 interpretations without the bound.
        let chain: Vec<Vec<u8>> = (0..24)
            .map(|i| {
                let next = 7 + i;
                if i == 23 {
                    stream(&lines(&["leaf"]))
                } else {
                    stream(&format!("/X{next} Do /X{next} Do"))
                }
            })
            .collect();
        let refs: Vec<&[u8]> = chain.iter().map(Vec::as_slice).collect();
        let doc = pdf_with(&["/X6 Do"], &refs);
        assert_eq!(
            quick("form explosion", || text(&doc, 10_000_000)),
            Err(ExtractError::Failed)
        );
        // Forms drawn more than once, nested a little, are fine. (pdf-extract interprets a form
        // with a fresh graphics state, ignoring the caller's `cm`: where a form draws is where
        // its own content puts it.)
        let form = |line: &str, y: u32| {
            let content = format!("BT /F1 12 Tf 72 {y} Td ({line}) Tj ET");
            format!(
                "<< /Resources << /Font << /F1 3 0 R >> >> /Length {} >>\n\
                 stream\n{content}\nendstream",
                content.len()
            )
        };
        let (upper, lower) = (form("in a form", 760), form("lower form", 700));
        let doc = pdf_with(
            &["/X6 Do /X8 Do /X6 Do"],
            &[
                b"<< /Length 6 >>\nstream\n/X7 Do\nendstream",
                upper.as_bytes(),
                lower.as_bytes(),
            ],
        );
        let e = text(&doc, 1_000).expect("forms");
        assert_eq!(e.text, "in a form\nlower form\nin a form");
    }

    /// A one-page document whose font has `cmap` as its /ToUnicode, showing `(ABC)`.
    fn with_to_unicode(cmap: &str) -> Vec<u8> {
        let content = stream("BT /F1 12 Tf 72 700 Td (ABC) Tj ET");
        let cmap = stream(cmap);
        let objects: [&[u8]; 6] = [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 /MediaBox [0 0 612 792] >>",
            b"<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 5 0 R >> >> \
              /Contents 4 0 R >>",
            &content,
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode 6 0 R >>",
            &cmap,
        ];
        raw_pdf(&objects, "/Root 1 0 R")
    }

    #[test]
    fn extract_pdf_cmaps_are_checked_before_parsing() {
        let cmap = |body: &str| {
            format!(
                "/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n\
                 1 begincodespacerange <00> <FF> endcodespacerange\n{body}\nendcmap end end"
            )
        };
        // A real CMap is used: A → Z by bfchar, B and C → a and b by bfrange.
        let fine =
            cmap("1 beginbfchar <41> <005A> endbfchar\n1 beginbfrange <42> <43> <0061> endbfrange");
        assert_eq!(
            text(&with_to_unicode(&fine), 100).map(|e| e.text),
            Ok("Zab".into())
        );
        let all_two_byte = cmap("1 beginbfrange <0000> <FFFF> <0000> endbfrange");
        assert!(
            quick("65,536 codes", || text(
                &with_to_unicode(&all_two_byte),
                100
            ))
            .is_ok()
        );
        // adobe-cmap-parser would insert four billion entries (or 2^32 - 1 in the second).
        for bomb in [
            "1 beginbfrange <00000000> <FFFFFFFF> <0000> endbfrange",
            "2 beginbfrange <0000> <FFFF> <0000> <00010000> <FFFFFFFF> <0000> endbfrange",
        ] {
            let doc = with_to_unicode(&cmap(bomb));
            assert_eq!(
                quick("bfrange bomb", || text(&doc, 100)),
                Err(ExtractError::Failed)
            );
        }
        // Its recursive-descent parser would overflow the stack (arrays, literal strings,
        // dictionaries, and arrays behind a string of closers that must not count).
        let deep = 100_000;
        for nested in [
            "[".repeat(deep),
            "(".repeat(deep),
            "<<".repeat(deep),
            format!(
                "{}{}",
                "[".repeat(60),
                "(]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]) [".repeat(deep / 100)
            ),
        ] {
            let doc = with_to_unicode(&cmap(&nested));
            assert_eq!(
                quick("deep CMap", || text(&doc, 100)),
                Err(ExtractError::Failed)
            );
        }
        assert!(syntax_is_shallow(
            format!("{}eexec{}", "{".repeat(10), "[".repeat(99)).as_bytes()
        ));
        assert_eq!(
            cmap_codes(b"1 beginbfrange <41> <40> <0061> endbfrange"),
            Some(0)
        );
        assert_eq!(cmap_codes(b"1 beginbfrange <41> [<0061>] endbfrange"), None);
        assert_eq!(
            cmap_codes(b"1 beginbfrange (A) (B) <0061> endbfrange"),
            None
        );
        assert_eq!(
            cmap_codes(b"2 beginbfrange <0041><0042>[<61><62>] <10 00> <1FFF> <0> endbfrange"),
            Some(2 + 0x1000)
        );
    }

    #[test]
    fn extract_pdf_panics_become_failed() {
        // No /MediaBox anywhere: pdf-extract's `expect("MediaBox")`.
        let objects: [&[u8]; 3] = [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R >>",
        ];
        let doc = raw_pdf(&objects, "/Root 1 0 R");
        assert_eq!(text(&doc, 100), Err(ExtractError::Failed));
        // An operator short of operands: `assert!(operands.len() == 6)`.
        let doc = pdf_with(&["1 0 0 cm"], &[]);
        assert_eq!(text(&doc, 100), Err(ExtractError::Failed));
    }

    /// `plain` encrypted with RC4 (revision 3) and these passwords.
    fn encrypted(plain: &[u8], user: &str) -> Vec<u8> {
        use pdf_extract::{EncryptionState, EncryptionVersion, Permissions};
        let mut doc = Document::load_mem(plain).expect("fixture loads");
        doc.trailer.set(
            "ID",
            Object::Array(vec![
                Object::string_literal(b"0123456789abcdef".to_vec()),
                Object::string_literal(b"0123456789abcdef".to_vec()),
            ]),
        );
        let version = EncryptionVersion::V2 {
            document: &doc,
            owner_password: "owner secret",
            user_password: user,
            key_length: 128,
            permissions: Permissions::all(),
        };
        let state = EncryptionState::try_from(version).expect("state");
        doc.encrypt(&state).expect("encrypt");
        let mut out = Vec::new();
        doc.save_to(&mut out).expect("save");
        out
    }

    #[test]
    fn extract_pdf_encrypted() {
        let plain = pdf_with(&[&lines(&["Secret terms"])], &[]);
        let locked = encrypted(&plain, "user secret");
        assert!(locked.windows(8).any(|w| w == b"/Encrypt"));
        assert!(
            !locked.windows(12).any(|w| w == b"Secret terms"),
            "not really encrypted"
        );
        assert_eq!(text(&locked, 100), Err(ExtractError::Encrypted));
        // Only an owner password: anyone may open it, and pdf.js (the reference) does.
        let open = encrypted(&plain, "");
        assert!(
            !open.windows(12).any(|w| w == b"Secret terms"),
            "not really encrypted"
        );
        assert_eq!(text(&open, 100).map(|e| e.text), Ok("Secret terms".into()));
        assert_eq!(ExtractError::Encrypted.to_string(), "ENCRYPTED");
    }
}
