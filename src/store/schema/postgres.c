/*
 * The PostgreSQL schema as numbered migrations (DESIGN §4): the same tables
 * and columns as the SQLite schema, times as BIGINT unix milliseconds, ids as
 * TEXT in the "C" collation (cursors compare them bytewise, as SQLite does).
 * A migration is never edited once released: changes go into a new entry.
 */
#include "store/schema/postgres.h"

#include "store/stats_sql.h"

/* Churning tables: vacuum after 1 % of dead rows instead of 20 %, so a busy
 * outbox or delivery table does not bloat between autovacuum runs. */
#define CHURN_STORAGE                                                                          \
    "autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,"               \
    " autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02"

static const char schema_v1[] =
    /* Unix milliseconds of the current statement: one "now" for every default of a row. */
    "CREATE OR REPLACE FUNCTION hookd_now_ms() RETURNS bigint LANGUAGE sql STABLE"
    " AS $$ SELECT floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint $$;"
    /* The shape of core/ids.h: evt_ + 12 hex digits of milliseconds + 20 random hex digits. */
    "CREATE OR REPLACE FUNCTION hookd_event_id() RETURNS text LANGUAGE sql VOLATILE"
    " AS $$ SELECT 'evt_' || lpad(to_hex(floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint), 12, '0')"
    " || substr(md5(random()::text || clock_timestamp()::text), 1, 20) $$;"
    /* A JSON check that returns false instead of raising an error, so that
     * hookd_publish_pg() can refuse bad input without aborting the caller's
     * transaction. The json type (not jsonb) checks the syntax only. */
    "CREATE OR REPLACE FUNCTION hookd_json_valid(t text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$"
    " BEGIN PERFORM t::json; RETURN t IS NOT NULL;"
    " EXCEPTION WHEN data_exception THEN RETURN false; END $$;"

    /* The outbox is the public contract: a bare INSERT of event_type and
     * payload from any application gets an evt_ id and created_at. */
    "CREATE TABLE hookd_outbox ("
    " seq BIGSERIAL PRIMARY KEY,"
    " id TEXT COLLATE \"C\" NOT NULL UNIQUE DEFAULT hookd_event_id(),"
    " account TEXT,"
    " event_type TEXT NOT NULL,"
    " resource_type TEXT,"
    " resource_id TEXT,"
    " resource_version BIGINT,"
    " payload TEXT NOT NULL DEFAULT '{}'," /* text, so the payload comes back byte for byte */
    " idempotency_key TEXT,"
    " created_at BIGINT NOT NULL DEFAULT hookd_now_ms(),"
    " dispatched_at BIGINT"
    ") WITH (" CHURN_STORAGE ");"
    "CREATE UNIQUE INDEX hookd_outbox_idempotency ON hookd_outbox(idempotency_key)"
    " WHERE idempotency_key IS NOT NULL;"
    "CREATE INDEX hookd_outbox_undispatched ON hookd_outbox(seq) WHERE dispatched_at IS NULL;"
    /* Relays LISTEN on hookd_outbox. One notification per inserting statement,
     * sent at commit and merged within a transaction; plain SQL inserts wake
     * the relays too. */
    "CREATE OR REPLACE FUNCTION hookd_outbox_notify() RETURNS trigger LANGUAGE plpgsql"
    " AS $$ BEGIN NOTIFY hookd_outbox; RETURN NULL; END $$;"
    "CREATE TRIGGER hookd_outbox_notify AFTER INSERT ON hookd_outbox"
    " FOR EACH STATEMENT EXECUTE FUNCTION hookd_outbox_notify();"

    "CREATE TABLE hookd_endpoints ("
    " id TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
    " account TEXT,"
    " url TEXT NOT NULL,"
    " description TEXT,"
    " event_types TEXT NOT NULL DEFAULT '[]',"
    " secrets TEXT NOT NULL DEFAULT '[]',"
    " enabled BOOLEAN NOT NULL DEFAULT true,"
    " disabled_reason TEXT,"
    " ordering TEXT NOT NULL DEFAULT 'none' CHECK (ordering IN ('none', 'key', 'latest')),"
    " max_in_flight INTEGER NOT NULL DEFAULT 0,"
    " rate_limit INTEGER NOT NULL DEFAULT 0,"
    " timeout_ms BIGINT NOT NULL DEFAULT 0,"
    " retry_schedule TEXT,"
    " created_at BIGINT NOT NULL DEFAULT hookd_now_ms(),"
    " updated_at BIGINT NOT NULL DEFAULT hookd_now_ms(),"
    " disabled_at BIGINT);"
    "CREATE INDEX hookd_endpoints_account ON hookd_endpoints(account, id);"

    /* fillfactor 80 leaves room on each page for HOT updates of the lease columns. */
    "CREATE TABLE hookd_deliveries ("
    " id TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
    " event_id TEXT COLLATE \"C\" NOT NULL,"
    " endpoint_id TEXT COLLATE \"C\" NOT NULL,"
    " account TEXT,"
    " status TEXT NOT NULL DEFAULT 'pending'"
    "  CHECK (status IN ('pending', 'retrying', 'delivered', 'dead', 'superseded', 'skipped')),"
    " attempt_count INTEGER NOT NULL DEFAULT 0,"
    " next_attempt_at BIGINT,"
    " last_status_code INTEGER,"
    " last_error TEXT,"
    " first_attempt_at BIGINT,"
    " last_attempt_at BIGINT,"
    " delivered_at BIGINT,"
    " created_at BIGINT NOT NULL DEFAULT hookd_now_ms(),"
    " lease_owner TEXT,"
    " lease_until BIGINT,"
    " lease_token BIGINT NOT NULL DEFAULT 0,"
    " UNIQUE (event_id, endpoint_id)"
    ") WITH (fillfactor = 80, " CHURN_STORAGE ");"
    /* Only open deliveries are in the due indexes, so they stay small. */
    "CREATE INDEX hookd_deliveries_due ON hookd_deliveries(next_attempt_at)"
    " WHERE status IN ('pending', 'retrying');"
    "CREATE INDEX hookd_deliveries_endpoint_due ON hookd_deliveries(endpoint_id, next_attempt_at)"
    " WHERE status IN ('pending', 'retrying');"
    /* Leases per endpoint, for the in-flight caps of the claim. */
    "CREATE INDEX hookd_deliveries_leased ON hookd_deliveries(endpoint_id, lease_until)"
    " WHERE lease_owner IS NOT NULL;"
    "CREATE INDEX hookd_deliveries_endpoint ON hookd_deliveries(endpoint_id, id);"
    "CREATE INDEX hookd_deliveries_status ON hookd_deliveries(status, id);"

    "CREATE TABLE hookd_attempts ("
    " id BIGSERIAL PRIMARY KEY,"
    " delivery_id TEXT COLLATE \"C\" NOT NULL,"
    " n INTEGER NOT NULL,"
    " started_at BIGINT NOT NULL,"
    " duration_ms INTEGER NOT NULL DEFAULT 0,"
    " status_code INTEGER,"
    " error_class TEXT,"
    " error TEXT,"
    " response TEXT,"
    " node TEXT"
    ") WITH (" CHURN_STORAGE ");"
    "CREATE INDEX hookd_attempts_delivery ON hookd_attempts(delivery_id, n);"

    "CREATE TABLE hookd_meta (key TEXT COLLATE \"C\" NOT NULL PRIMARY KEY, value TEXT);"
    /* The endpoint cache validator: bumped by every row written to
     * hookd_endpoints, including plain-SQL writes made outside hookd. The
     * function's search_path is the migrating session's, so the trigger finds
     * hookd_meta whatever the writing session's search_path is. */
    "INSERT INTO hookd_meta(key, value) VALUES ('endpoints_version', '0');"
    "CREATE OR REPLACE FUNCTION hookd_endpoints_bump() RETURNS trigger LANGUAGE plpgsql"
    " SET search_path FROM CURRENT AS $$ BEGIN"
    " UPDATE hookd_meta SET value = (value::bigint + 1)::text WHERE key = 'endpoints_version';"
    " RETURN NULL; END $$;"
    "CREATE TRIGGER hookd_endpoints_bump AFTER INSERT OR UPDATE OR DELETE ON hookd_endpoints"
    " FOR EACH ROW EXECUTE FUNCTION hookd_endpoints_bump();";

