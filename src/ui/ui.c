/*
 * Serving the dashboard and portal files. Each file under src/ui/static/ is
 * embedded by the assembler (.incbin; the Makefile makes this object depend
 * on the files) and listed in the table below: adding a file is one UI_FILE
 * line and one table row. Answers carry a strict Content-Security-Policy
 * (scripts and styles only from these files, no inline code, no framing), an
 * ETag for revalidation, and no-referrer so a page's URL never leaves it.
 */
#include "ui/ui.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UI_FILE(sym, file)                                                                                  \
    __asm__(".section .rodata\n.balign 16\n.globl " #sym "_data\n.hidden " #sym "_data\n" #sym "_data:\n"   \
            ".incbin \"src/ui/static/" file "\"\n.globl " #sym "_end\n.hidden " #sym "_end\n" #sym "_end:\n" \
            ".byte 0\n.previous\n");                                                                       \
    extern const unsigned char sym##_data[], sym##_end[]

UI_FILE(ui_index, "ui/index.html");
UI_FILE(ui_app_js, "ui/app.js");
UI_FILE(ui_app_css, "ui/app.css");
UI_FILE(ui_common_js, "ui/common.js");
UI_FILE(ui_chart_js, "ui/chart.js");
UI_FILE(ui_overview_js, "ui/overview.js");
UI_FILE(ui_endpoints_js, "ui/endpoints.js");
UI_FILE(ui_events_js, "ui/events.js");
UI_FILE(ui_dead_js, "ui/dead.js");
UI_FILE(ui_inbound_js, "ui/inbound.js");
UI_FILE(portal_index, "portal/index.html");
UI_FILE(portal_js, "portal/portal.js");
UI_FILE(portal_css, "portal/portal.css");
UI_FILE(lib_hookd_js, "lib/hookd.js");
UI_FILE(lib_base_css, "lib/base.css");

#define HTML "text/html; charset=utf-8"
#define JS "text/javascript; charset=utf-8"
#define CSS "text/css; charset=utf-8"
#define ROW(path, type, sym) {path, type, sym##_data, 0, sym##_end, ""}

static struct ui_file {
    const char *path;
    const char *type;
    const unsigned char *data;
    size_t len;
    const unsigned char *end;
    char etag[24];
} files[] = {
    ROW("ui/index.html", HTML, ui_index),
    ROW("ui/app.js", JS, ui_app_js),
    ROW("ui/app.css", CSS, ui_app_css),
    ROW("ui/common.js", JS, ui_common_js),
    ROW("ui/chart.js", JS, ui_chart_js),
    ROW("ui/overview.js", JS, ui_overview_js),
    ROW("ui/endpoints.js", JS, ui_endpoints_js),
    ROW("ui/events.js", JS, ui_events_js),
    ROW("ui/dead.js", JS, ui_dead_js),
    ROW("ui/inbound.js", JS, ui_inbound_js),
    ROW("portal/index.html", HTML, portal_index),
    ROW("portal/portal.js", JS, portal_js),
    ROW("portal/portal.css", CSS, portal_css),
    ROW("lib/hookd.js", JS, lib_hookd_js),
    ROW("lib/base.css", CSS, lib_base_css),
};
static struct ui_asset assets[sizeof files / sizeof files[0]];
static pthread_once_t files_once = PTHREAD_ONCE_INIT;

static const char csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                          "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
                          "frame-ancestors 'none'";

/* Lengths from the symbols, and an ETag (FNV-1a of the bytes) per file, once. */
static void files_init(void)
{
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        struct ui_file *f = &files[i];
        uint64_t h = 1469598103934665603ULL;

        f->len = (size_t)(f->end - f->data);
        for (size_t b = 0; b < f->len; b++)
            h = (h ^ f->data[b]) * 1099511628211ULL;
        snprintf(f->etag, sizeof f->etag, "\"%016llx\"", (unsigned long long)h);
        assets[i] = (struct ui_asset){f->path, f->type, f->data, f->len};
    }
}

static const struct ui_file *file_find(const char *url_path)
{
    char want[64];
    const char *p = url_path[0] == '/' ? url_path + 1 : url_path;
    size_t n = strlen(p);

    if (n == 0 || n >= sizeof want - sizeof "index.html")
        return NULL;
    memcpy(want, p, n + 1);
    if (want[n - 1] == '/')
        memcpy(want + n, "index.html", sizeof "index.html");
    pthread_once(&files_once, files_init);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (strcmp(files[i].path, want) == 0)
            return &files[i];
    return NULL;
}

const struct ui_asset *ui_asset_find(const char *url_path)
{
    const struct ui_file *f = file_find(url_path);

    return f ? &assets[f - files] : NULL;
}

/* An If-None-Match list holds this tag (or is "*"). */
static bool etag_matches(const char *header, const char *etag)
{
    size_t n = strlen(etag);

    if (header == NULL)
        return false;
    for (const char *p = header; (p = strpbrk(p, "*\"")) != NULL; p++) {
        if (*p == '*' || strncmp(p, etag, n) == 0)
            return true;
        if ((p = strchr(p + 1, '"')) == NULL)
            break;
    }
    return false;
}

void ui_serve(struct http_request *req, struct http_response *res, void *ctx)
{
    const char *path = http_path(req);
    const struct ui_file *f;
    char *body;

    (void)ctx;
    if (strcmp(path, "/ui") == 0 || strcmp(path, "/portal") == 0) {
        char to[16];
        snprintf(to, sizeof to, "%s/", path);
        http_reply(res, 308, NULL, 0);
        http_add_header(res, "Location", to);
        return;
    }
    if ((f = file_find(path)) == NULL) {
        http_reply_error(res, 404, "not_found", "no such page");
        return;
    }
    http_add_header(res, "Cache-Control", "no-cache");
    http_add_header(res, "ETag", f->etag);
    http_add_header(res, "X-Content-Type-Options", "nosniff");
    http_add_header(res, "Referrer-Policy", "no-referrer");
    if (strcmp(f->type, HTML) == 0)
        http_add_header(res, "Content-Security-Policy", csp);
    if (etag_matches(http_header(req, "If-None-Match"), f->etag)) {
        http_reply(res, 304, NULL, 0);
        return;
    }
    if ((body = malloc(f->len ? f->len : 1)) == NULL) {
        http_reply_error(res, 503, "out_of_memory", "cannot serve the page now");
        return;
    }
    memcpy(body, f->data, f->len);
    http_reply(res, 200, body, f->len);
    res->content_type = f->type;
}
