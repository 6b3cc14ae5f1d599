#!/usr/bin/env python3
"""Generate the MIME-shape regression corpus of issue 36 ("no false absence on real mail").

Purpose: write tests/fixtures/mime-shapes/NN-name.eml, one small message per shape of real mail
that broke (or could break) the promise that what `get_message` shows is what every search
matches: a Content-Type without a subtype or with garbage, an unknown charset, base64 cut in the
middle of a quantum or holding characters outside its alphabet, a quoted-printable soft break
inside a word, a multipart part without headers, digests, nested messages, a multipart without a
boundary, a boundary string inside the text, unnamed octet-stream and unknown parts, HTML only,
text/enriched and text/x-log, an inline image, a named binary attachment and a well-formed
control message. Beside them, tests/fixtures/mime-shapes/shapes.json names per file:

    file           the .eml's name
    shape          what the shape is, in words
    subject        the message's Subject (no present or absent word is in it)
    present        a word the body text holds (as a search types it: the accent-free form for
                   the Latin-1 shape; split by a soft line break in the raw bytes of the QP shape;
                   in the decodable prefix of the truncated base64)
    bodyContains   strings `get_message`'s body must contain (the present word as shown)
    absent         a word no part of the message holds
    absentStatus   the expected search_mailbox status for `absent`: NOT_FOUND, or
                   SEARCH_INCOMPLETE when a body-position part cannot be read
    absentWarning  the warning code that SEARCH_INCOMPLETE must carry, else null
    attachments    the content types of the attachments get_message must list, in order
                   ([] for none); null where the rules do not say (an unreadable body part)
    nestedWord     a word only inside a nested message (investigate_documents reads it), or null

It also copies every .eml as a fuzz seed, fuzz/corpus/mime_memory/shape-NN-name and
fuzz/corpus/mime_maildir/shape-NN-name.

    python3 scripts/gen-mime-shapes.py            # writes the corpus, shapes.json and the seeds
    python3 scripts/gen-mime-shapes.py --check    # exit 1 if a committed file differs

Invariant: byte-for-byte deterministic (fixed dates, "random" bytes from SHA-256 of fixed
labels), Python standard library only, CRLF line ends, only invented people at example.com.
Who runs it: a person changing a shape; the test tests/it/mime_shapes.rs reads its output.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "mime-shapes"
SEEDS = [ROOT / "fuzz" / "corpus" / "mime_memory", ROOT / "fuzz" / "corpus" / "mime_maildir"]

NOT_FOUND = "NOT_FOUND"
INCOMPLETE = "SEARCH_INCOMPLETE"
UNKNOWN_TYPE = "message_part_unknown_type"
UNDECODABLE = "message_part_undecodable"


def pseudo_bytes(label: str, n: int) -> bytes:
    """`n` fixed bytes that look random (SHA-256 in counter mode over `label`)."""
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"{label}/{counter}".encode()).digest()
        counter += 1
    return bytes(out[:n])


def binary_blob(label: str, n: int) -> bytes:
    """Bytes no text decoder reads as text: NULs and invalid UTF-8 all through."""
    raw = bytearray(pseudo_bytes(label, n))
    for i in range(0, n, 7):
        raw[i] = 0
    for i in range(3, n, 11):
        raw[i] = 0xFF
    return bytes(raw)


def b64_lines(data: bytes) -> list[str]:
    text = base64.b64encode(data).decode("ascii")
    return [text[i : i + 76] for i in range(0, len(text), 76)]


def crlf(text: str) -> bytes:
    """`text` (written with \\n) with CRLF line ends, as UTF-8."""
    return text.replace("\r\n", "\n").replace("\n", "\r\n").encode("utf-8")


def head(n: int, subject: str, extra: str = "") -> bytes:
    """The common header block of shape `n` (no blank line), then `extra` header lines."""
    text = (
        "From: Rosa Quintero <rosa.quintero@example.com>\n"
        "To: Shapes Desk <shapes@example.com>\n"
        f"Subject: {subject}\n"
        f"Date: Mon, 2 Nov 2026 10:{n:02d}:00 +0000\n"
        f"Message-ID: <shape-{n:02d}@example.com>\n"
        "MIME-Version: 1.0\n"
    )
    return crlf(text + extra)


class Shape:
    def __init__(
        self,
        n: int,
        name: str,
        shape: str,
        raw: bytes,
        *,
        present: str | None = None,
        body_contains: list[str] | None = None,
        absent_status: str = NOT_FOUND,
        absent_warning: str | None = None,
        attachments: list[str] | None = None,
        nested_word: str | None = None,
    ):
        self.n = n
        self.name = name
        self.shape = shape
        self.raw = raw
        self.present = present or f"kumquat{n:02d}"
        self.body_contains = body_contains or [self.present]
        self.absent = f"marzipan{n:02d}"
        self.absent_status = absent_status
        self.absent_warning = absent_warning
        self.attachments = attachments
        self.nested_word = nested_word

    @property
    def file(self) -> str:
        return f"{self.n:02d}-{self.name}.eml"

    def subject(self) -> str:
        return f"Shape {self.n:02d} {self.name}"

    def manifest(self) -> dict:
        return {
            "file": self.file,
            "shape": self.shape,
            "subject": self.subject(),
            "present": self.present,
            "bodyContains": self.body_contains,
            "absent": self.absent,
            "absentStatus": self.absent_status,
            "absentWarning": self.absent_warning,
            "attachments": self.attachments,
            "nestedWord": self.nested_word,
        }


def note(n: int) -> str:
    """A short plain body holding the shape's present word once."""
    return (
        "Hello team,\n\n"
        f"The quarterly note mentions kumquat{n:02d} once, near the middle.\n\n"
        "Regards,\nRosa\n"
    )


