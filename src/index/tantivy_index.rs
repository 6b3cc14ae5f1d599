//! The embedded implementation of the index interface: tantivy over [`CapDirectory`].
//!
//! Matching is exact-token, like the live scan: text fields go through the shared analyzer
//! ([`super::analyzer`], [`crate::text`]'s tokens), and a query's words through the same, so a
//! word absent from every field of every message in scope is absent from the mail as indexed.
//! Ranking is BM25 with field boosts (subject > from > recipients > body > attachment names >
//! attachment text) and recency breaking ties. Sender and subject filters are substring matches
//! on lower-cased raw fields (regex over the term dictionary), as the live filters are. Bodies
//! and attachment text are indexed but not stored: the doc store keeps only the summary an
//! answer shows.

use std::ops::Bound;
use std::sync::Mutex;

use tantivy::collector::{Count, TopDocs};
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, RangeQuery, RegexQuery, TermQuery};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing,
    TextOptions, Value,
};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{DocAddress, Index, IndexReader, IndexWriter, Order as TOrder, ReloadPolicy, Term};
use tantivy::{Searcher, TantivyDocument};

use super::analyzer::{self, MailTokenizer};
use super::capdir::CapDirectory;
use super::stored::{self, GAPS, gap_code, raw};
use super::{
    CandidateQuery, Clue, IndexError, IndexHits, IndexQuery, IndexedMessage, TextIndex,
    TextIndexWriter, doc_key,
};
use crate::backends::model::{ContentGap, MessageSummary, SortBy, SortOrder};

/// The analyzer's registered name (it carries the text analysis version into the schema).
const ANALYZER: &str = analyzer::NAME;
/// The writer's indexing memory (tantivy needs ≥ 15 MB per thread). 64 MB rather than 96: the
/// sync's peak RSS at 100,000 messages was 326 MB with 96 (`cargo bench --bench index`, target
/// 300 MB).
const WRITER_MEMORY: usize = 64 * 1024 * 1024;
const WRITER_THREADS: usize = 2;

const BOOSTS: [(&str, f32); 6] = [
    ("subject", 3.0),
    ("from", 2.0),
    ("recipients", 1.2),
    ("body", 1.0),
    ("att_names", 0.8),
    ("att_text", 0.5),
];

/// The clauses of a boolean query.
type Clauses = Vec<(Occur, Box<dyn Query>)>;

#[derive(Clone, Copy)]
struct Fields {
    /// folder id, NUL, backend id: what a put replaces and a remove deletes.
    key: Field,
    id: Field,
    folder: Field,
    mid: Field,
    thread: Field,
    subject: Field,
    from: Field,
    recipients: Field,
    body: Field,
    att_names: Field,
    att_text: Field,
    from_raw: Field,
    subject_raw: Field,
    received: Field,
    is_read: Field,
    has_att: Field,
    gap: Field,
    /// Some attachment's text is not wholly in `att_text`.
    att_unread: Field,
    summary: Field,
}

fn schema() -> (Schema, Fields) {
    schema_with(ANALYZER)
}

/// The schema whose text fields are analyzed by the analyzer registered as `analyzer`.
fn schema_with(analyzer: &str) -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(analyzer)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        key: b.add_text_field("key", STRING),
        id: b.add_text_field("id", STRING | STORED),
        folder: b.add_text_field("folder", STRING),
        mid: b.add_text_field("mid", STRING | STORED),
        thread: b.add_text_field("thread", STRING),
        subject: b.add_text_field("subject", text.clone()),
        from: b.add_text_field("from", text.clone()),
        recipients: b.add_text_field("recipients", text.clone()),
        body: b.add_text_field("body", text.clone()),
        att_names: b.add_text_field("att_names", text.clone()),
        att_text: b.add_text_field("att_text", text),
        from_raw: b.add_text_field("from_raw", STRING),
        subject_raw: b.add_text_field("subject_raw", STRING | FAST),
        received: b.add_i64_field("received", INDEXED | FAST),
        is_read: b.add_bool_field("is_read", INDEXED),
        has_att: b.add_bool_field("has_att", INDEXED),
        gap: b.add_u64_field("gap", INDEXED),
        att_unread: b.add_bool_field("att_unread", INDEXED),
        summary: b.add_bytes_field("summary", STORED),
    };
    (b.build(), fields)
}

