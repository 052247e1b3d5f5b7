/*
 * The SQLite schema as numbered migrations (DESIGN §4). A migration is never
 * edited once released: changes go into a new entry at the end.
 */
#include "store/schema/sqlite.h"

#include "store/health_sql.h"
#include "store/stats_sql.h"

/* Unix milliseconds now, in SQL (julianday of the epoch is 2440587.5). */
#define SQL_NOW_MS "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"

/* The outbox's columns as version 1 made them (the rebuild of version 26 starts from them). */
#define SQ_OUTBOX_V1_COLUMNS                                                                                    \
    " seq INTEGER PRIMARY KEY,"                                                                                 \
    " id TEXT NOT NULL UNIQUE DEFAULT ('evt_' || printf('%012x', " SQL_NOW_MS ") || lower(hex(randomblob(10)))),"   \
    " account TEXT,"                                                                                            \
    " event_type TEXT NOT NULL,"                                                                                \
    " resource_type TEXT,"                                                                                      \
    " resource_id TEXT,"                                                                                        \
    " resource_version INTEGER,"                                                                                \
    " payload TEXT NOT NULL DEFAULT '{}',"                                                                      \
    " idempotency_key TEXT,"                                                                                    \
    " created_at INTEGER NOT NULL DEFAULT (" SQL_NOW_MS "),"                                                    \
    " dispatched_at INTEGER"

static const char schema_v1[] =
    /* The outbox is the public contract: a bare INSERT of event_type and
     * payload from any application gets an evt_ id and created_at. */
    "CREATE TABLE hookd_outbox (" SQ_OUTBOX_V1_COLUMNS ");"
    /* Partial: rows without a key cost no index entry. */
    "CREATE UNIQUE INDEX hookd_outbox_idempotency ON hookd_outbox(idempotency_key)"
    " WHERE idempotency_key IS NOT NULL;"
    "CREATE INDEX hookd_outbox_undispatched ON hookd_outbox(seq) WHERE dispatched_at IS NULL;"

    "CREATE TABLE hookd_endpoints ("
    " id TEXT NOT NULL PRIMARY KEY,"
    " account TEXT,"
    " url TEXT NOT NULL,"
    " description TEXT,"
    " event_types TEXT NOT NULL DEFAULT '[]',"
    " secrets TEXT NOT NULL DEFAULT '[]',"
    " enabled INTEGER NOT NULL DEFAULT 1,"
    " disabled_reason TEXT,"
    " ordering TEXT NOT NULL DEFAULT 'none' CHECK (ordering IN ('none', 'key', 'latest')),"
    " max_in_flight INTEGER NOT NULL DEFAULT 0,"
    " rate_limit INTEGER NOT NULL DEFAULT 0,"
    " timeout_ms INTEGER NOT NULL DEFAULT 0,"
    " retry_schedule TEXT,"
    " created_at INTEGER NOT NULL DEFAULT (" SQL_NOW_MS "),"
    " updated_at INTEGER NOT NULL DEFAULT (" SQL_NOW_MS "),"
    " disabled_at INTEGER"
    ") WITHOUT ROWID;"
    "CREATE INDEX hookd_endpoints_account ON hookd_endpoints(account, id);"

    "CREATE TABLE hookd_deliveries ("
    " id TEXT NOT NULL PRIMARY KEY,"
    " event_id TEXT NOT NULL,"
    " endpoint_id TEXT NOT NULL,"
    " account TEXT,"
    " status TEXT NOT NULL DEFAULT 'pending'"
    "  CHECK (status IN ('pending', 'retrying', 'delivered', 'dead', 'superseded', 'skipped')),"
    " attempt_count INTEGER NOT NULL DEFAULT 0,"
    " next_attempt_at INTEGER,"
    " last_status_code INTEGER,"
    " last_error TEXT,"
    " first_attempt_at INTEGER,"
    " last_attempt_at INTEGER,"
    " delivered_at INTEGER,"
    " created_at INTEGER NOT NULL,"
    " lease_owner TEXT,"
    " lease_until INTEGER,"
    " lease_token INTEGER NOT NULL DEFAULT 0,"
    " UNIQUE (event_id, endpoint_id)"
    ") WITHOUT ROWID;"
    /* Only open deliveries are in the due index, so it stays small. */
    "CREATE INDEX hookd_deliveries_due ON hookd_deliveries(next_attempt_at)"
    " WHERE status IN ('pending', 'retrying');"
    "CREATE INDEX hookd_deliveries_endpoint ON hookd_deliveries(endpoint_id, id);"
    "CREATE INDEX hookd_deliveries_status ON hookd_deliveries(status, id);"

    "CREATE TABLE hookd_attempts ("
    " id INTEGER PRIMARY KEY,"
    " delivery_id TEXT NOT NULL,"
    " n INTEGER NOT NULL,"
    " started_at INTEGER NOT NULL,"
    " duration_ms INTEGER NOT NULL DEFAULT 0,"
    " status_code INTEGER,"
    " error_class TEXT,"
    " error TEXT,"
    " response TEXT,"
    " node TEXT);"
    "CREATE INDEX hookd_attempts_delivery ON hookd_attempts(delivery_id, n);"

    "CREATE TABLE hookd_meta (key TEXT NOT NULL PRIMARY KEY, value TEXT) WITHOUT ROWID;"
    /* The endpoint cache validator: bumped by every write to hookd_endpoints,
     * including writes made with plain SQL outside hookd. */
    "INSERT INTO hookd_meta(key, value) VALUES ('endpoints_version', '0');"
    "CREATE TRIGGER hookd_endpoints_ai AFTER INSERT ON hookd_endpoints BEGIN"
    " UPDATE hookd_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'endpoints_version'; END;"
    "CREATE TRIGGER hookd_endpoints_au AFTER UPDATE ON hookd_endpoints BEGIN"
    " UPDATE hookd_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'endpoints_version'; END;"
    "CREATE TRIGGER hookd_endpoints_ad AFTER DELETE ON hookd_endpoints BEGIN"
    " UPDATE hookd_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'endpoints_version'; END;";

/* Per-endpoint in-flight caps at claim time: each endpoint's due rows in
 * time order, and the leases each endpoint holds. */
