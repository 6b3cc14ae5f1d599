//! The vectors of one mailbox alias, kept in that alias's index folder (a cap-std [`Dir`] the
//! caller hands over): every passage of a message as one int8 row, normalised for cosine with
//! its own scale, keyed by the message's key (up to [`MAX_CHUNKS`] rows per key). A search is a
//! brute-force scan: an i8 dot product per row, the best row of a key is the key's score.
//! Measured on the 2-core development machine while other builds ran (load 6), the scan built
//! at opt-level 3 (`cargo test --config 'profile.dev.package.mailgate.opt-level=3' --lib
//! embed::vectors::tests::scan_timing -- --ignored --nocapture`): 23 to 26 ms per search (k = 20)
//! over 100,000 rows of 384 dimensions (36 MiB), so about 2.5 ms at 10,000; no index structure
//! is needed at mailbox sizes. The same run's commit of 36 MiB took 1.3 s (SHA-256 of a
//! dependency built without optimisation, plus the fsync).
//!
//! Durability: [`VectorStore::commit`] writes the whole store to `vectors.tmp`, fsyncs it,
//! renames it over `vectors.bin` and fsyncs the folder, so a crash (even `kill -9`) at any point
//! leaves the previous committed file or the new one, never a mix. The file ends with the
//! SHA-256 of everything before it and records the model's name: a file that fails the check,
//! or was written for another model or dimension, is not served; the store starts empty and
//! the next sync embeds every message again (its fill pass), since vectors are derived data.
//! The same holds when the endpoint starts answering vectors of another size under the same
//! model name ([`VectorStore::adopt_dimension`]): the old vectors are stale, dropped, and the
//! sync that notices embeds them again; it never stops the text half of a sync.

use std::collections::HashMap;
use std::io::{self, Write as _};
use std::sync::Arc;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt as _};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt as _, Permissions, PermissionsExt as _};
use sha2::{Digest as _, Sha256};

use super::chunk::MAX_CHUNKS;
use super::wire::MAX_DIMENSION;
use crate::dir_fd;

pub(crate) const FILE: &str = "vectors.bin";
const TMP: &str = "vectors.tmp";
/// Format name and version 1.
const MAGIC: &[u8; 8] = b"MGVEC\0\0\x01";
const DIGEST_LEN: usize = 32;
/// Largest file read back (1M passages of 1,024 dimensions stay under it).
const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// Why the store refused a change or could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum VectorError {
    #[error("the vector file could not be written or read ({0:?})")]
    Io(io::ErrorKind),
    #[error("a message has {0} passages; at most 8 are kept")]
    TooManyChunks(usize),
    #[error("a message has no passage vector")]
    NoChunks,
    #[error("a vector has {got} dimensions where the store has {expected}")]
    Dimension { expected: usize, got: usize },
    #[error("a vector holds a non-finite number")]
    NotFinite,
    #[error("a vector is all zeros")]
    Zero,
    #[error("a message key is longer than 65,535 bytes")]
    KeyTooLong,
}

impl From<io::Error> for VectorError {
    fn from(error: io::Error) -> Self {
        VectorError::Io(error.kind())
    }
}

/// See the module doc. Rows live in flat arrays (`data` holds `dim` bytes per row) so a scan
/// walks memory in order; no f32 copy of a vector is kept.
pub(crate) struct VectorStore {
    dir: Dir,
    model: String,
    /// Dimension of every row; 0 while the store is empty and was never given one.
    dim: usize,
    /// The key of each row.
    rows: Vec<Arc<str>>,
    /// Each row's scale: value = i8 × scale, of the unit-length vector.
    scales: Vec<f32>,
    data: Vec<i8>,
    /// The rows of each key.
    index: HashMap<Arc<str>, Vec<usize>>,
    dirty: bool,
    changes: SizeChanges,
}

impl VectorStore {
    /// The store committed in `dir` for `model`, or an empty one (none yet, another model's,
    /// or unreadable: logged, then rebuilt by sync). A leftover `vectors.tmp` of a crashed
    /// commit is removed.
    pub(crate) fn open(dir: Dir, model: &str) -> Result<Self, VectorError> {
        match dir.remove_file(TMP) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        Self::open_readonly(dir, model)
    }

