//! A message as passages to embed: its text cut on whitespace into at most [`MAX_CHUNKS`]
//! pieces of at most [`CHUNK_CHARS`] characters, each prefixed with the subject so a passage
//! from the middle of a long mail still says what the mail is about. Whitespace runs become one
//! space (the model does not read layout). Text past the last chunk is not embedded; the
//! lexical index still has it. A word longer than a chunk is cut at a character boundary.

/// Passages per message at most: the vector store keeps one row per passage.
pub(crate) const MAX_CHUNKS: usize = 8;
/// Body characters per passage at most (about 250 tokens: well inside e5's 512).
pub(crate) const CHUNK_CHARS: usize = 1_000;
/// Subject characters kept in the prefix.
const SUBJECT_CHARS: usize = 200;

/// The passages of one message: 1..=[`MAX_CHUNKS`], never empty; a message without body text
/// is one passage, its subject (which may itself be empty).
pub(crate) fn chunks(subject: &str, body: &str) -> Vec<String> {
    let subject: String = collapse(subject).chars().take(SUBJECT_CHARS).collect();
    let mut pieces: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut current_chars = 0;
    'words: for word in body.split_whitespace() {
        let mut word = word;
        loop {
            let word_chars = word.chars().count();
            let room = CHUNK_CHARS.saturating_sub(current_chars + usize::from(current_chars > 0));
            if word_chars <= room {
                if current_chars > 0 {
                    current.push(' ');
                    current_chars += 1;
                }
                current.push_str(word);
                current_chars += word_chars;
                continue 'words;
            }
            if current_chars > 0 {
                pieces.push(std::mem::take(&mut current));
                current_chars = 0;
            } else {
                // A word longer than a whole chunk: cut it.
                let cut = word
                    .char_indices()
                    .nth(CHUNK_CHARS)
                    .map_or(word.len(), |(at, _)| at);
                pieces.push(word[..cut].to_owned());
                word = &word[cut..];
            }
            if pieces.len() == MAX_CHUNKS {
                break 'words;
            }
        }
    }
    if current_chars > 0 && pieces.len() < MAX_CHUNKS {
        pieces.push(current);
    }
    if pieces.is_empty() {
        return vec![subject];
    }
    pieces
        .into_iter()
        .map(|piece| {
            if subject.is_empty() {
                piece
            } else {
                format!("{subject}\n\n{piece}")
            }
        })
        .collect()
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn short_mail_is_one_passage_with_its_subject() {
        assert_eq!(
            chunks("  Rent\tinvoice ", "Dear team,\n\n the rent  is due.\r\n"),
            ["Rent invoice\n\nDear team, the rent is due."]
        );
        assert_eq!(chunks("Only a subject", " \n\t"), ["Only a subject"]);
        assert_eq!(chunks("", ""), [""]);
        assert_eq!(chunks("", "body only"), ["body only"]);
    }

    #[test]
    fn long_mail_is_cut_on_whitespace_and_capped() {
        let body = "lease ".repeat(2_000); // 12,000 characters
        let passages = chunks("Lisbon", &body);
        assert_eq!(passages.len(), MAX_CHUNKS);
        for passage in &passages {
            let text = passage.strip_prefix("Lisbon\n\n").expect("subject first");
            assert!(text.chars().count() <= CHUNK_CHARS, "{}", text.len());
            assert!(text.split(' ').all(|w| w == "lease"), "cut between words");
        }
        let giant_word = "x".repeat(CHUNK_CHARS * 2 + 5);
        let passages = chunks("", &giant_word);
        let lengths: Vec<usize> = passages.iter().map(|p| p.chars().count()).collect();
        assert_eq!(lengths, [CHUNK_CHARS, CHUNK_CHARS, 5]);
    }

    proptest! {
        #[test]
        fn passages_are_bounded_and_keep_the_words_in_order(
            subject in "[a-z ]{0,30}",
            words in proptest::collection::vec("[a-zé]{1,1200}", 0..40),
        ) {
            let body = words.join(" \n ");
            let passages = chunks(&subject, &body);
            prop_assert!((1..=MAX_CHUNKS).contains(&passages.len()));
            let subject = collapse(&subject);
            let mut rejoined = String::new();
            for passage in &passages {
                let text = if subject.is_empty() {
                    passage.as_str()
                } else {
                    passage.strip_prefix(&format!("{subject}\n\n")).unwrap_or(passage)
                };
                prop_assert!(text.chars().count() <= CHUNK_CHARS);
                rejoined.push_str(text);
            }
            let all: String = words.concat();
            let kept: String = rejoined.split_whitespace().collect();
            if words.is_empty() {
                prop_assert_eq!(passages, vec![subject]);
            } else {
                prop_assert!(all.starts_with(&kept), "a prefix of the text, in order");
                if passages.len() < MAX_CHUNKS {
                    prop_assert_eq!(kept, all, "nothing dropped below the cap");
                }
            }
        }
    }
}
