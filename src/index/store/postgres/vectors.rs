//! The shared store's vectors (semantic recall): each passage's vector as a pgvector `halfvec`
//! row beside its message, in `mailgate_vectors`. A sync's side ([`PgVectors`]) keeps in memory
//! which messages have vectors of the endpoint's model and the upserts waiting for the next
//! commit, which writes them in the commit's fenced transaction: a message put again loses its
//! old vectors with its old row (the foreign key cascades), so a message never keeps vectors of
//! text it no longer has. The server's side ([`nearest`]) asks the HNSW index of the vectors'
//! size for the closest passages of one folder, scanning on (`strict_order`) until enough
//! passages of this mailbox's folder are found, and keeps each message's best passage, as the
//! local store's scan does.
//!
//! Vectors are kept at unit length, so a cosine distance of `d` is a similarity of `1 - d`, the
//! figure the local store's scan gives.

use std::collections::{HashMap, HashSet};

use pgvector::HalfVector;
use tokio_postgres::Transaction;

use super::store_error;
use crate::embed::chunk::MAX_CHUNKS;
use crate::embed::vectors::{SizeChanges, SyncVectors, VectorError, check_passages, unit_length};
use crate::embed::wire::MAX_DIMENSION;
use crate::index::IndexError;
use crate::index::store::Nearest;

/// The largest size pgvector's HNSW index takes for a `halfvec`: a larger model's vectors are
/// searched by an exact scan.
const HNSW_MAX_DIMENSION: usize = 4000;

/// An arbitrary constant naming the lock under which the first sync of a vector size creates
/// that size's HNSW index (two syncs of other mailboxes may store the first vectors at once).
const HNSW_LOCK: i64 = 0x6d67_5f68_6e73_7700; // "mg_hnsw"

/// The HNSW index of vectors of `dim` numbers.
fn hnsw_name(dim: usize) -> String {
    format!("mailgate_vectors_hnsw_{dim}")
}

/// A message key of the sync (`index::doc_key`) as its folder and id.
fn split_key(key: &str) -> Option<(&str, &str)> {
    key.split_once('\u{0}')
}

/// One mailbox's vectors as a sync sees and changes them (module doc).
pub(crate) struct PgVectors {
    model: String,
    /// The size of the vectors held; 0 while there are none.
    dim: usize,
    /// The messages with vectors of `model` and `dim`, committed or waiting.
    have: HashSet<String>,
    /// Per message key, the unit-length passages waiting for the next commit.
    upserts: HashMap<String, Vec<Vec<f32>>>,
    /// Every stored vector is stale (the size changed): deleted at the next commit.
    drop_all: bool,
    changes: SizeChanges,
    /// The HNSW index of `dim` is known to exist.
    indexed_dim: Option<usize>,
}

impl PgVectors {
    /// The vectors of `model` the scoped mailbox holds. Vectors another model made are stale:
    /// deleted here (in the caller's transaction, fenced by the lease), and their messages embedded again.
    pub(crate) async fn load(tx: &Transaction<'_>, model: &str) -> Result<Self, IndexError> {
        tx.execute(
            "DELETE FROM mailgate_vectors
              WHERE mailbox = current_setting('mailgate.mailbox') AND model <> $1",
            &[&model],
        )
        .await
        .map_err(store_error)?;
        let rows = tx
            .query(
                "SELECT folder_id, id, dims FROM mailgate_vectors
                  WHERE mailbox = current_setting('mailgate.mailbox')
                    AND model = $1 AND passage = 0",
                &[&model],
            )
            .await
            .map_err(store_error)?;
        let mut per_dim: HashMap<i32, Vec<String>> = HashMap::new();
        for row in &rows {
            let (folder, id, dims): (&str, &str, i32) = (
                row.try_get(0).map_err(store_error)?,
                row.try_get(1).map_err(store_error)?,
                row.try_get(2).map_err(store_error)?,
            );
            per_dim
                .entry(dims)
                .or_default()
                .push(crate::index::doc_key(folder, id));
        }
        // One size is served; were there two (an endpoint that changed while a sync died), the
        // larger set stays and the other's messages are embedded again.
        let (dim, have) = per_dim
            .into_iter()
            .max_by_key(|(dims, keys)| (keys.len(), *dims))
            .map(|(dims, keys)| (usize::try_from(dims).unwrap_or(0), keys))
            .unwrap_or_default();
        Ok(Self {
            model: model.to_owned(),
            dim,
            have: have.into_iter().collect(),
            upserts: HashMap::new(),
            drop_all: false,
            changes: SizeChanges::default(),
            indexed_dim: None,
        })
    }

