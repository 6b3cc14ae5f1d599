#![expect(
    clippy::disallowed_methods,
    reason = "tests corrupt and inspect the store's files directly"
)]

use std::time::Instant;

use super::*;

const MODEL: &str = "multilingual-e5-small-q4";

fn folder() -> (tempfile::TempDir, Dir) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).expect("open");
    (tmp, dir)
}

fn reopen(tmp: &tempfile::TempDir, model: &str) -> VectorStore {
    let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).expect("open");
    VectorStore::open(dir, model).expect("store")
}

/// A deterministic pseudo-random vector (xorshift), values in [-1, 1).
fn vector(seed: u64, dim: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..dim)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn keys(hits: &[(String, f32)]) -> Vec<&str> {
    hits.iter().map(|(k, _)| k.as_str()).collect()
}

#[test]
fn the_closest_passage_ranks_its_message_first() {
    let (_tmp, dir) = folder();
    let mut store = VectorStore::open(dir, MODEL).expect("store");
    store
        .upsert("m1", vec![vector(1, 384), vector(2, 384)])
        .expect("upsert");
    store.upsert("m2", vec![vector(3, 384)]).expect("upsert");
    store.upsert("m3", vec![vector(4, 384)]).expect("upsert");
    assert_eq!(store.len(), 3);
    // Close to m1's second passage, scaled (cosine ignores length).
    let query: Vec<f32> = vector(2, 384).iter().map(|x| x * 3.0).collect();
    let hits = store.search(&query, 2);
    assert_eq!(hits[0].0, "m1");
    assert!((hits[0].1 - 1.0).abs() < 0.01, "cosine ≈ 1: {}", hits[0].1);
    assert_eq!(hits.len(), 2, "k keys, each once");
    assert_ne!(hits[1].0, "m1");
    assert!(store.search(&query, 0).is_empty());
    assert!(
        store.search(&vector(2, 10), 3).is_empty(),
        "another dimension"
    );
}

#[test]
fn quantised_scores_track_the_cosine() {
    for seed in 0..50 {
        let (a, b) = (vector(seed, 384), vector(seed + 1000, 384));
        let (sa, qa) = quantise(&a).expect("finite");
        let (sb, qb) = quantise(&b).expect("finite");
        let dot: i32 = qa
            .iter()
            .zip(&qb)
            .map(|(&x, &y)| i32::from(x) * i32::from(y))
            .sum();
        let approx = dot as f32 * sa * sb;
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        let exact = a.iter().zip(&b).map(|(x, y)| x * y).sum::<f32>() / (norm(&a) * norm(&b));
        assert!((approx - exact).abs() < 0.02, "{approx} vs {exact}");
    }
    assert_eq!(quantise(&[0.0, 0.0]), Some((0.0, vec![0, 0])));
    assert_eq!(quantise(&[1.0, f32::NAN]), None);
}

#[test]
fn upsert_replaces_remove_drops_and_refusals_change_nothing() {
    let (_tmp, dir) = folder();
    let mut store = VectorStore::open(dir, MODEL).expect("store");
    for i in 0..20 {
        store
            .upsert(&format!("m{i}"), vec![vector(i, 16); (i % 3 + 1) as usize])
            .expect("upsert");
    }
    store.upsert("m5", vec![vector(500, 16)]).expect("replace");
    assert_eq!(store.search(&vector(500, 16), 1)[0].0, "m5");
    for i in (0..20).step_by(2) {
        store.remove(&format!("m{i}"));
    }
    store.remove("never-there");
    assert_eq!(store.len(), 10);
    // Every remaining key still finds exactly its own rows after the swaps.
    for i in (1..20).step_by(2) {
        let key = format!("m{i}");
        let seed = if i == 5 { 500 } else { i };
        assert_eq!(store.search(&vector(seed, 16), 1)[0].0, key, "{key}");
        assert!(store.contains(&key));
    }
    assert_eq!(store.rows.len(), store.scales.len());
    assert_eq!(store.data.len(), store.rows.len() * 16);
    assert_eq!(store.keys_missing(["m1", "m2", "m3", "new"]), ["m2", "new"]);
    for refused in [
        store.upsert("m1", vec![]),
        store.upsert("m1", vec![vector(1, 16); 9]),
        store.upsert("m1", vec![vector(1, 17)]),
        store.upsert("m1", vec![vector(1, 16), vec![f32::INFINITY; 16]]),
    ] {
        assert!(refused.is_err());
    }
    assert_eq!(store.search(&vector(1, 16), 1)[0].0, "m1", "m1 kept");
}

