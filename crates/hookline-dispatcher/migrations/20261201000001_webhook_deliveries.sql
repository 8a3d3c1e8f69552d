-- The PostgreSQL delivery ledger: one row per delivery (an event to an endpoint) with its
-- lifecycle state, and an append-only audit trail of its transitions.
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    endpoint_id      TEXT        NOT NULL,
    event_id         TEXT        NOT NULL,
    status           TEXT        NOT NULL CHECK (status IN
                         ('Received', 'Processing', 'Succeeded', 'Failed', 'Rejected', 'DLQ')),
    -- Attempts made so far (HTTP requests sent), as the dispatcher counts them.
    attempts         INTEGER     NOT NULL DEFAULT 0,
    -- The HTTP status of the last attempt (NULL: none, or no answer).
    last_status      INTEGER,
    -- The dispatcher that holds the lease while the row is 'Processing', and until when.
    lease_owner      TEXT,
    lease_expires_at TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (endpoint_id, event_id)
);
-- Retention deletes by age, in batches.
CREATE INDEX IF NOT EXISTS webhook_deliveries_updated_at ON webhook_deliveries (updated_at);

CREATE TABLE IF NOT EXISTS webhook_delivery_transitions (
    id            BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id   TEXT        NOT NULL,
    event_id      TEXT        NOT NULL,
    -- NULL when the statement found no row before (a new delivery starts as 'Received').
    from_status   TEXT,
    to_status     TEXT        NOT NULL,
    attempts      INTEGER     NOT NULL,
    last_status   INTEGER,
    dispatcher_id TEXT        NOT NULL,
    at            TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS webhook_delivery_transitions_delivery
    ON webhook_delivery_transitions (endpoint_id, event_id, id);
CREATE INDEX IF NOT EXISTS webhook_delivery_transitions_at ON webhook_delivery_transitions (at);