    /// Forgets `key`'s vectors: the message is put again or removed, and its row takes its
    /// vectors with it at the commit.
    pub(crate) fn forget(&mut self, key: &str) {
        self.have.remove(key);
        self.upserts.remove(key);
    }

    /// Writes the changes since the last commit in `tx` (the commit's, fenced by the lease).
    pub(crate) async fn write(&mut self, tx: &Transaction<'_>) -> Result<(), IndexError> {
        if std::mem::take(&mut self.drop_all) {
            tx.execute(
                "DELETE FROM mailgate_vectors WHERE mailbox = current_setting('mailgate.mailbox')",
                &[],
            )
            .await
            .map_err(store_error)?;
        }
        if self.upserts.is_empty() {
            return Ok(());
        }
        self.ensure_hnsw(tx).await?;
        let upserts = std::mem::take(&mut self.upserts);
        let (mut folders, mut ids, mut passages, mut vectors) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut key_folders, mut key_ids) = (Vec::new(), Vec::new());
        for (key, chunks) in &upserts {
            let Some((folder, id)) = split_key(key) else {
                continue;
            };
            key_folders.push(folder);
            key_ids.push(id);
            for (n, chunk) in chunks.iter().enumerate() {
                folders.push(folder);
                ids.push(id);
                passages.push(i16::try_from(n).unwrap_or(i16::MAX));
                vectors.push(HalfVector::from_f32_slice(chunk));
            }
        }
        tx.execute(
            "DELETE FROM mailgate_vectors
              WHERE mailbox = current_setting('mailgate.mailbox')
                AND (folder_id, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))",
            &[&key_folders, &key_ids],
        )
        .await
        .map_err(store_error)?;
        let dims = i32::try_from(self.dim).unwrap_or(i32::MAX);
        // A message removed since it was embedded has no row: its vectors are not written.
        tx.execute(
            "INSERT INTO mailgate_vectors (mailbox, folder_id, id, passage, model, dims, embedding)
             SELECT current_setting('mailgate.mailbox'), v.f, v.i, v.p, $5, $6, v.e
               FROM unnest($1::text[], $2::text[], $3::int2[], $4::halfvec[]) AS v(f, i, p, e)
              WHERE EXISTS (SELECT 1 FROM mailgate_messages m
                             WHERE m.mailbox = current_setting('mailgate.mailbox')
                               AND m.folder_id = v.f AND m.id = v.i)",
            &[&folders, &ids, &passages, &vectors, &self.model, &dims],
        )
        .await
        .map_err(store_error)?;
        Ok(())
    }

    /// Creates the HNSW index of the vectors' size when it does not exist yet: the first sync
    /// that stores vectors of a size makes it (the size is the model's, unknown to `index
    /// migrate`).
    async fn ensure_hnsw(&mut self, tx: &Transaction<'_>) -> Result<(), IndexError> {
        if self.indexed_dim == Some(self.dim) || !(1..=HNSW_MAX_DIMENSION).contains(&self.dim) {
            return Ok(());
        }
        let name = hnsw_name(self.dim);
        let exists: bool = tx
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&name])
            .await
            .map_err(store_error)?
            .try_get(0)
            .map_err(store_error)?;
        if !exists {
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&HNSW_LOCK])
                .await
                .map_err(store_error)?;
            // The name and size are numbers this code formats, never input.
            tx.batch_execute(&format!(
                "CREATE INDEX IF NOT EXISTS {name} ON mailgate_vectors
                   USING hnsw ((embedding::halfvec({dim})) halfvec_cosine_ops)
                   WHERE dims = {dim}",
                dim = self.dim
            ))
            .await
            .map_err(store_error)?;
        }
        self.indexed_dim = Some(self.dim);
        Ok(())
    }
}