    /// Loads the committed vectors without touching the folder: the server's side, which must
    /// never remove the temp file a sync is writing.
    pub(crate) fn open_readonly(dir: Dir, model: &str) -> Result<Self, VectorError> {
        let mut store = VectorStore {
            dir,
            model: model.to_owned(),
            dim: 0,
            rows: Vec::new(),
            scales: Vec::new(),
            data: Vec::new(),
            index: HashMap::new(),
            dirty: false,
            changes: SizeChanges::default(),
        };
        let bytes = match read_file(&store.dir) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Ok(store),
            Err(e) => return Err(e.into()),
        };
        match decode(&bytes, model) {
            Some(decoded) => {
                store.dim = decoded.dim;
                for (key, chunks) in decoded.keys {
                    store.push_rows(&key, chunks);
                }
            }
            None => {
                tracing::warn!(
                    "the vector file is damaged or was written for another model; vectors are \
                     embedded again"
                );
                // The next commit replaces the file even if nothing else changes.
                store.dirty = true;
            }
        }
        Ok(store)
    }

    /// The size of the stored vectors; 0 while the store holds none.
    pub(crate) fn dimension(&self) -> usize {
        if self.rows.is_empty() { 0 } else { self.dim }
    }

    /// Drops `key`'s passages (nothing when it has none).
    pub(crate) fn remove(&mut self, key: &str) {
        let Some(mut rows) = self.index.remove(key) else {
            return;
        };
        self.dirty = true;
        // Highest first: each swap_remove moves the last row into the hole, and the last row
        // is never one still to be removed.
        rows.sort_unstable_by(|a, b| b.cmp(a));
        for row in rows {
            let last = self.rows.len() - 1;
            self.rows.swap_remove(row);
            self.scales.swap_remove(row);
            if row != last {
                let (head, tail) = self.data.split_at_mut(last * self.dim);
                head[row * self.dim..(row + 1) * self.dim].copy_from_slice(&tail[..self.dim]);
                if let Some(moved) = self.index.get_mut(&self.rows[row])
                    && let Some(slot) = moved.iter_mut().find(|r| **r == last)
                {
                    *slot = row;
                }
            }
            self.data.truncate(last * self.dim);
        }
    }

    /// The candidates without vectors, in the given order: what sync embeds when the endpoint
    /// is back ("fill vectors later").
    #[cfg(test)]
    pub(crate) fn keys_missing<'a>(
        &self,
        candidates: impl IntoIterator<Item = &'a str>,
    ) -> Vec<String> {
        candidates
            .into_iter()
            .filter(|key| !self.contains(key))
            .map(str::to_owned)
            .collect()
    }

    /// Messages with vectors.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// The `k` keys whose best passage is closest to `query` (cosine, approximated through the
    /// int8 rows), best first, ties by key. A query of another dimension finds nothing.
    #[cfg(test)]
    pub(crate) fn search(&self, query: &[f32], k: usize) -> Vec<(String, f32)> {
        self.search_where(query, k, |_| true)
    }

    /// The `k` keys whose best passage is closest to `query`, over the keys `keep` admits only
    /// (a search's folder).
    pub(crate) fn search_where(
        &self,
        query: &[f32],
        k: usize,
        keep: impl Fn(&str) -> bool,
    ) -> Vec<(String, f32)> {
        if k == 0 || self.rows.is_empty() || query.len() != self.dim {
            return Vec::new();
        }
        let Some((query_scale, query)) = quantise(query) else {
            return Vec::new();
        };
        let mut scored: Vec<(f32, usize)> = self
            .data
            .chunks_exact(self.dim)
            .zip(&self.scales)
            .enumerate()
            .filter(|(row, _)| keep(&self.rows[*row]))
            .map(|(row, (values, scale))| {
                let dot: i32 = values
                    .iter()
                    .zip(&query)
                    .map(|(&a, &b)| i32::from(a) * i32::from(b))
                    .sum();
                (dot as f32 * scale * query_scale, row)
            })
            .collect();
        // A key has at most MAX_CHUNKS rows, so the best k keys' best rows are among the best
        // k × MAX_CHUNKS rows: only those are sorted.
        let order = |a: &(f32, usize), b: &(f32, usize)| {
            b.0.total_cmp(&a.0)
                .then_with(|| self.rows[a.1].cmp(&self.rows[b.1]))
                .then_with(|| a.1.cmp(&b.1))
        };
        let keep = k.saturating_mul(MAX_CHUNKS).min(scored.len());
        if keep < scored.len() {
            scored.select_nth_unstable_by(keep, order);
            scored.truncate(keep);
        }
        scored.sort_unstable_by(order);
        let mut hits: Vec<(String, f32)> = Vec::with_capacity(k);
        for (score, row) in scored {
            let key = &self.rows[row];
            if hits.iter().all(|(seen, _)| seen.as_str() != &**key) {
                hits.push((key.to_string(), score));
                if hits.len() == k {
                    break;
                }
            }
        }
        hits
    }

    /// Makes every change so far durable (module doc); nothing to do when there is none.
    pub(crate) fn commit(&mut self) -> Result<(), VectorError> {
        if !self.dirty {
            return Ok(());
        }
        let bytes = self.encode()?;
        match self.dir.remove_file(TMP) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        let mut opts = OpenOptions::new();
        opts.write(true)
            .create_new(true)
            .mode(0o600)
            .follow(FollowSymlinks::No);
        let mut file = self.dir.open_with(TMP, &opts)?;
        file.set_permissions(Permissions::from_mode(0o600))?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        drop(file);
        self.dir.rename(TMP, &self.dir, FILE)?;
        dir_fd::sync(&self.dir)?;
        self.dirty = false;
        Ok(())
    }

    fn push_rows(&mut self, key: &str, chunks: Vec<Row>) {
        let key: Arc<str> = Arc::from(key);
        let mut rows = Vec::with_capacity(chunks.len());
        for (scale, values) in chunks {
            rows.push(self.rows.len());
            self.rows.push(Arc::clone(&key));
            self.scales.push(scale);
            self.data.extend_from_slice(&values);
        }
        self.index.insert(key, rows);
    }

    /// The file: magic, dimension (u32), model (u16 length + bytes), key count (u64), then per
    /// key its length (u16), bytes, passage count (u8) and each passage's scale (f32) and
    /// values; last the SHA-256 of all of it. Little-endian throughout; keys in sorted order so
    /// equal stores write equal files.
    fn encode(&self) -> Result<Vec<u8>, VectorError> {
        let mut out = Vec::with_capacity(self.data.len() + self.rows.len() * 8 + 64);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&u32::try_from(self.dim).unwrap_or(0).to_le_bytes());
        let model = self.model.as_bytes();
        let model_len = u16::try_from(model.len()).map_err(|_| VectorError::KeyTooLong)?;
        out.extend_from_slice(&model_len.to_le_bytes());
        out.extend_from_slice(model);
        out.extend_from_slice(&(self.index.len() as u64).to_le_bytes());
        let mut keys: Vec<(&Arc<str>, &Vec<usize>)> = self.index.iter().collect();
        keys.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (key, rows) in keys {
            let len = u16::try_from(key.len()).map_err(|_| VectorError::KeyTooLong)?;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(key.as_bytes());
            out.push(u8::try_from(rows.len()).map_err(|_| VectorError::TooManyChunks(rows.len()))?);
            for &row in rows {
                out.extend_from_slice(&self.scales[row].to_le_bytes());
                out.extend(
                    self.data[row * self.dim..(row + 1) * self.dim]
                        .iter()
                        .map(|&v| v.to_le_bytes()[0]),
                );
            }
        }
        let digest = Sha256::digest(&out);
        out.extend_from_slice(&digest);
        Ok(out)
    }
}