fn analyzer() -> TextAnalyzer {
    TextAnalyzer::from(MailTokenizer)
}

/// One alias's tantivy index.
pub(crate) struct TantivyIndex {
    index: Index,
    fields: Fields,
    reader: IndexReader,
    /// Serialises reloads: a search reloads when a newer commit exists.
    reload: Mutex<()>,
}

impl TantivyIndex {
    /// Opens the index in `dir`, creating it when `create` (the sync's side) and the folder
    /// holds none; the server's side never creates one ([`IndexError::Missing`]).
    pub(crate) fn open(dir: CapDirectory, create: bool) -> Result<Self, IndexError> {
        let (schema, fields) = schema();
        let exists = Index::exists(&dir).map_err(|e| IndexError::Store(e.to_string()))?;
        let index = if exists {
            Index::open(dir)?
        } else if create {
            Index::create(dir, schema.clone(), tantivy::IndexSettings::default())?
        } else {
            return Err(IndexError::Missing);
        };
        if index.schema() != schema {
            // Another analyzer (its name is in the schema) or another layout: its tokens are
            // not this version's, so it must not answer.
            return Err(IndexError::Outdated);
        }
        index.tokenizers().register(ANALYZER, analyzer());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(Self {
            index,
            fields,
            reader,
            reload: Mutex::new(()),
        })
    }

    /// The only writer of this index (an exclusive, process-lifetime lock).
    pub(crate) fn writer(&self) -> Result<TantivyWriter, IndexError> {
        let writer = self
            .index
            .writer_with_num_threads(WRITER_THREADS, WRITER_MEMORY)?;
        Ok(TantivyWriter {
            writer,
            fields: self.fields,
        })
    }

    /// A writer with one indexing thread, so that one commit makes one segment.
    #[cfg(test)]
    fn writer_one_segment(&self) -> Result<TantivyWriter, IndexError> {
        Ok(TantivyWriter {
            writer: self.index.writer_with_num_threads(1, WRITER_MEMORY)?,
            fields: self.fields,
        })
    }

    /// The latest committed state (reloading if a sync committed since).
    fn searcher(&self) -> Result<Searcher, IndexError> {
        let _one = self
            .reload
            .lock()
            .map_err(|_| IndexError::Store("reload lock poisoned".to_owned()))?;
        // A reload can race a merge that deletes the files of the commit it read: try again.
        let mut last = None;
        for _ in 0..3 {
            match self.reader.reload() {
                Ok(()) => return Ok(self.reader.searcher()),
                Err(e) => last = Some(e),
            }
        }
        match last {
            Some(e) => Err(e.into()),
            None => Ok(self.reader.searcher()),
        }
    }

    fn word_query(&self, word: &str) -> Option<Box<dyn Query>> {
        let tokens = crate::text::query_tokens(word);
        if tokens.is_empty() {
            return None;
        }
        // Every token of the word must occur (a word the analyzer splits, like `e-mail`).
        let per_token: Vec<(Occur, Box<dyn Query>)> = tokens
            .iter()
            .map(|token| {
                let any_field: Vec<(Occur, Box<dyn Query>)> = BOOSTS
                    .iter()
                    .filter_map(|(name, boost)| {
                        let field = self.index.schema().get_field(name).ok()?;
                        let q = TermQuery::new(
                            Term::from_field_text(field, token),
                            IndexRecordOption::WithFreqs,
                        );
                        Some((
                            Occur::Should,
                            Box::new(BoostQuery::new(Box::new(q), *boost)) as Box<dyn Query>,
                        ))
                    })
                    .collect();
                (
                    Occur::Must,
                    Box::new(BooleanQuery::new(any_field)) as Box<dyn Query>,
                )
            })
            .collect();
        Some(Box::new(BooleanQuery::new(per_token)))
    }

