//! Secrets and keys together: one `webhook-signature` value carrying `v1` and `v1a`
//! signatures of several secrets and keys, as during a rotation or a migration from one
//! scheme to the other, verified by receivers holding any one of them.

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;

const MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const TIMESTAMP: i64 = 1_614_265_330;
const BODY: &[u8] = br#"{"test": 2432232314}"#;

fn signer(rng: &mut StdRng) -> Signer {
    let secrets = vec![SigningSecret::generate(rng), SigningSecret::generate(rng)];
    let keys = vec![SigningKey::generate(rng), SigningKey::generate(rng)];
    Signer::new(secrets, keys)
}

#[test]
fn a_mixed_header_verifies_with_each_secret_and_each_public_key() {
    let signer = signer(&mut StdRng::seed_from_u64(3));
    let header = signer.sign(MSG_ID, TIMESTAMP, BODY);
    let versions: Vec<&str> = header
        .split(' ')
        .map(|part| part.split_once(',').map_or("", |(v, _)| v))
        .collect();
    assert_eq!(versions, ["v1", "v1", "v1a", "v1a"], "{header}");
    for secret in signer.secrets() {
        verify(
            std::slice::from_ref(secret),
            MSG_ID,
            TIMESTAMP,
            BODY,
            &header,
        )
        .expect("each secret verifies");
    }
    for key in signer.keys() {
        verify_v1a(&[key.public_key()], MSG_ID, TIMESTAMP, BODY, &header)
            .expect("each public key verifies");
    }
    // A receiver with a key or secret that signed nothing finds no match.
    let mut other = StdRng::seed_from_u64(4);
    let stranger = SigningKey::generate(&mut other);
    assert_eq!(
        verify_v1a(&[stranger.public_key()], MSG_ID, TIMESTAMP, BODY, &header),
        Err(SigningError::NoMatch)
    );
    assert_eq!(
        verify(
            &[SigningSecret::generate(&mut other)],
            MSG_ID,
            TIMESTAMP,
            BODY,
            &header
        ),
        Err(SigningError::NoMatch)
    );
}

#[test]
fn a_tampered_delivery_fails_both_schemes() {
    let signer = signer(&mut StdRng::seed_from_u64(5));
    let header = signer.sign(MSG_ID, TIMESTAMP, BODY);
    let publics: Vec<VerifyingKey> = signer.keys().iter().map(SigningKey::public_key).collect();
    for body in [&b"{\"test\": 2432232315}"[..], b""] {
        assert_eq!(
            verify(signer.secrets(), MSG_ID, TIMESTAMP, body, &header),
            Err(SigningError::NoMatch)
        );
        assert_eq!(
            verify_v1a(&publics, MSG_ID, TIMESTAMP, body, &header),
            Err(SigningError::NoMatch)
        );
    }
}

#[test]
fn keys_only_and_nothing() {
    let mut rng = StdRng::seed_from_u64(6);
    let keys_only = Signer::new(Vec::new(), vec![SigningKey::generate(&mut rng)]);
    let header = keys_only.sign(MSG_ID, TIMESTAMP, BODY);
    assert!(
        header.starts_with("v1a,") && !header.contains(' '),
        "{header}"
    );
    assert!(!keys_only.is_empty());
    let none = Signer::default();
    assert!(none.is_empty());
    assert_eq!(none.sign(MSG_ID, TIMESTAMP, BODY), "");
}

#[test]
fn the_signer_debug_shows_no_key_material() {
    let signer = signer(&mut StdRng::seed_from_u64(8));
    let debug = format!("{signer:?}");
    for secret in signer.secrets() {
        assert!(!debug.contains(&secret.to_whsec()[6..]), "{debug}");
    }
    for key in signer.keys() {
        assert!(!debug.contains(&key.to_whsk()[5..]), "{debug}");
        assert!(debug.contains(&key.public_key().to_whpk()), "{debug}");
    }
    assert!(debug.contains("<2 redacted>"), "{debug}");
}