static const char schema_v2[] =
    "CREATE INDEX hookd_deliveries_endpoint_due ON hookd_deliveries(endpoint_id, next_attempt_at)"
    " WHERE status IN ('pending', 'retrying');"
    "CREATE INDEX hookd_deliveries_leased ON hookd_deliveries(endpoint_id, lease_until)"
    " WHERE lease_owner IS NOT NULL;";

/* The claim's order, (next_attempt_at, id), straight from the index: no sort
 * of an endpoint's backlog per claim (the PostgreSQL schema's version 2). */
static const char schema_v3[] =
    "DROP INDEX hookd_deliveries_endpoint_due;"
    "CREATE INDEX hookd_deliveries_endpoint_due ON hookd_deliveries(endpoint_id, next_attempt_at, id)"
    " WHERE status IN ('pending', 'retrying');";

/*
 * The inbound families (DESIGN §4, §6): sources (the definition and its
 * secrets as JSON text, and a cache validator bumped by triggers like the
 * endpoints'), the inbox (one row per (source, event_id): the key the
 * receiver's insert-or-duplicate statement runs into), and the bounded
 * rejection log with its per-source, per-reason counters. Self-contained: it
 * creates everything it uses, so it can be renumbered at a merge.
 */
static const char schema_inbound[] =
    "CREATE TABLE hookd_sources ("
    " name TEXT NOT NULL PRIMARY KEY,"
    " definition TEXT NOT NULL,"
    " secrets TEXT NOT NULL DEFAULT '{}',"
    " created_at INTEGER NOT NULL DEFAULT (" SQL_NOW_MS "),"
    " updated_at INTEGER NOT NULL DEFAULT (" SQL_NOW_MS ")"
    ") WITHOUT ROWID;"
    "INSERT INTO hookd_meta(key, value) VALUES ('sources_version', '0') ON CONFLICT(key) DO NOTHING;"
    "CREATE TRIGGER hookd_sources_ai AFTER INSERT ON hookd_sources BEGIN"
    " UPDATE hookd_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'sources_version'; END;"
    "CREATE TRIGGER hookd_sources_au AFTER UPDATE ON hookd_sources BEGIN"
    " UPDATE hookd_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'sources_version'; END;"
    "CREATE TRIGGER hookd_sources_ad AFTER DELETE ON hookd_sources BEGIN"
    " UPDATE hookd_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'sources_version'; END;"

    /* A rowid table: payloads are up to max_body, too large for WITHOUT ROWID. */
    "CREATE TABLE hookd_inbox ("
    " id TEXT NOT NULL UNIQUE,"
    " source TEXT NOT NULL,"
    " event_id TEXT NOT NULL,"
    " event_type TEXT,"
    " entity_kind TEXT,"
    " entity_id TEXT,"
    " version INTEGER,"
    " payload TEXT NOT NULL,"
    " payload_sha256 TEXT NOT NULL,"
    " signature_verified INTEGER NOT NULL DEFAULT 0,"
    " status TEXT NOT NULL DEFAULT 'pending'"
    "  CHECK (status IN ('pending', 'processed', 'deferred', 'quarantined')),"
    " attempts INTEGER NOT NULL DEFAULT 0,"
    " next_attempt_at INTEGER,"
    " lease_owner TEXT,"
    " lease_until INTEGER,"
    " lease_token INTEGER NOT NULL DEFAULT 0,"
    " result TEXT,"
    " error TEXT,"
    " received_at INTEGER NOT NULL,"
    " processed_at INTEGER,"
    " dup_count INTEGER NOT NULL DEFAULT 0,"
    " last_dup_at INTEGER,"
    " conflict_count INTEGER NOT NULL DEFAULT 0,"
    " UNIQUE (source, event_id));"
    /* What the workers will claim: only open items are in it. */
    "CREATE INDEX hookd_inbox_due ON hookd_inbox(next_attempt_at) WHERE status IN ('pending', 'deferred');"
    "CREATE INDEX hookd_inbox_source ON hookd_inbox(source, id);"
    "CREATE INDEX hookd_inbox_entity ON hookd_inbox(entity_kind, entity_id, id);"
    "CREATE INDEX hookd_inbox_status ON hookd_inbox(status, id);"

    "CREATE TABLE hookd_rejections ("
    " id INTEGER PRIMARY KEY,"
    " source TEXT NOT NULL,"
    " at INTEGER NOT NULL,"
    " reason TEXT NOT NULL,"
    " peer TEXT,"
    " size INTEGER NOT NULL DEFAULT 0,"
    " sha256 TEXT);"
    "CREATE INDEX hookd_rejections_source ON hookd_rejections(source, id);"
    "CREATE TABLE hookd_rejection_counts ("
    " source TEXT NOT NULL,"
    " reason TEXT NOT NULL,"
    " count INTEGER NOT NULL DEFAULT 0,"
    " last_at INTEGER NOT NULL,"
    " PRIMARY KEY (source, reason)"
    ") WITHOUT ROWID;";

/*
 * Response snippets as bytes: a response is whatever the endpoint sent (a
 * Latin-1 page, a gzip body, NULs, UTF-8 cut at the cap), so it is kept as a
 * BLOB with a flag for a cut. Older rows keep their text in response, read
 * through the same expression (STORE_ATTEMPT_SQLITE_RESPONSE).
 */
static const char schema_attempt_bytes[] =
    "ALTER TABLE hookd_attempts ADD COLUMN response_body BLOB;"
    "ALTER TABLE hookd_attempts ADD COLUMN response_truncated INTEGER NOT NULL DEFAULT 0;";

/*
 * The outbox is untrusted input (issue 9): a row's id, type, account and
 * resource fields keep the rules of core/event_check.h whoever writes them,
 * plain SQL included. A trigger, not a CHECK: adding a CHECK means rebuilding
 * the table, and rows written before this migration are left as they are
 * (the relay rejects those that break the rules, into the new `error`
 * column). Built-in functions only, as applications' connections run it:
 * GLOB sees characters, CAST(… AS BLOB) the bytes (a NUL included). What it
 * cannot see is invalid UTF-8 in a label; the relay rejects that row.
 * The limits are core/event_check.h's (63, 128, 255).
 */
#define SQ_NO_NUL(col) "instr(CAST(NEW." col " AS BLOB), X'00') = 0"
#define SQ_BYTES(col) "length(CAST(NEW." col " AS BLOB))"
#define SQ_REFUSE(msg, ok) " SELECT RAISE(ABORT, '" msg "') WHERE NOT (" ok ");"
#define SQ_LABEL_OK(col)                                                                              \
    "NEW." col " IS NULL OR (typeof(NEW." col ") = 'text' AND " SQ_BYTES(col) " <= 255 AND NEW." col \
    " NOT GLOB ('*[' || char(1) || '-' || char(31) || char(127) || ']*') AND " SQ_NO_NUL(col) ")"