    /// Messages where one of `fields` holds a run of tokens spelling `text` ([`Clue::Text`],
    /// [`analyzer::spelling`]).
    fn spelled_in(&self, text: &str, fields: &[Field]) -> Box<dyn Query> {
        let Some(per_atom) = analyzer::spelling(text) else {
            return Box::new(tantivy::query::AllQuery);
        };
        let per_field: Clauses = fields
            .iter()
            .map(|&field| {
                let all: Clauses = per_atom
                    .iter()
                    .map(|runs| {
                        let any: Clauses = runs
                            .iter()
                            .map(|run| (Occur::Should, term(field, run)))
                            .collect();
                        (
                            Occur::Must,
                            Box::new(BooleanQuery::new(any)) as Box<dyn Query>,
                        )
                    })
                    .collect();
                (
                    Occur::Should,
                    Box::new(BooleanQuery::new(all)) as Box<dyn Query>,
                )
            })
            .collect();
        Box::new(BooleanQuery::new(per_field))
    }

    /// How many messages `scope` holds, and how many of them are not wholly indexed, by kind.
    fn scope_counts(
        &self,
        searcher: &Searcher,
        scope: &dyn Query,
    ) -> Result<(usize, Vec<(ContentGap, usize)>), IndexError> {
        let in_scope = searcher.search(scope, &Count)?;
        let mut gaps = Vec::new();
        for gap in GAPS {
            let gapped = BooleanQuery::new(vec![
                (Occur::Must, scope.box_clone()),
                (Occur::Must, gap_term(self.fields.gap, gap)),
            ]);
            let n = searcher.search(&gapped, &Count)?;
            if n > 0 {
                gaps.push((gap, n));
            }
        }
        Ok((in_scope, gaps))
    }

    /// The scope (folder) and structured filters as query clauses.
    fn filter_clauses(&self, q: &IndexQuery) -> Result<Clauses, IndexError> {
        let f = self.fields;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        if let Some(folder) = &q.folder_id {
            clauses.push((Occur::Must, term(f.folder, folder)));
        }
        let filters = &q.filters;
        if let Some(sender) = &filters.sender {
            clauses.push((Occur::Must, contains(f.from_raw, sender)?));
        }
        if let Some(subject) = &filters.subject {
            clauses.push((Occur::Must, contains(f.subject_raw, subject)?));
        }
        if filters.date_from.is_some() || filters.date_to.is_some() {
            let bound = |d: Option<chrono::DateTime<chrono::Utc>>| match d {
                Some(d) => Bound::Included(Term::from_field_i64(f.received, d.timestamp())),
                None => Bound::Unbounded,
            };
            clauses.push((
                Occur::Must,
                Box::new(RangeQuery::new(
                    bound(filters.date_from),
                    bound(filters.date_to),
                )),
            ));
        }
        if let Some(want) = filters.has_attachments {
            clauses.push((Occur::Must, bool_term(f.has_att, want)));
        }
        if let Some(want) = filters.is_read {
            clauses.push((Occur::Must, bool_term(f.is_read, want)));
        }
        Ok(clauses)
    }

    fn summaries(
        &self,
        searcher: &Searcher,
        hits: Vec<(f32, DocAddress)>,
    ) -> Result<Vec<(MessageSummary, f32)>, IndexError> {
        hits.into_iter()
            .map(|(score, addr)| {
                let doc: TantivyDocument = searcher.doc(addr)?;
                Ok((self.summary_of(&doc)?, score))
            })
            .collect()
    }