/// Issue 27: vectors of another size than the endpoint now answers are stale: dropped all at
/// once (the caller is told once to embed them again), then the store takes the new size.
#[test]
fn another_vector_size_drops_every_vector_as_stale() {
    let (tmp, dir) = folder();
    let mut store = VectorStore::open(dir, MODEL).expect("store");
    assert_eq!(
        store.adopt_dimension(16),
        0,
        "an empty store has no size yet"
    );
    for i in 0..3 {
        store
            .upsert(&format!("m{i}"), vec![vector(i, 16)])
            .expect("upsert");
    }
    store.commit().expect("commit");
    assert_eq!(store.dimension(), 16);
    assert_eq!(store.adopt_dimension(16), 0, "the same size keeps them");
    for refused in [0, MAX_DIMENSION + 1] {
        assert_eq!(store.adopt_dimension(refused), 0, "{refused}");
    }
    assert!(!store.take_refill());
    assert_eq!((store.len(), store.restarts()), (3, 0));

    assert_eq!(store.adopt_dimension(24), 3);
    assert_eq!(
        (store.len(), store.dimension(), store.restarts()),
        (0, 0, 1)
    );
    assert!(store.take_refill(), "the caller embeds them again");
    assert!(!store.take_refill(), "told once");
    assert!(store.search(&vector(0, 16), 3).is_empty());
    store
        .upsert("m0", vec![vector(0, 24)])
        .expect("the new size");
    assert_eq!(store.dimension(), 24);
    assert_eq!(keys(&store.search(&vector(0, 24), 3)), ["m0"]);
    store.commit().expect("commit");
    let again = reopen(&tmp, MODEL);
    assert_eq!((again.len(), again.dimension()), (1, 24));
}

#[test]
fn committed_vectors_survive_a_reopen_and_uncommitted_ones_do_not() {
    let (tmp, dir) = folder();
    let mut store = VectorStore::open(dir, MODEL).expect("store");
    store
        .upsert("a", vec![vector(1, 32), vector(2, 32)])
        .expect("upsert");
    store.upsert("b", vec![vector(3, 32)]).expect("upsert");
    store.commit().expect("commit");
    store
        .upsert("c", vec![vector(4, 32)])
        .expect("not committed");
    let before = store.search(&vector(2, 32), 3);
    let again = reopen(&tmp, MODEL);
    assert_eq!(again.len(), 2);
    assert!(!again.contains("c"));
    let after = again.search(&vector(2, 32), 3);
    assert_eq!(keys(&after), ["a", "b"]);
    assert_eq!(before[0], after[0], "the same scores from the file");
    let mode = std::fs::metadata(tmp.path().join(FILE))
        .expect("file")
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
}

#[test]
fn a_crash_mid_commit_leaves_the_previous_state() {
    let (tmp, dir) = folder();
    let mut store = VectorStore::open(dir, MODEL).expect("store");
    store.upsert("a", vec![vector(1, 32)]).expect("upsert");
    store.commit().expect("commit");
    // A commit killed after writing part of the temp file: the rename never happened.
    let full = store.encode().expect("encode");
    std::fs::write(tmp.path().join(TMP), &full[..full.len() / 2]).expect("half a file");
    let again = reopen(&tmp, MODEL);
    assert_eq!(again.len(), 1);
    assert!(!tmp.path().join(TMP).exists(), "the leftover is removed");
}