#define SQ_OUTBOX_CHECKS                                                                                          \
    SQ_REFUSE("hookd_outbox.id must be 1 to 63 characters of A-Z a-z 0-9 _ . : -",                             \
              "typeof(NEW.id) = 'text' AND " SQ_BYTES("id") " BETWEEN 1 AND 63"                                 \
              " AND NEW.id NOT GLOB '*[^A-Za-z0-9_.:-]*' AND " SQ_NO_NUL("id"))                                \
    SQ_REFUSE("hookd_outbox.event_type must be 1 to 128 characters of A-Z a-z 0-9 _ . -",                      \
              "typeof(NEW.event_type) = 'text' AND " SQ_BYTES("event_type") " BETWEEN 1 AND 128"                \
              " AND NEW.event_type NOT GLOB '*[^A-Za-z0-9_.-]*' AND " SQ_NO_NUL("event_type"))                 \
    SQ_REFUSE("hookd_outbox.account must be at most 255 bytes without control characters",                     \
              SQ_LABEL_OK("account"))                                                                         \
    SQ_REFUSE("hookd_outbox.resource_type must be at most 255 bytes without control characters",               \
              SQ_LABEL_OK("resource_type"))                                                                   \
    SQ_REFUSE("hookd_outbox.resource_id must be at most 255 bytes without control characters",                 \
              SQ_LABEL_OK("resource_id"))

static const char schema_outbox_check[] =
    "ALTER TABLE hookd_outbox ADD COLUMN error TEXT;"
    "CREATE TRIGGER hookd_outbox_check_insert AFTER INSERT ON hookd_outbox BEGIN" SQ_OUTBOX_CHECKS " END;"
    "CREATE TRIGGER hookd_outbox_check_update AFTER UPDATE OF id, event_type, account, resource_type, resource_id"
    " ON hookd_outbox BEGIN" SQ_OUTBOX_CHECKS " END;";

/* Static custom headers of an endpoint: a JSON object {"Name": "value"}, NULL for none. */
static const char schema_endpoint_headers[] = "ALTER TABLE hookd_endpoints ADD COLUMN headers TEXT;";

/* Inbox workers: the deferral clock, and the open items of an entity for the claim's one-at-a-time rule. */
static const char schema_inbox_workers[] =
    "ALTER TABLE hookd_inbox ADD COLUMN deferred_at INTEGER;"
    "CREATE INDEX hookd_inbox_open_entity ON hookd_inbox(source, entity_kind, entity_id, id)"
    " WHERE status IN ('pending', 'deferred') AND entity_id IS NOT NULL;"
    "CREATE INDEX hookd_inbox_leased ON hookd_inbox(lease_owner) WHERE lease_owner IS NOT NULL;";

/*
 * Ordering (key and latest modes): a delivery of an ordered endpoint carries
 * its resource's key, its event's outbox seq and version, so a claim can ask
 * whether an older delivery of the same resource is still open, and a newer
 * version supersede older ones, each with one probe of this index. Unordered
 * deliveries (the most) have no entry in it.
 */
static const char schema_delivery_order[] =
    "ALTER TABLE hookd_deliveries ADD COLUMN order_key TEXT;"
    "ALTER TABLE hookd_deliveries ADD COLUMN order_seq INTEGER;"
    "ALTER TABLE hookd_deliveries ADD COLUMN order_version INTEGER;"
    "CREATE INDEX hookd_deliveries_order ON hookd_deliveries(endpoint_id, order_key, order_seq)"
    " WHERE order_key IS NOT NULL;";

/*
 * Per-endpoint delivery state, shared by every part that decides whether an
 * endpoint gets a delivery now (DESIGN §3): the circuit breaker, the start of
 * the current run of failures (auto-disable) and the rate limit's token bucket
 * in milli-tokens. A table of its own beside hookd_endpoints: it changes with
 * attempts and claims, the endpoint's settings do not. A missing row is a
 * closed breaker, no failures and a full bucket; a deleted endpoint's row goes
 * with it.
 */
static const char schema_endpoint_state[] =
    "CREATE TABLE hookd_endpoint_state ("
    " endpoint_id TEXT NOT NULL PRIMARY KEY,"
    " breaker TEXT NOT NULL DEFAULT 'closed' CHECK (breaker IN ('closed', 'open', 'half_open')),"
    " consecutive_failures INTEGER NOT NULL DEFAULT 0,"
    " opened_at INTEGER,"
    " next_probe_at INTEGER,"
    " probe_interval_ms INTEGER NOT NULL DEFAULT 0,"
    " probe_until INTEGER,"
    " closed_at INTEGER,"
    " failing_since INTEGER,"
    " tokens_milli INTEGER,"
    " tokens_at INTEGER"
    ") WITHOUT ROWID;"
    "CREATE TRIGGER hookd_endpoint_state_gone AFTER DELETE ON hookd_endpoints BEGIN"
    " DELETE FROM hookd_endpoint_state WHERE endpoint_id = old.id; END;";

/*
 * State machines (DESIGN §7): definitions, the entities they keep (state,
 * last applied version, last event), and the append-only log of every
 * decision taken on an inbox item (applied, stale, deferred, quarantined,
 * reconciled) with who took it and when: the trace and the audit read it.
 */
static const char schema_machines[] =
    "CREATE TABLE hookd_machines ("
    " name TEXT NOT NULL PRIMARY KEY,"
    " definition TEXT NOT NULL,"
    " created_at INTEGER NOT NULL,"
    " updated_at INTEGER NOT NULL"
    ") WITHOUT ROWID;"
    "CREATE TABLE hookd_entities ("
    " kind TEXT NOT NULL,"
    " id TEXT NOT NULL,"
    " state TEXT,"
    " version INTEGER,"
    " last_event_id TEXT,"
    " updated_at INTEGER NOT NULL,"
    " PRIMARY KEY (kind, id)"
    ") WITHOUT ROWID;"
    "CREATE TABLE hookd_transitions ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " inbox_id TEXT NOT NULL,"
    " source TEXT NOT NULL,"
    " kind TEXT NOT NULL,"
    " entity_id TEXT NOT NULL,"
    " event_id TEXT,"
    " from_state TEXT,"
    " to_state TEXT,"
    " version INTEGER,"
    " result TEXT NOT NULL CHECK (result IN ('applied', 'stale', 'deferred', 'quarantined', 'reconciled')),"
    " reason TEXT,"
    " worker TEXT,"
    " at INTEGER NOT NULL"
    ");"
    "CREATE INDEX hookd_transitions_entity ON hookd_transitions(kind, entity_id, seq);"
    "CREATE INDEX hookd_transitions_inbox ON hookd_transitions(inbox_id);"
    "CREATE INDEX hookd_transitions_at ON hookd_transitions(at);";

