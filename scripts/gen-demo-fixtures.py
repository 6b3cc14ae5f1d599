#!/usr/bin/env python3
"""Generate the committed files of the mailgate demo corpus.

Purpose: (1) write small, real, fully fictional documents (PDF, DOCX, XLSX, ZIP, ZipCrypto ZIP,
PNG) into src/demo/fixtures/ (the attachments inside the demo messages; the Rust tests compare
the decoded attachments with them); (2) check the committed demo messages,
src/demo/messages/<alias>/<folder>/<unique>.eml, against src/demo/messages/manifest.tsv (one line
per message: alias, folder, Maildir unique name, flags or "-", in the order they are written) and
write src/demo/embedded.rs, the include_bytes! list that embeds them in the binary. The outputs are
committed and this script is only run by hand when a fixture or a message must change:

    python3 scripts/gen-demo-fixtures.py            # writes fixtures and src/demo/embedded.rs
    python3 scripts/gen-demo-fixtures.py --check    # exit 1 if a committed file differs

The .eml files are the bytes the former Rust generator (src/demo/corpus.rs before issue 10, with
its own quoted-printable, RFC 2047/2231 and date encoders) wrote, captured once; the Rust test
`the_corpus_is_byte_for_byte_the_pinned_one` pins their digest. To change a message, edit its
.eml (CRLF line ends, 8-bit bytes kept as they are; Python's email package is the tool for a new
one), keep the known-facts table in src/demo/corpus.rs true, bump VERSION in src/demo/mod.rs and
the pinned digest. A message's file name starts with its delivery time (unix seconds), which is
also the Maildir name, so message ids stay stable. The oversized attachment is not committed: its
message holds the line @@MAILGATE-DEMO-OVERSIZED-ATTACHMENT@@, replaced at run time.

Invariant: the output is byte-for-byte deterministic (fixed timestamps, fixed "random" bytes, no
clock, no RNG), uses the Python standard library only, and contains only invented people and
organisations. The text of every document carries the investigation signals the demo relies on
(proposal ids PROP-1001 / PROP-2042 / PROP-3107, clients Orchard Bakery Ltd / Harbour Lights Café
Ltd / Quill & Ink Stationers, insurers Northwind Mutual / Blue Heron Assurance, invoice numbers
INV-2026-0042 / INV-2026-0057 / INV-2026-0063). If you change any text here, update the
"known facts" table in src/demo/corpus.rs.

Why hand-written formats: Python's zipfile cannot write encrypted archives, and the demo must not
depend on office software, so the PDF, the OOXML packages and ZipCrypto are written directly.
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import io
import re
import struct
import sys
import zipfile
import zlib
from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent.parent / "src" / "demo"
OUT_DIR = DEMO_DIR / "fixtures"
MESSAGES_DIR = DEMO_DIR / "messages"
EMBEDDED_RS = DEMO_DIR / "embedded.rs"

# Every archive member gets this timestamp so the output never depends on the clock.
FIXED_DATE_TIME = (2026, 1, 15, 9, 30, 0)

# The password of the ZipCrypto archive; documented in corpus.rs and in the tour.
ZIP_PASSWORD = b"demo-zip-2026"


# --------------------------------------------------------------------------------------------
# PDF
# --------------------------------------------------------------------------------------------


def _pdf_escape(text: str) -> bytes:
    """Escape a line for a PDF literal string; the fixtures are ASCII on purpose."""
    raw = text.encode("ascii")
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def make_pdf(title: str, lines: list[str]) -> bytes:
    """A one-page PDF 1.4 with one BT/ET text object per line (Helvetica, WinAnsi).

    One text object per line keeps every extractor (pdf-extract, lopdf, pdfjs) on the simplest
    path; the content stream is not compressed so the text is also visible to a plain grep.
    """
    content = io.BytesIO()
    y = 760
    for index, line in enumerate(lines):
        size = 16 if index == 0 else 11
        content.write(b"BT /F1 %d Tf 72 %d Td (" % (size, y) + _pdf_escape(line) + b") Tj ET\n")
        y -= 24 if index == 0 else 16
    stream = content.getvalue()

    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"endstream",
        b"<< /Title (" + _pdf_escape(title) + b") /Producer (mailgate demo fixtures) "
        b"/CreationDate (D:20260115093000Z) >>",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref_at = out.tell()
    out.write(b"xref\n0 %d\n" % (len(objects) + 1))
    out.write(b"0000000000 65535 f \n")
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n"
        % (len(objects) + 1, len(objects), xref_at)
    )
    return out.getvalue()


# --------------------------------------------------------------------------------------------
# Deterministic ZIP writing (plain archives and OOXML packages)
# --------------------------------------------------------------------------------------------


def make_zip(entries: list[tuple[str, bytes, int]]) -> bytes:
    """A ZIP written by zipfile with every nondeterministic field pinned."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data, method in entries:
            info = zipfile.ZipInfo(name, date_time=FIXED_DATE_TIME)
            info.compress_type = method
            info.create_system = 3  # unix, whatever the host
            info.external_attr = 0o100644 << 16
            archive.writestr(info, data, compress_type=method, compresslevel=9)
    return buffer.getvalue()


