//! How text becomes matchable tokens: the one normalization ([`normalize`]) and tokenizer
//! ([`tokenize`]) that every matcher uses — the live scan's exact-token matcher
//! (`search::matcher`), the Maildir scan and its raw-byte prefilter, the index analyzer
//! (`index::analyzer`, a tantivy tokenizer over [`each_token`]), query parsing, and the
//! evidence signals (`tools::evidence::signals`) — so that what a reader sees is what a query
//! finds, and the index finds a message whenever the live scan does. The differential property
//! test in `index::analyzer` and the fuzz target `text_differential` hold the matchers to it.

pub(crate) mod normalize;
pub(crate) mod tokenize;

pub(crate) use normalize::normalized;
pub(crate) use tokenize::{Mode, each_token};

/// The version of the text analysis an index was built with. An index built by another version
/// is never served as proof and `index sync` rebuilds it. Bump it whenever the tokens of any
/// text change. 1: tantivy's simple tokenizer with ASCII folding and a 64-byte token limit;
/// 2: this module.
pub(crate) const ANALYZER_VERSION: u32 = 2;

/// The tokens of a text searched, in order.
pub(crate) fn tokens(text: &str) -> Vec<String> {
    collect(text, Mode::Document)
}

/// The tokens a query asks for, in order (every one must occur).
pub(crate) fn query_tokens(text: &str) -> Vec<String> {
    collect(text, Mode::Query)
}

fn collect(text: &str, mode: Mode) -> Vec<String> {
    let mut out = Vec::new();
    each_token(text, mode, |t, _, _| out.push(t.to_owned()));
    out
}

/// Appends the tokens of a text searched to `out`, each followed by one space, so that a query
/// token occurs in `out` exactly when it occurs inside one token of `text`. One allocation for
/// the whole text instead of one per token: the Maildir scan folds every message it reads.
pub(crate) fn fold_into(text: &str, out: &mut String) {
    each_token(text, Mode::Document, |t, _, _| {
        out.push_str(t);
        out.push(' ');
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_into_separates_every_token_by_one_space() {
        let mut out = String::new();
        fold_into("  Fatura:12 -- Março ", &mut out);
        fold_into("x", &mut out);
        assert_eq!(out, "fatura 12 marco x ");
    }

    #[test]
    fn the_classes_of_issue_27_match_what_was_typed() {
        // (what the mail holds, what a user types): every query token is a token of the text.
        for (mail, typed) in [
            ("Re\u{301}sume\u{301} attached", "résumé"),
            ("Η Αθήνα", "αθηνα"),
            ("ΑΘΗΝΑ", "Αθήνα"),
            ("İstanbul office", "istanbul"),
            ("私は東京都に住んでいます", "東京"),
            ("見積書を送ります", "見積書"),
            (
                "the digest e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 ok",
                "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
            ),
            ("the con\u{ad}tract", "contract"),
            ("Kick\u{200b}off at 10", "kickoff"),
            ("Straße", "STRASSE"),
            ("서울에서 만나요", "서울"),
        ] {
            let have = tokens(mail);
            for t in query_tokens(typed) {
                assert!(
                    have.contains(&t),
                    "{typed:?} → {t:?} not in {mail:?} → {have:?}"
                );
            }
            assert!(!query_tokens(typed).is_empty());
        }
    }
}