/* The claim reads each endpoint's due rows in (next_attempt_at, id) order and
 * stops at its limit: with id in the index it needs no sort, so a claim costs
 * what it takes, not the endpoint's whole backlog. */
static const char schema_v2[] =
    "CREATE INDEX hookd_deliveries_endpoint_due_v2 ON hookd_deliveries(endpoint_id, next_attempt_at, id)"
    " WHERE status IN ('pending', 'retrying');"
    "DROP INDEX hookd_deliveries_endpoint_due;"
    "ALTER INDEX hookd_deliveries_endpoint_due_v2 RENAME TO hookd_deliveries_endpoint_due;";

/*
 * The leases each endpoint holds, for the in-flight caps, move out of the
 * deliveries' indexes into a narrow table of their own (one row per leased
 * delivery, kept by the claim, completion and release statements). Then no
 * index of hookd_deliveries covers a lease column, so a claim's update of
 * lease_owner, lease_until and lease_token is a HOT update: a new row version
 * on the same page and no index entries, where it used to add one to each of
 * the table's seven indexes. Rows whose lease_until has passed count for
 * nothing; the next claim of the delivery overwrites them. It churns like the
 * others but holds at most the caps' worth of live rows, so the server's
 * autovacuum settings (50 dead rows + 20 %) visit it sooner than CHURN_STORAGE
 * would (1,000): bench/churn.sh saw fewer dead rows with them.
 */
static const char schema_v3[] =
    "CREATE TABLE hookd_inflight ("
    " delivery_id TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
    " endpoint_id TEXT COLLATE \"C\" NOT NULL,"
    " owner TEXT NOT NULL,"
    " lease_until BIGINT NOT NULL"
    ");"
    "CREATE INDEX hookd_inflight_endpoint ON hookd_inflight(endpoint_id, lease_until);"
    "INSERT INTO hookd_inflight(delivery_id, endpoint_id, owner, lease_until)"
    " SELECT id, endpoint_id, lease_owner, COALESCE(lease_until, 0) FROM hookd_deliveries"
    " WHERE lease_owner IS NOT NULL AND status IN ('pending', 'retrying');"
    "DROP INDEX hookd_deliveries_leased;"
    /* Every "earliest due" question is asked per endpoint, through
     * hookd_deliveries_endpoint_due: an index on next_attempt_at alone only
     * cost an entry per insert and retry, and tempted the planner into
     * walking all endpoints' rows in time order for one endpoint's. */
    "DROP INDEX hookd_deliveries_due;"
    /* A claim leases runs of neighbouring rows, and a HOT update needs room on
     * the row's own page: half of each page is left free (new pages only). */
    "ALTER TABLE hookd_deliveries SET (fillfactor = 50);";

/*
 * hookd_json_valid() was never called (no CHECK, trigger or query used it):
 * JSON text is checked in one place, core/json_check.c, by hookd_publish_pg()
 * and by the relay for rows inserted with plain SQL.
 */
static const char schema_v4[] = "DROP FUNCTION IF EXISTS hookd_json_valid(text);";

/*
 * The inbound families (DESIGN §4, §6): sources with their cache validator
 * (a trigger, like the endpoints'), the inbox (one row per (source,
 * event_id): the key the receiver's INSERT … ON CONFLICT DO UPDATE runs
 * into), and the bounded rejection log with its counters. Self-contained,
 * so it can be renumbered at a merge.
 */