/// The unit-length `vector` as int8 values and their scale; `None` for a non-finite number. A
/// zero vector becomes zeros with scale 0 (it matches nothing).
/// A store's vectors as a sync sees them: which messages have some, and the changes the sync
/// makes (made durable by the store's next commit). [`VectorStore`] is the local store's; the
/// shared store's (`index::store::postgres::vectors`) keeps the same rules.
pub(crate) trait SyncVectors {
    fn contains(&self, key: &str) -> bool;
    /// Replaces `key`'s passages by `vectors` (1..=[`MAX_CHUNKS`], one dimension, finite).
    /// Nothing changes when they are refused.
    fn upsert(&mut self, key: &str, vectors: Vec<Vec<f32>>) -> Result<(), VectorError>;
    /// Makes `dim` the size of the store's vectors, as the endpoint now answers. Vectors of
    /// another size came from another model behind the same name (issue 27): no query of the
    /// new size can be compared with them, so they are all dropped as stale (at the next
    /// commit), and [`SyncVectors::take_refill`] tells the caller to embed their messages
    /// again. Returns how many messages lost their vectors: 0 when the size is the store's, the
    /// store is empty, or `dim` is not a size the store takes (then `upsert` refuses the
    /// vectors).
    fn adopt_dimension(&mut self, dim: usize) -> usize;
    /// How many times [`SyncVectors::adopt_dimension`] dropped the vectors since the store was
    /// opened: more than once in one sync is an endpoint that keeps changing its answer.
    fn restarts(&self) -> u32;
    /// Whether vectors were dropped since the last call (so every indexed message needs its
    /// vectors again), clearing it.
    fn take_refill(&mut self) -> bool;
}

