/*
 * `hookd listen` scripting, parsed from the command line (pure, unit-tested):
 *   --respond LIST   answers consumed one per request: STATUS[;retry-after=V][;delay=D][;location=URL],...
 *   --delay LIST     delays consumed one per request: 10ms,2s,...
 *   --status PATH=CODE   a fixed answer for one path
 */
#ifndef HOOKD_CLI_LISTEN_H
#define HOOKD_CLI_LISTEN_H
#include <stddef.h>
#include <stdint.h>

#define LISTEN_SCRIPT_MAX 1000000 /* items in one --respond or --delay list */
#define LISTEN_HEADER_VALUE_MAX 1024

struct listen_answer {
    int status;          /* 100..599 */
    char *retry_after;   /* NULL: no Retry-After header */
    char *location;      /* NULL: no Location header */
    int64_t delay_ms;    /* 0: answer at once */
};

struct listen_script {
    struct listen_answer *items;
    size_t n;
};

struct listen_delays {
    int64_t *ms;
    size_t n;
};

struct listen_status_rule {
    char *path;
    int status;
};

/* Each returns 0 or HOOKD_EINVAL/HOOKD_ENOMEM with a message in err; outputs are freed with the *_free below. */
__attribute__((warn_unused_result)) int listen_script_parse(const char *text, struct listen_script *out, char *err,
                                                            size_t errlen);
void listen_script_free(struct listen_script *s);
__attribute__((warn_unused_result)) int listen_delays_parse(const char *text, struct listen_delays *out, char *err,
                                                            size_t errlen);
void listen_delays_free(struct listen_delays *d);
__attribute__((warn_unused_result)) int listen_status_rule_parse(const char *text, struct listen_status_rule *out,
                                                                 char *err, size_t errlen);
void listen_status_rule_free(struct listen_status_rule *r);
#endif