static const char schema_inbound[] =
    "CREATE TABLE hookd_sources ("
    " name TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
    " definition TEXT NOT NULL,"
    " secrets TEXT NOT NULL DEFAULT '{}',"
    " created_at BIGINT NOT NULL DEFAULT floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint,"
    " updated_at BIGINT NOT NULL DEFAULT floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint);"
    "INSERT INTO hookd_meta(key, value) VALUES ('sources_version', '0') ON CONFLICT (key) DO NOTHING;"
    "CREATE OR REPLACE FUNCTION hookd_sources_bump() RETURNS trigger LANGUAGE plpgsql"
    " SET search_path FROM CURRENT AS $$ BEGIN"
    " UPDATE hookd_meta SET value = (value::bigint + 1)::text WHERE key = 'sources_version';"
    " RETURN NULL; END $$;"
    "CREATE TRIGGER hookd_sources_bump AFTER INSERT OR UPDATE OR DELETE ON hookd_sources"
    " FOR EACH ROW EXECUTE FUNCTION hookd_sources_bump();"

    "CREATE TABLE hookd_inbox ("
    " id TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
    " source TEXT COLLATE \"C\" NOT NULL,"
    " event_id TEXT COLLATE \"C\" NOT NULL,"
    " event_type TEXT,"
    " entity_kind TEXT COLLATE \"C\","
    " entity_id TEXT COLLATE \"C\","
    " version BIGINT,"
    " payload TEXT NOT NULL," /* text: the body comes back byte for byte */
    " payload_sha256 TEXT NOT NULL,"
    " signature_verified BOOLEAN NOT NULL DEFAULT false,"
    " status TEXT NOT NULL DEFAULT 'pending'"
    "  CHECK (status IN ('pending', 'processed', 'deferred', 'quarantined')),"
    " attempts INTEGER NOT NULL DEFAULT 0,"
    " next_attempt_at BIGINT,"
    " lease_owner TEXT,"
    " lease_until BIGINT,"
    " lease_token BIGINT NOT NULL DEFAULT 0,"
    " result TEXT,"
    " error TEXT,"
    " received_at BIGINT NOT NULL,"
    " processed_at BIGINT,"
    " dup_count INTEGER NOT NULL DEFAULT 0,"
    " last_dup_at BIGINT,"
    " conflict_count INTEGER NOT NULL DEFAULT 0,"
    " UNIQUE (source, event_id)"
    ") WITH (fillfactor = 80);" /* room for HOT updates of status, leases and dup counts */
    "CREATE INDEX hookd_inbox_due ON hookd_inbox(next_attempt_at) WHERE status IN ('pending', 'deferred');"
    "CREATE INDEX hookd_inbox_source ON hookd_inbox(source, id);"
    "CREATE INDEX hookd_inbox_entity ON hookd_inbox(entity_kind, entity_id, id);"
    "CREATE INDEX hookd_inbox_status ON hookd_inbox(status, id);"

    "CREATE TABLE hookd_rejections ("
    " id BIGSERIAL PRIMARY KEY,"
    " source TEXT COLLATE \"C\" NOT NULL,"
    " at BIGINT NOT NULL,"
    " reason TEXT NOT NULL,"
    " peer TEXT,"
    " size BIGINT NOT NULL DEFAULT 0,"
    " sha256 TEXT);"
    "CREATE INDEX hookd_rejections_source ON hookd_rejections(source, id);"
    "CREATE TABLE hookd_rejection_counts ("
    " source TEXT COLLATE \"C\" NOT NULL,"
    " reason TEXT COLLATE \"C\" NOT NULL,"
    " count BIGINT NOT NULL DEFAULT 0,"
    " last_at BIGINT NOT NULL,"
    " PRIMARY KEY (source, reason));";

/*
 * Response snippets as bytes (bytea), with a flag for a snippet cut at the
 * cap: a text column refuses bytes that are not UTF-8, and a NUL. Adding
 * nullable columns rewrites nothing; older rows keep their text in response
 * (read through STORE_ATTEMPT_POSTGRES_RESPONSE).
 */
static const char schema_attempt_bytes[] =
    "ALTER TABLE hookd_attempts ADD COLUMN response_body bytea;"
    "ALTER TABLE hookd_attempts ADD COLUMN response_truncated BOOLEAN NOT NULL DEFAULT false;";

/*
 * The outbox is untrusted input (issue 9): a row's id, type, account and
 * resource fields keep the rules of core/event_check.h whoever writes them,
 * plain SQL included. A trigger, not a CHECK: a CHECK added NOT VALID is
 * still checked on every later UPDATE of a row, so the relay could not mark
 * a row written before this migration; the trigger looks at the checked
 * columns only, and such rows are rejected by the relay (into the new
 * `error` column). PostgreSQL text holds no NUL and only valid UTF-8.
 * The limits are core/event_check.h's (63, 128, 255).
 */
#define PG_REFUSE(cond, msg) " IF " cond " THEN RAISE EXCEPTION USING ERRCODE = 'check_violation', MESSAGE = '" msg "'; END IF;"
#define PG_LABEL_BAD(col) "octet_length(NEW." col ") > 255 OR NEW." col " ~ '[\\x01-\\x1f\\x7f]'"
#define PG_REFUSE_LABELS                                                                                         \
    PG_REFUSE(PG_LABEL_BAD("account"), "hookd_outbox.account must be at most 255 bytes without control characters") \
    PG_REFUSE(PG_LABEL_BAD("resource_type"),                                                                      \
              "hookd_outbox.resource_type must be at most 255 bytes without control characters")                 \
    PG_REFUSE(PG_LABEL_BAD("resource_id"),                                                                        \
              "hookd_outbox.resource_id must be at most 255 bytes without control characters")
static const char schema_outbox_check[] =
    "ALTER TABLE hookd_outbox ADD COLUMN error TEXT;"
    "CREATE OR REPLACE FUNCTION hookd_outbox_check() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    PG_REFUSE("NEW.id IS NULL OR NEW.id COLLATE \"C\" !~ '^[A-Za-z0-9_.:-]{1,63}$'",
              "hookd_outbox.id must be 1 to 63 characters of A-Z a-z 0-9 _ . : -")
    PG_REFUSE("NEW.event_type IS NULL OR NEW.event_type COLLATE \"C\" !~ '^[A-Za-z0-9_.-]{1,128}$'",
              "hookd_outbox.event_type must be 1 to 128 characters of A-Z a-z 0-9 _ . -")
    PG_REFUSE_LABELS
    " RETURN NEW; END $$;"
    "CREATE TRIGGER hookd_outbox_check BEFORE INSERT OR UPDATE OF id, event_type, account, resource_type, resource_id"
    " ON hookd_outbox FOR EACH ROW EXECUTE FUNCTION hookd_outbox_check();";

/* Static custom headers of an endpoint: a JSON object {"Name": "value"}, NULL for none. */
static const char schema_endpoint_headers[] = "ALTER TABLE hookd_endpoints ADD COLUMN headers TEXT;";

/* Inbox workers: the deferral clock, and the open items of an entity for the claim's one-at-a-time rule. */
static const char schema_inbox_workers[] =
    "ALTER TABLE hookd_inbox ADD COLUMN deferred_at BIGINT;"
    "CREATE INDEX hookd_inbox_open_entity ON hookd_inbox(source, entity_kind, entity_id, id)"
    " WHERE status IN ('pending', 'deferred') AND entity_id IS NOT NULL;"
    "CREATE INDEX hookd_inbox_leased ON hookd_inbox(lease_owner) WHERE lease_owner IS NOT NULL;";