impl SyncVectors for VectorStore {
    fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    fn upsert(&mut self, key: &str, vectors: Vec<Vec<f32>>) -> Result<(), VectorError> {
        if key.len() > usize::from(u16::MAX) {
            return Err(VectorError::KeyTooLong);
        }
        // An empty store takes the dimension of its first message (a new model may bring a
        // new one; `open` already dropped the old model's vectors).
        let expected = if self.rows.is_empty() || self.dim == 0 {
            vectors.first().map_or(0, Vec::len)
        } else {
            self.dim
        };
        check_passages(&vectors, expected)?;
        let mut quantised = Vec::with_capacity(vectors.len());
        for vector in &vectors {
            quantised.push(quantise(vector).ok_or(VectorError::NotFinite)?);
        }
        drop(vectors);
        self.remove(key);
        self.dim = expected;
        self.push_rows(key, quantised);
        self.dirty = true;
        Ok(())
    }

    fn adopt_dimension(&mut self, dim: usize) -> usize {
        if !self.changes.adopt(self.rows.is_empty(), self.dim, dim) {
            return 0;
        }
        let stale = self.index.len();
        self.rows.clear();
        self.scales.clear();
        self.data.clear();
        self.index.clear();
        self.dim = dim;
        self.dirty = true;
        stale
    }

    fn restarts(&self) -> u32 {
        self.changes.restarts
    }

    fn take_refill(&mut self) -> bool {
        std::mem::take(&mut self.changes.refill)
    }
}

/// The size changes a store's vectors saw since it was opened ([`SyncVectors::adopt_dimension`]).
#[derive(Default)]
pub(crate) struct SizeChanges {
    /// Times every vector was dropped for another size.
    pub(crate) restarts: u32,
    /// A drop whose messages the caller has not yet been told to embed again.
    pub(crate) refill: bool,
}

impl SizeChanges {
    /// Whether vectors of size `held` (`empty`: none) are stale now the endpoint answers `new`:
    /// another size the stores take. Recorded as a restart when they are.
    pub(crate) fn adopt(&mut self, empty: bool, held: usize, new: usize) -> bool {
        if empty || held == new || !(1..=MAX_DIMENSION).contains(&new) {
            return false;
        }
        self.restarts += 1;
        self.refill = true;
        true
    }
}

/// Refuses a message's passages that no store keeps: none, more than [`MAX_CHUNKS`], a size
/// other than `expected` or outside `1..=MAX_DIMENSION`. Every store checks the same way.
pub(crate) fn check_passages(vectors: &[Vec<f32>], expected: usize) -> Result<(), VectorError> {
    if vectors.is_empty() {
        return Err(VectorError::NoChunks);
    }
    if vectors.len() > MAX_CHUNKS {
        return Err(VectorError::TooManyChunks(vectors.len()));
    }
    match vectors
        .iter()
        .find(|v| v.len() != expected || !(1..=MAX_DIMENSION).contains(&v.len()))
    {
        Some(vector) => Err(VectorError::Dimension {
            expected,
            got: vector.len(),
        }),
        None => Ok(()),
    }
}

