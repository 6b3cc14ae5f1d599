//! Attachment extraction through the real binary (issue 13): every demo format is read by the
//! worker process through a real MCP client, hostile attachments become typed errors while the
//! server keeps answering, and the worker holds nothing but its pipes and its limits.

use std::io::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::util::{Client, EXE, FINANCE, PERSONAL, World, config_over_demo};

/// The first attachment of the first message with `subject` that has attachments.
pub(crate) async fn attachment_of(c: &Client, mailbox: &str, subject: &str) -> (String, String) {
    let mid = c
        .first_id(mailbox, json!({"subject": subject, "hasAttachments": true}))
        .await;
    let atts = c
        .ok(
            "list_attachments",
            json!({"mailbox": mailbox, "messageId": mid}),
        )
        .await;
    let aid = atts["attachments"][0]["id"].as_str().unwrap().to_owned();
    (mid, aid)
}

async fn content(c: &Client, mailbox: &str, subject: &str, extra: Value) -> Value {
    let (mid, aid) = attachment_of(c, mailbox, subject).await;
    let mut args = json!({"mailbox": mailbox, "messageId": mid, "attachmentId": aid});
    args.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    c.call("get_attachment_content", args)
        .await
        .unwrap()
        .structured_content
        .unwrap_or(Value::Null)
}

async fn content_error(c: &Client, mailbox: &str, subject: &str, extra: Value) -> String {
    let (mid, aid) = attachment_of(c, mailbox, subject).await;
    let mut args = json!({"mailbox": mailbox, "messageId": mid, "attachmentId": aid});
    args.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    c.tool_error("get_attachment_content", args).await
}

fn text(v: &Value) -> &str {
    v["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {v}"))
}

#[tokio::test]
async fn every_demo_format_extracts_in_the_worker() {
    let world = World::new();
    let c = world.shared_demo_client().await;

    let pdf = content(&c, "finance", "Invoice INV-2026-0042", json!({})).await;
    assert_eq!(pdf["extractor"], "pdf", "{pdf}");
    assert!(text(&pdf).contains("INV-2026-0042"), "{pdf}");

    let docx = content(&c, "personal", "Cover note PROP-2042", json!({})).await;
    assert_eq!(docx["extractor"], "docx", "{docx}");
    assert!(text(&docx).contains("PROP-2042"), "{docx}");

    let xlsx = content(&c, "finance", "Re: Q1 quarterly reconciliation", json!({})).await;
    assert_eq!(xlsx["extractor"], "xlsx", "{xlsx}");
    for id in ["PROP-1001", "PROP-2042", "PROP-3107"] {
        assert!(text(&xlsx).contains(id), "{id} in {xlsx}");
    }

    let listing = content(&c, "support", "Claims bundle CLM-2026-0311", json!({})).await;
    assert_eq!(listing["kind"], "zip_listing", "{listing}");
    assert_eq!(listing["hiddenEntries"], 0);
    let names: Vec<&str> = listing["zipEntries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"claims/report..v2.txt"), "{names:?}");
    let entry = content(
        &c,
        "support",
        "Claims bundle CLM-2026-0311",
        json!({"entry": "claims/claim-summary.txt"}),
    )
    .await;
    assert_eq!(entry["kind"], "text", "{entry}");
    assert_eq!(entry["entry"], "claims/claim-summary.txt");
    assert!(!text(&entry).is_empty());

    let secure = "Secure statements 2026";
    let locked = json!({"entry": "secret.txt"});
    assert_eq!(
        content_error(&c, "finance", secure, locked).await,
        "ZIP_ENCRYPTED"
    );
    let wrong = json!({"entry": "secret.txt", "password": "not-the-password"});
    assert_eq!(
        content_error(&c, "finance", secure, wrong).await,
        "ZIP_PASSWORD_INCORRECT"
    );
    let right = json!({"entry": "secret.txt", "password": "demo-zip-2026"});
    let secret = content(&c, "finance", secure, right).await;
    assert!(
        text(&secret).starts_with("ZIPCRYPTO-DEMO-SECRET-7781"),
        "{secret}"
    );
    c.close().await;
}

/// A message from a fictional sender with one attachment.
pub(crate) fn with_attachment(
    subject: &str,
    name: &str,
    content_type: &str,
    bytes: &[u8],
) -> Vec<u8> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut body = String::with_capacity(b64.len() * 78 / 76 + 512);
    body.push_str(&format!(
        "From: mallory@example.org\r\nTo: personal@example.com\r\nSubject: {subject}\r\n\
         Content-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\n\
         see attached\r\n--B\r\nContent-Type: {content_type}; name=\"{name}\"\r\n\
         Content-Disposition: attachment; filename=\"{name}\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\n"
    ));
    for chunk in b64.as_bytes().chunks(76) {
        body.push_str(std::str::from_utf8(chunk).unwrap());
        body.push_str("\r\n");
    }
    body.push_str("--B--\r\n");
    body.into_bytes()
}