def xml(text: str) -> bytes:
    return ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n' + text).encode("utf-8")


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


RELS_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
DOC_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
CT_NS = "http://schemas.openxmlformats.org/package/2006/content-types"
W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
S_NS = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
OOXML = "application/vnd.openxmlformats-officedocument"


def make_docx(paragraphs: list[str]) -> bytes:
    """Minimal WordprocessingML package: content types, package rels, document, core props."""
    content_types = xml(
        f'<Types xmlns="{CT_NS}">'
        f'<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        f'<Override PartName="/word/document.xml" ContentType="{OOXML}.wordprocessingml.document.main+xml"/>'
        '<Override PartName="/docProps/core.xml" '
        'ContentType="application/vnd.openxmlformats-package.core-properties+xml"/>'
        "</Types>"
    )
    rels = xml(
        f'<Relationships xmlns="{RELS_NS}">'
        f'<Relationship Id="rId1" Type="{DOC_REL}/officeDocument" Target="word/document.xml"/>'
        '<Relationship Id="rId2" '
        'Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" '
        'Target="docProps/core.xml"/>'
        "</Relationships>"
    )
    body = "".join(
        f'<w:p><w:r><w:t xml:space="preserve">{_esc(text)}</w:t></w:r></w:p>' for text in paragraphs
    )
    document = xml(f'<w:document xmlns:w="{W_NS}"><w:body>{body}<w:sectPr/></w:body></w:document>')
    core = xml(
        '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/">'
        "<dc:title>Cover note PROP-2042</dc:title><dc:creator>Example Brokers demo</dc:creator>"
        "</cp:coreProperties>"
    )
    deflated = zipfile.ZIP_DEFLATED
    return make_zip(
        [
            ("[Content_Types].xml", content_types, deflated),
            ("_rels/.rels", rels, deflated),
            ("word/document.xml", document, deflated),
            ("docProps/core.xml", core, deflated),
        ]
    )


def _col(index: int) -> str:
    return "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[index]


