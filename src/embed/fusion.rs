//! Reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009): an item's score is the sum over
//! the rankings that list it of `1 / (k + rank)`, rank counted from 1. It needs no score
//! calibration between the lexical and the vector ranking, only their orders. Determinism: an
//! item's contributions are summed smallest first (so the result does not depend on the order
//! of the lists), and equal scores are ordered by the item itself. An item repeated within one
//! list counts at its first rank only.

use std::collections::HashMap;

/// The constant of the paper and of most search engines.
pub(crate) const RRF_K: f32 = 60.0;

/// Every item of `lists` once, best first, with its fused score.
pub(crate) fn rrf(lists: &[&[String]], k: f32) -> Vec<(String, f32)> {
    let mut ranks: HashMap<&str, Vec<usize>> = HashMap::new();
    for list in lists {
        let mut seen = std::collections::HashSet::new();
        for (rank, item) in list.iter().enumerate() {
            if seen.insert(item.as_str()) {
                ranks.entry(item.as_str()).or_default().push(rank + 1);
            }
        }
    }
    let k = f64::from(k);
    let mut fused: Vec<(String, f32)> = ranks
        .into_iter()
        .map(|(item, mut ranks)| {
            // Largest rank first: smallest terms first, the same sum whatever the list order.
            ranks.sort_unstable_by(|a, b| b.cmp(a));
            let score: f64 = ranks.iter().map(|&r| 1.0 / (k + r as f64)).sum();
            (item.to_owned(), score as f32)
        })
        .collect();
    fused.sort_by(|(a, sa), (b, sb)| sb.total_cmp(sa).then_with(|| a.cmp(b)));
    fused
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn owned(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn agreement_wins_and_ties_go_by_name() {
        let lexical = owned(&["b", "a", "c"]);
        let vector = owned(&["a", "d", "b"]);
        let fused = rrf(&[&lexical, &vector], RRF_K);
        let order: Vec<&str> = fused.iter().map(|(s, _)| s.as_str()).collect();
        // a: 1/62 + 1/61, b: 1/61 + 1/63, c: 1/63, d: 1/62.
        assert_eq!(order, ["a", "b", "d", "c"]);
        assert!((fused[0].1 - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-6);
        let tie = rrf(&[&owned(&["y"]), &owned(&["x"])], RRF_K);
        assert_eq!(tie[0].0, "x", "equal scores: by name");
        assert!(rrf(&[], RRF_K).is_empty());
    }

    #[test]
    fn a_repeat_within_a_list_counts_once() {
        let fused = rrf(&[&owned(&["a", "a", "b"])], RRF_K);
        assert_eq!(fused.len(), 2);
        assert!((fused[0].1 - 1.0 / 61.0).abs() < 1e-7);
    }

    fn lists() -> impl Strategy<Value = Vec<Vec<String>>> {
        proptest::collection::vec(
            proptest::collection::vec("[a-h]", 0..8).prop_map(|mut v| {
                v.dedup();
                v
            }),
            0..5,
        )
    }

    proptest! {
        #[test]
        fn every_item_appears_once(lists in lists()) {
            let refs: Vec<&[String]> = lists.iter().map(Vec::as_slice).collect();
            let fused = rrf(&refs, RRF_K);
            let mut names: Vec<&String> = fused.iter().map(|(s, _)| s).collect();
            names.sort();
            let before = names.len();
            names.dedup();
            prop_assert_eq!(before, names.len());
            let mut all: Vec<&String> = lists.iter().flatten().collect();
            all.sort();
            all.dedup();
            prop_assert_eq!(names, all);
        }

        #[test]
        fn the_order_of_the_lists_does_not_matter(lists in lists(), seed in any::<u64>()) {
            let refs: Vec<&[String]> = lists.iter().map(Vec::as_slice).collect();
            let mut shuffled = refs.clone();
            // A deterministic permutation from the seed.
            for i in (1..shuffled.len()).rev() {
                let j = (seed.wrapping_mul(6364136223846793005).wrapping_add(i as u64) >> 33) as usize % (i + 1);
                shuffled.swap(i, j);
            }
            prop_assert_eq!(rrf(&refs, RRF_K), rrf(&shuffled, RRF_K));
        }

        #[test]
        fn an_item_first_everywhere_is_first(lists in lists(), top in "[x-z]") {
            let lists: Vec<Vec<String>> = lists
                .into_iter()
                .map(|mut list| {
                    list.insert(0, top.clone());
                    list
                })
                .collect();
            prop_assume!(!lists.is_empty());
            let refs: Vec<&[String]> = lists.iter().map(Vec::as_slice).collect();
            let fused = rrf(&refs, RRF_K);
            prop_assert_eq!(&fused[0].0, &top);
            if let Some(second) = fused.get(1) {
                prop_assert!(fused[0].1 > second.1, "strictly first");
            }
        }
    }
}
