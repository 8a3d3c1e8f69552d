-- The transactional outbox: an application inserts one row per webhook event in the same
-- transaction as its business change; `hookline outbox run` publishes it to Kafka.
-- The columns `id`, `aggregatetype`, `aggregateid`, `type` and `payload` are those
-- Debezium's outbox event router reads by default.
CREATE TABLE IF NOT EXISTS hookline_outbox (
    -- The task id, which is also the event id (`webhook-id`).
    id             UUID        PRIMARY KEY,
    -- 'endpoint': a delivery to the endpoint `aggregateid` (the events topic);
    -- 'tenant': a tenant event for the tenant `aggregateid` (the fan-out topic).
    aggregatetype  TEXT        NOT NULL CHECK (aggregatetype IN ('endpoint', 'tenant')),
    -- The Kafka record key: the endpoint id, or the tenant id of a tenant event.
    aggregateid    TEXT        NOT NULL,
    -- The event type, e.g. `invoice.paid`.
    type           TEXT        NOT NULL,
    -- The HTTP request body. `json`, not `jsonb`: the text is kept byte for byte.
    payload        JSON        NOT NULL,
    content_type   TEXT        NOT NULL DEFAULT 'application/json',
    -- Extra HTTP request headers: an object of strings.
    headers        JSONB       NOT NULL DEFAULT '{}',
    -- The tenant of a delivery to one endpoint (optional; a tenant event's is aggregateid).
    tenant_id      TEXT,
    channels       TEXT[]      NOT NULL DEFAULT '{}',
    -- A URL overriding the endpoint's for this delivery.
    endpoint_url   TEXT,
    -- The deadline: a delivery not made by then is parked as expired.
    expires_at     TIMESTAMPTZ,
    -- The relay's bookkeeping.
    status         TEXT        NOT NULL DEFAULT 'NOT_CALLED'
                       CHECK (status IN ('NOT_CALLED', 'WIP', 'COMPLETE', 'FAILED')),
    retry_count    INTEGER     NOT NULL DEFAULT 0,
    last_retry_ts  TIMESTAMPTZ,
    -- A task that failed is not taken again before this time.
    next_retry_ts  TIMESTAMPTZ,
    last_error     TEXT,
    -- The relay holding a 'WIP' task, and until when; an expired lease is taken over.
    claimed_by     TEXT,
    claimed_until  TIMESTAMPTZ,
    created_ts     TIMESTAMPTZ NOT NULL DEFAULT now(),
    completed_ts   TIMESTAMPTZ
);

-- The claim: tasks waiting, oldest first, and leases that expired.
CREATE INDEX IF NOT EXISTS hookline_outbox_waiting
    ON hookline_outbox (created_ts) WHERE status = 'NOT_CALLED';
CREATE INDEX IF NOT EXISTS hookline_outbox_leases
    ON hookline_outbox (claimed_until) WHERE status = 'WIP';
-- The retention.
CREATE INDEX IF NOT EXISTS hookline_outbox_completed
    ON hookline_outbox (completed_ts) WHERE status = 'COMPLETE';

-- Wakes the relays listening on `hookline_outbox` (the payload is the schema) when rows
-- are inserted; delivered when the inserting transaction commits.
CREATE OR REPLACE FUNCTION hookline_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hookline_outbox', TG_TABLE_SCHEMA);
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS hookline_outbox_notify ON hookline_outbox;
CREATE TRIGGER hookline_outbox_notify
    AFTER INSERT ON hookline_outbox
    FOR EACH STATEMENT EXECUTE FUNCTION hookline_outbox_notify();