/// `vector` scaled to length 1 (so a dot product is its cosine), `None` when a number is not
/// finite or every number is 0 (no direction to compare).
pub(crate) fn unit_length(vector: &[f32]) -> Option<Vec<f32>> {
    let norm = norm(vector)?;
    (norm > 0.0).then(|| {
        vector
            .iter()
            .map(|&x| (f64::from(x) / norm) as f32)
            .collect()
    })
}

/// The length of `vector`, `None` when a number is not finite.
fn norm(vector: &[f32]) -> Option<f64> {
    vector.iter().all(|x| x.is_finite()).then(|| {
        vector
            .iter()
            .map(|&x| f64::from(x) * f64::from(x))
            .sum::<f64>()
            .sqrt()
    })
}

fn quantise(vector: &[f32]) -> Option<Row> {
    let norm = norm(vector)?;
    let max = vector
        .iter()
        .map(|&x| f64::from(x).abs())
        .fold(0.0, f64::max);
    if norm == 0.0 || max == 0.0 {
        return Some((0.0, vec![0; vector.len()]));
    }
    let step = max / norm / 127.0;
    let values = vector
        .iter()
        .map(|&x| (f64::from(x) / norm / step).round().clamp(-127.0, 127.0) as i8)
        .collect();
    Some((step as f32, values))
}

/// `vectors.bin`'s bytes, `None` when there is none. The file passes the checks of every index
/// file (`path_guard::read_file_in`: a regular file owned by the effective user, mode `0600`,
/// one hard link), on its opened descriptor.
fn read_file(dir: &Dir) -> io::Result<Option<Vec<u8>>> {
    use crate::path_guard::{ModeRule, PrivateFileError, read_file_in};
    read_file_in(dir, FILE, ModeRule::Private, MAX_FILE_BYTES).map_err(|e| match e {
        PrivateFileError::TooLarge => io::Error::from(io::ErrorKind::FileTooLarge),
        PrivateFileError::Io(kind) => io::Error::from(kind),
        refused => io::Error::new(io::ErrorKind::PermissionDenied, refused),
    })
}

/// One passage as stored: its scale and its int8 values.
type Row = (f32, Vec<i8>);

struct Decoded {
    dim: usize,
    keys: Vec<(String, Vec<Row>)>,
}

/// The file's content when its digest holds, its model is `model` and every field is in
/// range; `None` otherwise.
fn decode(bytes: &[u8], model: &str) -> Option<Decoded> {
    let (body, digest) = bytes.split_at_checked(bytes.len().checked_sub(DIGEST_LEN)?)?;
    if Sha256::digest(body).as_slice() != digest {
        return None;
    }
    let mut reader = Reader(body);
    if reader.take(MAGIC.len())? != MAGIC {
        return None;
    }
    let dim = usize::try_from(u32::from_le_bytes(reader.array()?)).ok()?;
    let model_len = usize::from(u16::from_le_bytes(reader.array()?));
    if reader.take(model_len)? != model.as_bytes() || dim > MAX_DIMENSION {
        return None;
    }
    let count = u64::from_le_bytes(reader.array()?);
    let mut keys = Vec::new();
    for _ in 0..count {
        let len = usize::from(u16::from_le_bytes(reader.array()?));
        let key = std::str::from_utf8(reader.take(len)?).ok()?.to_owned();
        let chunks = usize::from(reader.take(1)?[0]);
        if !(1..=MAX_CHUNKS).contains(&chunks) || dim == 0 {
            return None;
        }
        let mut rows = Vec::with_capacity(chunks);
        for _ in 0..chunks {
            let scale = f32::from_le_bytes(reader.array()?);
            if !scale.is_finite() {
                return None;
            }
            let values = reader.take(dim)?.iter().map(|&b| b as i8).collect();
            rows.push((scale, values));
        }
        keys.push((key, rows));
    }
    reader.0.is_empty().then_some(Decoded { dim, keys })
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.0.split_at_checked(n)?;
        self.0 = tail;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
}

#[cfg(test)]
mod tests;