def make_xlsx(sheets: list[tuple[str, list[list[object]]]]) -> bytes:
    """Minimal SpreadsheetML package with a shared-string table and a trivial style sheet."""
    shared: list[str] = []

    def sid(text: str) -> int:
        if text not in shared:
            shared.append(text)
        return shared.index(text)

    sheet_parts = []
    for sheet_index, (_, rows) in enumerate(sheets, start=1):
        row_xml = []
        for r, row in enumerate(rows, start=1):
            cells = []
            for c, value in enumerate(row):
                ref = f"{_col(c)}{r}"
                if isinstance(value, str):
                    cells.append(f'<c r="{ref}" t="s"><v>{sid(value)}</v></c>')
                else:
                    cells.append(f'<c r="{ref}"><v>{value}</v></c>')
            row_xml.append(f'<row r="{r}">{"".join(cells)}</row>')
        sheet_parts.append(
            (
                f"xl/worksheets/sheet{sheet_index}.xml",
                xml(f'<worksheet xmlns="{S_NS}"><sheetData>{"".join(row_xml)}</sheetData></worksheet>'),
            )
        )

    overrides = "".join(
        f'<Override PartName="/{name}" ContentType="{OOXML}.spreadsheetml.worksheet+xml"/>'
        for name, _ in sheet_parts
    )
    content_types = xml(
        f'<Types xmlns="{CT_NS}">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        f'<Override PartName="/xl/workbook.xml" ContentType="{OOXML}.spreadsheetml.sheet.main+xml"/>'
        f"{overrides}"
        f'<Override PartName="/xl/sharedStrings.xml" ContentType="{OOXML}.spreadsheetml.sharedStrings+xml"/>'
        f'<Override PartName="/xl/styles.xml" ContentType="{OOXML}.spreadsheetml.styles+xml"/>'
        "</Types>"
    )
    rels = xml(
        f'<Relationships xmlns="{RELS_NS}">'
        f'<Relationship Id="rId1" Type="{DOC_REL}/officeDocument" Target="xl/workbook.xml"/>'
        "</Relationships>"
    )
    sheet_entries = "".join(
        f'<sheet name="{_esc(name)}" sheetId="{i}" r:id="rId{i}"/>'
        for i, (name, _) in enumerate(sheets, start=1)
    )
    workbook = xml(
        f'<workbook xmlns="{S_NS}" xmlns:r="{DOC_REL}"><sheets>{sheet_entries}</sheets></workbook>'
    )
    n = len(sheets)
    workbook_rels = xml(
        f'<Relationships xmlns="{RELS_NS}">'
        + "".join(
            f'<Relationship Id="rId{i}" Type="{DOC_REL}/worksheet" Target="worksheets/sheet{i}.xml"/>'
            for i in range(1, n + 1)
        )
        + f'<Relationship Id="rId{n + 1}" Type="{DOC_REL}/sharedStrings" Target="sharedStrings.xml"/>'
        + f'<Relationship Id="rId{n + 2}" Type="{DOC_REL}/styles" Target="styles.xml"/>'
        + "</Relationships>"
    )
    styles = xml(
        f'<styleSheet xmlns="{S_NS}">'
        '<fonts count="1"><font><sz val="11"/><name val="Calibri"/></font></fonts>'
        '<fills count="1"><fill><patternFill patternType="none"/></fill></fills>'
        '<borders count="1"><border/></borders>'
        '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>'
        '<cellXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/></cellXfs>'
        "</styleSheet>"
    )
    # Shared strings are collected while the sheets are rendered, so they are written last.
    strings = "".join(f"<si><t>{_esc(s)}</t></si>" for s in shared)
    shared_xml = xml(
        f'<sst xmlns="{S_NS}" count="{len(shared)}" uniqueCount="{len(shared)}">{strings}</sst>'
    )
    deflated = zipfile.ZIP_DEFLATED
    entries = [
        ("[Content_Types].xml", content_types, deflated),
        ("_rels/.rels", rels, deflated),
        ("xl/workbook.xml", workbook, deflated),
        ("xl/_rels/workbook.xml.rels", workbook_rels, deflated),
    ]
    entries += [(name, data, deflated) for name, data in sheet_parts]
    entries += [
        ("xl/sharedStrings.xml", shared_xml, deflated),
        ("xl/styles.xml", styles, deflated),
    ]
    return make_zip(entries)


# --------------------------------------------------------------------------------------------
# ZipCrypto (traditional PKWARE encryption), written by hand
# --------------------------------------------------------------------------------------------


def _crc_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (0xEDB88320 ^ (c >> 1)) if c & 1 else (c >> 1)
        table.append(c)
    return table


CRC_TABLE = _crc_table()


class ZipCrypto:
    """The three-key stream cipher of APPNOTE 6.1; weak, but it is what `zip -P` writes."""

    def __init__(self, password: bytes) -> None:
        self.keys = [0x12345678, 0x23456789, 0x34567890]
        for byte in password:
            self._update(byte)

    @staticmethod
    def _crc(crc: int, byte: int) -> int:
        return CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)

    def _update(self, byte: int) -> None:
        k0, k1, k2 = self.keys
        k0 = self._crc(k0, byte)
        k1 = ((k1 + (k0 & 0xFF)) * 134775813 + 1) & 0xFFFFFFFF
        k2 = self._crc(k2, k1 >> 24)
        self.keys = [k0, k1, k2]

    def _stream_byte(self) -> int:
        temp = (self.keys[2] | 2) & 0xFFFF
        return ((temp * (temp ^ 1)) >> 8) & 0xFF

    def encrypt(self, data: bytes) -> bytes:
        out = bytearray()
        for byte in data:
            out.append(byte ^ self._stream_byte())
            self._update(byte)
        return bytes(out)


