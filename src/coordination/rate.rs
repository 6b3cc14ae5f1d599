//! Per-account rate limits as token buckets on the monotonic clock (issue 12 item 4): one
//! [`TokenBucket`] per account and protocol, shared by every tool that reaches that account, so
//! the limit is the account's and not a tool's. Invariants: a bucket holds at most `capacity`
//! tokens (a full window's worth may go out in one burst), refills continuously at `capacity`
//! per `window` in exact integer arithmetic (no float drift, no overflow however long it idles),
//! and in any interval of length `d` grants at most `capacity + capacity * d / window` tokens;
//! a refusal says how long until one token is there; a poisoned lock refuses (fails closed).
//! Who may call it: the backends, before each rate-limited command; a refusal becomes
//! `BackendError::Throttled`, i.e. `RATE_LIMITED` with a retry-after hint.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A token bucket of `capacity` tokens refilled at `capacity` per `window`.
///
/// The level is kept in *units* where one token is `window_ns` units and each nanosecond adds
/// `capacity` units: refill is then an integer multiplication and the wait for the next token an
/// exact (rounded-up) division, so "wait exactly the hint, then take" always succeeds.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    capacity: u32,
    /// The window in nanoseconds, at least 1.
    window_ns: u128,
    state: Mutex<Level>,
}

#[derive(Debug)]
struct Level {
    /// In units (see [`TokenBucket`]); at most `capacity * window_ns`.
    units: u128,
    /// When `units` was last brought up to date. Never moves backwards.
    at: Instant,
}

impl TokenBucket {
    /// A full bucket. A capacity of 0 or a zero window cannot come from the config (its bounds
    /// start at 1); they are raised to 1 token and 1 ns rather than dividing by zero.
    pub(crate) fn new(capacity: u32, window: Duration) -> Self {
        Self::starting_at(capacity, window, Instant::now())
    }

    fn starting_at(capacity: u32, window: Duration, start: Instant) -> Self {
        let capacity = capacity.max(1);
        let window_ns = window.as_nanos().max(1);
        Self {
            capacity,
            window_ns,
            state: Mutex::new(Level {
                units: u128::from(capacity) * window_ns,
                at: start,
            }),
        }
    }

    /// Takes one token now, or says how long until one is available (never zero). Rounding
    /// the wait for display (whole seconds, at least 1) is the caller's job.
    pub(crate) fn try_take(&self) -> Result<(), Duration> {
        self.try_take_at(Instant::now())
    }

    /// [`Self::try_take`] at a given instant, so tests need no waiting. An instant earlier than
    /// one already seen (two callers racing to the lock) counts as no time passing.
    fn try_take_at(&self, now: Instant) -> Result<(), Duration> {
        let Ok(mut level) = self.state.lock() else {
            // A panic while holding the lock may have left the level half-updated: refuse, and
            // hint a whole window, as nothing here can tell when it would be sound again.
            return Err(self.window());
        };
        let elapsed = now.saturating_duration_since(level.at).as_nanos();
        let full = u128::from(self.capacity) * self.window_ns;
        // Saturating: after an absurd idle time the product may overflow; the bucket is full.
        level.units = level
            .units
            .saturating_add(elapsed.saturating_mul(u128::from(self.capacity)))
            .min(full);
        level.at = level.at.max(now);
        if level.units >= self.window_ns {
            level.units -= self.window_ns;
            return Ok(());
        }
        let missing = self.window_ns - level.units;
        let wait_ns = missing.div_ceil(u128::from(self.capacity));
        Err(nanos(wait_ns))
    }

    fn window(&self) -> Duration {
        nanos(self.window_ns)
    }
}