fn deliver(maildir: &Path, n: u32, raw: &[u8]) {
    let name = format!("{}.M{n}P1.hostile", 1_900_000_000 + n);
    std::fs::write(maildir.join("new").join(name), raw).unwrap();
}

/// The worker started as the server starts it: empty environment, stdin and stdout piped.
fn spawn_worker() -> std::process::Child {
    std::process::Command::new(EXE)
        .arg("__extract-worker")
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// `len` pseudo-random bytes (xorshift) behind a `%PDF-` header.
fn random_pdf(len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for b in bytes.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    bytes[..5].copy_from_slice(b"%PDF-");
    bytes
}

/// A ZIP of `(name, bytes)` files, deflated.
fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in files {
        out.start_file(*name, options).unwrap();
        out.write_all(bytes).unwrap();
    }
    out.finish().unwrap().into_inner()
}

#[tokio::test]
async fn hostile_attachments_are_typed_errors_and_the_server_keeps_answering() {
    let world = World::new();
    // Small archive caps keep the fixtures small; the attachment cap admits the 20 MB file.
    let config = config_over_demo(
        &world,
        &[PERSONAL, FINANCE],
        r#", "maxZipUncompressedBytes": 1048576, "maxZipEntries": 1000,
           "maxAttachmentInputBytes": 31457280, "maxContainerUncompressedBytes": 1048576"#,
    )
    .await;
    let personal = world.state().join("demo/mail/personal");

    let bomb = zip_of(&[("zeros.txt", &vec![0u8; 8 << 20])]);
    assert!(bomb.len() < 64 << 10, "a bomb: {} bytes", bomb.len());
    let many: Vec<(String, Vec<u8>)> = (0..5_000)
        .map(|i| (format!("f{i}.txt"), Vec::new()))
        .collect();
    let many_refs: Vec<(&str, &[u8])> = many
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let inner = zip_of(&[("inner.txt", b"deep")]);
    let random = random_pdf(20 << 20);
    let laughs = {
        let mut xml =
            String::from("<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n<!ENTITY lol \"lol\">\n");
        for i in 1..10 {
            let prev = if i == 1 {
                "lol".to_owned()
            } else {
                format!("lol{}", i - 1)
            };
            xml.push_str(&format!(
                "<!ENTITY lol{i} \"{}\">\n",
                format!("&{prev};").repeat(10)
            ));
        }
        xml.push_str("]>\n<lolz>&lol9;</lolz>\n");
        xml.into_bytes()
    };
    let big_docx = zip_of(&[("word/document.xml", &vec![b' '; 2 << 20])]);
    let cases: [(&str, &str, &str, Vec<u8>); 7] = [
        ("bomb", "bomb.zip", "application/zip", bomb),
        ("many", "many.zip", "application/zip", zip_of(&many_refs)),
        (
            "nested",
            "nested.zip",
            "application/zip",
            zip_of(&[("inner.zip", &inner)]),
        ),
        (
            "names",
            "names.zip",
            "application/zip",
            zip_of(&[
                ("../evil.txt", b"x"),
                ("/abs.txt", b"x"),
                ("a\\b.txt", b"x"),
                ("ok.txt", b"fine"),
            ]),
        ),
        ("random", "scan.pdf", "application/pdf", random),
        ("laughs", "laughs.xml", "application/xml", laughs),
        (
            "container",
            "big.docx",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            big_docx,
        ),
    ];
    for (n, (subject, name, content_type, bytes)) in cases.iter().enumerate() {
        deliver(
            &personal,
            n as u32 + 1,
            &with_attachment(subject, name, content_type, bytes),
        );
    }
    let c = world.client(&["--config", &config, "serve"]).await;
    let started = Instant::now();

    // Each answer is typed; after each, a real extraction in another mailbox still works.
    let expect_ok = |v: &Value| assert_eq!(v["extractor"], "pdf", "the server still extracts: {v}");
    let invoice = "Invoice INV-2026-0042";

    let bomb = content_error(&c, "personal", "bomb", json!({"entry": "zeros.txt"})).await;
    assert_eq!(bomb, "ZIP_TOO_LARGE");
    // In raw mode the entry is capped by maxRawAttachmentBytes too.
    let raw = json!({"entry": "zeros.txt", "mode": "raw"});
    assert_eq!(
        content_error(&c, "personal", "bomb", raw).await,
        "RAW_TOO_LARGE"
    );
    // A DOCX whose container inflates past maxContainerUncompressedBytes.
    assert_eq!(
        content_error(&c, "personal", "container", json!({})).await,
        "ZIP_TOO_LARGE"
    );
    expect_ok(&content(&c, "finance", invoice, json!({})).await);

    let many = content_error(&c, "personal", "many", json!({})).await;
    assert_eq!(many, "ZIP_TOO_MANY_ENTRIES");
    expect_ok(&content(&c, "finance", invoice, json!({})).await);

    let nested = content_error(&c, "personal", "nested", json!({"entry": "inner.zip"})).await;
    assert_eq!(nested, "UNSUPPORTED_FORMAT");

    let names = content(&c, "personal", "names", json!({})).await;
    assert_eq!(names["hiddenEntries"], 3, "{names}");
    assert_eq!(names["zipEntries"].as_array().unwrap().len(), 1, "{names}");
    // A traversal name is refused by the schema before any handler; a near miss is not found.
    assert_eq!(
        content_error(&c, "personal", "names", json!({"entry": "../evil.txt"})).await,
        "INVALID_ARGUMENT"
    );
    assert_eq!(
        content_error(&c, "personal", "names", json!({"entry": "evil.txt"})).await,
        "ZIP_ENTRY_NOT_FOUND"
    );

    let random = content_error(&c, "personal", "random", json!({})).await;
    assert_eq!(random, "EXTRACTION_FAILED");
    expect_ok(&content(&c, "finance", invoice, json!({})).await);

    let laughs = content(&c, "personal", "laughs", json!({})).await;
    assert!(
        text(&laughs).len() < 10_000,
        "no entity expansion: {laughs}"
    );

    // Every hostile case ended well within one extraction's time limit each.
    assert!(started.elapsed() < Duration::from_secs(30 * 6));
    c.close().await;
}