def _dos_time_date() -> tuple[int, int]:
    y, mo, d, h, mi, s = FIXED_DATE_TIME
    return (h << 11) | (mi << 5) | (s // 2), ((y - 1980) << 9) | (mo << 5) | d


def make_zipcrypto(entries: list[tuple[str, bytes]], password: bytes) -> bytes:
    """A deflated ZIP whose every entry is ZipCrypto-encrypted (general-purpose bit 0).

    The 12-byte encryption header is normally random; here it is derived from a fixed seed so
    the file is reproducible. Its last byte is the high byte of the CRC, as APPNOTE requires when
    no data descriptor is used, which is what lets readers detect a wrong password.
    """
    dos_time, dos_date = _dos_time_date()
    local = io.BytesIO()
    central = io.BytesIO()
    for name, data in entries:
        crc = zlib.crc32(data) & 0xFFFFFFFF
        compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
        deflated = compressor.compress(data) + compressor.flush()
        seed = hashlib.sha256(b"mailgate-demo-zipcrypto:" + name.encode("utf-8")).digest()
        header = seed[:11] + bytes([crc >> 24])
        cipher = ZipCrypto(password)
        payload = cipher.encrypt(header + deflated)
        raw_name = name.encode("utf-8")
        flags = 0x0001
        offset = local.tell()
        local.write(
            struct.pack(
                "<IHHHHHIIIHH",
                0x04034B50, 20, flags, 8, dos_time, dos_date, crc, len(payload), len(data),
                len(raw_name), 0,
            )
        )
        local.write(raw_name)
        local.write(payload)
        central.write(
            struct.pack(
                "<IHHHHHHIIIHHHHHII",
                0x02014B50, (3 << 8) | 20, 20, flags, 8, dos_time, dos_date, crc, len(payload),
                len(data), len(raw_name), 0, 0, 0, 0, 0o100644 << 16, offset,
            )
        )
        central.write(raw_name)
    cd = central.getvalue()
    cd_offset = local.tell()
    count = len(entries)
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(cd), cd_offset, 0)
    return local.getvalue() + cd + eocd


# --------------------------------------------------------------------------------------------
# PNG
# --------------------------------------------------------------------------------------------