/// A nanosecond count as a [`Duration`], saturating (a window fits in a `Duration`, so every
/// wait computed from one does too).
fn nanos(ns: u128) -> Duration {
    const NS_PER_SEC: u128 = 1_000_000_000;
    let secs = u64::try_from(ns / NS_PER_SEC).unwrap_or(u64::MAX);
    // The remainder is below 10^9, so it fits in a u32.
    let sub = u32::try_from(ns % NS_PER_SEC).unwrap_or(0);
    Duration::new(secs, sub)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::{Arc, Barrier};

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn a_full_window_bursts_then_the_next_waits_for_one_token() {
        let start = Instant::now();
        let bucket = TokenBucket::starting_at(60, MINUTE, start);
        for _ in 0..60 {
            assert_eq!(bucket.try_take_at(start), Ok(()));
        }
        // 60 per minute: one token per second.
        assert_eq!(bucket.try_take_at(start), Err(Duration::from_secs(1)));
        // Part of the way there, the wait shrinks by exactly the time passed.
        let later = start + Duration::from_millis(400);
        assert_eq!(bucket.try_take_at(later), Err(Duration::from_millis(600)));
    }

    #[test]
    fn waiting_exactly_the_hint_is_enough_and_a_nanosecond_less_is_not() {
        let start = Instant::now();
        // 7 per 10 s: a token every 1.428571428..s, so the hint is rounded up to whole ns.
        let bucket = TokenBucket::starting_at(7, Duration::from_secs(10), start);
        for _ in 0..7 {
            assert_eq!(bucket.try_take_at(start), Ok(()));
        }
        let wait = bucket.try_take_at(start).expect_err("empty");
        assert_eq!(wait, Duration::from_nanos(1_428_571_429));
        let early = start + wait - Duration::from_nanos(1);
        assert_eq!(bucket.try_take_at(early), Err(Duration::from_nanos(1)));
        assert_eq!(bucket.try_take_at(start + wait), Ok(()));
        // That was the only token: the refill is partial, not the whole bucket.
        assert!(bucket.try_take_at(start + wait).is_err());
    }

    #[test]
    fn a_huge_idle_time_refills_to_capacity_and_no_further() {
        let start = Instant::now();
        let bucket = TokenBucket::starting_at(u32::MAX, Duration::MAX, start);
        assert_eq!(bucket.try_take_at(start), Ok(()));
        let small = TokenBucket::starting_at(3, MINUTE, start);
        for _ in 0..3 {
            assert_eq!(small.try_take_at(start), Ok(()));
        }
        // Years of idling (as far as `Instant` can go) leave the bucket at capacity: 3, not more.
        let far = [
            Duration::from_secs(u64::from(u32::MAX)),
            Duration::from_secs(1 << 40),
        ]
        .into_iter()
        .find_map(|d| start.checked_add(d))
        .expect("a far instant");
        for _ in 0..3 {
            assert_eq!(small.try_take_at(far), Ok(()));
        }
        assert_eq!(small.try_take_at(far), Err(Duration::from_secs(20)));
    }

    #[test]
    fn a_capacity_of_one_allows_one_per_window() {
        let start = Instant::now();
        let bucket = TokenBucket::starting_at(1, Duration::from_secs(3600), start);
        assert_eq!(bucket.try_take_at(start), Ok(()));
        assert_eq!(
            bucket.try_take_at(start + Duration::from_secs(600)),
            Err(Duration::from_secs(3000))
        );
        assert_eq!(
            bucket.try_take_at(start + Duration::from_secs(3600)),
            Ok(())
        );
        assert!(
            bucket
                .try_take_at(start + Duration::from_secs(3600))
                .is_err()
        );
        // The config's bounds start at 1, but a 0 never divides by zero: it acts as 1.
        let zero = TokenBucket::starting_at(0, Duration::ZERO, start);
        assert_eq!(zero.try_take_at(start), Ok(()));
        assert_eq!(zero.try_take_at(start), Err(Duration::from_nanos(1)));
    }

    #[test]
    fn an_earlier_instant_than_one_seen_counts_as_no_time() {
        let start = Instant::now();
        let bucket = TokenBucket::starting_at(1, MINUTE, start);
        let later = start + MINUTE;
        assert_eq!(bucket.try_take_at(later), Ok(()));
        // A racing caller that read the clock before `later` gets no refill from going back.
        assert_eq!(bucket.try_take_at(start), Err(MINUTE));
        // Nor does the clock moving back and forth count the same minute twice.
        assert_eq!(bucket.try_take_at(later), Err(MINUTE));
    }

    #[test]
    fn concurrent_takers_never_exceed_the_capacity() {
        const THREADS: usize = 8;
        const TRIES: usize = 40;
        let start = Instant::now();
        let bucket = Arc::new(TokenBucket::starting_at(
            50,
            Duration::from_secs(3600),
            start,
        ));
        let barrier = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let bucket = Arc::clone(&bucket);
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    barrier.wait();
                    (0..TRIES)
                        .filter(|_| bucket.try_take_at(start).is_ok())
                        .count()
                })
            })
            .collect();
        let granted: usize = handles
            .into_iter()
            .map(|h| h.join().expect("a taker thread"))
            .sum();
        assert_eq!(granted, 50, "every token once, none twice");
        // And on the real clock: an hour's window refills far less than a token during a test.
        let real = Arc::new(TokenBucket::new(20, Duration::from_secs(3600)));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let real = Arc::clone(&real);
                std::thread::spawn(move || (0..TRIES).filter(|_| real.try_take().is_ok()).count())
            })
            .collect();
        let granted: usize = handles
            .into_iter()
            .map(|h| h.join().expect("a taker thread"))
            .sum();
        assert_eq!(granted, 20);
    }

    #[test]
    fn a_poisoned_bucket_refuses() {
        let bucket = Arc::new(TokenBucket::new(5, MINUTE));
        let poisoner = Arc::clone(&bucket);
        let _ = std::thread::spawn(move || {
            let _guard = poisoner.state.lock();
            panic!("poison the lock");
        })
        .join();
        assert_eq!(bucket.try_take(), Err(MINUTE));
    }

    proptest! {
        /// For any sequence of take times, the grants inside any interval `[t, t + d]` number at
        /// most `capacity + capacity * d / window`; and a refusal's hint is exact: waiting it
        /// (with no other taker) gets a token.
        #[test]
        fn grants_in_any_interval_stay_within_capacity_plus_refill(
            capacity in 1u32..12,
            window_ms in 1u64..5_000,
            gaps_ms in prop::collection::vec(0u64..700, 1..120),
        ) {
            let window = Duration::from_millis(window_ms);
            let start = Instant::now();
            let bucket = TokenBucket::starting_at(capacity, window, start);
            let mut now = start;
            let mut granted: Vec<Duration> = Vec::new();
            for gap in gaps_ms {
                now += Duration::from_millis(gap);
                if bucket.try_take_at(now).is_ok() {
                    granted.push(now - start);
                }
            }
            let cap = u128::from(capacity);
            let window_ns = window.as_nanos();
            for (i, first) in granted.iter().enumerate() {
                for (j, last) in granted.iter().enumerate().skip(i) {
                    let count = u128::try_from(j - i + 1).unwrap_or(u128::MAX);
                    let d = (*last - *first).as_nanos();
                    // count <= cap + cap * d / window, multiplied through by window.
                    prop_assert!(
                        count * window_ns <= cap * window_ns + cap * d,
                        "{count} grants in {d} ns with {cap} per {window_ns} ns"
                    );
                }
            }
            // Drain, then the hint is exact.
            while bucket.try_take_at(now).is_ok() {}
            let wait = bucket.try_take_at(now).expect_err("drained");
            prop_assert!(wait > Duration::ZERO && wait <= window);
            prop_assert!(bucket.try_take_at(now + wait).is_ok());
        }
    }
}