/*
 * Replays and account tokens (DESIGN §12). A replay's items are the
 * deliveries it made pending again: its progress is counted from their
 * statuses now, so nothing has to update the replay as they go. Tokens keep
 * only the SHA-256 of their secret; a trigger bumps tokens_version on every
 * write (the auth cache's validator, as sources_version is the receiver's).
 */
static const char schema_replays_tokens[] =
    "CREATE TABLE hookd_replays ("
    " id TEXT NOT NULL PRIMARY KEY,"
    " actor TEXT NOT NULL,"
    " account TEXT,"
    " kind TEXT NOT NULL CHECK (kind IN ('delivery', 'event', 'range')),"
    " filter TEXT NOT NULL,"
    " created_at INTEGER NOT NULL,"
    " finished_at INTEGER,"
    " matched INTEGER NOT NULL DEFAULT 0,"
    " replayed INTEGER NOT NULL DEFAULT 0,"
    " skipped INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX hookd_replays_account ON hookd_replays(account, id);"
    "CREATE TABLE hookd_replay_items ("
    " replay_id TEXT NOT NULL,"
    " delivery_id TEXT NOT NULL,"
    " PRIMARY KEY (replay_id, delivery_id)) WITHOUT ROWID;"
    "CREATE TABLE hookd_tokens ("
    " id TEXT NOT NULL PRIMARY KEY,"
    " account TEXT NOT NULL,"
    " scope TEXT NOT NULL CHECK (scope IN ('read', 'read_replay')),"
    " token_hash TEXT NOT NULL UNIQUE,"
    " description TEXT,"
    " created_by TEXT NOT NULL,"
    " created_at INTEGER NOT NULL,"
    " expires_at INTEGER NOT NULL,"
    " revoked_at INTEGER);"
    "CREATE INDEX hookd_tokens_account ON hookd_tokens(account, id);"
    "INSERT INTO hookd_meta(key, value) VALUES ('tokens_version', '0') ON CONFLICT(key) DO NOTHING;"
    "CREATE TRIGGER hookd_tokens_bump_insert AFTER INSERT ON hookd_tokens BEGIN"
    " UPDATE hookd_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'tokens_version'; END;"
    "CREATE TRIGGER hookd_tokens_bump_update AFTER UPDATE ON hookd_tokens BEGIN"
    " UPDATE hookd_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'tokens_version'; END;"
    "CREATE TRIGGER hookd_tokens_bump_delete AFTER DELETE ON hookd_tokens BEGIN"
    " UPDATE hookd_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'tokens_version'; END;";

/*
 * Operations: alerts (one open alert per rule and subject: a partial unique
 * index), and the indexes the alert rules and the retention purge read: attempts
 * by start time (error rates over a window), final deliveries by creation
 * (the purge takes the oldest), processed inbox items still holding their
 * payload by processing time (a purged one leaves the index).
 */
static const char schema_alerts_retention[] =
    "CREATE TABLE hookd_alerts ("
    " id TEXT NOT NULL PRIMARY KEY,"
    " rule TEXT NOT NULL,"
    " subject TEXT NOT NULL,"
    " message TEXT NOT NULL,"
    " details TEXT NOT NULL DEFAULT '{}',"
    " opened_at INTEGER NOT NULL,"
    " resolved_at INTEGER);"
    "CREATE UNIQUE INDEX hookd_alerts_open ON hookd_alerts(rule, subject) WHERE resolved_at IS NULL;"
    "CREATE INDEX hookd_alerts_subject ON hookd_alerts(rule, subject, resolved_at);"
    "CREATE INDEX hookd_attempts_started ON hookd_attempts(started_at);"
    "CREATE INDEX hookd_deliveries_final ON hookd_deliveries(created_at)"
    " WHERE status IN ('delivered', 'superseded');"
    "CREATE INDEX hookd_inbox_retention ON hookd_inbox(processed_at)"
    " WHERE status = 'processed' AND payload <> '';";

/*
 * Endpoint health (DESIGN §8 /v1/endpoints/{id}/health, /v1/summary, sync
 * status): attempt figures per endpoint, minute and node, written with the
 * attempt results (each node its own rows, so nodes never wait for one
 * another's counters): attempts, successes and the retry flow; latencies in
 * log-scale buckets (core/latency.h); failed attempts by account and status
 * code or error class (error_class '' for a received status, account_null 1
 * for a delivery without account: the key holds no NULLs); and each
 * endpoint's latest attempt, success and error. Buckets older than 25 h are
 * purged by the writes. Two partial indexes answer "what does this endpoint's
 * queue look like" from the index alone (open and failed deliveries by
 * status, oldest first) and one finds a resource's events, newest first.
 */
