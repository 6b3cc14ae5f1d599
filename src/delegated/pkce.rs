//! The `--browser` sign-in's one-time secrets (issue 37): the PKCE proof key (RFC 7636, S256
//! only) and the `state` value the loopback receiver expects back.
//!
//! Why: the authorization code comes back through the browser, in a URL any local process (or
//! a page that guesses the port) can also send to the loopback receiver. PKCE makes a stolen
//! code worthless without the verifier that never leaves this process, and `state` lets the
//! receiver tell the provider's redirect from a stray or forged request (RFC 6749 §10.12).
//!
//! Invariants:
//! - Both values are 32 bytes from the operating system's random number generator (not a
//!   userspace generator seeded from it: these are one-shot secrets, and the cost is nothing),
//!   base64url without padding, 43 characters: inside RFC 7636's 43-128 and its unreserved
//!   charset. A failing generator is an error, never a weaker value.
//! - Only S256 is offered: `plain` would put the verifier itself in the browser's URL.
//! - The verifier and the state are wiped from memory on drop, are not `Clone`, and their
//!   `Debug` prints no part of them. The state is compared in constant time.
//!
//! Who calls it: `loopback` (the authorization URL, the state check) and the token client's
//! code exchange (the verifier).

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::TryRng as _;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;
use zeroize::Zeroizing;

/// The `code_challenge_method` sent with the challenge.
pub(crate) const CHALLENGE_METHOD: &str = "S256";
/// Random bytes behind a verifier or a state (256 bits: RFC 7636 §7.1's recommendation).
const SECRET_BYTES: usize = 32;

/// The operating system's random number generator failed; nothing was generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the operating system's random number generator failed")]
pub(crate) struct RandomError;

/// A PKCE pair: the verifier kept here, the challenge sent in the authorization URL.
#[derive(Debug)]
pub(crate) struct Pkce {
    verifier: PkceVerifier,
    /// `base64url(sha256(verifier))`: public by design (it is in the browser's URL).
    challenge: String,
}

impl Pkce {
    /// A fresh pair from the operating system's random number generator.
    pub(crate) fn generate() -> Result<Pkce, RandomError> {
        Ok(Pkce::from_bytes(&*random_bytes()?))
    }

    /// The pair whose verifier is `bytes` in base64url (RFC 7636 §4.1).
    fn from_bytes(bytes: &[u8; SECRET_BYTES]) -> Pkce {
        let verifier = PkceVerifier(Zeroizing::new(URL_SAFE_NO_PAD.encode(bytes)));
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.expose().as_bytes()));
        Pkce {
            verifier,
            challenge,
        }
    }

    /// The `code_challenge` (method [`CHALLENGE_METHOD`]).
    pub(crate) fn challenge(&self) -> &str {
        &self.challenge
    }

    /// The verifier, for the code exchange.
    pub(crate) fn verifier(&self) -> &PkceVerifier {
        &self.verifier
    }
}

/// The `code_verifier`: whoever holds it with the code can redeem the code.
pub(crate) struct PkceVerifier(Zeroizing<String>);

impl PkceVerifier {
    /// The value itself, for the token request's body.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for PkceVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PkceVerifier(<redacted>)")
    }
}

/// The `state` sent in the authorization URL and expected back on the redirect.
pub(crate) struct State(Zeroizing<String>);

impl State {
    /// A fresh value from the operating system's random number generator.
    pub(crate) fn generate() -> Result<State, RandomError> {
        Ok(State(Zeroizing::new(
            URL_SAFE_NO_PAD.encode(random_bytes()?.as_slice()),
        )))
    }

    /// The value itself, for the authorization URL.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `returned` is this state, in time that does not depend on where they differ (a
    /// local process timing the receiver's answers learns nothing). A length difference
    /// returns early: the length is no secret, every state has 43 characters.
    pub(crate) fn matches(&self, returned: &str) -> bool {
        bool::from(self.0.as_bytes().ct_eq(returned.as_bytes()))
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("State(<redacted>)")
    }
}

/// 32 bytes straight from the operating system, wiped on drop.
fn random_bytes() -> Result<Zeroizing<[u8; SECRET_BYTES]>, RandomError> {
    let mut bytes = Zeroizing::new([0u8; SECRET_BYTES]);
    rand::rngs::SysRng
        .try_fill_bytes(&mut bytes[..])
        .map_err(|_| RandomError)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7636 Appendix B: the octets, the verifier they encode to, and its S256 challenge.
    #[test]
    fn rfc_7636_appendix_b() {
        let octets: [u8; 32] = [
            116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186, 22, 212,
            37, 77, 105, 214, 191, 240, 91, 88, 5, 88, 83, 132, 141, 121,
        ];
        let pkce = Pkce::from_bytes(&octets);
        assert_eq!(
            pkce.verifier().expose(),
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        );
        assert_eq!(
            pkce.challenge(),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    /// RFC 7636 §4.1: 43-128 characters of `[A-Za-z0-9-._~]`; each pair is fresh.
    #[test]
    fn generated_values_are_well_formed_and_fresh() {
        let unreserved = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
        };
        let a = Pkce::generate().expect("rng");
        let b = Pkce::generate().expect("rng");
        for pkce in [&a, &b] {
            let verifier = pkce.verifier().expose();
            assert!((43..=128).contains(&verifier.len()), "{}", verifier.len());
            assert!(unreserved(verifier));
            assert_eq!(pkce.challenge().len(), 43);
            assert!(unreserved(pkce.challenge()));
            let digest = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
            assert_eq!(pkce.challenge(), digest);
        }
        assert_ne!(a.verifier().expose(), b.verifier().expose());
        let (s, t) = (
            State::generate().expect("rng"),
            State::generate().expect("rng"),
        );
        assert_eq!(s.expose().len(), 43);
        assert!(unreserved(s.expose()));
        assert_ne!(s.expose(), t.expose());
    }

    #[test]
    fn state_matches_itself_only() {
        let state = State::generate().expect("rng");
        let value = state.expose().to_owned();
        assert!(state.matches(&value));
        assert!(!state.matches(""));
        assert!(!state.matches(&value[..42]));
        assert!(!state.matches(&format!("{value}x")));
        let mut flipped = value.clone().into_bytes();
        flipped[42] ^= 1;
        assert!(!state.matches(&String::from_utf8(flipped).expect("ascii")));
        assert!(!state.matches(&value.to_uppercase()));
    }

    #[test]
    fn debug_shows_no_secret() {
        let pkce = Pkce::generate().expect("rng");
        let state = State::generate().expect("rng");
        let shown = format!("{pkce:?} {state:?} {:?}", pkce.verifier());
        assert!(!shown.contains(pkce.verifier().expose()), "{shown}");
        assert!(!shown.contains(state.expose()), "{shown}");
        assert!(shown.contains("<redacted>"));
    }
}