/// The largest attachment `maxAttachmentInputBytes` admits (50 MiB), random bytes behind a PDF
/// header, straight to the worker as the server sends it (a Maildir message cannot carry 50 MiB
/// of base64 under its 64 MiB message cap): a typed failure, well inside the time limit.
#[test]
fn a_50_mib_random_file_named_pdf_is_a_typed_failure() {
    let bytes = random_pdf(50 << 20);
    let request = json!({
        "job": {"kind": "text", "name": "scan.pdf", "content_type": "application/pdf"},
        "caps": {"max_chars": 200_000, "max_zip_entries": 200,
                 "max_zip_uncompressed_bytes": 52_428_800, "max_container_entries": 1_000,
                 "max_container_uncompressed_bytes": 104_857_600},
        "len": bytes.len(),
    });
    let started = Instant::now();
    let mut worker = spawn_worker();
    let mut stdin = worker.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        stdin.write_all(format!("{request}\n").as_bytes()).unwrap();
        stdin.write_all(&bytes).unwrap();
    });
    let out = worker.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply, json!({"error": "Failed"}));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn the_worker_holds_only_its_pipes_and_its_limits() {
    // Started as the server starts it (empty environment), it locks itself down before reading
    // its request: while it waits for one, /proc shows what a parser bug could reach.
    let mut worker = spawn_worker();
    let proc = format!("/proc/{}", worker.id());
    let deadline = Instant::now() + Duration::from_secs(30);
    let limits = loop {
        let limits = std::fs::read_to_string(format!("{proc}/limits")).unwrap();
        if limits
            .lines()
            .any(|l| l.starts_with("Max open files") && l.contains(" 3 "))
        {
            break limits;
        }
        assert!(
            Instant::now() < deadline,
            "the worker never locked down: {limits}"
        );
        std::thread::yield_now();
    };
    let row = |name: &str| {
        limits
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {limits}"))
            .split_whitespace()
            .rev()
            .nth(1)
            .unwrap()
            .to_owned()
    };
    assert_eq!(row("Max address space").parse::<u64>().unwrap(), 1 << 30);
    assert_eq!(row("Max cpu time"), "60");
    assert_eq!(row("Max file size"), "0");
    assert_eq!(row("Max core file size"), "0");
    let status = std::fs::read_to_string(format!("{proc}/status")).unwrap();
    assert!(status.lines().any(|l| l == "NoNewPrivs:\t1"), "{status}");
    assert_eq!(std::fs::read(format!("{proc}/environ")).unwrap(), b"");
    let fds: Vec<String> = std::fs::read_dir(format!("{proc}/fd"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        fds.iter().all(|fd| ["0", "1", "2"].contains(&fd.as_str())),
        "{fds:?}"
    );
    // A malformed request is refused with its own exit code, not a crash.
    worker
        .stdin
        .take()
        .unwrap()
        .write_all(b"not json\n")
        .unwrap();
    assert_eq!(worker.wait().unwrap().code(), Some(71));

    // With anything in its environment it refuses to start.
    let status = std::process::Command::new(EXE)
        .arg("__extract-worker")
        .env("SECRET_EXAMPLE", "x")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(70));
}

