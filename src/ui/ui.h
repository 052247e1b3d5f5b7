/*
 * The dashboard (/ui/) and the customer portal (/portal/): static files
 * compiled into the binary (src/ui/static/, embedded by ui.c) and served on
 * the admin listener without a token; the pages call the /v1 API with the
 * admin token (dashboard) or an account token (portal) kept in the browser's
 * session storage, never in a URL the server sees.
 */
#ifndef HOOKD_UI_UI_H
#define HOOKD_UI_UI_H
#include <stddef.h>
#include "net/http.h"

struct ui_asset {
    const char *path; /* as served, without the leading "/": "ui/index.html" */
    const char *type; /* Content-Type */
    const unsigned char *data;
    size_t len;
};

/* The asset served at a URL path ("/ui/", "/ui/app.js", "/portal/"), or NULL. */
const struct ui_asset *ui_asset_find(const char *url_path);
/* The handler of GET /ui, /portal and the files under /ui/, /portal/ and /lib/. */
void ui_serve(struct http_request *req, struct http_response *res, void *ctx);
#endif
