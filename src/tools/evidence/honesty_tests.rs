//! Issue 9's false-absence property over generated Maildir mailboxes: a signal placed in a
//! subject, a body (also past the preview), an attachment name, the text of a readable
//! attachment or the bytes of an unreadable one is never answered `NOT_FOUND`; and a signal
//! placed nowhere is `NOT_FOUND` exactly when no attachment was left unread.

use std::io::Write as _;
use std::sync::Arc;

use base64::Engine as _;
use cap_std::fs::{Dir, DirBuilder, DirBuilderExt as _, OpenOptions, OpenOptionsExt as _};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::tools::App;
use crate::tools::args::InvestigateArgs;

/// Attachment kinds: the first four have an extractor, the last three do not.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Csv,
    Txt,
    Json,
    Html,
    Pdf,
    Xlsx,
    Png,
}

impl Kind {
    const ALL: [Kind; 7] = [
        Kind::Csv,
        Kind::Txt,
        Kind::Json,
        Kind::Html,
        Kind::Pdf,
        Kind::Xlsx,
        Kind::Png,
    ];

    fn readable(self) -> bool {
        matches!(self, Kind::Csv | Kind::Txt | Kind::Json | Kind::Html)
    }

    fn content_type(self) -> &'static str {
        match self {
            Kind::Csv => "text/csv",
            Kind::Txt => "text/plain",
            Kind::Json => "application/json",
            Kind::Html => "text/html",
            Kind::Pdf => "application/pdf",
            Kind::Xlsx => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            Kind::Png => "image/png",
        }
    }

    fn extension(self) -> &'static str {
        match self {
            Kind::Csv => "csv",
            Kind::Txt => "txt",
            Kind::Json => "json",
            Kind::Html => "html",
            Kind::Pdf => "pdf",
            Kind::Xlsx => "xlsx",
            Kind::Png => "png",
        }
    }

    /// File bytes carrying `text` (for the unreadable kinds, inside their binary framing).
    fn bytes(self, text: &str) -> Vec<u8> {
        match self {
            Kind::Csv => format!("ref,party\n1,{text}\n").into_bytes(),
            Kind::Txt => format!("notes: {text}\n").into_bytes(),
            Kind::Json => json!({ "note": text }).to_string().into_bytes(),
            Kind::Html => format!("<html><body><p>{text}</p></body></html>").into_bytes(),
            Kind::Pdf => format!("%PDF-1.4\n({text}) Tj\n%%EOF\n").into_bytes(),
            Kind::Xlsx => {
                let mut b = b"PK\x03\x04\x14\x00".to_vec();
                b.extend_from_slice(text.as_bytes());
                b
            }
            Kind::Png => {
                let mut b = b"\x89PNG\r\n\x1a\n\x00\x00".to_vec();
                b.extend_from_slice(text.as_bytes());
                b
            }
        }
    }
}

/// Where the signal goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Subject,
    Body,
    /// In the body after more than the 500-character preview.
    LateBody,
    AttachmentName,
    ReadableContent,
    UnreadableContent,
    Nowhere,
}

impl Place {
    fn readable(self) -> bool {
        !matches!(self, Place::UnreadableContent | Place::Nowhere)
    }
}

#[derive(Clone, Debug)]
struct Message {
    folder: usize,
    words: Vec<&'static str>,
    attachments: Vec<Kind>,
}

/// Filler vocabulary: no word is (or joins into) the signal.
const WORDS: [&str; 8] = [
    "renewal", "meeting", "quarter", "ledger", "notes", "agenda", "review", "draft",
];

const FOLDERS: [&str; 3] = ["", ".Sent", ".Archive"];

fn message() -> impl Strategy<Value = Message> {
    (
        0..3usize,
        proptest::collection::vec(proptest::sample::select(WORDS.to_vec()), 1..6),
        proptest::collection::vec(proptest::sample::select(Kind::ALL.to_vec()), 0..3),
    )
        .prop_map(|(folder, words, attachments)| Message {
            folder,
            words,
            attachments,
        })
}

