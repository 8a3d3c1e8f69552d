//! The store's statements. Each writes its audit row in the same statement; `prev` is read
//! in the statement's snapshot (the row as it was before, when there was one).

/// $1 receiver, $2 webhook id, $3 token, $4 lease in seconds, $5 TTL in seconds. Counts the
/// rows claimed (0 or 1). The optimistic lock: a row is taken over only when its TTL ran
/// out, or when it did not succeed and no live lease holds it (a failed handler, a
/// crashed receiver).
pub(super) const CLAIM: &str = "
WITH prev AS (
    SELECT status FROM hookline_received WHERE receiver = $1 AND webhook_id = $2
), up AS (
    INSERT INTO hookline_received AS r
        (receiver, webhook_id, status, lease_owner, lease_until, expires_at)
    VALUES ($1, $2, 'Processing', $3, now() + make_interval(secs => $4),
            now() + make_interval(secs => $5))
    ON CONFLICT (receiver, webhook_id) DO UPDATE
    SET status = 'Processing', attempts = r.attempts + 1,
        lease_owner = EXCLUDED.lease_owner, lease_until = EXCLUDED.lease_until,
        expires_at = EXCLUDED.expires_at, last_seen = now(),
        succeeded_at = NULL
    WHERE r.expires_at < now()
       OR (r.status <> 'Succeeded' AND (r.lease_until IS NULL OR r.lease_until < now()))
    RETURNING (r.xmax = 0) AS inserted
), audit AS (
    INSERT INTO hookline_received_transitions
        (receiver, webhook_id, from_status, to_status, lease_owner)
    SELECT $1, $2, CASE WHEN up.inserted THEN NULL ELSE (SELECT status FROM prev) END,
           'Processing', $3
    FROM up
)
SELECT count(*) FROM up";

/// $1 receiver, $2 webhook id. What a copy that lost the claim found: the status, whether
/// a lease holds it, whether it is still remembered.
pub(super) const FOUND: &str = "
SELECT status, COALESCE(lease_until >= now(), false), expires_at >= now()
FROM hookline_received WHERE receiver = $1 AND webhook_id = $2";

/// $1 receiver, $2 webhook id, $3 token, $4 TTL in seconds. Only the claim's owner.
pub(super) const SUCCEED: &str = "
WITH up AS (
    UPDATE hookline_received
    SET status = 'Succeeded', lease_owner = NULL, lease_until = NULL, last_seen = now(),
        succeeded_at = now(), expires_at = now() + make_interval(secs => $4)
    WHERE receiver = $1 AND webhook_id = $2 AND status = 'Processing' AND lease_owner = $3
    RETURNING 1
), audit AS (
    INSERT INTO hookline_received_transitions
        (receiver, webhook_id, from_status, to_status, lease_owner)
    SELECT $1, $2, 'Processing', 'Succeeded', $3 FROM up
)
SELECT count(*) FROM up";

/// $1 receiver, $2 webhook id, $3 token. Only the claim's owner; the row stays (`Failed`,
/// no lease) so that the next copy takes it at once and `attempts` goes on counting.
pub(super) const RELEASE: &str = "
WITH up AS (
    UPDATE hookline_received
    SET status = 'Failed', lease_owner = NULL, lease_until = NULL, last_seen = now()
    WHERE receiver = $1 AND webhook_id = $2 AND status = 'Processing' AND lease_owner = $3
    RETURNING 1
), audit AS (
    INSERT INTO hookline_received_transitions
        (receiver, webhook_id, from_status, to_status, lease_owner)
    SELECT $1, $2, 'Processing', 'Failed', $3 FROM up
)
SELECT count(*) FROM up";

/// $1 batch size. Rows past their TTL, every receiver's.
pub(super) const PURGE_RECEIVED: &str = "
DELETE FROM hookline_received WHERE ctid IN (
    SELECT ctid FROM hookline_received WHERE expires_at < now() LIMIT $1)";

/// $1 batch size, $2 retention in seconds.
pub(super) const PURGE_TRANSITIONS: &str = "
DELETE FROM hookline_received_transitions WHERE id IN (
    SELECT id FROM hookline_received_transitions
    WHERE at < now() - make_interval(secs => $2) LIMIT $1)";