/*
 * Ordering (key and latest modes): a delivery of an ordered endpoint carries
 * its resource's key, its event's outbox seq and version, so a claim can ask
 * whether an older delivery of the same resource is still open, and a newer
 * version supersede older ones, each with one probe of this index. Unordered
 * deliveries (the most) have no entry in it. Adding nullable columns without
 * defaults rewrites nothing.
 */
static const char schema_delivery_order[] =
    "ALTER TABLE hookd_deliveries ADD COLUMN order_key TEXT COLLATE \"C\","
    " ADD COLUMN order_seq BIGINT, ADD COLUMN order_version BIGINT;"
    "CREATE INDEX hookd_deliveries_order ON hookd_deliveries(endpoint_id, order_key, order_seq)"
    " WHERE order_key IS NOT NULL;";

/*
 * Per-endpoint delivery state, shared by every node (DESIGN §3): the circuit
 * breaker, the start of the current run of failures (auto-disable) and the
 * rate limit's token bucket in milli-tokens, updated by the attempt results
 * and, under the endpoint's claim lock, by the claims. A table of its own
 * beside hookd_endpoints: it changes with attempts and claims, the endpoint's
 * settings do not (and their cache validator must not move with it). A
 * missing row is a closed breaker, no failures and a full bucket; a deleted
 * endpoint's row goes with it.
 */
static const char schema_endpoint_state[] =
    "CREATE TABLE hookd_endpoint_state ("
    " endpoint_id TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
    " breaker TEXT NOT NULL DEFAULT 'closed' CHECK (breaker IN ('closed', 'open', 'half_open')),"
    " consecutive_failures INTEGER NOT NULL DEFAULT 0,"
    " opened_at BIGINT,"
    " next_probe_at BIGINT,"
    " probe_interval_ms BIGINT NOT NULL DEFAULT 0,"
    " probe_until BIGINT,"
    " closed_at BIGINT,"
    " failing_since BIGINT,"
    " tokens_milli BIGINT,"
    " tokens_at BIGINT"
    ") WITH (fillfactor = 50);"
    "CREATE OR REPLACE FUNCTION hookd_endpoint_state_gone() RETURNS trigger LANGUAGE plpgsql"
    " SET search_path FROM CURRENT AS $$ BEGIN"
    " DELETE FROM hookd_endpoint_state WHERE endpoint_id = old.id;"
    " RETURN NULL; END $$;"
    "CREATE TRIGGER hookd_endpoint_state_gone AFTER DELETE ON hookd_endpoints"
    " FOR EACH ROW EXECUTE FUNCTION hookd_endpoint_state_gone();";

/*
 * State machines (DESIGN §7): definitions, the entities they keep (state,
 * last applied version, last event), and the append-only log of every
 * decision taken on an inbox item (applied, stale, deferred, quarantined,
 * reconciled) with who took it and when: the trace and the audit read it.
 */
static const char schema_machines[] =
    "CREATE TABLE hookd_machines ("
    " name TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
    " definition TEXT NOT NULL,"
    " created_at BIGINT NOT NULL,"
    " updated_at BIGINT NOT NULL"
    ");"
    "CREATE TABLE hookd_entities ("
    " kind TEXT COLLATE \"C\" NOT NULL,"
    " id TEXT COLLATE \"C\" NOT NULL,"
    " state TEXT,"
    " version BIGINT,"
    " last_event_id TEXT,"
    " updated_at BIGINT NOT NULL,"
    " PRIMARY KEY (kind, id)"
    ");"
    "CREATE TABLE hookd_transitions ("
    " seq BIGSERIAL PRIMARY KEY,"
    " inbox_id TEXT COLLATE \"C\" NOT NULL,"
    " source TEXT COLLATE \"C\" NOT NULL,"
    " kind TEXT COLLATE \"C\" NOT NULL,"
    " entity_id TEXT COLLATE \"C\" NOT NULL,"
    " event_id TEXT,"
    " from_state TEXT,"
    " to_state TEXT,"
    " version BIGINT,"
    " result TEXT NOT NULL CHECK (result IN ('applied', 'stale', 'deferred', 'quarantined', 'reconciled')),"
    " reason TEXT,"
    " worker TEXT,"
    " at BIGINT NOT NULL"
    ");"
    "CREATE INDEX hookd_transitions_entity ON hookd_transitions(kind, entity_id, seq);"
    "CREATE INDEX hookd_transitions_inbox ON hookd_transitions(inbox_id);"
    "CREATE INDEX hookd_transitions_at ON hookd_transitions(at);";

/*
 * Replays and account tokens (DESIGN §12). A replay's items are the
 * deliveries it made pending again: its progress is counted from their
 * statuses now, so nothing has to update the replay as they go. Tokens keep
 * only the SHA-256 of their secret; a trigger bumps tokens_version on every
 * write (the auth cache's validator on every node, as sources_version is the
 * receiver's).
 */
static const char schema_replays_tokens[] =
    "CREATE TABLE hookd_replays ("
    " id TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
    " actor TEXT NOT NULL,"
    " account TEXT COLLATE \"C\","
    " kind TEXT NOT NULL CHECK (kind IN ('delivery', 'event', 'range')),"
    " filter TEXT NOT NULL,"
    " created_at BIGINT NOT NULL,"
    " finished_at BIGINT,"
    " matched INTEGER NOT NULL DEFAULT 0,"
    " replayed INTEGER NOT NULL DEFAULT 0,"
    " skipped INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX hookd_replays_account ON hookd_replays(account, id);"
    "CREATE TABLE hookd_replay_items ("
    " replay_id TEXT COLLATE \"C\" NOT NULL,"
    " delivery_id TEXT COLLATE \"C\" NOT NULL,"
    " PRIMARY KEY (replay_id, delivery_id));"
    "CREATE TABLE hookd_tokens ("
    " id TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
    " account TEXT COLLATE \"C\" NOT NULL,"
    " scope TEXT NOT NULL CHECK (scope IN ('read', 'read_replay')),"
    " token_hash TEXT NOT NULL UNIQUE,"
    " description TEXT,"
    " created_by TEXT NOT NULL,"
    " created_at BIGINT NOT NULL,"
    " expires_at BIGINT NOT NULL,"
    " revoked_at BIGINT);"
    "CREATE INDEX hookd_tokens_account ON hookd_tokens(account, id);"
    "INSERT INTO hookd_meta(key, value) VALUES ('tokens_version', '0') ON CONFLICT (key) DO NOTHING;"
    "CREATE OR REPLACE FUNCTION hookd_tokens_bump() RETURNS trigger LANGUAGE plpgsql"
    " SET search_path FROM CURRENT AS $$ BEGIN"
    " UPDATE hookd_meta SET value = (value::bigint + 1)::text WHERE key = 'tokens_version';"
    " RETURN NULL; END $$;"
    "CREATE TRIGGER hookd_tokens_bump AFTER INSERT OR UPDATE OR DELETE ON hookd_tokens"
    " FOR EACH STATEMENT EXECUTE FUNCTION hookd_tokens_bump();";