/// Over 3,000 characters of text for windows of 1,000: multi-byte characters and line breaks,
/// as windows count characters, not bytes.
pub(crate) fn long_notes() -> String {
    (0..260).map(|i| format!("line {i} é€😀\n")).collect()
}

/// `get_attachment_content` read to the end by following nextCursor: the text, and how many
/// answers it took. `args` names the attachment (and an entry, if any).
pub(crate) async fn text_by_cursor(c: &Client, args: &Value) -> (String, usize) {
    let (mut text, mut answers) = (String::new(), 0);
    let mut args = args.clone();
    loop {
        let answer = c.ok("get_attachment_content", args.clone()).await;
        answers += 1;
        assert!(answers < 100, "cursors never end");
        text.push_str(answer["text"].as_str().unwrap());
        match answer["nextCursor"].as_str() {
            Some(next) => {
                assert_eq!(answer["truncated"], true, "{answer}");
                args["cursor"] = json!(next);
            }
            None => {
                assert_eq!(answer["truncated"], false, "{answer}");
                return (text, answers);
            }
        }
    }
}

/// Issue 22: attachment text cut at maxExtractedChars and an archive listing past a page go on
/// by cursor exactly where the answer stopped, and a cursor fits only its own request.
#[tokio::test]
async fn attachment_text_and_archive_listings_continue_by_cursor() {
    let world = World::new();
    let config = config_over_demo(
        &world,
        &[PERSONAL, FINANCE],
        r#", "maxExtractedChars": 1000, "maxZipEntries": 1000"#,
    )
    .await;
    let personal = world.state().join("demo/mail/personal");
    let long = long_notes();
    let names: Vec<String> = (0..450).map(|i| format!("dir/file-{i:03}.txt")).collect();
    let mut files: Vec<(&str, &[u8])> = names
        .iter()
        .map(|n| (n.as_str(), b"x".as_slice()))
        .collect();
    files.push(("long.txt", long.as_bytes()));
    deliver(
        &personal,
        1,
        &with_attachment("Long notes", "notes.txt", "text/plain", long.as_bytes()),
    );
    deliver(
        &personal,
        2,
        &with_attachment(
            "Many files",
            "files.zip",
            "application/zip",
            &zip_of(&files),
        ),
    );
    let c = world.client(&["--config", config.as_str(), "serve"]).await;

    // Text: windows of 1,000 characters, joined, are the attachment.
    let (mid, aid) = attachment_of(&c, "personal", "Long notes").await;
    let notes = json!({"mailbox": "personal", "messageId": mid, "attachmentId": aid});
    let (text, answers) = text_by_cursor(&c, &notes).await;
    assert_eq!(text, long);
    assert_eq!(answers, long.chars().count().div_ceil(1000));

    // An archive entry's text goes on the same way.
    let (zid, zaid) = attachment_of(&c, "personal", "Many files").await;
    let entry =
        json!({"mailbox": "personal", "messageId": zid, "attachmentId": zaid, "entry": "long.txt"});
    assert_eq!(text_by_cursor(&c, &entry).await.0, long);

    // The listing: pages of 200 entries, every entry once, in order.
    let listing = json!({"mailbox": "personal", "messageId": zid, "attachmentId": zaid});
    let mut listed = Vec::new();
    let mut args = listing.clone();
    let mut pages = 0;
    let listing_cursor = loop {
        let page = c.ok("get_attachment_content", args.clone()).await;
        pages += 1;
        let entries = page["zipEntries"].as_array().unwrap();
        listed.extend(
            entries
                .iter()
                .map(|e| e["name"].as_str().unwrap().to_owned()),
        );
        match page["nextCursor"].as_str() {
            Some(next) => {
                assert_eq!((entries.len(), &page["truncated"]), (200, &json!(true)));
                args["cursor"] = json!(next);
            }
            None => {
                assert!(page.get("truncated").is_none(), "{page}");
                break args["cursor"].as_str().unwrap().to_owned();
            }
        }
    };
    assert_eq!(pages, 3);
    let mut expected = names.clone();
    expected.push("long.txt".into());
    assert_eq!(listed, expected);

    // A cursor fits only its own request: another attachment, an entry for a listing's
    // cursor, raw mode, another mailbox, an altered one — each INVALID_ARGUMENT.
    let mut altered = listing_cursor.clone();
    let last = altered.pop().unwrap();
    altered.push(if last == 'A' { 'B' } else { 'A' });
    let with = |base: &Value, extra: Value| {
        let mut v = base.clone();
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    for args in [
        with(&notes, json!({"cursor": listing_cursor})),
        with(&entry, json!({"cursor": listing_cursor})),
        with(&listing, json!({"cursor": listing_cursor, "mode": "raw"})),
        with(&listing, json!({"cursor": altered})),
        with(
            &listing,
            json!({"mailbox": "finance", "cursor": listing_cursor}),
        ),
    ] {
        assert_eq!(
            c.tool_error("get_attachment_content", args.clone()).await,
            "INVALID_ARGUMENT",
            "{args}"
        );
    }
    c.close().await;
}