    /// The stored document of the first message whose `field` is `value` (ids and keys are
    /// unique).
    fn first(&self, field: Field, value: &str) -> Result<Option<TantivyDocument>, IndexError> {
        let searcher = self.searcher()?;
        let top = searcher.search(
            term(field, value).as_ref(),
            &TopDocs::with_limit(1).order_by_score(),
        )?;
        match top.into_iter().next() {
            Some((_, addr)) => Ok(Some(searcher.doc(addr)?)),
            None => Ok(None),
        }
    }

    fn summary_of(&self, doc: &TantivyDocument) -> Result<MessageSummary, IndexError> {
        let bytes = doc
            .get_first(self.fields.summary)
            .and_then(|v| v.as_bytes())
            .ok_or_else(|| IndexError::Store("a document has no summary".to_owned()))?;
        stored::decode(bytes)
    }
}

fn term(field: Field, value: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, value),
        IndexRecordOption::Basic,
    ))
}

fn gap_term(field: Field, gap: ContentGap) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_u64(field, gap_code(Some(gap))),
        IndexRecordOption::Basic,
    ))
}

fn bool_term(field: Field, value: bool) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_bool(field, value),
        IndexRecordOption::Basic,
    ))
}

/// Values of a raw field that contain `needle` (case-insensitive), as the live filters match.
fn contains(field: Field, needle: &str) -> Result<Box<dyn Query>, IndexError> {
    let pattern = format!(".*{}.*", regex::escape(&raw(needle)));
    RegexQuery::from_pattern(&pattern, field)
        .map(|q| Box::new(q) as Box<dyn Query>)
        .map_err(|e| IndexError::Store(e.to_string()))
}

impl TextIndex for TantivyIndex {
    fn search(&self, q: &IndexQuery) -> Result<IndexHits, IndexError> {
        let searcher = self.searcher()?;
        let f = self.fields;
        let filters = self.filter_clauses(q)?;
        let scope: Box<dyn Query> = match &q.folder_id {
            Some(folder) => term(f.folder, folder),
            None => Box::new(tantivy::query::AllQuery),
        };
        let mut clauses = filters;
        let mut has_words = false;
        for word in &q.words {
            if let Some(wq) = self.word_query(word) {
                clauses.push((Occur::Must, wq));
                has_words = true;
            }
        }
        if !q.words.is_empty() && !has_words {
            // A query of no indexable word matches nothing, and proves nothing either.
            return Ok(IndexHits {
                in_scope: searcher.search(scope.as_ref(), &Count)?,
                ..IndexHits::default()
            });
        }
        if clauses.is_empty() {
            clauses.push((Occur::Must, Box::new(tantivy::query::AllQuery)));
        }
        let query = BooleanQuery::new(clauses);
        let limit = q.limit.max(1);
        let (matched, hits) = match (has_words, q.order) {
            (true, None) => {
                let top =
                    TopDocs::with_limit(limit).tweak_score(move |seg: &tantivy::SegmentReader| {
                        let received = seg
                            .fast_fields()
                            .i64("received")
                            .ok()
                            .map(|c| c.first_or_default_col(0));
                        move |doc: tantivy::DocId, score: tantivy::Score| {
                            (score, received.as_ref().map_or(0, |c| c.get_val(doc)))
                        }
                    });
                let (count, top) = searcher.search(&query, &(Count, top))?;
                (
                    count,
                    top.into_iter()
                        .map(|((s, _), a)| (s, a))
                        .collect::<Vec<_>>(),
                )
            }
            (_, order) => {
                let order = order.unwrap_or_default();
                let direction = match order.direction {
                    SortOrder::Asc => TOrder::Asc,
                    SortOrder::Desc => TOrder::Desc,
                };
                match order.by {
                    SortBy::ReceivedDateTime => {
                        let top = TopDocs::with_limit(limit)
                            .order_by_fast_field::<i64>("received", direction);
                        let (count, top) = searcher.search(&query, &(Count, top))?;
                        (count, top.into_iter().map(|(_, a)| (0.0, a)).collect())
                    }
                    SortBy::Subject => {
                        let top = TopDocs::with_limit(limit)
                            .order_by_string_fast_field("subject_raw", direction);
                        let (count, top) = searcher.search(&query, &(Count, top))?;
                        (count, top.into_iter().map(|(_, a)| (0.0, a)).collect())
                    }
                }
            }
        };
        let (in_scope, gaps) = self.scope_counts(&searcher, scope.as_ref())?;
        Ok(IndexHits {
            hits: self.summaries(&searcher, hits)?,
            matched,
            in_scope,
            gaps,
        })
    }