static const char schema_endpoint_health[] =
    "CREATE TABLE hookd_endpoint_minutes ("
    " endpoint_id TEXT NOT NULL,"
    " minute INTEGER NOT NULL,"
    " node TEXT NOT NULL,"
    " attempts INTEGER NOT NULL DEFAULT 0,"
    " successes INTEGER NOT NULL DEFAULT 0,"
    " retries_started INTEGER NOT NULL DEFAULT 0,"
    " retries_ended INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY (endpoint_id, minute, node)"
    ") WITHOUT ROWID;"
    "CREATE INDEX hookd_endpoint_minutes_minute ON hookd_endpoint_minutes(minute);"
    "CREATE TABLE hookd_latency_minutes ("
    " endpoint_id TEXT NOT NULL,"
    " minute INTEGER NOT NULL,"
    " node TEXT NOT NULL,"
    " bucket INTEGER NOT NULL,"
    " count INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY (endpoint_id, minute, node, bucket)"
    ") WITHOUT ROWID;"
    "CREATE INDEX hookd_latency_minutes_minute ON hookd_latency_minutes(minute);"
    "CREATE TABLE hookd_failure_minutes ("
    " minute INTEGER NOT NULL,"
    " endpoint_id TEXT NOT NULL,"
    " account_null INTEGER NOT NULL,"
    " account TEXT NOT NULL,"
    " status_code INTEGER NOT NULL,"
    " error_class TEXT NOT NULL,"
    " node TEXT NOT NULL,"
    " count INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY (minute, endpoint_id, account_null, account, status_code, error_class, node)"
    ") WITHOUT ROWID;"
    "CREATE TABLE hookd_endpoint_last ("
    " endpoint_id TEXT NOT NULL,"
    " node TEXT NOT NULL,"
    " last_attempt_at INTEGER,"
    " last_success_at INTEGER,"
    " last_error_at INTEGER,"
    " last_error_status_code INTEGER,"
    " last_error_class TEXT,"
    " last_error TEXT,"
    " PRIMARY KEY (endpoint_id, node)"
    ") WITHOUT ROWID;"
    "CREATE TRIGGER hookd_endpoint_health_gone AFTER DELETE ON hookd_endpoints BEGIN"
    " DELETE FROM hookd_endpoint_minutes WHERE endpoint_id = old.id;"
    " DELETE FROM hookd_latency_minutes WHERE endpoint_id = old.id;"
    " DELETE FROM hookd_endpoint_last WHERE endpoint_id = old.id; END;"
    "CREATE INDEX hookd_deliveries_endpoint_status ON hookd_deliveries(endpoint_id, status, created_at)"
    " WHERE status IN ('pending', 'retrying', 'dead', 'skipped');"
    "CREATE INDEX hookd_outbox_resource ON hookd_outbox(resource_type, resource_id, seq)"
    " WHERE resource_id IS NOT NULL;";

/*
 * The workers' claim walks the open items in (next_attempt_at, id) order and
 * stops after the ones it takes: the index gives that order, so a claim no
 * longer sorts every due item (its cost followed the backlog).
 */
static const char schema_inbox_claim_order[] =
    "DROP INDEX hookd_inbox_due;"
    "CREATE INDEX hookd_inbox_due ON hookd_inbox(next_attempt_at, id) WHERE status IN ('pending', 'deferred');";

/*
 * The dashboard's per-minute series (GET /v1/stats) count the events and
 * inbound items of a window: an index on each time column makes that a range
 * of the index, not a scan of the table.
 */
static const char schema_stats_time_indexes[] =
    "CREATE INDEX hookd_outbox_created ON hookd_outbox(created_at);"
    "CREATE INDEX hookd_inbox_received ON hookd_inbox(received_at);";

/*
 * A replay record is listed under an account only when every delivery it
 * covers goes to that account's own endpoints (an account token reads the
 * records of its account). Records made before that rule which made a
 * delivery to an account-less endpoint, or to another account's, pending
 * again lose their account (the filter they keep still names it).
 */
static const char schema_replays_owned[] =
    "UPDATE hookd_replays SET account = NULL WHERE account IS NOT NULL AND EXISTS ("
    " SELECT 1 FROM hookd_replay_items i JOIN hookd_deliveries d ON d.id = i.delivery_id"
    " LEFT JOIN hookd_endpoints e ON e.id = d.endpoint_id"
    " WHERE i.replay_id = hookd_replays.id AND (e.account IS NULL OR e.account <> hookd_replays.account));";

/*
 * The transitions log's result check as comparisons: SQLite evaluates an IN
 * list of more than two values through an ephemeral table it builds for
 * each statement (a b-tree and its pager: ~2 µs an insert, measured), and
 * every decision inserts rows here. A CHECK cannot be altered, so the table
 * is rebuilt; the AUTOINCREMENT counter moves with it, so seq never goes back.
 */
static const char schema_transitions_check_compare[] =
    "CREATE TABLE hookd_transitions_new ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " inbox_id TEXT NOT NULL,"
    " source TEXT NOT NULL,"
    " kind TEXT NOT NULL,"
    " entity_id TEXT NOT NULL,"
    " event_id TEXT,"
    " from_state TEXT,"
    " to_state TEXT,"
    " version INTEGER,"
    " result TEXT NOT NULL CHECK (result = 'applied' OR result = 'stale' OR result = 'deferred'"
    "  OR result = 'quarantined' OR result = 'reconciled'),"
    " reason TEXT,"
    " worker TEXT,"
    " at INTEGER NOT NULL"
    ");"
    "INSERT INTO hookd_transitions_new(seq, inbox_id, source, kind, entity_id, event_id, from_state, to_state,"
    " version, result, reason, worker, at) SELECT seq, inbox_id, source, kind, entity_id, event_id, from_state,"
    " to_state, version, result, reason, worker, at FROM hookd_transitions ORDER BY seq;"
    "DELETE FROM sqlite_sequence WHERE name = 'hookd_transitions_new';"
    "UPDATE sqlite_sequence SET name = 'hookd_transitions_new' WHERE name = 'hookd_transitions';"
    "DROP TABLE hookd_transitions;"
    "ALTER TABLE hookd_transitions_new RENAME TO hookd_transitions;"
    "CREATE INDEX hookd_transitions_entity ON hookd_transitions(kind, entity_id, seq);"
    "CREATE INDEX hookd_transitions_inbox ON hookd_transitions(inbox_id);"
    "CREATE INDEX hookd_transitions_at ON hookd_transitions(at);";

/*
 * The dashboard's per-minute series count by id instead (store/stats_sql.h):
 * the indexes on the time columns go, and only the rows whose id does not
 * encode their time (written so by SQL or with a client's id) are indexed, by
 * id and by time, in partial indexes that hookd's own rows never enter.
 */
#define ODD_INDEXES(table, prefix, column)                                                                   \
    "CREATE INDEX " table "_odd_id ON " table "(id) WHERE " STATS_ODD_SQLITE(prefix, column) ";"              \
    "CREATE INDEX " table "_odd_time ON " table "(" column ") WHERE " STATS_ODD_SQLITE(prefix, column) ";"
static const char schema_stats_by_id[] =
    "DROP INDEX hookd_outbox_created;"
    "DROP INDEX hookd_inbox_received;"
    ODD_INDEXES("hookd_outbox", "evt_", "created_at") ODD_INDEXES("hookd_inbox", "inb_", "received_at");

