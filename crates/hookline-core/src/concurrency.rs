//! How the dispatcher's attempts are shared between endpoints: no endpoint may hold more
//! than a quarter of them, so that one slow endpoint cannot take every attempt.

/// One endpoint's share of the dispatcher's attempts is 1 / `SHARE_DIVISOR` of
/// `concurrency.max_in_flight`.
pub const SHARE_DIVISOR: usize = 4;

/// The most attempts one endpoint may have in flight when the dispatcher allows
/// `max_in_flight` in all (at least 1): its own `max_concurrency`, or
/// `concurrency.per_endpoint`, is capped at this.
pub fn endpoint_share(max_in_flight: usize) -> u32 {
    u32::try_from(max_in_flight / SHARE_DIVISOR)
        .unwrap_or(u32::MAX)
        .max(1)
}

/// The attempts slow, failing and unproven endpoints share, all together, when the
/// dispatcher allows `max_in_flight` (at least 1): half, so that the healthy endpoints always
/// have the other half however many misbehave.
pub fn slow_share(max_in_flight: usize) -> usize {
    (max_in_flight / 2).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_endpoints_share_half_of_the_attempts_and_at_least_one() {
        assert_eq!(slow_share(256), 128);
        assert_eq!(slow_share(1), 1);
        assert_eq!(slow_share(0), 1);
    }

    #[test]
    fn an_endpoint_gets_a_quarter_of_the_attempts_and_at_least_one() {
        assert_eq!(endpoint_share(256), 64);
        assert_eq!(endpoint_share(8_000), 2_000);
        assert_eq!(endpoint_share(3), 1);
        assert_eq!(endpoint_share(0), 1);
        assert_eq!(endpoint_share(usize::MAX), u32::MAX);
    }
}