/// The raw RFC 5322 bytes of message `i`, with the signal where `place` says (when `carrier`).
fn raw(i: usize, m: &Message, signal: &str, place: Place, carrier: bool) -> Vec<u8> {
    let put = |p: Place| carrier && place == p;
    let filler = m.words.join(" ");
    let subject = if put(Place::Subject) {
        format!("{filler} {signal}")
    } else {
        filler.clone()
    };
    let body = if put(Place::Body) {
        format!("{filler}\r\nsee {signal} please\r\n")
    } else if put(Place::LateBody) {
        format!("{}\r\nsee {signal} please\r\n", "lorem ipsum ".repeat(60))
    } else {
        format!("{filler}\r\n")
    };
    let mut out = format!(
        "From: Ana <ana@example.com>\r\nTo: team@example.org\r\nSubject: {subject}\r\n\
         Date: Mon, 2 Mar 2026 10:{:02}:00 +0000\r\nMessage-ID: <gen-{i}@example.com>\r\n\
         MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n\
         --b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n",
        i % 60
    );
    for (j, kind) in m.attachments.iter().enumerate() {
        // The signal's attachment is the first one of the wanted kind.
        let first_of = |want: bool| {
            m.attachments
                .iter()
                .position(|k| k.readable() == want)
                .is_some_and(|p| p == j)
        };
        let name = if put(Place::AttachmentName) && j == 0 {
            format!("{signal}-file.{}", kind.extension())
        } else {
            format!("file-{j}.{}", kind.extension())
        };
        let text = if (put(Place::ReadableContent) && first_of(true))
            || (put(Place::UnreadableContent) && first_of(false))
        {
            format!("{filler} {signal}")
        } else {
            filler.clone()
        };
        let b64 = base64::engine::general_purpose::STANDARD.encode(kind.bytes(&text));
        out.push_str(&format!(
            "--b\r\nContent-Type: {}; name=\"{name}\"\r\nContent-Disposition: attachment; \
             filename=\"{name}\"\r\nContent-Transfer-Encoding: base64\r\n\r\n{b64}\r\n",
            kind.content_type()
        ));
    }
    out.push_str("--b--\r\n");
    out.into_bytes()
}

/// Whether message `m` can carry the signal at `place` (it needs the right attachments).
fn can_carry(m: &Message, place: Place) -> bool {
    match place {
        Place::AttachmentName => !m.attachments.is_empty(),
        Place::ReadableContent => m.attachments.iter().any(|k| k.readable()),
        Place::UnreadableContent => m.attachments.iter().any(|k| !k.readable()),
        _ => true,
    }
}

struct Generated {
    app: Arc<App>,
    _dir: tempfile::TempDir,
}

fn write(dir: &Dir, path: &str, bytes: &[u8]) {
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true).mode(0o600);
    let mut f = dir.open_with(path, &opts).expect("create");
    f.write_all(bytes).expect("write");
}

/// A private temp HOME with one Maildir mailbox `gen` holding `messages`.
fn mailbox(messages: &[(usize, Vec<u8>)]) -> Generated {
    mailbox_with(messages, json!({}))
}