/*
 * Operations: alerts (one open alert per rule and subject: a partial unique
 * index), and the indexes the alert rules and the retention purge read: attempts
 * by start time (error rates over a window), final deliveries by creation
 * (the purge takes the oldest), processed inbox items still holding their
 * payload by processing time (a purged one leaves the index).
 */
static const char schema_alerts_retention[] =
    "CREATE TABLE hookd_alerts ("
    " id TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
    " rule TEXT NOT NULL,"
    " subject TEXT NOT NULL,"
    " message TEXT NOT NULL,"
    " details TEXT NOT NULL DEFAULT '{}',"
    " opened_at BIGINT NOT NULL,"
    " resolved_at BIGINT);"
    "CREATE UNIQUE INDEX hookd_alerts_open ON hookd_alerts(rule, subject) WHERE resolved_at IS NULL;"
    "CREATE INDEX hookd_alerts_subject ON hookd_alerts(rule, subject, resolved_at);"
    "CREATE INDEX hookd_attempts_started ON hookd_attempts(started_at);"
    "CREATE INDEX hookd_deliveries_final ON hookd_deliveries(created_at)"
    " WHERE status IN ('delivered', 'superseded');"
    "CREATE INDEX hookd_inbox_retention ON hookd_inbox(processed_at)"
    " WHERE status = 'processed' AND payload <> '';";

/*
 * Library sources (handler {"library": true}, DESIGN §6): the application
 * processes their items with hookd_inbox_work(), and the daemon's claims
 * leave them out (store/inbox_sql.h). Whether a definition names that handler,
 * false for one that is not JSON (plain SQL can write one): a bad row must not
 * fail every claim. Self-contained, so it can be renumbered at a merge.
 */
static const char schema_inbox_library[] =
    "CREATE OR REPLACE FUNCTION hookd_source_is_library(definition text) RETURNS boolean"
    " LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$ BEGIN"
    " RETURN coalesce((definition::jsonb #> '{handler,library}') = 'true'::jsonb, false);"
    " EXCEPTION WHEN others THEN RETURN false; END $$;";

/*
 * Inbox wake-ups across nodes: workers LISTEN on hookd_inbox, so an item
 * committed on any node (or made pending again by a replay) starts processing
 * within milliseconds instead of at the next poll. One notification per
 * inserting statement, and the server folds repeats within a transaction (a
 * group commit is one); the watcher on each node coalesces them further
 * (inbound/inbox_watch.c). The trigger looks at no row: a filter per statement
 * (which sources the workers process) cost more on every accept than the
 * wake-ups it saved. Claims and completions do not notify: that would wake
 * every node on every step. Self-contained, so it can be renumbered at a merge.
 */
static const char schema_inbox_notify[] =
    "CREATE OR REPLACE FUNCTION hookd_inbox_notify() RETURNS trigger LANGUAGE plpgsql"
    " AS $$ BEGIN NOTIFY hookd_inbox; RETURN NULL; END $$;"
    "CREATE TRIGGER hookd_inbox_notify_insert AFTER INSERT ON hookd_inbox"
    " FOR EACH STATEMENT EXECUTE FUNCTION hookd_inbox_notify();"
    "CREATE TRIGGER hookd_inbox_notify_replay AFTER UPDATE OF status ON hookd_inbox"
    " FOR EACH ROW WHEN (new.status = 'pending' AND old.status <> 'pending')"
    " EXECUTE FUNCTION hookd_inbox_notify();";

/*
 * Endpoint health: the SQLite schema's migration of the same name (attempt
 * buckets per endpoint, minute and node; each endpoint's latest attempt; the
 * queue and resource indexes). Rows are keyed by node so that two nodes'
 * result batches never wait for each other on a shared counter row; a
 * deleted endpoint's buckets go with it (its failure rows age out).
 */
static const char schema_endpoint_health[] =
    "CREATE TABLE hookd_endpoint_minutes ("
    " endpoint_id TEXT COLLATE \"C\" NOT NULL,"
    " minute BIGINT NOT NULL,"
    " node TEXT COLLATE \"C\" NOT NULL,"
    " attempts BIGINT NOT NULL DEFAULT 0,"
    " successes BIGINT NOT NULL DEFAULT 0,"
    " retries_started BIGINT NOT NULL DEFAULT 0,"
    " retries_ended BIGINT NOT NULL DEFAULT 0,"
    " PRIMARY KEY (endpoint_id, minute, node)"
    ") WITH (fillfactor = 70);"
    "CREATE INDEX hookd_endpoint_minutes_minute ON hookd_endpoint_minutes(minute);"
    "CREATE TABLE hookd_latency_minutes ("
    " endpoint_id TEXT COLLATE \"C\" NOT NULL,"
    " minute BIGINT NOT NULL,"
    " node TEXT COLLATE \"C\" NOT NULL,"
    " bucket INTEGER NOT NULL,"
    " count BIGINT NOT NULL DEFAULT 0,"
    " PRIMARY KEY (endpoint_id, minute, node, bucket)"
    ") WITH (fillfactor = 70);"
    "CREATE INDEX hookd_latency_minutes_minute ON hookd_latency_minutes(minute);"
    "CREATE TABLE hookd_failure_minutes ("
    " minute BIGINT NOT NULL,"
    " endpoint_id TEXT COLLATE \"C\" NOT NULL,"
    " account_null BOOLEAN NOT NULL,"
    " account TEXT COLLATE \"C\" NOT NULL,"
    " status_code INTEGER NOT NULL,"
    " error_class TEXT COLLATE \"C\" NOT NULL,"
    " node TEXT COLLATE \"C\" NOT NULL,"
    " count BIGINT NOT NULL DEFAULT 0,"
    " PRIMARY KEY (minute, endpoint_id, account_null, account, status_code, error_class, node)"
    ") WITH (fillfactor = 70);"
    "CREATE TABLE hookd_endpoint_last ("
    " endpoint_id TEXT COLLATE \"C\" NOT NULL,"
    " node TEXT COLLATE \"C\" NOT NULL,"
    " last_attempt_at BIGINT,"
    " last_success_at BIGINT,"
    " last_error_at BIGINT,"
    " last_error_status_code INTEGER,"
    " last_error_class TEXT,"
    " last_error TEXT,"
    " PRIMARY KEY (endpoint_id, node)"
    ") WITH (fillfactor = 50);"
    "CREATE OR REPLACE FUNCTION hookd_endpoint_health_gone() RETURNS trigger LANGUAGE plpgsql"
    " SET search_path FROM CURRENT AS $$ BEGIN"
    " DELETE FROM hookd_endpoint_minutes WHERE endpoint_id = old.id;"
    " DELETE FROM hookd_latency_minutes WHERE endpoint_id = old.id;"
    " DELETE FROM hookd_endpoint_last WHERE endpoint_id = old.id;"
    " RETURN NULL; END $$;"
    "CREATE TRIGGER hookd_endpoint_health_gone AFTER DELETE ON hookd_endpoints"
    " FOR EACH ROW EXECUTE FUNCTION hookd_endpoint_health_gone();"
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
 * hookd_deliveries_status (status, id) holds no delivered row: a completion
 * that ends a delivery as delivered is not a HOT update (status is indexed
 * elsewhere too), so it added an entry to every full index, this one among
 * them, at the busy right edge of ('delivered', id). Lists of the other
 * statuses repeat the predicate in their text (postgres_deliveries.c) so
 * that their generic plans can use the index; the signal and figure queries
 * name their statuses as literals, which imply it. A list of delivered rows
 * walks the primary key newest first, where they are the most.
 */
