/* Test helper: one statement on a libpq connection that must succeed (the test fails with the server's message). */
#ifndef HOOKD_TESTS_PG_EXEC_H
#define HOOKD_TESTS_PG_EXEC_H

#include <libpq-fe.h>

static inline void pg_exec_ok(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
}
#endif
