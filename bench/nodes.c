/*
 * The hookd side of a run: starts `hookd serve` nodes, waits for their health check, creates
 * endpoints through the admin API (libcurl), stops them, and reads their CPU time and RSS from /proc.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "nodes.h"

#define BENCH_SECRET_KEY "62656e63682d6f6e6c792d7468726f776177617920736563726574206b657921"
#define N_OWN_ENV 7 /* variables loadgen itself sets for hookd serve */
#define HEALTH_WAIT_MS 20000
#define STOP_WAIT_MS 10000

extern char **environ;

/* ---------------------------------------------------------------- HTTP client (admin API, health) */

struct resp_buf {
    char *p;
    size_t len, cap;
};

static size_t resp_write(char *data, size_t size, size_t nmemb, void *arg)
{
    struct resp_buf *b = arg;
    size_t n = size * nmemb, room = b->cap > b->len + 1 ? b->cap - b->len - 1 : 0, take = n < room ? n : room;

    if (b->p != NULL && take > 0) {
        memcpy(b->p + b->len, data, take);
        b->len += take;
        b->p[b->len] = '\0';
    }
    return n;
}

/* The HTTP status of one request (0 when it failed); the body, capped, in resp when given. */
long http_status(const char *method, const char *url, const char *token, const char *body, char *resp,
                 size_t resp_cap)
{
    struct resp_buf rb = {resp, 0, resp_cap};
    struct curl_slist *hdrs = NULL;
    char auth[128];
    long code = 0;
    CURL *e = curl_easy_init();

    if (e == NULL)
        return 0;
    if (resp != NULL && resp_cap > 0)
        resp[0] = '\0';
    if (token != NULL) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        hdrs = curl_slist_append(hdrs, auth);
        explicit_bzero(auth, sizeof auth);
    }
    if (body != NULL) {
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    }
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(e, CURLOPT_PROXY, ""); /* never a proxy from the environment */
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, resp_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &rb);
    if (curl_easy_perform(e) == CURLE_OK)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(e);
    return code;
}

/* ---------------------------------------------------------------- hookd process */

/* Two distinct free loopback ports (bound together, then released for hookd to take). */
static int free_ports(int *a, int *b)
{
    int fds[2] = {-1, -1}, *outs[2] = {a, b}, result = 0;

    for (int i = 0; i < 2 && result == 0; i++) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof sa;
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&sa, sizeof sa) != 0 ||
            getsockname(fds[i], (struct sockaddr *)&sa, &len) != 0)
            result = -1;
        *outs[i] = ntohs(sa.sin_port);
    }
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return result;
}

/* "VmRSS" or "VmHWM" of pid in KiB, or -1. */
static int64_t proc_status_kib(pid_t pid, const char *key)
{
    char path[64], line[256];
    int64_t kib = -1;
    size_t n = strlen(key);
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (pid <= 0 || (f = fopen(path, "r")) == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            kib = strtoll(line + n + 1, NULL, 10);
    fclose(f);
    return kib;
}

/* From /proc/<pid>/stat: the parent's pid and utime, stime, cutime, cstime (clock ticks). */
static int proc_stat_read(pid_t pid, long *ppid, long long ticks[4])
{
    char path[64], buf[1024], *close_paren;
    FILE *f;
    size_t n;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (pid <= 0 || (f = fopen(path, "r")) == NULL)
        return -1;
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    /* The command name may hold spaces: fields are counted after its closing parenthesis. */
    if ((close_paren = strrchr(buf, ')')) == NULL ||
        sscanf(close_paren + 1, " %*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld %lld %lld", ppid, &ticks[0],
               &ticks[1], &ticks[2], &ticks[3]) != 5)
        return -1;
    return 0;
}

/* User + system CPU seconds used so far by pid (hookd), or -1. */
static double proc_cpu_s(pid_t pid)
{
    long long t[4];
    long ppid;

    if (proc_stat_read(pid, &ppid, t) != 0)
        return -1;
    return (double)(t[0] + t[1]) / (double)sysconf(_SC_CLK_TCK);
}

double tree_cpu_s(pid_t root)
{
    long long t[4], total;
    long ppid;
    DIR *d;
    struct dirent *de;

    if (root <= 0 || proc_stat_read(root, &ppid, t) != 0 || (d = opendir("/proc")) == NULL)
        return -1;
    total = t[0] + t[1] + t[2] + t[3];
    while ((de = readdir(d)) != NULL) {
        long pid = strtol(de->d_name, NULL, 10);
        if (pid > 0 && proc_stat_read((pid_t)pid, &ppid, t) == 0 && ppid == (long)root)
            total += t[0] + t[1];
    }
    closedir(d);
    return (double)total / (double)sysconf(_SC_CLK_TCK);
}

double self_cpu_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void print_log_tail(const struct hookd_proc *h)
{
    char buf[4096];
    FILE *f = fopen(h->log, "r");
    size_t n;

    if (f == NULL)
        return;
    if (fseek(f, -(long)(sizeof buf - 1), SEEK_END) != 0)
        rewind(f);
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr, "--- end of %s ---\n%s\n---\n", h->log, buf);
}