#[test]
fn a_damaged_or_foreign_file_is_not_served() {
    let (tmp, dir) = folder();
    let mut store = VectorStore::open(dir, MODEL).expect("store");
    store.upsert("a", vec![vector(1, 32)]).expect("upsert");
    store.commit().expect("commit");
    assert_eq!(
        reopen(&tmp, "another-model").len(),
        0,
        "another model's vectors"
    );
    let path = tmp.path().join(FILE);
    let good = std::fs::read(&path).expect("read");
    for damaged in [
        good[..good.len() - 1].to_vec(),
        {
            let mut flipped = good.clone();
            flipped[20] ^= 1;
            flipped
        },
        Vec::new(),
    ] {
        std::fs::write(&path, &damaged).expect("damage");
        let mut store = reopen(&tmp, MODEL);
        assert_eq!(store.len(), 0);
        // The next commit replaces the damaged file even with nothing new in it.
        store.commit().expect("commit");
        assert_eq!(reopen(&tmp, MODEL).len(), 0);
        assert_ne!(std::fs::read(&path).expect("read"), damaged);
    }
}

#[test]
fn decode_refuses_what_encode_never_writes() {
    let (_tmp, dir) = folder();
    let mut store = VectorStore::open(dir, MODEL).expect("store");
    store.upsert("a", vec![vector(1, 4)]).expect("upsert");
    let bytes = store.encode().expect("encode");
    assert!(decode(&bytes, MODEL).is_some());
    // Re-sealed with a valid digest but a chunk count of 0.
    let mut body = bytes[..bytes.len() - DIGEST_LEN].to_vec();
    let count_at = MAGIC.len() + 4 + 2 + MODEL.len() + 8 + 2 + 1;
    body[count_at] = 0;
    let digest = Sha256::digest(&body);
    body.extend_from_slice(&digest);
    assert!(decode(&body, MODEL).is_none());
}

/// Timing of the brute-force scan (module doc), not a check: run it by hand with
/// the command in the module doc (`cargo test --release …` works too, with a longer build).
#[test]
#[ignore = "a measurement, run by hand"]
#[expect(clippy::print_stderr, reason = "the measurement is the output")]
fn scan_timing() {
    let (_tmp, dir) = folder();
    let mut store = VectorStore::open(dir, MODEL).expect("store");
    for i in 0..100_000u64 {
        store
            .upsert(&format!("msg-{i}"), vec![vector(i, 384)])
            .expect("upsert");
    }
    let queries: Vec<Vec<f32>> = (0..20).map(|i| vector(1_000_000 + i, 384)).collect();
    let started = Instant::now();
    for query in &queries {
        assert_eq!(store.search(query, 20).len(), 20);
    }
    let per_query = started.elapsed() / 20;
    let started = Instant::now();
    store.commit().expect("commit");
    let commit = started.elapsed();
    eprintln!(
        "100000 rows x 384: {per_query:?} per search (k=20), commit {commit:?}, {} MiB",
        store.data.len() / (1024 * 1024)
    );
}

/// The vectors file is an index file: one readable by others, or with a second name, is never
/// loaded (issue 27: "index files get the owner/mode/link checks SECURITY.md promises").
#[test]
fn a_vector_file_open_to_others_or_hard_linked_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let (tmp, dir) = folder();
    let mut store = VectorStore::open(dir, MODEL).expect("store");
    store.upsert("m1", vec![vector(1, 8)]).expect("upsert");
    store.commit().expect("commit");
    assert_eq!(reopen(&tmp, MODEL).len(), 1, "the private file loads");
    let file = tmp.path().join(FILE);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let open = |tmp: &tempfile::TempDir| {
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).expect("open");
        VectorStore::open_readonly(dir, MODEL)
    };
    assert!(open(&tmp).is_err(), "a file readable by others was loaded");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::fs::hard_link(&file, tmp.path().join("second-name")).expect("link");
    assert!(open(&tmp).is_err(), "a hard-linked file was loaded");
}