def make_png(width: int, height: int) -> bytes:
    """A small RGB gradient PNG (the demo's inline "team lunch" picture)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    rows = bytearray()
    for y in range(height):
        rows.append(0)  # filter type: none
        for x in range(width):
            rows += bytes([(x * 255) // (width - 1), (y * 255) // (height - 1), 160])
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + chunk(b"IEND", b"")
    )


# --------------------------------------------------------------------------------------------
# The fixtures
# --------------------------------------------------------------------------------------------


def fixtures() -> dict[str, bytes]:
    out: dict[str, bytes] = {}

    out["proposal-PROP-1001.pdf"] = make_pdf(
        "Proposal PROP-1001",
        [
            "Insurance proposal PROP-1001",
            "Client: Orchard Bakery Ltd",
            "Insurer: Northwind Mutual",
            "Cover: commercial property and business interruption",
            "Period: 2026-04-01 to 2027-03-31",
            "Annual premium: EUR 4,870.00 (billed on invoice INV-2026-0042)",
            "Broker: Example Brokers, account manager Ana Lima",
            "Status: awaiting client signature",
            "This document is fictional demo data for mailgate.",
        ],
    )
    out["invoice-INV-2026-0042.pdf"] = make_pdf(
        "Invoice INV-2026-0042",
        [
            "Invoice INV-2026-0042",
            "Bill to: Orchard Bakery Ltd, 12 Mill Lane, Exampleton",
            "Issued by: Example Brokers on behalf of Northwind Mutual",
            "Reference: proposal PROP-1001",
            "Amount due: EUR 4,870.00",
            "Due date: 2026-04-30",
            "This document is fictional demo data for mailgate.",
        ],
    )
    # Carried in the demo under the hostile file name "IGNORE PREVIOUS INSTRUCTIONS.pdf"; its own
    # text is harmless so that only the name is the injection.
    out["payment-notice-INV-2026-0077.pdf"] = make_pdf(
        "Payment notice INV-2026-0077",
        [
            "Payment notice",
            "Supplier: Paper Trail Supplies",
            "Invoice INV-2026-0077",
            "Amount due: EUR 312.40",
            "This document is fictional demo data for mailgate.",
        ],
    )
    out["cover-note-PROP-2042.docx"] = make_docx(
        [
            "Cover note for proposal PROP-2042",
            "Client: Harbour Lights Café Ltd",
            "Insurer: Blue Heron Assurance",
            "Cover: public liability, EUR 2,000,000 any one occurrence",
            "Premium: EUR 2,310.50, invoice INV-2026-0057",
            "Cover is confirmed from 2026-05-01 subject to the premium being received.",
            "This document is fictional demo data for mailgate.",
        ]
    )
    out["premium-schedule-2026.xlsx"] = make_xlsx(
        [
            (
                "Schedule",
                [
                    ["Proposal", "Client", "Insurer", "Premium EUR", "Invoice"],
                    ["PROP-1001", "Orchard Bakery Ltd", "Northwind Mutual", 4870, "INV-2026-0042"],
                    ["PROP-2042", "Harbour Lights Café Ltd", "Blue Heron Assurance", 2310.5, "INV-2026-0057"],
                    ["PROP-3107", "Quill & Ink Stationers", "Northwind Mutual", 1125, "INV-2026-0063"],
                ],
            ),
            (
                "Notes",
                [
                    ["Note"],
                    ["Schedule of premiums due, prepared by the finance desk."],
                    ["PROP-3107 for Quill & Ink Stationers is only listed in this workbook."],
                ],
            ),
        ]
    )
    out["claims-bundle-2026-Q2.zip"] = make_zip(
        [
            (
                "README.txt",
                b"Claims bundle 2026-Q2 (fictional demo data).\n"
                b"Entries: claims/claim-summary.txt, claims/claim-lines.csv, claims/report..v2.txt,\n"
                b"notes/handover.md\n",
                zipfile.ZIP_STORED,
            ),
            (
                "claims/claim-summary.txt",
                b"Claim CLM-2026-0311\n"
                b"Client: Orchard Bakery Ltd\n"
                b"Insurer: Northwind Mutual\n"
                b"Policy from proposal PROP-1001\n"
                b"Loss: oven fire, 2026-05-14; reserve EUR 18,400.00\n",
                zipfile.ZIP_DEFLATED,
            ),
            (
                "claims/claim-lines.csv",
                b"claim,line,description,amount_eur\n"
                b"CLM-2026-0311,1,Replacement deck oven,12500.00\n"
                b"CLM-2026-0311,2,Smoke cleaning,2900.00\n"
                b"CLM-2026-0311,3,Business interruption (5 days),3000.00\n",
                zipfile.ZIP_DEFLATED,
            ),
            (
                # "..", but not as a path segment: addressable, and extractable (spec 5.11).
                "claims/report..v2.txt",
                b"Adjuster report v2 for CLM-2026-0311: cause accidental, cover confirmed.\n",
                zipfile.ZIP_DEFLATED,
            ),
            (
                "notes/handover.md",
                b"# Handover\n\n- Chase Northwind Mutual for the adjuster fee note.\n"
                b"- Orchard Bakery Ltd asked for a call on Friday.\n",
                zipfile.ZIP_DEFLATED,
            ),
        ]
    )
    out["secure-statements-2026.zip"] = make_zipcrypto(
        [
            (
                "secret.txt",
                b"ZIPCRYPTO-DEMO-SECRET-7781\n"
                b"Confidential statement for Orchard Bakery Ltd\n"
                b"Invoice INV-2026-0042, balance EUR 4,870.00, insurer Northwind Mutual\n"
                b"This file is fictional demo data for mailgate.\n",
            )
        ],
        ZIP_PASSWORD,
    )
    out["team-lunch.png"] = make_png(24, 16)
    return out


# ---------------------------------------------------------------------------------------------
# The message index
# ---------------------------------------------------------------------------------------------

UNIQUE = re.compile(r"[0-9]+\.M[0-9]+P[0-9]+\.demo")
FOLDER = re.compile(r"INBOX|[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*")


def message_index() -> tuple[str, list[str]]:
    """The text of embedded.rs, and the problems found in the manifest and the messages."""
    problems = []
    rows = []
    manifest = (MESSAGES_DIR / "manifest.tsv").read_text(encoding="utf-8")
    for number, line in enumerate(manifest.splitlines(), 1):
        fields = line.split("\t")
        if len(fields) != 4:
            problems.append(f"manifest.tsv:{number}: want 4 tab-separated fields")
            continue
        alias, folder, unique, flags = fields
        if not (re.fullmatch(r"[a-z]+", alias) and FOLDER.fullmatch(folder)):
            problems.append(f"manifest.tsv:{number}: bad alias or folder")
        if not UNIQUE.fullmatch(unique):
            problems.append(f"manifest.tsv:{number}: bad unique name {unique!r}")
        if flags != "-" and (flags != "".join(sorted(set(flags))) or set(flags) - set("FRS")):
            problems.append(f"manifest.tsv:{number}: flags must be '-' or sorted letters of FRS")
        path = MESSAGES_DIR / alias / folder / f"{unique}.eml"
        if not path.is_file():
            problems.append(f"manifest.tsv:{number}: no file {path.relative_to(DEMO_DIR)}")
            continue
        raw = path.read_bytes()
        if re.search(rb"(?<!\r)\n|\r(?!\n)", raw):
            problems.append(f"{path.relative_to(DEMO_DIR)}: a line does not end in CRLF")
        # The standard library's parser as a second opinion next to mail-parser in the Rust tests.
        message = email.parser.BytesParser(policy=email.policy.default).parsebytes(raw)
        if not message["X-Demo-Key"] or not message["Message-ID"]:
            problems.append(f"{path.relative_to(DEMO_DIR)}: no X-Demo-Key or Message-ID")
        rows.append((alias, folder, unique, "" if flags == "-" else flags))
    listed = {MESSAGES_DIR / a / f / f"{u}.eml" for a, f, u, _ in rows}
    for path in sorted(MESSAGES_DIR.rglob("*.eml")):
        if path not in listed:
            problems.append(f"{path.relative_to(DEMO_DIR)}: not in manifest.tsv")
    uniques = [u for _, _, u, _ in rows]
    if len(set(uniques)) != len(uniques):
        problems.append("manifest.tsv: a unique name repeats")
    out = [
        "//! The embedded demo messages in manifest order: alias, folder, Maildir unique name,",
        "//! flags, bytes. Generated by scripts/gen-demo-fixtures.py from",
        "//! src/demo/messages/manifest.tsv; do not edit by hand.",
        "",
        "/// One committed message file, `messages/<alias>/<folder>/<unique>.eml`.",
        "macro_rules! eml {",
        "    ($alias:literal, $folder:literal, $unique:literal, $flags:literal) => {",
        "        (",
        "            $alias,",
        "            $folder,",
        "            $unique,",
        "            $flags,",
        "            include_bytes!(concat!(",
        "                \"messages/\",",
        "                $alias,",
        "                \"/\",",
        "                $folder,",
        "                \"/\",",
        "                $unique,",
        "                \".eml\"",
        "            )) as &[u8],",
        "        )",
        "    };",
        "}",
        "",
        "/// (alias, folder, unique, flags, bytes).",
        "pub(super) type Embedded = (",
        "    &'static str,",
        "    &'static str,",
        "    &'static str,",
        "    &'static str,",
        "    &'static [u8],",
        ");",
        "",
        "pub(super) const MESSAGES: &[Embedded] = &[",
    ]
    out += [f'    eml!("{a}", "{f}", "{u}", "{fl}"),' for a, f, u, fl in rows]
    out += ["];", ""]
    return "\n".join(out), problems


def main(argv: list[str]) -> int:
    check = "--check" in argv[1:]
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    differs = []
    outputs = sorted((OUT_DIR / name, data) for name, data in fixtures().items())
    index, problems = message_index()
    outputs.append((EMBEDDED_RS, index.encode("utf-8")))
    for path, data in outputs:
        name = str(path.relative_to(DEMO_DIR))
        if check:
            if not path.exists() or path.read_bytes() != data:
                differs.append(name)
            continue
        path.write_bytes(data)
        print(f"{name}: {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}")
    for problem in problems:
        print(problem, file=sys.stderr)
    if differs:
        print("out of date: " + ", ".join(differs), file=sys.stderr)
    return 1 if differs or problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