    fn candidates(&self, q: &CandidateQuery) -> Result<IndexHits, IndexError> {
        let searcher = self.searcher()?;
        let f = self.fields;
        let scope = term(f.folder, &q.folder_id);
        let mut any: Clauses = Vec::new();
        for clue in &q.clues {
            match clue {
                Clue::Text(text) => any.push((
                    Occur::Should,
                    self.spelled_in(text, &[f.subject, f.from, f.body, f.att_names, f.att_text]),
                )),
                Clue::AttachmentName(text) => {
                    any.push((Occur::Should, self.spelled_in(text, &[f.att_names])))
                }
                Clue::Gap => {
                    any.extend(GAPS.iter().map(|&g| (Occur::Should, gap_term(f.gap, g))));
                }
                Clue::UnreadAttachments => any.push((Occur::Should, bool_term(f.att_unread, true))),
            }
        }
        let (in_scope, gaps) = self.scope_counts(&searcher, scope.as_ref())?;
        if any.is_empty() {
            return Ok(IndexHits {
                in_scope,
                gaps,
                ..IndexHits::default()
            });
        }
        let query = BooleanQuery::new(vec![
            (Occur::Must, scope),
            (Occur::Must, Box::new(BooleanQuery::new(any))),
        ]);
        let top = TopDocs::with_limit(q.limit.max(1))
            .order_by_fast_field::<i64>("received", TOrder::Desc);
        let (matched, top) = searcher.search(&query, &(Count, top))?;
        let hits = top.into_iter().map(|(_, a)| (0.0, a)).collect();
        Ok(IndexHits {
            hits: self.summaries(&searcher, hits)?,
            matched,
            in_scope,
            gaps,
        })
    }

    fn summary(&self, id: &str) -> Result<Option<MessageSummary>, IndexError> {
        self.first(self.fields.id, id)?
            .map(|doc| self.summary_of(&doc))
            .transpose()
    }

    fn summaries_in(
        &self,
        folder_id: &str,
        ids: &[&str],
    ) -> Result<Vec<Option<MessageSummary>>, IndexError> {
        let searcher = self.searcher()?;
        ids.iter()
            .map(|id| {
                let key = term(self.fields.key, &doc_key(folder_id, id));
                let top =
                    searcher.search(key.as_ref(), &TopDocs::with_limit(1).order_by_score())?;
                match top.into_iter().next() {
                    Some((_, addr)) => {
                        let doc: TantivyDocument = searcher.doc(addr)?;
                        self.summary_of(&doc).map(Some)
                    }
                    None => Ok(None),
                }
            })
            .collect()
    }

    fn message_id(&self, folder_id: &str, id: &str) -> Result<Option<String>, IndexError> {
        Ok(self
            .first(self.fields.key, &doc_key(folder_id, id))?
            .and_then(|doc| {
                doc.get_first(self.fields.mid)
                    .and_then(|v| v.as_str())
                    .map(str::to_owned)
            }))
    }
}

/// The sync's writer.
pub(crate) struct TantivyWriter {
    writer: IndexWriter,
    fields: Fields,
}

