//! XLSX text (issue 13): one `# <sheet name>` line per sheet, then its rows, cell values
//! separated by tabs (an empty column keeps its tab, so columns stay aligned), one line per row,
//! a blank line between sheets. calamine reads the workbook after
//! [`zip::preflight_container`](super::zip::preflight_container) has bounded the container (the
//! shared strings are loaded whole, so their size must be known first). Cells are streamed with
//! calamine's cell reader rather than a dense `Range`, whose size a sender picks with two
//! far-apart cells; empty rows are skipped. Reading stops once `max_chars` Unicode scalar values
//! are out. A password-protected workbook (an OLE compound file) is
//! [`ExtractError::Encrypted`]; anything malformed is [`ExtractError::Failed`].

use std::io::Cursor;

use calamine::{Data, Reader, Xlsx, XlsxError};

use super::docx::{CFB_MAGIC, TextBudget};
use super::zip as container;
use super::{Caps, ExtractError, Extracted};

/// The text of a XLSX document, at most `caps.max_chars` Unicode scalar values.
pub(crate) fn extract(bytes: &[u8], caps: &Caps) -> Result<Extracted, ExtractError> {
    if bytes.starts_with(CFB_MAGIC) {
        return Err(ExtractError::Encrypted);
    }
    container::preflight_container(bytes, caps)?;
    let mut workbook = Xlsx::new(Cursor::new(bytes)).map_err(|error| match error {
        XlsxError::Password => ExtractError::Encrypted,
        _ => ExtractError::Failed,
    })?;
    let mut out = TextBudget::new(caps.max_chars);
    for (index, sheet) in workbook.sheet_names().into_iter().enumerate() {
        if out.is_full() {
            break;
        }
        if index > 0 {
            out.push('\n');
        }
        out.push_str("# ");
        out.push_str(&sheet);
        out.push('\n');
        let mut cells = workbook
            .worksheet_cells_reader(&sheet)
            .map_err(|_| ExtractError::Failed)?;
        // The row being written and the column after its last written cell.
        let mut row: Option<u32> = None;
        let mut next_column: u32 = 0;
        while !out.is_full() {
            let Some(cell) = cells.next_cell().map_err(|_| ExtractError::Failed)? else {
                break;
            };
            let value = Data::from(cell.get_value().clone());
            if value == Data::Empty {
                continue;
            }
            let (r, c) = cell.get_position();
            if row != Some(r) {
                if row.is_some() {
                    out.push('\n');
                }
                row = Some(r);
                next_column = 0;
            }
            // One tab per column boundary crossed; a cell out of order still gets one.
            let tabs = if next_column == 0 {
                c
            } else {
                c.saturating_sub(next_column).saturating_add(1)
            };
            for _ in 0..tabs {
                if !out.has_room() {
                    break;
                }
                out.push('\t');
            }
            out.push_str(&value.to_string());
            next_column = c.saturating_add(1);
        }
        if row.is_some() {
            out.push('\n');
        }
    }
    Ok(out.finish("xlsx"))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::extract::ZipError;
    use crate::extract::zip::tests::{Put, build, caps};

    const SCHEDULE: &[u8] = include_bytes!("../demo/fixtures/premium-schedule-2026.xlsx");

    const MAIN: &str = "http://schemas.openxmlformats.org/spreadsheetml/2006/main";
    const REL: &str = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";

    /// A workbook with the given sheets (name, `sheetData` children) and shared strings.
    fn xlsx(sheets: &[(&str, &str)], shared: &[&str]) -> Vec<u8> {
        let mut workbook = format!(r#"<workbook xmlns="{MAIN}" xmlns:r="{REL}"><sheets>"#);
        let mut rels = String::from(
            r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">"#,
        );
        let mut parts = Vec::new();
        for (i, (name, data)) in sheets.iter().enumerate() {
            let n = i + 1;
            workbook.push_str(&format!(
                r#"<sheet name="{name}" sheetId="{n}" r:id="rId{n}"/>"#
            ));
            rels.push_str(&format!(
                r#"<Relationship Id="rId{n}" Type="{REL}/worksheet" Target="worksheets/sheet{n}.xml"/>"#
            ));
            parts.push((
                format!("xl/worksheets/sheet{n}.xml"),
                format!(r#"<worksheet xmlns="{MAIN}"><sheetData>{data}</sheetData></worksheet>"#),
            ));
        }
        workbook.push_str("</sheets></workbook>");
        rels.push_str("</Relationships>");
        let strings: String = shared
            .iter()
            .map(|s| format!("<si><t>{s}</t></si>"))
            .collect();
        parts.push((
            "_rels/.rels".into(),
            format!(
                r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="{REL}/officeDocument" Target="xl/workbook.xml"/></Relationships>"#
            ),
        ));
        parts.push(("xl/workbook.xml".into(), workbook));
        parts.push(("xl/_rels/workbook.xml.rels".into(), rels));
        parts.push((
            "xl/sharedStrings.xml".into(),
            format!(r#"<sst xmlns="{MAIN}">{strings}</sst>"#),
        ));
        let entries: Vec<(&str, Put<'_>)> = parts
            .iter()
            .map(|(name, xml)| (name.as_str(), Put::Deflated(xml.as_bytes())))
            .collect();
        build(&entries)
    }

    fn s(r: &str, index: usize) -> String {
        format!(r#"<c r="{r}" t="s"><v>{index}</v></c>"#)
    }

    fn n(r: &str, value: &str) -> String {
        format!(r#"<c r="{r}"><v>{value}</v></c>"#)
    }

    #[test]
    fn sheets_rows_and_tab_separated_cells() {
        let first = format!(
            r#"<row r="1">{}{}</row><row r="2">{}{}</row><row r="5">{}</row>"#,
            s("A1", 0),
            s("B1", 1),
            s("A2", 2),
            n("C2", "42.5"),
            n("B5", "7"),
        );
        let second = format!(r#"<row r="1">{}</row>"#, s("A1", 3));
        let bytes = xlsx(
            &[("Schedule", &first), ("Empty", ""), ("Notes", &second)],
            &["Policy", "Premium", "PROP-1", "see &amp; note"],
        );
        let e = extract(&bytes, &caps()).expect("xlsx");
        assert_eq!(
            e.text,
            "# Schedule\nPolicy\tPremium\nPROP-1\t\t42.5\n\t7\n\n# Empty\n\n# Notes\nsee & note"
        );
        assert_eq!((e.truncated, e.extractor), (false, "xlsx"));
    }

    #[test]
    fn output_stops_at_max_chars() {
        let rows = |count: u32| -> String {
            (1..=count)
                .map(|r| {
                    format!(
                        r#"<row r="{r}">{}</row>"#,
                        n(&format!("A{r}"), &r.to_string())
                    )
                })
                .collect()
        };
        let bytes = xlsx(&[("S", &rows(2000))], &[]);
        let e = extract(
            &bytes,
            &Caps {
                max_chars: 10,
                ..caps()
            },
        )
        .expect("xlsx");
        assert_eq!((e.text.as_str(), e.truncated), ("# S\n1\n2\n3", true));
        let e = extract(
            &xlsx(&[("S", &rows(3))], &[]),
            &Caps {
                max_chars: 9,
                ..caps()
            },
        )
        .expect("xlsx");
        assert!(!e.truncated);
    }

    #[test]
    fn far_apart_cells_cost_nothing() {
        let data = format!(
            r#"<row r="1">{}</row><row r="1048576">{}</row>"#,
            n("A1", "1"),
            n("XFD1048576", "2")
        );
        let bytes = xlsx(&[("S", &data)], &[]);
        let started = Instant::now();
        let e = extract(
            &bytes,
            &Caps {
                max_chars: 100,
                ..caps()
            },
        )
        .expect("xlsx");
        // The 16,383 tabs before XFD run into the budget; trailing whitespace is trimmed.
        assert_eq!((e.text.as_str(), e.truncated), ("# S\n1", true));
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn huge_shared_strings_are_over_the_container_cap() {
        let long = "x".repeat(2 * 1024 * 1024);
        let bytes = xlsx(&[("S", &s("A1", 0))], &[&long]);
        assert!(bytes.len() < 64 * 1024);
        assert_eq!(
            extract(&bytes, &caps()),
            Err(ExtractError::Zip(ZipError::TooLarge))
        );
        let few = Caps {
            max_container_entries: 2,
            ..caps()
        };
        assert_eq!(
            extract(&xlsx(&[("S", "")], &[]), &few),
            Err(ExtractError::Zip(ZipError::TooManyEntries))
        );
    }

    #[test]
    fn encrypted_and_malformed_workbooks() {
        let cfb = b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1 an OLE compound file";
        assert_eq!(extract(cfb, &caps()), Err(ExtractError::Encrypted));
        for bad in [&b""[..], b"PK\x03\x04", b"random bytes, not a zip at all"] {
            assert_eq!(extract(bad, &caps()), Err(ExtractError::Failed));
        }
        let no_workbook = build(&[("xl/other.xml", Put::Deflated(b"<x/>"))]);
        assert_eq!(extract(&no_workbook, &caps()), Err(ExtractError::Failed));
        let broken = xlsx(&[("S", r#"<row r="1"><c r="A1"><v>1</row>"#)], &[]);
        assert_eq!(extract(&broken, &caps()), Err(ExtractError::Failed));
        let encrypted = build(&[("xl/workbook.xml", Put::Aes(b"<workbook/>", "pw"))]);
        assert_eq!(extract(&encrypted, &caps()), Err(ExtractError::Encrypted));
    }

    #[test]
    fn demo_premium_schedule() {
        let e = extract(SCHEDULE, &caps()).expect("xlsx");
        assert!(e.text.starts_with("# Schedule\n"), "{}", e.text);
        assert!(e.text.contains("\n# Notes\n"), "{}", e.text);
        for id in ["PROP-1001", "PROP-2042", "PROP-3107"] {
            assert!(e.text.contains(id), "{id} in {}", e.text);
        }
        assert!(!e.truncated);
    }
}