def single(n: int, name: str, shape: str, header_lines: str, body: bytes, **kw) -> Shape:
    s = Shape(n, name, shape, b"", **kw)
    s.raw = head(n, s.subject(), header_lines) + b"\r\n" + body
    return s


def multipart(n: int, name: str, shape: str, ctype: str, boundary: str, parts: list[bytes], **kw):
    """A multipart message: each of `parts` is a part's headers, blank line and body, CRLF."""
    s = Shape(n, name, shape, b"", **kw)
    body = crlf("This is a multi-part message in MIME format.\n")
    for part in parts:
        body += f"--{boundary}\r\n".encode() + part
        if not part.endswith(b"\r\n"):
            body += b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    s.raw = (
        head(n, s.subject(), f'Content-Type: {ctype}; boundary="{boundary}"\n') + b"\r\n" + body
    )
    return s


def text_part(text: str, ctype: str = "text/plain; charset=utf-8") -> bytes:
    return crlf(f"Content-Type: {ctype}\nContent-Transfer-Encoding: 8bit\n\n{text}")


def b64_part(headers: str, data: bytes) -> bytes:
    lines = "\n".join(b64_lines(data))
    return crlf(f"{headers}Content-Transfer-Encoding: base64\n\n{lines}\n")


def nested_message(label: str, subject: str, text: str) -> bytes:
    return crlf(
        f"From: Ian Okafor <ian.okafor@example.com>\n"
        f"To: dev-list@example.com\n"
        f"Subject: {subject}\n"
        f"Date: Sun, 1 Nov 2026 09:00:00 +0000\n"
        f"Message-ID: <{label}@example.com>\n"
        f"Content-Type: text/plain; charset=utf-8\n\n"
        f"{text}"
    )