/*
 * One index for an entity's items instead of two (one B-tree less to write
 * per accepted item of an entity; none for an item without an entity kind):
 * hookd_inbox_entity becomes (entity_kind, entity_id, status, source, id)
 * over the items that have a kind, and serves what hookd_inbox_open_entity
 * served, the claims' one-at-a-time test (kind, id, open statuses, source:
 * two short ranges), as well as the lists by kind or entity, the machines'
 * open items of an entity and the audit (the entity's items).
 */
static const char schema_inbox_entity_index[] =
    "DROP INDEX hookd_inbox_open_entity;"
    "DROP INDEX hookd_inbox_entity;"
    "CREATE INDEX hookd_inbox_entity ON hookd_inbox(entity_kind, entity_id, status, source, id)"
    " WHERE entity_kind IS NOT NULL;";

/*
 * A delivery's status checks as comparisons, in the table's CHECK and in the
 * health index's predicate: SQLite evaluates an IN list of more than two
 * values through an ephemeral table (a b-tree and its pager) built for each
 * statement, and these ran at every insert of a delivery (two) and every
 * completion (three: the CHECK, the predicate on the old row and on the new):
 * about a fifth of the writer's time in the throughput run. The predicate's
 * index is rebuilt (the queries repeat its text: health_sql.h). A CHECK
 * cannot be altered, and rebuilding hookd_deliveries would copy every row:
 * the table's text is edited instead, the procedure SQLite documents for
 * changing constraints that leave the stored rows as they are
 * (lang_altertable.html, "otheralter": writable_schema, then a schema
 * change that moves the schema cookie, here the index's). The new CHECK
 * accepts exactly the values the old one did.
 */
#define DELIVERY_STATUS_IN_QUOTED "status IN (''pending'', ''retrying'', ''delivered'', ''dead'', ''superseded'', ''skipped'')"
#define DELIVERY_STATUS_OR_QUOTED                                                                        \
    "status = ''pending'' OR status = ''retrying'' OR status = ''delivered'' OR status = ''dead''"      \
    " OR status = ''superseded'' OR status = ''skipped''"
static const char schema_deliveries_status_compare[] =
    "PRAGMA writable_schema = ON;"
    "UPDATE sqlite_master SET sql = replace(sql, 'CHECK (" DELIVERY_STATUS_IN_QUOTED ")',"
    " 'CHECK (" DELIVERY_STATUS_OR_QUOTED ")') WHERE type = 'table' AND name = 'hookd_deliveries';"
    "PRAGMA writable_schema = RESET;"
    "DROP INDEX hookd_deliveries_endpoint_status;"
    "CREATE INDEX hookd_deliveries_endpoint_status ON hookd_deliveries(endpoint_id, status, created_at)"
    " WHERE " HEALTH_STATUS_OR("") ";";

/* Every column of hookd_inbox after migration 8 (inbox_workers), in table order. */
#define INBOX_REBUILD_COLUMNS                                                                                \
    "id, source, event_id, event_type, entity_kind, entity_id, version, payload, payload_sha256,"             \
    " signature_verified, status, attempts, next_attempt_at, lease_owner, lease_until, lease_token, result,"  \
    " error, received_at, processed_at, dup_count, last_dup_at, conflict_count, deferred_at"

/*
 * The inbox's per-node lease index goes: every claim inserted an entry and
 * every outcome deleted it (two b-tree writes per attempt), for one reader,
 * the node's release of its leases at start, which walks the open items
 * instead (hookd_inbox_due: a lease is only ever held on an open item).
 */
static const char schema_inbox_leased_index_drop[] = "DROP INDEX hookd_inbox_leased;";

/*
 * The inbox's status check as comparisons (as the transitions log's,
 * transitions_check_compare): an IN list of four values made SQLite build an
 * ephemeral table for every insert and every status update of an item (the
 * receiver's insert, the outcome, the settling of a deferred item). A CHECK
 * cannot be altered, so the table is rebuilt with every row (rowids kept)
 * and every index it has at this point.
 */
static const char schema_inbox_check_compare[] =
    "CREATE TABLE hookd_inbox_new ("
    " id TEXT NOT NULL UNIQUE,"
    " source TEXT NOT NULL,"
    " event_id TEXT NOT NULL,"
    " event_type TEXT,"
    " entity_kind TEXT,"
    " entity_id TEXT,"
    " version INTEGER,"
    " payload TEXT NOT NULL,"
    " payload_sha256 TEXT NOT NULL,"
    " signature_verified INTEGER NOT NULL DEFAULT 0,"
    " status TEXT NOT NULL DEFAULT 'pending'"
    "  CHECK (status = 'pending' OR status = 'processed' OR status = 'deferred' OR status = 'quarantined'),"
    " attempts INTEGER NOT NULL DEFAULT 0,"
    " next_attempt_at INTEGER,"
    " lease_owner TEXT,"
    " lease_until INTEGER,"
    " lease_token INTEGER NOT NULL DEFAULT 0,"
    " result TEXT,"
    " error TEXT,"
    " received_at INTEGER NOT NULL,"
    " processed_at INTEGER,"
    " dup_count INTEGER NOT NULL DEFAULT 0,"
    " last_dup_at INTEGER,"
    " conflict_count INTEGER NOT NULL DEFAULT 0,"
    " deferred_at INTEGER,"
    " UNIQUE (source, event_id));"
    "INSERT INTO hookd_inbox_new(rowid, " INBOX_REBUILD_COLUMNS ")"
    " SELECT rowid, " INBOX_REBUILD_COLUMNS " FROM hookd_inbox ORDER BY rowid;"
    "DROP TABLE hookd_inbox;"
    "ALTER TABLE hookd_inbox_new RENAME TO hookd_inbox;"
    "CREATE INDEX hookd_inbox_due ON hookd_inbox(next_attempt_at, id) WHERE status IN ('pending', 'deferred');"
    "CREATE INDEX hookd_inbox_source ON hookd_inbox(source, id);"
    "CREATE INDEX hookd_inbox_status ON hookd_inbox(status, id);"
    "CREATE INDEX hookd_inbox_retention ON hookd_inbox(processed_at) WHERE status = 'processed' AND payload <> '';"
    "CREATE INDEX hookd_inbox_entity ON hookd_inbox(entity_kind, entity_id, status, source, id)"
    " WHERE entity_kind IS NOT NULL;"
    "CREATE INDEX hookd_inbox_odd_id ON hookd_inbox(id) WHERE " STATS_ODD_SQLITE("inb_", "received_at") ";"
    "CREATE INDEX hookd_inbox_odd_time ON hookd_inbox(received_at) WHERE " STATS_ODD_SQLITE("inb_", "received_at") ";";