impl SyncVectors for PgVectors {
    fn contains(&self, key: &str) -> bool {
        self.have.contains(key)
    }

    fn upsert(&mut self, key: &str, vectors: Vec<Vec<f32>>) -> Result<(), VectorError> {
        let expected = if self.have.is_empty() || self.dim == 0 {
            vectors.first().map_or(0, Vec::len)
        } else {
            self.dim
        };
        check_passages(&vectors, expected)?;
        let unit = vectors
            .iter()
            .map(|v| {
                unit_length(v).ok_or(if v.iter().all(|x| x.is_finite()) {
                    VectorError::Zero
                } else {
                    VectorError::NotFinite
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.dim = expected;
        self.have.insert(key.to_owned());
        self.upserts.insert(key.to_owned(), unit);
        Ok(())
    }

    fn adopt_dimension(&mut self, dim: usize) -> usize {
        if !self.changes.adopt(self.have.is_empty(), self.dim, dim) {
            return 0;
        }
        let stale = self.have.len();
        self.have.clear();
        self.upserts.clear();
        self.drop_all = true;
        self.dim = dim;
        stale
    }

    fn restarts(&self) -> u32 {
        self.changes.restarts
    }

    fn take_refill(&mut self) -> bool {
        std::mem::take(&mut self.changes.refill)
    }
}

/// The `k` messages of `folder_id` whose best passage of `model` is closest to `query`, best
/// first (module doc), in the scoped read transaction `tx`.
pub(crate) async fn nearest(
    tx: &impl tokio_postgres::GenericClient,
    model: &str,
    query: &[f32],
    k: usize,
    folder_id: &str,
) -> Result<Nearest, IndexError> {
    let dim = query.len();
    let Some(unit) = unit_length(query) else {
        return Ok(Nearest::Found(Vec::new()));
    };
    if k == 0 || !(1..=MAX_DIMENSION).contains(&dim) {
        return Ok(Nearest::Found(Vec::new()));
    }
    let passages = i64::try_from(k.saturating_mul(MAX_CHUNKS)).unwrap_or(i64::MAX);
    // A message has at most MAX_CHUNKS passages, so the best k messages' best passages are
    // among the best k × MAX_CHUNKS passages.
    let ef_search = passages.clamp(40, 1000);
    tx.batch_execute(&format!(
        "SET LOCAL hnsw.iterative_scan = strict_order; SET LOCAL hnsw.ef_search = {ef_search}"
    ))
    .await
    .map_err(store_error)?;
    // The size is a number this code formats, written as a literal so the planner can match
    // the partial HNSW index of that size (`WHERE dims = N`) in every plan.
    let distance = format!("embedding::halfvec({dim}) <=> $1::halfvec({dim})");
    let rows = tx
        .query(
            &format!(
                "SELECT id, ({distance})::float8 FROM mailgate_vectors
                  WHERE mailbox = current_setting('mailgate.mailbox')
                    AND folder_id = $2 AND model = $3 AND dims = {dim}
                  ORDER BY {distance} LIMIT $4"
            ),
            &[
                &HalfVector::from_f32_slice(&unit),
                &folder_id,
                &model,
                &passages,
            ],
        )
        .await
        .map_err(store_error)?;
    let mut hits: Vec<(String, f32)> = Vec::with_capacity(k);
    for row in &rows {
        let id: String = row.try_get(0).map_err(store_error)?;
        let distance: f64 = row.try_get(1).map_err(store_error)?;
        if hits.iter().all(|(seen, _)| *seen != id) {
            hits.push((id, (1.0 - distance) as f32));
            if hits.len() == k {
                break;
            }
        }
    }
    if hits.is_empty() {
        let any: bool = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM mailgate_vectors
                                 WHERE mailbox = current_setting('mailgate.mailbox')
                                   AND model = $1 AND dims = $2)",
                &[&model, &i32::try_from(dim).unwrap_or(i32::MAX)],
            )
            .await
            .map_err(store_error)?
            .try_get(0)
            .map_err(store_error)?;
        if !any {
            return Ok(Nearest::NotIndexed);
        }
    }
    Ok(Nearest::Found(hits))
}