def truncated_base64(n: int, name: str, left: int) -> Shape:
    """A text/plain base64 body cut `left` characters (1-3) into a quantum, after three whole
    lines: the present word is in the decodable prefix, the rest of the text is lost."""
    text = (
        "Hello team,\n\nThe first line of this report mentions "
        f"kumquat{n:02d} early on.\n"
        + "".join(
            f"Line {i}: the delivery schedule for week {i} is unchanged and on track.\n"
            for i in range(1, 9)
        )
        + "Regards,\nRosa\n"
    )
    lines = b64_lines(crlf(text))
    kept = lines[:3] + [lines[3][: 28 + left]]
    assert len(kept[-1]) % 4 == left
    assert f"kumquat{n:02d}".encode() in base64.b64decode("".join(kept[:3]))
    what = {
        1: "one character of its last quantum, which holds no whole byte",
        2: "two characters of its last quantum, unpadded",
    }[left]
    return single(
        n,
        name,
        f"text/plain base64 cut mid-quantum (the last line keeps {what}); "
        "the word is in the decodable prefix",
        "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n",
        crlf("\n".join(kept) + "\n"),
        absent_status=INCOMPLETE,
        absent_warning=UNDECODABLE,
    )


def shapes() -> list[Shape]:
    out: list[Shape] = []

    # 1-7: Content-Type values a reader must take as text/plain (RFC 2045 §5.2), with the
    # charset when one is given.
    out.append(
        single(
            1,
            "type-without-subtype",
            "Content-Type: text (no subtype), charset iso-8859-1 given",
            "Content-Type: text; charset=iso-8859-1\nContent-Transfer-Encoding: 8bit\n",
            crlf(note(1)) + "Lunch at the caf\xe9 on Friday.\r\n".encode("latin-1"),
            body_contains=["kumquat01", "café"],
            attachments=[],
        )
    )
    out.append(
        single(
            2,
            "type-slash-no-subtype",
            "Content-Type: text/ (empty subtype)",
            "Content-Type: text/\n",
            crlf(note(2)),
            attachments=[],
        )
    )
    out.append(
        single(
            3,
            "subtype-only",
            "Content-Type: plain (a subtype without its type)",
            "Content-Type: plain\n",
            crlf(note(3)),
            attachments=[],
        )
    )
    out.append(
        single(
            4,
            "three-segments",
            "Content-Type: text/plain/extra, charset utf-8 given",
            "Content-Type: text/plain/extra; charset=utf-8\nContent-Transfer-Encoding: 8bit\n",
            crlf(note(4) + "A naïve question follows.\n"),
            body_contains=["kumquat04", "naïve"],
            attachments=[],
        )
    )
    out.append(
        single(
            5,
            "garbage-semicolons",
            "Content-Type: ;;;",
            "Content-Type: ;;;\n",
            crlf(note(5)),
            attachments=[],
        )
    )
    out.append(
        single(
            6,
            "garbage-at-signs",
            "Content-Type: @@@",
            "Content-Type: @@@\n",
            crlf(note(6)),
            attachments=[],
        )
    )
    out.append(
        single(
            7,
            "empty-content-type",
            "Content-Type: (empty value)",
            "Content-Type:\n",
            crlf(note(7)),
            attachments=[],
        )
    )

    # 8: an unknown charset label over Latin-1 bytes: guessed (not UTF-8, so windows-1252).
    latin = (
        "Hello team,\n\nThe caterer confirmed the p\xe2tisserie08 order and the cr\xe8me "
        "for Friday.\n\nRosa\n"
    )
    out.append(
        single(
            8,
            "unknown-charset-latin1",
            "text/plain with an unknown charset label over Latin-1 bytes; the word has an accent "
            "and is searched without it",
            'Content-Type: text/plain; charset="x-unknown-roman"\nContent-Transfer-Encoding: 8bit\n',
            latin.replace("\n", "\r\n").encode("latin-1"),
            present="patisserie08",
            body_contains=["pâtisserie08", "crème"],
            attachments=[],
        )
    )

    # 9: base64 cut in the middle of a 4-character quantum, one of its four characters left
    # (which holds no whole byte): the decodable prefix holds the present word, the rest of the
    # text is lost. Shape 26 is the same cut two characters into the quantum.
    out.append(truncated_base64(9, "base64-truncated", 1))

    # 10: a second, unnamed text/plain part whose base64 holds characters outside the alphabet.
    lines = b64_lines(crlf("Second section: the totals are attached below.\n" * 4))
    lines[1] = lines[1][:20] + "*%!?" + lines[1][24:]
    out.append(
        multipart(
            10,
            "base64-invalid-chars",
            "multipart/mixed: a clean text part with the word, then an unnamed text/plain part "
            "whose base64 holds characters outside the base64 alphabet",
            "multipart/mixed",
            "b10",
            [
                text_part(note(10)),
                crlf(
                    "Content-Type: text/plain; charset=utf-8\n"
                    "Content-Transfer-Encoding: base64\n\n" + "\n".join(lines) + "\n"
                ),
            ],
            absent_status=INCOMPLETE,
            absent_warning=UNDECODABLE,
        )
    )

    # 11: a quoted-printable soft line break inside the word.
    out.append(
        single(
            11,
            "qp-soft-break-in-word",
            "text/plain quoted-printable, the word split by a soft line break (=CRLF)",
            "Content-Type: text/plain; charset=utf-8\n"
            "Content-Transfer-Encoding: quoted-printable\n",
            crlf(
                "Hello team,\n\nThe quarterly note mentions kumq=\nuat11 once, at the caf=C3=A9 "
                "table.\n\nRegards,\nRosa\n"
            ),
            body_contains=["kumquat11", "café"],
            attachments=[],
        )
    )

    # 12: a multipart body part with no headers at all (text/plain by default).
    out.append(
        multipart(
            12,
            "part-without-headers",
            "multipart/mixed whose second part has no headers (blank line right after the "
            "boundary): text/plain us-ascii by default",
            "multipart/mixed",
            "b12",
            [
                text_part("Hello team, the details follow in the next part.\n"),
                crlf("\nThe second part mentions kumquat12 once.\n"),
            ],
            attachments=[],
        )
    )

    # 13: a list digest: multipart/mixed with a masthead, and a multipart/digest whose parts
    # have no Content-Type (message/rfc822 by default in a digest, RFC 2046 §5.1.5).
    digest_items = [
        nested_message("digest-13-1", "Build times", "The nestedword13 build took 14 minutes.\n"),
        nested_message("digest-13-2", "Re: Build times", "Faster than last week, thanks.\n"),
    ]
    digest = crlf("Content-Type: multipart/digest; boundary=\"d13\"\n\n")
    for item in digest_items:
        digest += b"--d13\r\n\r\n" + item
    digest += b"--d13--\r\n"
    out.append(
        multipart(
            13,
            "digest-without-content-type",
            "multipart/mixed: a text masthead with the word, then a multipart/digest whose two "
            "parts have no Content-Type (each a nested message/rfc822)",
            "multipart/mixed",
            "b13",
            [text_part("dev-list digest, volume 4, issue 2. Topics: kumquat13 builds.\n"), digest],
            attachments=["message/rfc822", "message/rfc822"],
            nested_word="nestedword13",
        )
    )

    # 14: a forwarded message (message/rfc822, unnamed) inside multipart/mixed.
    out.append(
        multipart(
            14,
            "rfc822-in-mixed",
            "multipart/mixed: a text part with the word, then an unnamed message/rfc822 part "
            "(a forward)",
            "multipart/mixed",
            "b14",
            [
                text_part("Forwarding the note below about kumquat14.\n"),
                crlf("Content-Type: message/rfc822\n\n")
                + nested_message(
                    "forward-14", "Warehouse move", "The nestedword14 pallets move on Tuesday.\n"
                ),
            ],
            attachments=["message/rfc822"],
            nested_word="nestedword14",
        )
    )

    # 15: a multipart Content-Type without its boundary parameter: the body is text, shown as
    # it is; its parts cannot be split, so their transfer encodings are never undone and no
    # absence is proved over it.
    out.append(
        single(
            15,
            "multipart-without-boundary",
            "Content-Type: multipart/mixed without a boundary parameter (read as text/plain, "
            "named undecodable: its parts cannot be split)",
            "Content-Type: multipart/mixed\n",
            crlf(note(15) + "--\nRosa Quintero, Shapes Desk\n"),
            attachments=[],
            absent_status=INCOMPLETE,
            absent_warning=UNDECODABLE,
        )
    )

    # 16: the boundary string inside the text: mid-line, and as the prefix of a longer token on
    # a line of its own (not a delimiter line: RFC 2046 §5.1.1 wants the line to be only the
    # boundary and optional white space). The word comes after both.
    out.append(
        multipart(
            16,
            "boundary-inside-words",
            'multipart/mixed; boundary="frontier" whose text holds "--frontier" mid-line and a '
            'line starting "--frontierland"; the word comes after both',
            "multipart/mixed",
            "frontier",
            [
                text_part(
                    "We crossed the --frontier twice on the trip.\n"
                    "--frontierland was the name of the second ride.\n"
                    "After the ride everyone had kumquat16 ice cream.\n"
                ),
                text_part("Second part: photos to follow.\n"),
            ],
            body_contains=["kumquat16", "--frontierland"],
            attachments=[],
        )
    )

    # 17: an unnamed application/octet-stream part whose bytes are UTF-8 text.
    out.append(
        multipart(
            17,
            "octet-stream-unnamed-text",
            "multipart/mixed: an intro, then an unnamed application/octet-stream part (base64) "
            "whose bytes are UTF-8 text holding the word",
            "multipart/mixed",
            "b17",
            [
                text_part("Cron output follows.\n"),
                b64_part(
                    "Content-Type: application/octet-stream\n",
                    crlf("Übersicht der Läufe: job kumquat17 finished in 12 s.\n"),
                ),
            ],
            body_contains=["kumquat17", "Übersicht"],
            # Read into the body and still listed: IMAP's BODYSTRUCTURE cannot tell text bytes
            # from binary ones, so both backends list the part alike.
            attachments=["application/octet-stream"],
        )
    )

    # 18, 19: unnamed binary parts in body position that nothing can read as text.
    out.append(
        multipart(
            18,
            "octet-stream-unnamed-binary",
            "multipart/mixed: a text part with the word, then an unnamed application/octet-stream "
            "part (base64) of binary bytes",
            "multipart/mixed",
            "b18",
            [
                text_part(note(18)),
                b64_part("Content-Type: application/octet-stream\n", binary_blob("18", 600)),
            ],
            absent_status=INCOMPLETE,
            absent_warning=UNKNOWN_TYPE,
        )
    )
    out.append(
        multipart(
            19,
            "x-unknown-unnamed-binary",
            "multipart/mixed: a text part with the word, then an unnamed application/x-unknown "
            "part (base64) of binary bytes",
            "multipart/mixed",
            "b19",
            [
                text_part(note(19)),
                b64_part("Content-Type: application/x-unknown\n", binary_blob("19", 600)),
            ],
            absent_status=INCOMPLETE,
            absent_warning=UNKNOWN_TYPE,
        )
    )

    # 20: HTML only.
    out.append(
        single(
            20,
            "html-only",
            "a single text/html part (no text/plain alternative)",
            "Content-Type: text/html; charset=utf-8\nContent-Transfer-Encoding: 8bit\n",
            crlf(
                "<!DOCTYPE html>\n<html><head><title>Menu</title></head><body>\n"
                "<p>Dinner menu: <b>kumquat20</b> tart &amp; tea.</p>\n</body></html>\n"
            ),
            attachments=[],
        )
    )

    # 21: text/enriched (RFC 1896), a single part.
    out.append(
        single(
            21,
            "text-enriched",
            "a single text/enriched part with formatting commands",
            "Content-Type: text/enriched; charset=us-ascii\n",
            crlf("<bold>Reminder</bold>: bring kumquat21 to the <italic>picnic</italic>.\n"),
            attachments=[],
        )
    )

    # 22: an unnamed text/x-log part after an intro.
    out.append(
        multipart(
            22,
            "text-x-log-unnamed",
            "multipart/mixed: an intro, then an unnamed text/x-log part holding the word",
            "multipart/mixed",
            "b22",
            [
                text_part("The nightly log is below.\n"),
                text_part(
                    "2026-11-02 02:00:01 start\n2026-11-02 02:00:09 job kumquat22 finished\n",
                    "text/x-log; charset=utf-8",
                ),
            ],
            attachments=[],
        )
    )

    # 23: an unnamed inline image (not a gap: search_mailbox does not read images).
    png = b"\x89PNG\r\n\x1a\n" + binary_blob("23", 200)
    out.append(
        multipart(
            23,
            "unnamed-inline-image",
            "multipart/related: text/html with the word, then an unnamed inline image/png with a "
            "Content-ID",
            "multipart/related",
            "b23",
            [
                text_part(
                    '<p>See the chart for kumquat23.</p><img src="cid:chart23@example.com">\n',
                    "text/html; charset=utf-8",
                ),
                b64_part(
                    "Content-Type: image/png\nContent-ID: <chart23@example.com>\n"
                    "Content-Disposition: inline\n",
                    png,
                ),
            ],
            attachments=["image/png"],
        )
    )

    # 24: a named binary attachment (not a gap: its name is searched, its content is not in
    # search_mailbox's scope).
    out.append(
        multipart(
            24,
            "named-octet-stream-binary",
            "multipart/mixed: a text part with the word, then a named application/octet-stream "
            "attachment of binary bytes",
            "multipart/mixed",
            "b24",
            [
                text_part(note(24)),
                b64_part(
                    'Content-Type: application/octet-stream; name="firmware-24.bin"\n'
                    'Content-Disposition: attachment; filename="firmware-24.bin"\n',
                    binary_blob("24", 600),
                ),
            ],
            attachments=["application/octet-stream"],
        )
    )

    # 25: the well-formed control: multipart/alternative (plain + HTML) and a named PDF.
    alternative = crlf('Content-Type: multipart/alternative; boundary="a25"\n\n')
    alternative += b"--a25\r\n" + text_part(note(25))
    alternative += b"--a25\r\n" + text_part(
        "<p>The quarterly note mentions <b>kumquat25</b> once.</p>\n", "text/html; charset=utf-8"
    )
    alternative += b"--a25--\r\n"
    pdf = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + binary_blob("25", 300) + b"\n%%EOF\n"
    out.append(
        multipart(
            25,
            "control-well-formed",
            "a well-formed message: multipart/mixed of multipart/alternative (plain and HTML) "
            "and a named application/pdf attachment",
            "multipart/mixed",
            "b25",
            [
                alternative,
                b64_part(
                    'Content-Type: application/pdf; name="report-25.pdf"\n'
                    'Content-Disposition: attachment; filename="report-25.pdf"\n',
                    pdf,
                ),
            ],
            attachments=["application/pdf"],
        )
    )

    # 26: base64 cut two characters into a quantum, no padding. RFC 2045 base64 is always
    # padded, so an unpadded tail says the part was cut: the lost rest is a gap, even though
    # the two characters decode to one whole byte.
    out.append(truncated_base64(26, "base64-unpadded-tail", 2))
    return out