static const char schema_deliveries_status_undelivered[] =
    "DROP INDEX hookd_deliveries_status;"
    "CREATE INDEX hookd_deliveries_status ON hookd_deliveries(status, id) WHERE status <> 'delivered';";

/*
 * The relays' wake-up, skipped for a session that asked (store_quiet_outbox:
 * the connections machine decisions commit on). NOTIFY takes a lock at commit
 * that the server holds until the commit is on disk, so every notifying
 * transaction of the server waits for the one before it, fsync included:
 * four decision connections emitting events committed one after the other
 * instead of together (at 1,000 decisions/s, p50 accept->applied 260-750 ms
 * against 16 ms without). Such a session wakes its own node's relay after
 * its commit; other nodes find the rows at their safety poll. Inserts by
 * every other session (and by plain SQL) notify as before. Self-contained.
 */
static const char schema_outbox_notify_quiet[] =
    "CREATE OR REPLACE FUNCTION hookd_outbox_notify() RETURNS trigger LANGUAGE plpgsql"
    " AS $$ BEGIN"
    " IF current_setting('hookd.outbox_notify', true) IS DISTINCT FROM 'off' THEN NOTIFY hookd_outbox; END IF;"
    " RETURN NULL; END $$;";

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
 * A machine decision settles the open items a chain applied in one call: a
 * loop of single-row updates by id, each on the primary key whatever the
 * statistics say (an UPDATE joined to an unnest of the ids is planned once
 * per connection, and a plan made while the table was small scans it).
 * Returns the number of items settled; the fence is inbox_settle's.
 * Self-contained, so it can be renumbered at a merge.
 */
static const char schema_inbox_settle_many[] =
    "CREATE OR REPLACE FUNCTION hookd_inbox_settle_many(ids text[], statuses text[], results text[],"
    " errors text[], nexts bigint[], now_ms bigint) RETURNS bigint LANGUAGE plpgsql AS $$"
    " DECLARE settled bigint := 0; changed bigint; k int;"
    " BEGIN"
    "  FOR k IN 1 .. coalesce(array_length(ids, 1), 0) LOOP"
    "   UPDATE hookd_inbox SET status = statuses[k], result = results[k], error = errors[k],"
    "    next_attempt_at = CASE WHEN statuses[k] = 'deferred' THEN nexts[k] END,"
    "    processed_at = CASE WHEN statuses[k] = 'processed' THEN now_ms ELSE processed_at END,"
    "    deferred_at = CASE WHEN statuses[k] = 'deferred' THEN COALESCE(deferred_at, now_ms) END,"
    "    attempts = attempts + 1"
    "   WHERE id = ids[k] AND status IN ('pending', 'deferred') AND (lease_until IS NULL OR lease_until <= now_ms);"
    "   GET DIAGNOSTICS changed = ROW_COUNT;"
    "   settled := settled + changed;"
    "  END LOOP;"
    "  RETURN settled;"
    " END $$;";

/*
 * The dashboard's per-minute series count by id instead (store/stats_sql.h):
 * the indexes on the time columns go, and only the rows whose id does not
 * encode their time (written so by SQL or with a client's id) are indexed, by
 * id and by time, in partial indexes that hookd's own rows never enter.
 */
#define ODD_INDEXES(table, prefix, column)                                                                   \
    "CREATE INDEX " table "_odd_id ON " table "(id) WHERE " STATS_ODD_PG(prefix, column) ";"                  \
    "CREATE INDEX " table "_odd_time ON " table "(" column ") WHERE " STATS_ODD_PG(prefix, column) ";"
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
 * Inbox wake-ups only for the items someone works on: an inserting statement
 * notifies when one of its new rows is of a source with a handler (forward,
 * machine, or the application's library handler: the words in its
 * definition, so a doubtful definition notifies). A row of a source nothing
 * processes woke every node's workers, which claimed it and put it off again
 * (a claim and a write per accepted item on the accept path's own writer:
 * bench inbound on PostgreSQL ran at half speed). The filter reads the
 * statement's new rows once per statement, and an accept's statement is the
 * whole group commit now (store_inbox_insert_many): its cost is per batch,
 * not per accept. Copies (ON CONFLICT DO UPDATE) are no new rows and notify
 * no one, as before only by accident. Self-contained, so it can be
 * renumbered at a merge.
 */
static const char schema_inbox_notify_handled[] =
    "CREATE OR REPLACE FUNCTION hookd_inbox_notify_added() RETURNS trigger LANGUAGE plpgsql"
    " AS $$ BEGIN"
    " IF EXISTS (SELECT 1 FROM hookd_sources s WHERE s.name IN (SELECT a.source FROM added a)"
    "  AND (s.definition LIKE '%\"forward\"%' OR s.definition LIKE '%\"machine\"%'"
    "  OR s.definition LIKE '%\"library\"%')) THEN NOTIFY hookd_inbox; END IF;"
    " RETURN NULL; END $$;"
    "DROP TRIGGER hookd_inbox_notify_insert ON hookd_inbox;"
    "CREATE TRIGGER hookd_inbox_notify_insert AFTER INSERT ON hookd_inbox REFERENCING NEW TABLE AS added"
    " FOR EACH STATEMENT EXECUTE FUNCTION hookd_inbox_notify_added();";

