-- hookline-receiver's PostgreSQL de-duplication store: one row per webhook id a receiver
-- has seen, with its state and processing lease, and an append-only audit trail of its
-- transitions.
CREATE TABLE IF NOT EXISTS hookline_received (
    -- The receiver's name, so that several receivers can share one table.
    receiver     TEXT        NOT NULL,
    webhook_id   TEXT        NOT NULL,
    -- 'Processing': a copy's handler runs (under the lease); 'Succeeded': it answered 2xx;
    -- 'Failed': it did not (or the request was dropped), the next copy is processed.
    status       TEXT        NOT NULL CHECK (status IN ('Processing', 'Succeeded', 'Failed')),
    -- Claims won: how often a handler was started for this id.
    attempts     INTEGER     NOT NULL DEFAULT 1,
    -- The claim's token and until when it holds the id, while 'Processing'.
    lease_owner  TEXT,
    lease_until  TIMESTAMPTZ,
    first_seen   TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen    TIMESTAMPTZ NOT NULL DEFAULT now(),
    succeeded_at TIMESTAMPTZ,
    -- The end of the dedup TTL: after it the id is forgotten (a copy is processed again)
    -- and the row is removed by the purge.
    expires_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (receiver, webhook_id)
);
CREATE INDEX IF NOT EXISTS hookline_received_expires_at ON hookline_received (expires_at);

CREATE TABLE IF NOT EXISTS hookline_received_transitions (
    id          BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    receiver    TEXT        NOT NULL,
    webhook_id  TEXT        NOT NULL,
    -- NULL when the statement found no row before.
    from_status TEXT,
    to_status   TEXT        NOT NULL,
    -- The claim's token.
    lease_owner TEXT        NOT NULL,
    at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS hookline_received_transitions_id
    ON hookline_received_transitions (receiver, webhook_id, id);
CREATE INDEX IF NOT EXISTS hookline_received_transitions_at ON hookline_received_transitions (at);
