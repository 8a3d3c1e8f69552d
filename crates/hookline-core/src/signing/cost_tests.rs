//! What one unauthenticated request can make a verifier do: the worst `webhook-signature`
//! a raw client can write (tens of thousands of candidates over a 1 MiB body) is refused
//! before any hashing, and within the cap the work is one HMAC per secret and one message
//! per request. Counted through [`work`](super::work), never timed.

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::work::{self, Work};
use super::*;

const MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const TIMESTAMP: i64 = 1_614_265_330;
/// A worst-case candidate count: a ~2.4 MB header.
const FLOOD: usize = 50_000;

fn big_body() -> Vec<u8> {
    vec![b'x'; 1024 * 1024]
}

/// `count` copies of `filler` then `last`, space-separated.
fn header(filler: &str, count: usize, last: Option<&str>) -> String {
    let mut parts = vec![filler; count];
    parts.extend(last);
    parts.join(" ")
}

#[test]
fn v1_headers_over_the_cap_are_refused_before_any_hmac() {
    let body = big_body();
    let mut rng = StdRng::seed_from_u64(11);
    let secret = SigningSecret::generate(&mut rng);
    let right = secret.sign(MSG_ID, TIMESTAMP, &body);
    let wrong = SigningSecret::generate(&mut rng).sign(MSG_ID, TIMESTAMP, &body);
    let refused = Err(SigningError::TooManySignatures {
        version: "v1",
        max: MAX_SIGNATURE_CANDIDATES,
    });
    let secrets = [secret];
    let check = |header: &str| verify(&secrets, MSG_ID, TIMESTAMP, &body, header);
    work::take();
    for header in [
        header(&wrong, MAX_SIGNATURE_CANDIDATES + 1, None),
        header(&wrong, MAX_SIGNATURE_CANDIDATES, Some(&right)),
        header(&wrong, FLOOD, None),
        header(&wrong, FLOOD - 1, Some(&right)),
        header(&right, FLOOD, None),
    ] {
        assert_eq!(check(&header), refused);
        assert_eq!(work::take(), Work::default(), "no HMAC before the cap");
    }
    // Within the cap, the right signature anywhere verifies, and other versions do not
    // count towards it.
    let v1a_noise = header("v1a,AAAA", FLOOD, None);
    for header in [
        header(&wrong, MAX_SIGNATURE_CANDIDATES - 1, Some(&right)),
        format!(
            "{right} {}",
            header(&wrong, MAX_SIGNATURE_CANDIDATES - 1, None)
        ),
        format!("{v1a_noise} {right}"),
    ] {
        assert_eq!(check(&header), Ok(()));
        assert_eq!(work::take().hmacs, 1);
    }
}

#[test]
fn v1_costs_one_hmac_per_secret_whatever_the_candidates() {
    let body = big_body();
    let mut rng = StdRng::seed_from_u64(12);
    let secrets: Vec<SigningSecret> = (0..3).map(|_| SigningSecret::generate(&mut rng)).collect();
    let right = secrets[2].sign(MSG_ID, TIMESTAMP, &body);
    let wrong = SigningSecret::generate(&mut rng).sign(MSG_ID, TIMESTAMP, &body);
    let check = |header: &str| verify(&secrets, MSG_ID, TIMESTAMP, &body, header);
    work::take();
    let all_wrong = header(&wrong, MAX_SIGNATURE_CANDIDATES, None);
    assert_eq!(check(&all_wrong), Err(SigningError::NoMatch));
    assert_eq!(
        work::take(),
        Work {
            hmacs: 3,
            ..Work::default()
        }
    );
    let right_last = header(&wrong, MAX_SIGNATURE_CANDIDATES - 1, Some(&right));
    assert_eq!(check(&right_last), Ok(()));
    assert_eq!(
        work::take(),
        Work {
            hmacs: 3,
            ..Work::default()
        }
    );
    // A header without a candidate of the right shape costs nothing at all.
    assert_eq!(check(""), Err(SigningError::NoMatch));
    assert_eq!(work::take(), Work::default());
}