/*
 * The inbox's per-node lease index goes. A fenced outcome (WHERE id = $1 AND
 * lease_owner = $2 AND lease_token = $3) was planned once per connection,
 * while the inbox was small, on that index rather than the primary key, and
 * read every item the node held for each outcome (132 buffers an update,
 * pg_stat_statements, a shuffled machine run); and as an indexed column,
 * lease_owner made every claim a non-HOT update. The node's release of its
 * leases at start walks the open items instead (a lease is only ever held on
 * an open item).
 */
static const char schema_inbox_leased_index_drop[] = "DROP INDEX hookd_inbox_leased;";

/*
 * The machine a source's definition names (handler.machine), or NULL, also
 * for a definition that is not JSON (plain SQL can write one): a machine's
 * update wakes the deferred items of its sources with it.
 */
static const char schema_source_machine_function[] =
    "CREATE OR REPLACE FUNCTION hookd_source_machine(definition text) RETURNS text"
    " LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$ BEGIN"
    " RETURN definition::jsonb #>> '{handler,machine}';"
    " EXCEPTION WHEN others THEN RETURN NULL; END $$;";

/*
 * The outbox check, the same rules in cheaper tests: a bounded repetition
 * (`^[…]{1,63}$`) makes the regex engine walk a 63-state automaton for
 * every row, and the check cost about 75 µs a row, more than the rest of
 * the insert (20,000 emitted-event rows: 2.2–3.1 s against 0.6 s without
 * the trigger). The length is compared as a number and the characters
 * against one negated class: 0.7–1.3 s. The class holds only ASCII, so a
 * byte count is the character count; NULL, empty, too long and any other
 * character are refused as before, with the same messages.
 */
static const char schema_outbox_check_cheaper[] =
    "CREATE OR REPLACE FUNCTION hookd_outbox_check() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    PG_REFUSE("NEW.id IS NULL OR octet_length(NEW.id) NOT BETWEEN 1 AND 63"
              " OR NEW.id COLLATE \"C\" ~ '[^A-Za-z0-9_.:-]'",
              "hookd_outbox.id must be 1 to 63 characters of A-Z a-z 0-9 _ . : -")
    PG_REFUSE("NEW.event_type IS NULL OR octet_length(NEW.event_type) NOT BETWEEN 1 AND 128"
              " OR NEW.event_type COLLATE \"C\" ~ '[^A-Za-z0-9_.-]'",
              "hookd_outbox.event_type must be 1 to 128 characters of A-Z a-z 0-9 _ . -")
    PG_REFUSE_LABELS
    " RETURN NEW; END $$;";

/*
 * Room on each page for the new versions of an item's row: the claim's lease
 * changes no indexed column and can be a HOT update (no entry in the nine
 * indexes) only while the row's page has room for its new version, and every
 * item's row is written again two or three times (lease, outcome, settle).
 * At 80, 10 % of the updates of a shuffled machine run were HOT. New pages
 * only: existing rows move as they are updated.
 */
static const char schema_inbox_fillfactor[] = "ALTER TABLE hookd_inbox SET (fillfactor = 50);";

/*
 * A decision's writes, cheaper on the server. hookd_transitions_at goes: no
 * statement reads the transitions log by time (the trace reads it by entity,
 * the audit by inbox id; nothing purges it), and every decision wrote an
 * entry into it for each row.
 *
 * hookd_inbox_settle_many becomes one UPDATE joined to the unnested arrays
 * instead of a loop of single-row ones: each statement of the loop set up its
 * executor, and a status change (never a HOT update: nine indexes, five of
 * them partial, each predicate prepared again) cost about 72 us a row that
 * way against 30 in one statement (2,000 rows on the bench's inbox); in the
 * shuffled machine run the loop was the server's largest cost (8,133 rows,
 * 189 us each). The plan stays a probe of the primary key per id whatever
 * the statistics say: the fence's condition is written as a CASE, which no
 * partial index's predicate can be proved from (the due index matched the
 * plain IN and was walked whole), and the function plans with sequential
 * scans, hash and merge joins priced out (a plan cached while the table was
 * small must not scan it once it is large). Same arguments, same fence, the
 * number of items settled.
 */
static const char schema_decision_writes[] =
    "DROP INDEX hookd_transitions_at;"
    "CREATE OR REPLACE FUNCTION hookd_inbox_settle_many(ids text[], statuses text[], results text[],"
    " errors text[], nexts bigint[], now_ms bigint) RETURNS bigint LANGUAGE plpgsql"
    " SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$"
    " DECLARE settled bigint;"
    " BEGIN"
    "  UPDATE hookd_inbox i SET status = u.status, result = u.result, error = u.error,"
    "   next_attempt_at = CASE WHEN u.status = 'deferred' THEN u.next END,"
    "   processed_at = CASE WHEN u.status = 'processed' THEN now_ms ELSE i.processed_at END,"
    "   deferred_at = CASE WHEN u.status = 'deferred' THEN COALESCE(i.deferred_at, now_ms) END,"
    "   attempts = i.attempts + 1"
    "  FROM unnest(ids, statuses, results, errors, nexts) AS u(id, status, result, error, next)"
    "  WHERE i.id = u.id"
    "  AND CASE WHEN i.status IN ('pending', 'deferred') THEN i.lease_until IS NULL OR i.lease_until <= now_ms END;"
    "  GET DIAGNOSTICS settled = ROW_COUNT;"
    "  RETURN settled;"
    " END $$;";

/*
 * Deliveries leased without their row (DESIGN §3, "Unrecorded deliveries"):
 * a fan-out that sends a delivery at once writes only its lease here, with
 * what it takes to write the row later (event_id, created_at; event_id set
 * marks such a lease), and the first result writes the delivery row in its
 * state after that attempt. lease_token fences that first record as the
 * row's token fences the others.
 */