/*
 * hookd_deliveries_due (next_attempt_at, of the open rows) goes, as it went on
 * PostgreSQL: every "earliest due" question is asked per endpoint, through
 * hookd_deliveries_endpoint_due (the claims and next_due name it), and no
 * statement's plan used this one; it cost an entry at every fan-out insert and
 * its removal at every final completion.
 */
static const char schema_deliveries_due_index_drop[] = "DROP INDEX hookd_deliveries_due;";

/*
 * A leased row leaves the claims' index: the earliest due rows of an endpoint
 * are its first entries, where before every claim, slot count and next_due
 * stepped over the endpoint's leased rows at the head of the due order (a
 * table lookup each, for lease_owner and lease_until). A row whose lease ran
 * out is found through hookd_deliveries_leased (lease_until < now) instead,
 * and its release puts it back. next_attempt_at keeps its meaning.
 *
 * The leases' index carries lease_owner: the lease counts name it (the
 * index's own condition), and SQLite looked each counted row up in the table
 * for it although the condition then needs no test; with it the count reads
 * the index alone.
 */
static const char schema_deliveries_due_unleased[] =
    "DROP INDEX hookd_deliveries_endpoint_due;"
    "CREATE INDEX hookd_deliveries_endpoint_due ON hookd_deliveries(endpoint_id, next_attempt_at, id)"
    " WHERE status IN ('pending', 'retrying') AND lease_owner IS NULL;"
    "DROP INDEX hookd_deliveries_leased;"
    "CREATE INDEX hookd_deliveries_leased ON hookd_deliveries(endpoint_id, lease_until, lease_owner)"
    " WHERE lease_owner IS NOT NULL;";

/*
 * The outbox's rules become CHECK constraints instead of the two triggers of
 * schema_outbox_check: the same expressions, named by the rule's message (the
 * error reads "CHECK constraint failed: hookd_outbox.id must be …"). A
 * trigger ran as a program of its own for every row written, with a statement
 * journal: 31 µs of CPU per single-row insert against 20 with the
 * constraints and 10 with neither (prepared inserts of 20,000 rows), paid by
 * every application's transaction and every event hookd writes. Adding a
 * CHECK needs the table rebuilt: the rows are copied as they are (checks off
 * for the copy, so rows written before the rules existed stay, and the relay
 * still rejects those), seq kept, and the indexes made again. SQLite checks a
 * row's constraints on an update only when the update changes a column they
 * name, so marking such a row dispatched still works.
 */
#define SQ_NO_NUL_COL(col) "instr(CAST(" col " AS BLOB), X'00') = 0"
#define SQ_BYTES_COL(col) "length(CAST(" col " AS BLOB))"
#define SQ_LABEL_OK_COL(col)                                                                                  \
    col " IS NULL OR (typeof(" col ") = 'text' AND " SQ_BYTES_COL(col) " <= 255 AND " col                      \
        " NOT GLOB ('*[' || char(1) || '-' || char(31) || char(127) || ']*') AND " SQ_NO_NUL_COL(col) ")"
#define OUTBOX_COLUMNS                                                                                        \
    "seq, id, account, event_type, resource_type, resource_id, resource_version, payload, idempotency_key,"  \
    " created_at, dispatched_at, error"
static const char schema_outbox_checks_inline[] =
    "DROP TRIGGER IF EXISTS hookd_outbox_check_insert;" /* IF EXISTS: an operator may have dropped one */
    "DROP TRIGGER IF EXISTS hookd_outbox_check_update;"
    "CREATE TABLE hookd_outbox_rebuilt (" SQ_OUTBOX_V1_COLUMNS ","
    " error TEXT,"
    " CONSTRAINT \"hookd_outbox.id must be 1 to 63 characters of A-Z a-z 0-9 _ . : -\""
    "  CHECK (typeof(id) = 'text' AND " SQ_BYTES_COL("id") " BETWEEN 1 AND 63"
    "  AND id NOT GLOB '*[^A-Za-z0-9_.:-]*' AND " SQ_NO_NUL_COL("id") "),"
    " CONSTRAINT \"hookd_outbox.event_type must be 1 to 128 characters of A-Z a-z 0-9 _ . -\""
    "  CHECK (typeof(event_type) = 'text' AND " SQ_BYTES_COL("event_type") " BETWEEN 1 AND 128"
    "  AND event_type NOT GLOB '*[^A-Za-z0-9_.-]*' AND " SQ_NO_NUL_COL("event_type") "),"
    " CONSTRAINT \"hookd_outbox.account must be at most 255 bytes without control characters\""
    "  CHECK (" SQ_LABEL_OK_COL("account") "),"
    " CONSTRAINT \"hookd_outbox.resource_type must be at most 255 bytes without control characters\""
    "  CHECK (" SQ_LABEL_OK_COL("resource_type") "),"
    " CONSTRAINT \"hookd_outbox.resource_id must be at most 255 bytes without control characters\""
    "  CHECK (" SQ_LABEL_OK_COL("resource_id") "));"
    "PRAGMA ignore_check_constraints = ON;"
    "INSERT INTO hookd_outbox_rebuilt(" OUTBOX_COLUMNS ") SELECT " OUTBOX_COLUMNS " FROM hookd_outbox;"
    "PRAGMA ignore_check_constraints = OFF;"
    "DROP TABLE hookd_outbox;"
    "ALTER TABLE hookd_outbox_rebuilt RENAME TO hookd_outbox;"
    "CREATE UNIQUE INDEX hookd_outbox_idempotency ON hookd_outbox(idempotency_key) WHERE idempotency_key IS NOT NULL;"
    "CREATE INDEX hookd_outbox_undispatched ON hookd_outbox(seq) WHERE dispatched_at IS NULL;"
    "CREATE INDEX hookd_outbox_resource ON hookd_outbox(resource_type, resource_id, seq) WHERE resource_id IS NOT NULL;"
    "CREATE INDEX hookd_outbox_odd_id ON hookd_outbox(id) WHERE " STATS_ODD_SQLITE("evt_", "created_at") ";"
    "CREATE INDEX hookd_outbox_odd_time ON hookd_outbox(created_at) WHERE " STATS_ODD_SQLITE("evt_", "created_at") ";";