impl TantivyWriter {
    /// Rewrites the segments that hold deleted or replaced messages without them, and removes
    /// the files nothing uses any more: a deleted mail's subject, sender and preview (stored)
    /// and its words (the term dictionary) must leave the disk, not wait for a merge policy to
    /// get round to it. A segment a background merge already holds is rewritten by that merge.
    fn purge_deleted(&mut self) -> Result<(), IndexError> {
        let with_deletes: Vec<tantivy::index::SegmentId> = self
            .writer
            .index()
            .searchable_segment_metas()?
            .into_iter()
            .filter(|meta| meta.has_deletes())
            .map(|meta| meta.id())
            .collect();
        if !with_deletes.is_empty() {
            // An error here is a segment already in a background merge: not a failure.
            let _ = self.writer.merge(&with_deletes).wait();
        }
        self.writer.garbage_collect_files().wait()?;
        Ok(())
    }
}

impl TextIndexWriter for TantivyWriter {
    fn put(&mut self, m: &IndexedMessage) -> Result<(), IndexError> {
        let f = self.fields;
        let s = &m.summary;
        let key = doc_key(&s.folder_id, &s.id);
        self.writer.delete_term(Term::from_field_text(f.key, &key));
        let mut doc = TantivyDocument::default();
        doc.add_text(f.key, &key);
        doc.add_text(f.id, &s.id);
        doc.add_text(f.folder, &s.folder_id);
        if let Some(mid) = &m.internet_message_id {
            doc.add_text(f.mid, mid);
        }
        for t in &m.thread_ids {
            doc.add_text(f.thread, t);
        }
        if let Some(subject) = &s.subject {
            doc.add_text(f.subject, subject);
            doc.add_text(f.subject_raw, raw(subject));
        } else {
            doc.add_text(f.subject_raw, "");
        }
        if let Some(from) = &s.from {
            for part in [&from.name, &from.address].into_iter().flatten() {
                doc.add_text(f.from, part);
                doc.add_text(f.from_raw, raw(part));
            }
        }
        for r in &m.recipients {
            doc.add_text(f.recipients, r);
        }
        doc.add_text(f.body, &m.body);
        for a in &s.attachments {
            if let Some(name) = &a.name {
                doc.add_text(f.att_names, name);
            }
        }
        if !m.attachment_text.is_empty() {
            doc.add_text(f.att_text, &m.attachment_text);
        }
        doc.add_i64(f.received, s.received.map_or(0, |d| d.timestamp()));
        doc.add_bool(f.is_read, s.is_read);
        doc.add_bool(f.has_att, s.has_attachments);
        doc.add_u64(f.gap, gap_code(s.gap));
        doc.add_bool(f.att_unread, !m.attachments_whole);
        doc.add_bytes(f.summary, &stored::encode(s)?);
        self.writer.add_document(doc)?;
        Ok(())
    }

    fn remove(&mut self, folder_id: &str, id: &str) -> Result<(), IndexError> {
        self.writer.delete_term(Term::from_field_text(
            self.fields.key,
            &doc_key(folder_id, id),
        ));
        Ok(())
    }

    fn commit(&mut self) -> Result<(), IndexError> {
        self.writer.commit()?;
        self.purge_deleted()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::backends::model::AttachmentMeta;
    use crate::index::analyzer::MAX_TOKEN_BYTES;
    use crate::index::capdir::CapDirectory;

    /// A fresh index in a temporary folder (kept alive by the returned guard).
    pub(crate) fn index() -> (tempfile::TempDir, TantivyIndex) {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = cap_std::fs::Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority())
            .expect("dir");
        let index = TantivyIndex::open(CapDirectory::new(dir), true).expect("index");
        (tmp, index)
    }

