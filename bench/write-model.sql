-- The write set issue 14 proposes for a delivery's happy path, run by bench/write-model.sh under
-- pgbench: an outbox claim (64 events) in one transaction, then their first results written as
-- delivery rows (4 endpoints: 256 rows, status delivered, with or without an attempt row each,
-- :att = 1 or 0) and the events marked, in another. Each client marks its claims with its own
-- value (-1 - client_id), so two clients never record each other's events.
BEGIN;
WITH c AS (SELECT seq FROM hookd_outbox WHERE dispatched_at IS NULL ORDER BY seq LIMIT 64 FOR UPDATE SKIP LOCKED),
u AS (UPDATE hookd_outbox o SET dispatched_at = -1 - :client_id FROM c WHERE o.seq = c.seq RETURNING o.seq)
SELECT count(*) AS claimed FROM u \gset
COMMIT;
BEGIN;
WITH o AS (SELECT seq, id FROM hookd_outbox WHERE dispatched_at = -1 - :client_id),
d AS (INSERT INTO hookd_deliveries(id, event_id, endpoint_id, status, attempt_count, last_status_code,
                                   first_attempt_at, last_attempt_at, delivered_at, created_at)
      SELECT 'dlv_' || o.id || '_' || e.id, o.id, e.id, 'delivered', 1, 200, 1, 1, 1, 1
      FROM o CROSS JOIN (SELECT id FROM hookd_endpoints) e RETURNING id),
a AS (INSERT INTO hookd_attempts(delivery_id, n, started_at, duration_ms, status_code)
      SELECT id, 1, 1, 1, 200 FROM d WHERE :att = 1)
UPDATE hookd_outbox SET dispatched_at = 2 WHERE dispatched_at = -1 - :client_id;
COMMIT;