static void print_exit(const char *what, int status)
{
    fprintf(stderr, "loadgen: hookd %s (%s %d)\n", what, WIFEXITED(status) ? "exit status" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

/* 0 while running; else says how it ended and returns -1. */
static int hookd_alive(struct hookd_proc *h)
{
    int status;

    if (h->pid <= 0)
        return -1;
    if (waitpid(h->pid, &status, WNOHANG) != h->pid)
        return 0;
    h->pid = 0;
    print_exit("exited", status);
    print_log_tail(h);
    return -1;
}

/* Starts `hookd serve` on store (a HOOKD_SERVER_STORE value), configured by the environment alone
 * (inherited HOOKD_* variables are dropped, so runs are reproducible), and waits for GET /healthz = 200. */
static int hookd_start(struct hookd_proc *h, const struct opts *o, const char *store, const char *token)
{
    size_t n_env = 0, cap = 0;
    char **envp = NULL, own[N_OWN_ENV][STORE_URL_MAX + 32], url[96];
    char *argv[] = {(char *)o->hookd, (char *)"serve", NULL};
    int64_t deadline;
    int result = -1;

    if (free_ports(&h->public_port, &h->admin_port) != 0) {
        perror("loadgen: free port");
        return -1;
    }
    h->rss_peak_kib = 0;
    snprintf(own[0], sizeof own[0], "HOOKD_SERVER_STORE=%s", store);
    snprintf(own[1], sizeof own[1], "HOOKD_SERVER_ADMIN_TOKEN=%s", token);
    snprintf(own[2], sizeof own[2], "HOOKD_SERVER_ADMIN_LISTEN=127.0.0.1:%d", h->admin_port);
    snprintf(own[3], sizeof own[3], "HOOKD_SERVER_PUBLIC_LISTEN=127.0.0.1:%d", h->public_port);
    snprintf(own[4], sizeof own[4], "HOOKD_DELIVERY_ALLOW_PRIVATE_NETWORKS=true");
    snprintf(own[5], sizeof own[5], "HOOKD_SERVER_LOG_LEVEL=warn");
    /* The key that seals secrets at rest: a PostgreSQL store needs one, the same on every node. A
     * throwaway store's, fixed (never a real deployment's). */
    snprintf(own[6], sizeof own[6], "HOOKD_SERVER_SECRET_KEY=%s", BENCH_SECRET_KEY);
    for (char **e = environ; *e != NULL; e++)
        cap++;
    if ((envp = calloc(cap + N_OWN_ENV + o->n_env + 1, sizeof *envp)) == NULL)
        return -1;
    for (char **e = environ; *e != NULL; e++)
        if (strncmp(*e, "HOOKD_", 6) != 0)
            envp[n_env++] = *e;
    for (size_t j = 0; j < N_OWN_ENV; j++) { /* an --env KEY=VALUE replaces our own KEY */
        size_t klen = (size_t)(strchr(own[j], '=') - own[j]) + 1;
        bool replaced = false;
        for (size_t i = 0; i < o->n_env; i++)
            replaced |= strncmp(o->env[i], own[j], klen) == 0;
        if (!replaced)
            envp[n_env++] = own[j];
    }
    for (size_t i = 0; i < o->n_env; i++)
        envp[n_env++] = (char *)o->env[i];

    fflush(NULL);
    if ((h->pid = fork()) == 0) { /* only async-signal-safe calls until exec */
        int fd = open(h->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        signal(SIGPIPE, SIG_DFL);            /* an ignored signal would stay ignored across exec */
        prctl(PR_SET_PDEATHSIG, SIGTERM);    /* no orphan daemon if loadgen dies */
        if (fd >= 0 && nul >= 0 && dup2(nul, 0) >= 0 && dup2(fd, 1) >= 0 && dup2(fd, 2) >= 0)
            execve(o->hookd, argv, envp);
        _exit(127);
    }
    if (h->pid < 0) {
        perror("loadgen: fork");
        goto out;
    }
    snprintf(url, sizeof url, "http://127.0.0.1:%d/healthz", h->public_port);
    for (deadline = mono_ns() + HEALTH_WAIT_MS * NS_PER_MS; mono_ns() < deadline; sleep_ms(50)) {
        if (hookd_alive(h) != 0)
            goto out;
        if (http_status("GET", url, NULL, NULL, NULL, 0) == 200) {
            result = 0;
            goto out;
        }
    }
    fprintf(stderr, "loadgen: hookd did not answer %s within %d s\n", url, HEALTH_WAIT_MS / 1000);
    print_log_tail(h);
out:
    free(envp);
    return result;
}

/* SIGTERM, then SIGKILL after 10 s. Returns -1 when hookd had to be killed or exited with an error. */
static int hookd_stop(struct hookd_proc *h)
{
    int status = 0, result = 0;
    int64_t deadline = mono_ns() + STOP_WAIT_MS * NS_PER_MS;

    if (h->pid <= 0)
        return 0;
    kill(h->pid, SIGTERM);
    while (waitpid(h->pid, &status, WNOHANG) == 0) {
        if (mono_ns() > deadline) {
            fprintf(stderr, "loadgen: hookd ignored SIGTERM for %d s; killing it\n", STOP_WAIT_MS / 1000);
            kill(h->pid, SIGKILL);
            waitpid(h->pid, &status, 0);
            break;
        }
        sleep_ms(20);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        print_exit("stopped uncleanly", status);
        result = -1;
    }
    h->pid = 0;
    return result;
}

int create_endpoints(const struct hookd_proc *h, const char *token, int sink_port, long k, long max_in_flight,
                     const char *event_type)
{
    char url[96], body[256], resp[2048], types[96] = "";

    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/endpoints", h->admin_port);
    if (event_type != NULL)
        snprintf(types, sizeof types, ", \"event_types\": [\"%.64s\"]", event_type);
    snprintf(body, sizeof body, "{\"url\": \"http://127.0.0.1:%d/\", \"max_in_flight\": %ld%s}", sink_port, max_in_flight,
             types);
    for (long i = 0; i < k; i++) {
        long code = http_status("POST", url, token, body, resp, sizeof resp);
        if (code != 201) { /* an error body holds no secret */
            fprintf(stderr, "loadgen: POST /v1/endpoints answered %ld: %s\n", code, resp);
            return -1;
        }
    }
    return 0;
}

int create_endpoint_id(const struct hookd_proc *h, const char *token, int sink_port, long max_in_flight,
                       const char *event_type, char id[HOOKD_ID_MAX])
{
    char url[96], body[256], resp[4096];
    const char *p;

    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/endpoints", h->admin_port);
    snprintf(body, sizeof body, "{\"url\": \"http://127.0.0.1:%d/\", \"max_in_flight\": %ld, \"event_types\": [\"%.64s\"]}",
             sink_port, max_in_flight, event_type);
    long code = http_status("POST", url, token, body, resp, sizeof resp);
    size_t n = 0;

    p = code == 201 ? strstr(resp, "\"id\":\"") : NULL;
    for (p = p != NULL ? p + 6 : NULL; p != NULL && *p != '"' && *p != '\0' && n < HOOKD_ID_MAX - 1; p++)
        id[n++] = *p;
    id[n] = '\0';
    if (p == NULL || *p != '"' || n == 0) {
        fprintf(stderr, "loadgen: POST /v1/endpoints answered %ld: %.200s\n", code, resp);
        return -1;
    }
    return 0;
}

int endpoint_delete(const struct hookd_proc *h, const char *token, const char *id)
{
    char url[160], resp[4096];

    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/endpoints/%.64s", h->admin_port, id);
    long code = http_status("DELETE", url, token, NULL, resp, sizeof resp);
    if (code != 204) {
        fprintf(stderr, "loadgen: DELETE %s answered %ld: %.200s\n", url, code, resp);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- the run's nodes */

int nodes_start(struct nodes *ns, const struct opts *o, const char *store, const char *token)
{
    for (long i = 0; i < ns->n; i++)
        if (hookd_start(&ns->proc[i], o, store, token) != 0)
            return -1;
    return 0;
}

int nodes_stop(struct nodes *ns)
{
    int result = 0;

    for (long i = 0; i < ns->n; i++)
        if (ns->proc[i].pid > 0 && hookd_stop(&ns->proc[i]) != 0) {
            print_log_tail(&ns->proc[i]);
            result = -1;
        }
    return result;
}

int nodes_alive(struct nodes *ns)
{
    for (long i = 0; i < ns->n; i++)
        if (hookd_alive(&ns->proc[i]) != 0)
            return -1;
    return 0;
}

void nodes_sample_rss(struct nodes *ns)
{
    for (long i = 0; i < ns->n; i++) {
        int64_t rss = proc_status_kib(ns->proc[i].pid, "VmRSS");
        if (rss > ns->proc[i].rss_peak_kib)
            ns->proc[i].rss_peak_kib = rss;
    }
}

double nodes_peak_mib(const struct nodes *ns, bool hwm)
{
    int64_t peak = 0;

    for (long i = 0; i < ns->n; i++) {
        int64_t h = hwm ? proc_status_kib(ns->proc[i].pid, "VmHWM") : 0;
        peak = h > peak ? h : peak;
        peak = ns->proc[i].rss_peak_kib > peak ? ns->proc[i].rss_peak_kib : peak;
    }
    return (double)peak / 1024.0;
}

double nodes_cpu_s(const struct nodes *ns, char *list, size_t cap)
{
    double total = 0;
    size_t len = 0;

    list[0] = '\0';
    for (long i = 0; i < ns->n; i++) {
        double c = proc_cpu_s(ns->proc[i].pid);
        total += c;
        if (ns->n > 1 && len < cap) {
            int w = snprintf(list + len, cap - len, "%s%.2f", i ? ", " : "", c);
            len += w > 0 ? (size_t)w : 0;
        }
    }
    return total;
}