    fn message(id: &str, subject: &str, body: &str) -> IndexedMessage {
        let mut summary = crate::search::engine::tests::candidate(id, subject);
        summary.folder_id = "inbox".to_owned();
        summary.received = chrono::DateTime::from_timestamp(1_700_000_000, 0);
        IndexedMessage {
            summary,
            internet_message_id: None,
            thread_ids: Vec::new(),
            recipients: Vec::new(),
            body: body.to_owned(),
            attachment_text: String::new(),
            attachments_whole: true,
        }
    }

    fn put_all(index: &TantivyIndex, messages: &[IndexedMessage]) {
        let mut w = index.writer().expect("writer");
        for m in messages {
            w.put(m).expect("put");
        }
        w.commit().expect("commit");
    }

    fn candidates(index: &TantivyIndex, clues: Vec<Clue>) -> Vec<String> {
        let hits = index
            .candidates(&CandidateQuery {
                folder_id: "inbox".to_owned(),
                clues,
                limit: 100,
            })
            .expect("candidates");
        let mut ids: Vec<String> = hits.hits.into_iter().map(|(m, _)| m.id).collect();
        ids.sort();
        ids
    }

    #[test]
    fn a_signal_is_found_in_each_spelling_between_its_breaks() {
        let (_tmp, index) = index();
        put_all(
            &index,
            &[
                message("spaced", "re: prop 1001", ""),
                message("compact", "", "see PROP1001 attached"),
                message("underscore", "(prop_1001)", ""),
                message("mixed", "ACME 2024 Q1 report", ""),
                message("odd-split", "pro p1001", ""),
                message("longer", "PROP-10012", ""),
                message("unrelated", "lunch", "nothing here"),
            ],
        );
        // A superset: `PROP-10012` holds neither `1001` nor `prop1001` as a token, `pro p1001`
        // breaks inside a run of letters.
        assert_eq!(
            candidates(&index, vec![Clue::Text("PROP-1001".to_owned())]),
            ["compact", "spaced", "underscore"]
        );
        assert_eq!(
            candidates(&index, vec![Clue::Text("acme 2024Q1".to_owned())]),
            ["mixed"]
        );
        // Punctuation only narrows nothing: every message is a candidate.
        assert_eq!(
            candidates(&index, vec![Clue::Text("--".to_owned())]).len(),
            7
        );
        // A run longer than an indexed token may hide in a dropped token: nothing narrows.
        let long = "x".repeat(MAX_TOKEN_BYTES + 1);
        assert_eq!(candidates(&index, vec![Clue::Text(long)]).len(), 7);
        assert!(candidates(&index, vec![]).is_empty());
    }

    #[test]
    fn messages_not_wholly_indexed_are_candidates() {
        let (_tmp, index) = index();
        let mut cut = message("cut", "big", "");
        cut.summary.gap = Some(ContentGap::TooLarge);
        let mut unread = message("unread", "scan", "");
        unread.attachments_whole = false;
        let mut named = message("named", "", "");
        named.summary.attachments.push(AttachmentMeta {
            id: "a1".to_owned(),
            name: Some("Policy Schedule.pdf".to_owned()),
            content_type: "application/pdf".to_owned(),
            size: 10,
            size_is_estimate: false,
            is_inline: false,
        });
        put_all(&index, &[cut, unread, named, message("whole", "x", "y")]);
        assert_eq!(candidates(&index, vec![Clue::Gap]), ["cut"]);
        assert_eq!(
            candidates(&index, vec![Clue::UnreadAttachments]),
            ["unread"]
        );
        assert_eq!(
            candidates(
                &index,
                vec![Clue::AttachmentName("policy schedule".to_owned())]
            ),
            ["named"]
        );
        // Attachment names are not searched in the subject, nor the subject for names.
        assert!(candidates(&index, vec![Clue::AttachmentName("scan".to_owned())]).is_empty());
    }