#[test]
fn v1_candidates_of_the_wrong_length_cost_no_hmac() {
    let body = big_body();
    let mut rng = StdRng::seed_from_u64(13);
    let secret = SigningSecret::generate(&mut rng);
    let right = secret.sign(MSG_ID, TIMESTAMP, &body);
    let ed25519 = SigningKey::generate(&mut rng).sign(MSG_ID, TIMESTAMP, &body);
    let as_v1 = ed25519.replacen("v1a,", "v1,", 1);
    let short = &right[..right.len() - 4];
    let longer = format!("{right}AAAA");
    // 44 characters, but 31 bytes.
    let thirty_one = format!("v1,{}==", &right[3..45]);
    let malformed = [
        "v1,AAAA",
        "v1,!!",
        "v1,",
        short,
        &longer,
        &as_v1,
        &thirty_one,
    ];
    let header = malformed.join(" ");
    work::take();
    assert_eq!(
        verify(&[secret], MSG_ID, TIMESTAMP, &body, &header),
        Err(SigningError::NoMatch)
    );
    assert_eq!(work::take(), Work::default());
}

#[test]
fn v1a_headers_over_the_cap_are_refused_before_any_check() {
    let body = big_body();
    let mut rng = StdRng::seed_from_u64(14);
    let key = SigningKey::generate(&mut rng);
    let right = key.sign(MSG_ID, TIMESTAMP, &body);
    let wrong = SigningKey::generate(&mut rng).sign(MSG_ID, TIMESTAMP, &body);
    let keys = [key.public_key()];
    let check = |header: &str| verify_v1a(&keys, MSG_ID, TIMESTAMP, &body, header);
    let refused = Err(SigningError::TooManySignatures {
        version: "v1a",
        max: MAX_SIGNATURE_CANDIDATES,
    });
    work::take();
    for header in [
        header(&wrong, MAX_SIGNATURE_CANDIDATES + 1, None),
        header(&wrong, FLOOD - 1, Some(&right)),
    ] {
        assert_eq!(check(&header), refused);
        assert_eq!(
            work::take(),
            Work::default(),
            "nothing checked over the cap"
        );
    }
    let within = header(&wrong, MAX_SIGNATURE_CANDIDATES - 1, Some(&right));
    assert_eq!(check(&within), Ok(()));
    let spent = work::take();
    assert_eq!(spent.messages, 1);
    assert_eq!(spent.ed25519, MAX_SIGNATURE_CANDIDATES);
}

#[test]
fn v1a_builds_the_message_once_and_only_when_needed() {
    let body = big_body();
    let mut rng = StdRng::seed_from_u64(15);
    let keys = [
        SigningKey::generate(&mut rng),
        SigningKey::generate(&mut rng),
    ];
    let publics: Vec<VerifyingKey> = keys.iter().map(SigningKey::public_key).collect();
    let right = keys[1].sign(MSG_ID, TIMESTAMP, &body);
    let check =
        |keys: &[VerifyingKey], header: &str| verify_v1a(keys, MSG_ID, TIMESTAMP, &body, header);
    work::take();
    // Two keys, one candidate: one message, a check per key.
    assert_eq!(check(&publics, &right), Ok(()));
    assert_eq!(
        work::take(),
        Work {
            ed25519: 2,
            messages: 1,
            ..Work::default()
        }
    );
    // No key, or no candidate of the right length: no copy of the body, no check.
    let hmac_length = format!("v1a,{}", &right[4..48]);
    for (keys, header) in [
        (&[][..], right.as_str()),
        (&publics[..], "v1a,AAAA v1a,!! v1a,"),
        (&publics[..], hmac_length.as_str()),
        (&publics[..], &right[..right.len() - 4]),
    ] {
        assert_eq!(check(keys, header), Err(SigningError::NoMatch));
        assert_eq!(work::take(), Work::default(), "{header}");
    }
}
