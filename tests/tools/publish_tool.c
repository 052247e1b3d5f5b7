/*
 * Test tool: publishes one event with hookd_publish() inside its own SQLite
 * transaction, then commits or rolls back, as an application would.
 * usage: publish_tool DB commit|rollback TYPE DATA_JSON  → prints the event id
 */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "hookd.h"

int main(int argc, char **argv)
{
    sqlite3 *db = NULL;
    char id[HOOKD_ID_MAX];
    struct hookd_event ev = {0};
    int r;

    if (argc != 5 || (strcmp(argv[2], "commit") != 0 && strcmp(argv[2], "rollback") != 0)) {
        fprintf(stderr, "usage: publish_tool DB commit|rollback TYPE DATA_JSON\n");
        return 2;
    }
    if (sqlite3_open(argv[1], &db) != SQLITE_OK)
        goto fail;
    sqlite3_busy_timeout(db, 5000);
    /* The application's own business write and the event share the transaction. */
    if (sqlite3_exec(db, "BEGIN IMMEDIATE; CREATE TABLE IF NOT EXISTS app_orders(id INTEGER PRIMARY KEY, note TEXT);"
                         "INSERT INTO app_orders(note) VALUES ('business change');",
                     NULL, NULL, NULL) != SQLITE_OK)
        goto fail;
    ev.type = argv[3];
    ev.data_json = argv[4];
    ev.account = "acme";
    r = hookd_publish(db, &ev, id);
    if (r != 0) {
        fprintf(stderr, "hookd_publish: %s\n", hookd_strerror(r));
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(db);
        return 1;
    }
    if (sqlite3_exec(db, strcmp(argv[2], "commit") == 0 ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL) != SQLITE_OK)
        goto fail;
    printf("%s\n", id);
    sqlite3_close(db);
    return 0;
fail:
    fprintf(stderr, "sqlite: %s\n", db != NULL ? sqlite3_errmsg(db) : "open failed");
    sqlite3_close(db);
    return 1;
}