    /// Every byte of the index's files, concatenated.
    fn all_bytes(dir: &std::path::Path) -> Vec<u8> {
        let dir =
            cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority()).expect("dir");
        let mut out = Vec::new();
        for entry in dir.entries().expect("read dir") {
            let entry = entry.expect("entry");
            if entry.file_type().expect("type").is_file() {
                out.extend(dir.read(entry.file_name()).expect("read"));
            }
        }
        out
    }

    #[test]
    fn an_index_built_by_another_analyzer_never_opens() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = || {
            CapDirectory::new(
                cap_std::fs::Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority())
                    .expect("dir"),
            )
        };
        // What version 1 wrote: the same fields, analyzed by "mail".
        let (old, _) = schema_with("mail");
        Index::create(dir(), old, tantivy::IndexSettings::default()).expect("old index");
        for create in [false, true] {
            assert!(
                matches!(TantivyIndex::open(dir(), create), Err(IndexError::Outdated)),
                "an index of another analysis opened"
            );
        }
    }

    #[test]
    fn a_deleted_message_leaves_the_index_files_at_the_next_commit() {
        let (tmp, index) = index();
        let secret = "zqxjvkwpyfbhsecret";
        // One segment holding both (a segment whose every message is deleted is dropped whole
        // anyway: the case to prove is the one sharing its segment).
        let mut w = index.writer_one_segment().expect("writer");
        w.put(&message(
            "gone",
            &format!("{secret} subject"),
            "body of the gone one",
        ))
        .expect("put");
        w.put(&message("kept", "lunch", "nothing here"))
            .expect("put");
        w.commit().expect("commit");
        drop(w);
        let holds = |bytes: &[u8]| bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
        assert!(
            holds(&all_bytes(tmp.path())),
            "the test must see the word first"
        );
        let mut w = index.writer().expect("writer");
        w.remove("inbox", "gone").expect("remove");
        w.commit().expect("commit");
        drop(w);
        assert!(
            !holds(&all_bytes(tmp.path())),
            "a deleted mail's text stays on disk"
        );
        let hits = index
            .search(&IndexQuery {
                folder_id: Some("inbox".to_owned()),
                words: vec!["lunch".to_owned()],
                filters: crate::backends::model::Filters::default(),
                limit: 10,
                order: None,
            })
            .expect("search");
        assert_eq!(hits.matched, 1, "the kept message is still found");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Whatever separators a message puts between a signal's atoms (or none), the
        /// candidate search finds it; a message missing one atom is not found.
        #[test]
        fn every_spelling_between_breaks_is_a_candidate(
            atoms in proptest::collection::vec(("[a-z]{1,6}", "[0-9]{1,4}"), 1..4),
            joins in proptest::collection::vec(proptest::sample::select(vec!["", " ", "-", "_", ". "]), 8),
            signal_joins in proptest::collection::vec(proptest::sample::select(vec!["", " ", "-"]), 8),
            noise in "[a-z ]{0,30}",
        ) {
            let atoms: Vec<String> = atoms.into_iter().flat_map(|(l, d)| [l, d]).collect();
            let spell = |joins: &[&str]| {
                let mut out = String::new();
                for (i, a) in atoms.iter().enumerate() {
                    if i > 0 {
                        out.push_str(joins[i % joins.len()]);
                    }
                    out.push_str(a);
                }
                out
            };
            let signal = spell(&signal_joins);
            let spelled = spell(&joins);
            let (_tmp, index) = index();
            put_all(&index, &[
                message("hit", "", &format!("{noise} {spelled} {noise}")),
                message("miss", "", &format!("{noise} {}", atoms[1..].join(" "))),
            ]);
            let found = candidates(&index, vec![Clue::Text(signal)]);
            proptest::prop_assert!(found.contains(&"hit".to_owned()), "{spelled}");
            let first_absent = !noise.split(' ').any(|w| w == atoms[0])
                && !atoms[1..].contains(&atoms[0]);
            if first_absent {
                proptest::prop_assert!(!found.contains(&"miss".to_owned()));
            }
        }
    }
}