def outputs() -> dict[Path, bytes]:
    files: dict[Path, bytes] = {}
    all_shapes = shapes()
    for s in all_shapes:
        raw = s.raw
        # Every line ends in CRLF; no bare LF or CR anywhere.
        assert b"\n" not in raw.replace(b"\r\n", b""), s.file
        assert b"\r" not in raw.replace(b"\r\n", b""), s.file
        assert s.absent.encode() not in raw, s.file
        assert s.present.encode() not in s.subject().encode(), s.file
        files[OUT / s.file] = raw
        for seeds in SEEDS:
            files[seeds / f"shape-{s.file[: -len('.eml')]}"] = raw
    names = [s.file for s in all_shapes]
    assert len(set(names)) == len(names)
    assert len({s.present for s in all_shapes}) == len(all_shapes)
    manifest = {
        "about": "Issue 36's MIME shapes; written by scripts/gen-mime-shapes.py (see its doc).",
        "shapes": [s.manifest() for s in all_shapes],
    }
    files[OUT / "shapes.json"] = (
        json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    ).encode("utf-8")
    return files


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for path, data in outputs().items():
        if check:
            if not path.exists() or path.read_bytes() != data:
                stale.append(path.relative_to(ROOT))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    if stale:
        for path in stale:
            print(f"stale: {path}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
