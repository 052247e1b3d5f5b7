/*
 * Test tool: publishes one event with hookd_publish_pg() inside its own
 * PostgreSQL transaction, then commits or rolls back, as an application would.
 * usage: publish_pg_tool URL commit|rollback TYPE DATA_JSON  → prints the event id
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>

#include "hookd.h"

/* Runs one statement without result rows; false (with the server's message on stderr) on failure. */
static int exec_ok(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;

    if (!ok)
        fprintf(stderr, "postgres: %s: %s", sql, PQerrorMessage(conn));
    PQclear(res);
    return ok;
}

int main(int argc, char **argv)
{
    PGconn *conn = NULL;
    char id[HOOKD_ID_MAX];
    struct hookd_event ev = {0};
    int commit, r, status = 1;

    if (argc != 5 || (strcmp(argv[2], "commit") != 0 && strcmp(argv[2], "rollback") != 0)) {
        fprintf(stderr, "usage: publish_pg_tool URL commit|rollback TYPE DATA_JSON\n");
        return 2;
    }
    commit = strcmp(argv[2], "commit") == 0;
    conn = PQconnectdb(argv[1]);
    if (PQstatus(conn) != CONNECTION_OK) {
        fprintf(stderr, "postgres: %s", PQerrorMessage(conn));
        goto out;
    }
    /* The application's own business write and the event share the transaction. */
    if (!exec_ok(conn, "BEGIN") ||
        !exec_ok(conn, "CREATE TABLE IF NOT EXISTS app_orders(id BIGSERIAL PRIMARY KEY, note TEXT)") ||
        !exec_ok(conn, "INSERT INTO app_orders(note) VALUES ('business change')"))
        goto out;
    ev.type = argv[3];
    ev.data_json = argv[4];
    ev.account = "acme";
    r = hookd_publish_pg(conn, &ev, id);
    if (r != 0) {
        fprintf(stderr, "hookd_publish_pg: %s\n", hookd_strerror(r));
        (void)exec_ok(conn, "ROLLBACK");
        goto out;
    }
    if (!exec_ok(conn, commit ? "COMMIT" : "ROLLBACK"))
        goto out;
    printf("%s\n", id);
    status = 0;
out:
    PQfinish(conn);
    return status;
}