static const char schema_inflight_unrecorded[] =
    "ALTER TABLE hookd_inflight ADD COLUMN lease_token BIGINT NOT NULL DEFAULT 0,"
    " ADD COLUMN event_id TEXT COLLATE \"C\", ADD COLUMN created_at BIGINT;"
    /* Every delivery, those in flight before their first result included (pending, leased): what the
     * API's reads and an application's SQL see. */
    "CREATE VIEW hookd_deliveries_all AS"
    " SELECT id, event_id, endpoint_id, account, status, attempt_count, next_attempt_at, last_status_code,"
    " last_error, first_attempt_at, last_attempt_at, delivered_at, created_at, lease_owner, lease_until,"
    " lease_token FROM hookd_deliveries"
    " UNION ALL SELECT x.delivery_id, x.event_id, x.endpoint_id, o.account, 'pending', 0, x.created_at,"
    " NULL::integer, NULL::text, NULL::bigint, NULL::bigint, NULL::bigint, x.created_at, x.owner, x.lease_until,"
    " x.lease_token FROM hookd_inflight x JOIN hookd_outbox o ON o.id = x.event_id WHERE x.event_id IS NOT NULL;";

/*
 * A delivery's first attempt stored in its row (DESIGN §3, "Unrecorded
 * deliveries"): the first result of an unrecorded delivery writes the row
 * with its attempt in the attempt1_* columns and no hookd_attempts row (a
 * delivery sent once and delivered is one row, not two, and three index
 * entries fewer). The columns are the attempt's as in hookd_attempts, n is 1;
 * they are written once, with the row, and never changed: retries and
 * replays add their attempts to hookd_attempts as before. A delivery first
 * sent through a claim has them NULL and all its attempts as rows.
 *
 * hookd_attempts_all is every attempt, the inline ones first (id 0: the
 * attempt lists order by id); a condition on delivery_id reaches both
 * branches' keys. The alert signals count the attempts of a time window:
 * hookd_attempts_started serves the rows, and the partial index here the
 * inline ones (only rows that have one, so a claim's completion, a retry,
 * adds no entry).
 */
static const char schema_attempt_inline[] =
    "ALTER TABLE hookd_deliveries ADD COLUMN attempt1_started_at BIGINT, ADD COLUMN attempt1_duration_ms INTEGER,"
    " ADD COLUMN attempt1_status_code INTEGER, ADD COLUMN attempt1_error_class TEXT, ADD COLUMN attempt1_error TEXT,"
    " ADD COLUMN attempt1_response_body bytea, ADD COLUMN attempt1_response_truncated BOOLEAN,"
    " ADD COLUMN attempt1_node TEXT;"
    "CREATE INDEX hookd_deliveries_attempt1_started ON hookd_deliveries(attempt1_started_at)"
    " WHERE attempt1_started_at IS NOT NULL;"
    "CREATE VIEW hookd_attempts_all AS"
    " SELECT 0::bigint AS id, id AS delivery_id, 1 AS n, attempt1_started_at AS started_at,"
    " attempt1_duration_ms AS duration_ms, attempt1_status_code AS status_code, attempt1_error_class AS error_class,"
    " attempt1_error AS error, NULL::text AS response, attempt1_response_body AS response_body, attempt1_node AS node,"
    " attempt1_response_truncated AS response_truncated FROM hookd_deliveries WHERE attempt1_started_at IS NOT NULL"
    " UNION ALL SELECT id, delivery_id, n, started_at, duration_ms, status_code, error_class, error, response,"
    " response_body, node, response_truncated FROM hookd_attempts;";

/*
 * An outbox seq is taken once the inserting transaction has its id: a
 * transaction that holds a seq is then in every snapshot's in-progress list
 * until it ends, which is what lets the relay's takes start from a floor
 * above the dispatched rows (postgres_events.c, "The take's floor"). The
 * sequence is still the column's own (nextval in order, one value at a time).
 */
static const char schema_outbox_seq_after_xid[] =
    /* The column's own sequence, whatever its name (hookd_outbox_seq_seq unless that name was taken). */
    "DO $do$ BEGIN EXECUTE format('CREATE FUNCTION hookd_outbox_next_seq() RETURNS bigint LANGUAGE plpgsql"
    " VOLATILE AS $f$ BEGIN PERFORM pg_current_xact_id(); RETURN nextval(%L::regclass); END $f$',"
    " pg_get_serial_sequence('hookd_outbox', 'seq')); END $do$;"
    "ALTER TABLE hookd_outbox ALTER COLUMN seq SET DEFAULT hookd_outbox_next_seq();";

/*
 * When each lease was made, by the server's clock (milliseconds): a lease of
 * an endpoint made within the last moments tells a node that holds none of
 * the endpoint's slots that they turn over on another node, so its fan-out
 * waits for them instead of leaving its deliveries to the claims (DESIGN §2,
 * rule 2). The server's clock, so the nodes' clocks need not agree; the
 * statement's time, so the column gets a fast default (no table rewrite).
 * Renewals leave it alone: a hung endpoint's leases look old.
 */
static const char schema_inflight_made_at[] =
    "ALTER TABLE hookd_inflight ADD COLUMN made_at BIGINT NOT NULL"
    " DEFAULT (extract(epoch FROM statement_timestamp()) * 1000)::bigint;";

const struct schema_migration postgres_migrations[] = {
    {1, schema_v1},
    {2, schema_v2},
    {3, schema_v3},
    {4, schema_v4},
    {5, schema_inbound},
    {6, schema_attempt_bytes},
    {7, schema_outbox_check},
    {8, schema_endpoint_headers},
    {9, schema_inbox_workers},
    {10, schema_delivery_order},
    {11, schema_endpoint_state},
    {12, schema_machines},
    {13, schema_replays_tokens},
    {14, schema_alerts_retention},
    {15, schema_inbox_library},
    {16, schema_inbox_notify},
    {17, schema_endpoint_health},
    {18, schema_inbox_claim_order},
    {19, schema_deliveries_status_undelivered},
    {20, schema_outbox_notify_quiet},
    {21, schema_stats_time_indexes},
    {22, schema_replays_owned},
    {23, schema_inbox_settle_many},
    {24, schema_stats_by_id},
    {25, schema_inbox_entity_index},
    {26, schema_inbox_notify_handled},
    {27, schema_inbox_leased_index_drop},
    {28, schema_source_machine_function},
    {29, schema_outbox_check_cheaper},
    {30, schema_inbox_fillfactor},
    {31, schema_decision_writes},
    {32, schema_inflight_unrecorded},
    {33, schema_attempt_inline},
    {34, schema_outbox_seq_after_xid},
    {35, schema_inflight_made_at},
};

const size_t postgres_migrations_count = sizeof postgres_migrations / sizeof postgres_migrations[0];