/// As [`mailbox`], with `limits` (top-level config keys) merged into the config.
fn mailbox_with(messages: &[(usize, Vec<u8>)], limits: Value) -> Generated {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = Dir::open_ambient_dir(dir.path(), cap_std::ambient_authority()).expect("home");
    let mut private = DirBuilder::new();
    private.mode(0o700);
    home.create_dir_with("mail", &private).expect("mail");
    let mail = home.open_dir("mail").expect("mail");
    for folder in FOLDERS {
        let d = if folder.is_empty() {
            mail.try_clone().expect("clone")
        } else {
            mail.create_dir_with(folder, &private).expect("folder");
            let d = mail.open_dir(folder).expect("folder");
            write(&d, "maildirfolder", b"");
            d
        };
        for sub in ["cur", "new", "tmp"] {
            d.create_dir_with(sub, &private).expect("sub");
        }
    }
    for (i, (folder, bytes)) in messages.iter().enumerate() {
        let folder = FOLDERS[*folder];
        let d = if folder.is_empty() {
            mail.try_clone().expect("clone")
        } else {
            mail.open_dir(folder).expect("folder")
        };
        write(
            &d,
            &format!("cur/{}.M{i}P1.gen:2,S", 1_772_000_000 + i),
            bytes,
        );
    }
    let mut config = json!({"mailboxes": [{
        "alias": "gen",
        "address": "gen@example.com",
        "backend": {"kind": "maildir", "path": dir.path().join("mail").to_string_lossy()},
    }]});
    if let (Some(c), Value::Object(extra)) = (config.as_object_mut(), limits) {
        c.extend(extra);
    }
    write(&home, "plugin.json", config.to_string().as_bytes());
    let home_path = dir.path().to_string_lossy().into_owned();
    let env = crate::config::env::Env::from_pairs([
        ("HOME", home_path.clone()),
        ("MAILGATE_HOME", format!("{home_path}/state")),
    ]);
    let (settings, gates) =
        crate::startup::load_settings(&env, Some(&dir.path().join("plugin.json")))
            .expect("settings");
    let app = crate::startup::build_app(&settings, gates, None, None).expect("app");
    Generated { app, _dir: dir }
}

fn investigate(app: &Arc<App>, criteria: Value) -> Value {
    let args: InvestigateArgs =
        serde_json::from_value(json!({"mailbox": "gen", "criteria": criteria})).expect("args");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let out = rt
        .block_on(super::investigate_documents(
            crate::tools::testutil::operator(app),
            args,
        ))
        .expect("answers");
    out.structured
}

