//! DOCX text (issue 13): the words of the headers, the body (`word/document.xml`) and the
//! footers, read with quick-xml after
//! [`preflight_container`](super::zip::preflight_container) has bounded the container.
//! Paragraphs end in a newline, table cells are separated by a tab and rows by a newline,
//! `w:tab` is a tab and `w:br`/`w:cr` a newline. quick-xml never expands DTD entities, so a
//! billion-laughs document yields its literal text and nothing more; reading stops as soon as
//! `max_chars` Unicode scalar values are out. A password-protected DOCX is an OLE compound file,
//! reported as [`ExtractError::Encrypted`]; anything malformed is [`ExtractError::Failed`].

use std::io::{BufReader, Cursor};

use quick_xml::Reader;
use quick_xml::events::Event;
use zip::ZipArchive;

use super::zip as container;
use super::{Caps, ExtractError, Extracted};

/// The magic of an OLE compound file: what Office writes for a password-protected document.
pub(crate) const CFB_MAGIC: &[u8; 4] = b"\xD0\xCF\x11\xE0";

const BODY: &str = "word/document.xml";

/// The text of a DOCX document, at most `caps.max_chars` Unicode scalar values.
pub(crate) fn extract(bytes: &[u8], caps: &Caps) -> Result<Extracted, ExtractError> {
    if bytes.starts_with(CFB_MAGIC) {
        return Err(ExtractError::Encrypted);
    }
    container::preflight_container(bytes, caps)?;
    let mut archive = ZipArchive::new(Cursor::new(bytes)).map_err(|_| ExtractError::Failed)?;
    let part_names = parts(&archive)?;
    let mut out = TextBudget::new(caps.max_chars);
    for name in &part_names {
        if out.is_full() {
            break;
        }
        out.separate();
        let part = archive.by_name(name).map_err(|_| ExtractError::Failed)?;
        read_part(BufReader::new(part), &mut out)?;
    }
    Ok(out.finish("docx"))
}

/// Headers, body, footers, in that order (headers and footers by their number).
fn parts(archive: &ZipArchive<Cursor<&[u8]>>) -> Result<Vec<String>, ExtractError> {
    let numbered = |prefix: &str| {
        let mut found: Vec<(u32, String)> = archive
            .file_names()
            .filter_map(|name| {
                let name = name.ok()?;
                let number = name.strip_prefix(prefix)?.strip_suffix(".xml").map(|n| {
                    if n.is_empty() {
                        Some(0)
                    } else {
                        n.parse().ok()
                    }
                })??;
                Some((number, name.into_owned()))
            })
            .collect();
        found.sort();
        found.into_iter().map(|(_, name)| name)
    };
    if archive.index_for_name(BODY).is_none() {
        return Err(ExtractError::Failed);
    }
    let mut names: Vec<String> = numbered("word/header").collect();
    names.push(BODY.to_owned());
    names.extend(numbered("word/footer"));
    Ok(names)
}

/// Where the reader is in the WordprocessingML tree, as far as text layout cares.
#[derive(Default)]
struct Layout {
    /// Inside `w:t`: its text is document text.
    in_text: bool,
    /// Depth of `w:r` runs: `w:tab` and `w:br` count only inside one (a `w:tab` in a
    /// paragraph's tab stops is not a tab character).
    runs: usize,
    /// Depth of table cells: a paragraph inside a cell ends with a space, not a newline, so a
    /// row stays one line.
    cells: usize,
    /// Per open table row: whether its next cell is the first (no tab before it).
    rows: Vec<bool>,
    /// A paragraph ended inside a cell; a space goes out before the cell's next text.
    pending_space: bool,
}