/*
 * Two cuts of the emitted event's and the transitions row's cost, the
 * machines' hot path (DESIGN §7): the outbox's label checks build their
 * pattern of control characters from five char() calls and four
 * concatenations for every row and every checked column, where a constant
 * (the same eight bytes, written as a blob cast to text) is read as it is;
 * and the id check tries the shape of the ids hookd and the table's default
 * write ('evt_' and 32 lower-case hex digits: one class per character)
 * before the scan that tries every character against the whole allowed set
 * at every position. Each new expression accepts exactly the rows the old one
 * did: the pattern's bytes are the same, and an id of that shape passes the
 * scan. The text is edited as migration 21 edited hookd_deliveries' (no row
 * is copied), and the index drop below moves the schema cookie. Measured in
 * prepared single-row inserts of emitted events: 82.7k instructions a row
 * (its commit's share included) to 65.2k.
 *
 * hookd_transitions_at goes: no statement reads the log by time (the trace
 * reads it by entity, the audit by inbox id; nothing purges it), and every
 * decision wrote an entry into it for each row (4.4k instructions of a
 * row's 30.9k).
 */
#define OUTBOX_LABEL_PATTERN_OLD_QUOTED "(''*['' || char(1) || ''-'' || char(31) || char(127) || '']*'')"
#define OUTBOX_LABEL_PATTERN_NEW_QUOTED "CAST(X''2A5B012D1F7F5D2A'' AS TEXT)"
#define OUTBOX_ID_SCAN_QUOTED " AND id NOT GLOB ''*[^A-Za-z0-9_.:-]*''"
#define HEX8 "[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]"
#define OUTBOX_ID_SHAPED_QUOTED " AND (id GLOB ''evt_" HEX8 HEX8 HEX8 HEX8 "'' OR id NOT GLOB ''*[^A-Za-z0-9_.:-]*'')"
static const char schema_outbox_checks_constant[] =
    "PRAGMA writable_schema = ON;"
    "UPDATE sqlite_master SET sql = replace(replace(sql, '" OUTBOX_LABEL_PATTERN_OLD_QUOTED "',"
    " '" OUTBOX_LABEL_PATTERN_NEW_QUOTED "'), '" OUTBOX_ID_SCAN_QUOTED "', '" OUTBOX_ID_SHAPED_QUOTED "')"
    " WHERE type = 'table' AND name = 'hookd_outbox';"
    "PRAGMA writable_schema = RESET;"
    "DROP INDEX hookd_transitions_at;";

/* The same name as PostgreSQL's view of every delivery (there it adds those in flight before their
 * first result, which have no row yet); here every delivery has its row. */
static const char schema_deliveries_all_view[] = "CREATE VIEW hookd_deliveries_all AS SELECT * FROM hookd_deliveries;";

/* The same name as PostgreSQL's view of every attempt (there it adds the first attempts kept in their
 * delivery rows, schema 33); here every attempt is a row of hookd_attempts. */
static const char schema_attempts_all_view[] =
    "CREATE VIEW hookd_attempts_all AS SELECT id, delivery_id, n, started_at, duration_ms, status_code, error_class,"
    " error, response, response_body, node, response_truncated FROM hookd_attempts;";

/*
 * hookd_inbox_entity carries what an accept's hold of a contiguous entity
 * reads of each open item before it reads the few it can pass whole
 * (sqlite_hold.c): the version, the next look (a live lease is only taken
 * on an item due, so an item not due holds none) and the type. The hold
 * walks the index alone instead of finding every open item's row (about
 * twenty a decision in the machine bench: a fifth of the writer's
 * instructions). The id goes (the rowid is in every entry; no statement
 * read the id from this index), so an entry grows by the three. An update
 * of the new columns follows a change of status (the index has it already)
 * except the next look's alone: a retry that stays open, a machine's wake.
 */
static const char schema_inbox_entity_versions[] =
    "DROP INDEX hookd_inbox_entity;"
    "CREATE INDEX hookd_inbox_entity ON hookd_inbox(entity_kind, entity_id, status, source, version,"
    " next_attempt_at, event_type) WHERE entity_kind IS NOT NULL;";

/*
 * hookd_transitions_inbox goes: hookd's only statements that look up an
 * item's transitions by inbox id are the audit's, which join every applied
 * row of the log to its item whatever the index (a scan of the log with a
 * probe of hookd_inbox's id per row; the one grouping by item sorts what it
 * scanned instead of reading the index in order, as the grouping by entity
 * and version did already). Every decision writes 1.9 rows on average in the
 * machine bench, each of which kept an entry here (2k instructions a row).
 * PostgreSQL keeps its index (its schema is its own).
 */
static const char schema_transitions_inbox_index_drop[] = "DROP INDEX IF EXISTS hookd_transitions_inbox;";

const struct schema_migration sqlite_migrations[] = {
    {1, schema_v1},
    {2, schema_v2},
    {3, schema_v3},
    {4, schema_inbound},
    {5, schema_attempt_bytes},
    {6, schema_outbox_check},
    {7, schema_endpoint_headers},
    {8, schema_inbox_workers},
    {9, schema_delivery_order},
    {10, schema_endpoint_state},
    {11, schema_machines},
    {12, schema_replays_tokens},
    {13, schema_alerts_retention},
    {14, schema_endpoint_health},
    {15, schema_inbox_claim_order},
    {16, schema_stats_time_indexes},
    {17, schema_replays_owned},
    {18, schema_transitions_check_compare},
    {19, schema_stats_by_id},
    {20, schema_inbox_entity_index},
    {21, schema_deliveries_status_compare},
    {22, schema_inbox_leased_index_drop},
    {23, schema_inbox_check_compare},
    {24, schema_deliveries_due_index_drop},
    {25, schema_deliveries_due_unleased},
    {26, schema_outbox_checks_inline},
    {27, schema_outbox_checks_constant},
    {28, schema_deliveries_all_view},
    {29, schema_attempts_all_view},
    {30, schema_inbox_entity_versions},
    {31, schema_transitions_inbox_index_drop},
};

const size_t sqlite_migrations_count = sizeof sqlite_migrations / sizeof sqlite_migrations[0];