fn place() -> impl Strategy<Value = Place> {
    proptest::sample::select(vec![
        Place::Subject,
        Place::Body,
        Place::LateBody,
        Place::AttachmentName,
        Place::ReadableContent,
        Place::UnreadableContent,
        Place::Nowhere,
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_signal_in_any_readable_part_is_never_not_found(
        messages in proptest::collection::vec(message(), 1..6),
        place in place(),
        carrier_pick in any::<proptest::sample::Index>(),
        id in 1000u32..9999,
        list in 0..3usize,
    ) {
        let signal = format!("ZQX-{id}");
        let carriers: Vec<usize> =
            (0..messages.len()).filter(|&i| can_carry(&messages[i], place)).collect();
        let carrier = (!carriers.is_empty() && place != Place::Nowhere)
            .then(|| carriers[carrier_pick.index(carriers.len())]);
        // No message can carry it there: the case is the "nowhere" case.
        let place = if carrier.is_some() { place } else { Place::Nowhere };
        let raws: Vec<(usize, Vec<u8>)> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| (m.folder, raw(i, m, &signal, place, carrier == Some(i))))
            .collect();
        let generated = mailbox(&raws);
        let key = ["proposalIds", "clients", "keywords"][list];
        let out = investigate(&generated.app, json!({ key: [signal] }));
        let status = out["status"].as_str().expect("status");
        let complete = out["coverage"]["complete"].as_bool().expect("complete");
        let any_unreadable = messages.iter().any(|m| m.attachments.iter().any(|k| !k.readable()));
        if place.readable() {
            prop_assert_ne!(status, "NOT_FOUND", "{:?}: {}", place, out);
            prop_assert!(out["totalMatches"].as_u64() >= Some(1), "{:?}: {}", place, out);
        } else if place == Place::UnreadableContent {
            prop_assert_ne!(status, "NOT_FOUND", "{}", out);
            prop_assert!(!complete, "{}", out);
        } else {
            // Nowhere: absence is claimed exactly when nothing was left unread.
            prop_assert_eq!(complete, !any_unreadable, "{}", out);
            prop_assert_eq!(
                status,
                if any_unreadable { "SEARCH_INCOMPLETE" } else { "NOT_FOUND" },
                "{}",
                out
            );
        }
    }
}

/// One inbox message whose attachments are `parts` (name, content type, bytes).
fn with_parts(parts: &[(&str, &str, Vec<u8>)]) -> Vec<u8> {
    let mut out = String::from(
        "From: Ana <ana@example.com>\r\nTo: team@example.org\r\nSubject: figures\r\n\
         Date: Mon, 2 Mar 2026 10:00:00 +0000\r\nMessage-ID: <parts@example.com>\r\n\
         MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n\
         --b\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n",
    );
    for (name, content_type, bytes) in parts {
        let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
        out.push_str(&format!(
            "--b\r\nContent-Type: {content_type}; name=\"{name}\"\r\nContent-Disposition: \
             attachment; filename=\"{name}\"\r\nContent-Transfer-Encoding: base64\r\n\r\n{b64}\r\n"
        ));
    }
    out.push_str("--b--\r\n");
    out.into_bytes()
}

fn not_read_reasons(out: &Value) -> Vec<(String, String)> {
    out["coverage"]["attachmentContent"]["notReadByReason"]
        .as_array()
        .expect("notReadByReason")
        .iter()
        .map(|r| {
            (
                r["reason"].as_str().expect("reason").to_owned(),
                r["lift"].as_str().expect("lift").to_owned(),
            )
        })
        .collect()
}

/// Each cap on reading attachment text makes coverage incomplete and says what lifts it:
/// `maxExtractedChars` (text past it is not searched), `maxAttachmentInputBytes` (not read),
/// and an attached message's own attachments (never extracted).
#[test]
fn caps_on_attachment_text_make_coverage_incomplete_and_name_the_lift() {
    // 1,011 bytes: under the 1 KiB input cap, over the 1,000-char text cap, id at the end.
    let long = format!("{} ZQX-4242\n", "filler words ".repeat(77));
    let big = "x".repeat(2048);
    let inner = with_parts(&[(
        "inner.pdf",
        "application/pdf",
        b"%PDF-1.4 ZQX-4242".to_vec(),
    )]);
    let raw = with_parts(&[
        ("long.csv", "text/csv", long.into_bytes()),
        ("big.txt", "text/plain", big.into_bytes()),
        ("forward.eml", "message/rfc822", inner),
    ]);
    let generated = mailbox_with(
        &[(0, raw)],
        json!({"maxExtractedChars": 1000, "maxAttachmentInputBytes": 1024}),
    );
    let out = investigate(&generated.app, json!({"proposalIds": ["ZQX-4242"]}));
    assert_eq!(out["status"], "SEARCH_INCOMPLETE", "{out}");
    assert_eq!(out["coverage"]["complete"], false);
    let reasons = not_read_reasons(&out);
    let codes: Vec<&str> = reasons.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        codes,
        [
            "EXTRACTION_TRUNCATED",
            "ATTACHMENT_TOO_LARGE",
            "NESTED_PARTS_NOT_READ"
        ],
        "{out}"
    );
    assert!(reasons[0].1.contains("raise") && reasons[0].1.contains("maxExtractedChars"));
    assert!(reasons[1].1.contains("maxAttachmentInputBytes"));
    assert_eq!(
        out["coverage"]["folders"][0]["attachmentContentsNotRead"],
        3
    );

    // Lifted: the same mailbox with room enough reads everything, and the id is found in the
    // CSV's tail (the attached message's own PDF is still not read).
    let roomy = mailbox_with(
        &[(
            0,
            with_parts(&[(
                "long.csv",
                "text/csv",
                format!("{} ZQX-4242\n", "filler words ".repeat(200)).into_bytes(),
            )]),
        )],
        json!({"maxExtractedChars": 10000}),
    );
    let out = investigate(&roomy.app, json!({"proposalIds": ["ZQX-4242"]}));
    assert_eq!(out["status"], "CANDIDATE_REVIEW", "{out}");
    assert_eq!(out["coverage"]["complete"], true);
    assert_eq!(
        out["matches"][0]["contentMatchAttachmentIds"],
        json!(["att-0"])
    );
}