/// Appends the text of one part. Stops early once the budget is full.
fn read_part(part: impl std::io::BufRead, out: &mut TextBudget) -> Result<(), ExtractError> {
    let mut reader = Reader::from_reader(part);
    let mut layout = Layout::default();
    let mut buf = Vec::new();
    while !out.is_full() {
        buf.clear();
        let event = reader
            .read_event_into(&mut buf)
            .map_err(|_| ExtractError::Failed)?;
        match event {
            Event::Start(e) => match e.local_name().as_ref() {
                "t" => layout.in_text = true,
                "r" => layout.runs += 1,
                "tr" => layout.rows.push(true),
                "tc" => {
                    if let Some(first) = layout.rows.last_mut() {
                        if !*first {
                            out.push('\t');
                        }
                        *first = false;
                    }
                    layout.cells += 1;
                    layout.pending_space = false;
                }
                _ => {}
            },
            Event::Empty(e) => match e.local_name().as_ref() {
                "tab" if layout.runs > 0 => layout.text(out, "\t"),
                "br" | "cr" if layout.runs > 0 => layout.text(out, "\n"),
                "p" => layout.end_paragraph(out),
                _ => {}
            },
            Event::End(e) => match e.local_name().as_ref() {
                "t" => layout.in_text = false,
                "r" => layout.runs = layout.runs.saturating_sub(1),
                "p" => layout.end_paragraph(out),
                "tc" => {
                    layout.cells = layout.cells.saturating_sub(1);
                    layout.pending_space = false;
                }
                "tr" => {
                    layout.rows.pop();
                    out.push('\n');
                }
                _ => {}
            },
            Event::Text(e) if layout.in_text => layout.text(out, &e.xml10_content()),
            Event::CData(e) if layout.in_text => layout.text(out, &e.xml10_content()),
            // Only the five predefined entities and character references: a DTD's own
            // entities are never expanded (billion laughs).
            Event::GeneralRef(e) if layout.in_text => {
                let resolved = match e.resolve_char_ref() {
                    Ok(Some(ch)) => Some(ch),
                    Ok(None) => predefined_entity(&e),
                    Err(_) => None,
                };
                if let Some(ch) = resolved {
                    layout.text(out, ch.encode_utf8(&mut [0; 4]));
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(())
}

impl Layout {
    fn text(&mut self, out: &mut TextBudget, text: &str) {
        if self.pending_space {
            self.pending_space = false;
            out.push(' ');
        }
        out.push_str(text);
    }

    fn end_paragraph(&mut self, out: &mut TextBudget) {
        if self.cells > 0 {
            self.pending_space = true;
        } else {
            out.push('\n');
        }
    }
}

fn predefined_entity(name: &str) -> Option<char> {
    match name {
        "lt" => Some('<'),
        "gt" => Some('>'),
        "amp" => Some('&'),
        "apos" => Some('\''),
        "quot" => Some('"'),
        _ => None,
    }
}

/// Text under construction, cut at `max` Unicode scalar values. Whitespace that does not fit is
/// dropped without counting as truncation (a paragraph's closing newline after the last word
/// is not "more text"); the first refused non-whitespace character sets `truncated`, and the
/// extractors stop reading there. Shared with [`super::xlsx`].
pub(crate) struct TextBudget {
    text: String,
    chars: usize,
    max: usize,
    truncated: bool,
}

impl TextBudget {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            text: String::new(),
            chars: 0,
            max,
            truncated: false,
        }
    }

    /// Whether text was refused: nothing more needs to be read.
    pub(crate) fn is_full(&self) -> bool {
        self.truncated
    }

    /// Whether another character fits (whitespace loops stop here: refused whitespace does not
    /// set [`Self::is_full`]).
    pub(crate) fn has_room(&self) -> bool {
        self.chars < self.max
    }

    pub(crate) fn push(&mut self, ch: char) {
        if self.chars < self.max {
            self.text.push(ch);
            self.chars += 1;
        } else if !ch.is_whitespace() {
            self.truncated = true;
        }
    }

    pub(crate) fn push_str(&mut self, text: &str) {
        for ch in text.chars() {
            if self.truncated {
                return;
            }
            self.push(ch);
        }
    }

    /// A line break unless the text is empty or already ends one.
    pub(crate) fn separate(&mut self) {
        if !self.text.is_empty() && !self.text.ends_with('\n') {
            self.push('\n');
        }
    }

    /// The text without trailing whitespace.
    pub(crate) fn finish(self, extractor: &'static str) -> Extracted {
        let mut text = self.text;
        text.truncate(text.trim_end().len());
        Extracted {
            text,
            truncated: self.truncated,
            extractor,
            unread_parts: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::extract::ZipError;
    use crate::extract::zip::tests::{Put, bomb, build, caps, lie_about_size};

    const COVER_NOTE: &[u8] = include_bytes!("../demo/fixtures/cover-note-PROP-2042.docx");

    const NS: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;

    /// A DOCX whose body is `body` (the children of `w:body`), plus optional header/footer XML.
    fn docx(body: &str, extra: &[(&str, &str)]) -> Vec<u8> {
        let document = format!(
            r#"<?xml version="1.0"?><w:document {NS}><w:body>{body}</w:body></w:document>"#
        );
        let mut entries = vec![
            ("[Content_Types].xml", Put::Deflated(b"<Types/>".as_slice())),
            ("word/document.xml", Put::Deflated(document.as_bytes())),
        ];
        for (name, xml) in extra {
            entries.push((name, Put::Deflated(xml.as_bytes())));
        }
        build(&entries)
    }

    fn p(text: &str) -> String {
        format!("<w:p><w:r><w:t>{text}</w:t></w:r></w:p>")
    }

    fn text(bytes: &[u8]) -> String {
        extract(bytes, &caps()).expect("docx").text
    }

    #[test]
    fn paragraphs_runs_tabs_breaks_and_entities() {
        let body = format!(
            "{}<w:p><w:pPr><w:tabs><w:tab w:val=\"left\" w:pos=\"720\"/></w:tabs></w:pPr>\
             <w:r><w:t>a</w:t><w:tab/><w:t xml:space=\"preserve\">b </w:t></w:r>\
             <w:r><w:t>c</w:t><w:br/><w:t>d</w:t></w:r></w:p>\
             <w:p/>{}<w:p><w:r><w:delText>deleted</w:delText><w:instrText>PAGE</w:instrText>\
             </w:r></w:p>",
            p("Fish &amp; chips &lt;caf&#233;&gt; &#x263A;"),
            p("<![CDATA[raw <text>]]>"),
        );
        let bytes = docx(&body, &[]);
        let e = extract(&bytes, &caps()).expect("docx");
        assert_eq!(e.text, "Fish & chips <café> ☺\na\tb c\nd\n\nraw <text>");
        assert_eq!(
            (e.truncated, e.extractor, e.unread_parts),
            (false, "docx", 0)
        );
    }

    #[test]
    fn tables_are_tab_separated_rows() {
        let cell = |inner: &str| format!("<w:tc><w:tcPr/>{inner}</w:tc>");
        let body = format!(
            "{}<w:tbl><w:tr>{}{}</w:tr><w:tr>{}{}</w:tr></w:tbl>{}",
            p("before"),
            cell(&p("r1c1")),
            cell(&format!("{}{}", p("two"), p("paras"))),
            cell(&p("r2c1")),
            cell("<w:p/>"),
            p("after"),
        );
        assert_eq!(
            text(&docx(&body, &[])),
            "before\nr1c1\ttwo paras\nr2c1\t\nafter"
        );
    }

    #[test]
    fn headers_body_footers_in_order() {
        let part = |root: &str, t: &str| format!("<w:{root} {NS}>{}</w:{root}>", p(t));
        let bytes = docx(
            &p("BODY"),
            &[
                ("word/footer1.xml", &part("ftr", "F1")),
                ("word/header2.xml", &part("hdr", "H2")),
                ("word/header10.xml", &part("hdr", "H10")),
                ("word/header1.xml", &part("hdr", "H1")),
                ("word/headerX.xml", &part("hdr", "not a header part")),
            ],
        );
        assert_eq!(text(&bytes), "H1\nH2\nH10\nBODY\nF1");
    }

    /// A continuation window of a document is the whole text's slice there: paragraph breaks
    /// and the cap's whitespace rule included.
    #[test]
    fn windows_of_a_document_join_to_its_text() {
        use crate::extract::job::{Job, run};
        let body = (0..300)
            .map(|i| p(&format!("para-{i} ")))
            .collect::<String>();
        let bytes = docx(&body, &[]);
        let job = Job::Text {
            name: Some("a.docx".into()),
            content_type: String::new(),
        };
        let window = Caps {
            max_chars: 97,
            ..caps()
        };
        let mut joined = String::new();
        loop {
            let at = Job::Window {
                from_char: joined.chars().count() as u64,
                job: Box::new(job.clone()),
            };
            let part = run(&at, &bytes, &window).unwrap().into_text().unwrap();
            joined.push_str(&part.text);
            if !part.truncated {
                break;
            }
        }
        assert_eq!(joined, text(&bytes));
    }

    #[test]
    fn output_stops_at_max_chars() {
        let body = (0..1000)
            .map(|i| p(&format!("para-{i}")))
            .collect::<String>();
        let bytes = docx(&body, &[]);
        let small = Caps {
            max_chars: 9,
            ..caps()
        };
        let e = extract(&bytes, &small).expect("docx");
        assert_eq!((e.text.as_str(), e.truncated), ("para-0\npa", true));
        let exact = Caps {
            max_chars: 6,
            ..caps()
        };
        let e = extract(&docx(&p("para-0"), &[]), &exact).expect("docx");
        assert_eq!((e.text.as_str(), e.truncated), ("para-0", false));
        let e = extract(
            &docx(&p("é€😀"), &[]),
            &Caps {
                max_chars: 2,
                ..caps()
            },
        )
        .expect("docx");
        assert_eq!((e.text.as_str(), e.truncated), ("é€", true));
    }

    #[test]
    fn billion_laughs_is_not_expanded() {
        let mut dtd = String::from("<!DOCTYPE w:document [<!ENTITY lol0 \"lol\">");
        for i in 1..10 {
            let prev = format!("&lol{};", i - 1);
            dtd.push_str(&format!("<!ENTITY lol{i} \"{}\">", prev.repeat(10)));
        }
        dtd.push(']');
        dtd.push('>');
        let document = format!(
            "<?xml version=\"1.0\"?>{dtd}<w:document {NS}><w:body>{}</w:body></w:document>",
            p("before &lol9; after")
        );
        let bytes = build(&[("word/document.xml", Put::Deflated(document.as_bytes()))]);
        let started = Instant::now();
        let e = extract(&bytes, &caps()).expect("docx");
        assert_eq!(e.text, "before  after");
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn encrypted_malformed_and_oversized_documents() {
        let cfb = b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1 an OLE compound file";
        assert_eq!(extract(cfb, &caps()), Err(ExtractError::Encrypted));
        for bad in [&b""[..], b"PK\x03\x04", b"random bytes, not a zip at all"] {
            assert_eq!(extract(bad, &caps()), Err(ExtractError::Failed));
        }
        let no_body = build(&[("word/other.xml", Put::Deflated(b"<x/>"))]);
        assert_eq!(extract(&no_body, &caps()), Err(ExtractError::Failed));
        let broken = docx("<w:p><w:r><w:t>unclosed</w:r></w:p>", &[]);
        assert_eq!(extract(&broken, &caps()), Err(ExtractError::Failed));
        let encrypted = build(&[("word/document.xml", Put::ZipCrypto(b"<w:document/>", "pw"))]);
        assert_eq!(extract(&encrypted, &caps()), Err(ExtractError::Encrypted));
        let mut bomb = bomb("word/document.xml", 8 * 1024 * 1024);
        assert_eq!(
            extract(&bomb, &caps()),
            Err(ExtractError::Zip(ZipError::TooLarge))
        );
        lie_about_size(&mut bomb, 100);
        assert_eq!(
            extract(&bomb, &caps()),
            Err(ExtractError::Zip(ZipError::TooLarge))
        );
        let few = Caps {
            max_container_entries: 1,
            ..caps()
        };
        assert_eq!(
            extract(&docx(&p("x"), &[]), &few),
            Err(ExtractError::Zip(ZipError::TooManyEntries))
        );
    }

    #[test]
    fn demo_cover_note() {
        let e = extract(COVER_NOTE, &caps()).expect("docx");
        assert!(e.text.contains("PROP-2042"), "{}", e.text);
        assert!(e.text.contains("Harbour Lights"), "{}", e.text);
        assert!(!e.truncated);
    }
}
