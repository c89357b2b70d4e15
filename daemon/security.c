/*
 * security.c — who may connect to rtomod (see rtomod_security.h): the
 * `security` configuration keys, the key files, CURVE on the listening
 * sockets, and the ZAP handler that admits listed client keys and
 * addresses and counts the rest.
 *
 * The ZAP handler runs in a thread of its own, not on the libev loop:
 *  - ZeroMQ's I/O threads wait for its answer in the middle of a
 *    handshake; on the loop, a connection would wait behind a burst of
 *    frames (ingest reads up to ingest.fairness messages per turn) or a
 *    long control request, and the loop is not running yet while rtomod
 *    starts, when clients already connect.  The thread answers at once.
 *  - It must be bound before the first socket listens (CURVE admits every
 *    client while no handler is bound), and the sockets are made by their
 *    subsystems as rtomod starts; a thread started by the first
 *    rtomod_security_prepare() needs no hook in the start-up sequence.
 *  - What it reads (keys, address rules) is fixed before it starts; what
 *    it writes is one atomic counter, so it shares no lock with the loop.
 *  - It stops by itself: terminating the context makes its zmq_poll fail
 *    with ETERM, and it closes its sockets so that zmq_ctx_term returns.
 * The thread also reads the sockets' monitors, to count connections that
 * fail before ZAP is asked (a client without CURVE, with the wrong server
 * key, or not speaking ZeroMQ).  It blocks every signal: they belong to the
 * loop.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "rtomo_keys.h"
#include "rtomod_config.h"
#include "rtomod_log.h"
#include "rtomod_security.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
/* Listening sockets watched at most (ingest, publish, control). */
#define MAX_WATCHED 8
/* Refusals logged per window; the rest are summed up in one line. */
#define LOG_BURST 5
#define LOG_WINDOW_S 10.0
#define MONITORED_EVENTS                                                    \
    (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |                                  \
     ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

/* ------------------------------------------------- configuration ---- */

static int parse_path(const json_t *v, char *dst, char *why, size_t n)
{
    if (json_is_null(v)) {
        dst[0] = '\0';
        return 0;
    }
    if (!json_is_string(v) || json_string_length(v) == 0 ||
        json_string_length(v) >= RTOMOD_PATH_MAX) {
        snprintf(why, n, "expected null or a file path of less than %d "
                 "characters", RTOMOD_PATH_MAX);
        return -1;
    }
    snprintf(dst, RTOMOD_PATH_MAX, "%s", json_string_value(v));
    return 0;
}

static json_t *dump_path(const char *path)
{
    return path[0] ? json_string(path) : json_null();
}

int rtomod_security_parse_secret_key_file(const json_t *v,
                                          struct rtomod_config *cfg,
                                          char *why, size_t n)
{
    return parse_path(v, cfg->security.curve_secret_key_file, why, n);
}

json_t *rtomod_security_dump_secret_key_file(const struct rtomod_config *cfg)
{
    return dump_path(cfg->security.curve_secret_key_file);
}

int rtomod_security_parse_client_keys(const json_t *v,
                                      struct rtomod_config *cfg, char *why,
                                      size_t n)
{
    return parse_path(v, cfg->security.client_keys, why, n);
}

json_t *rtomod_security_dump_client_keys(const struct rtomod_config *cfg)
{
    return dump_path(cfg->security.client_keys);
}

/* "10.0.0.0/8", "192.168.1.7", "::1", "fd00::/8". */
static int parse_rule(const char *text, rtomod_address_rule *rule)
{
    char host[INET6_ADDRSTRLEN + 8];
    const char *slash = strchr(text, '/');
    size_t len = slash ? (size_t)(slash - text) : strlen(text);
    if (len == 0 || len >= sizeof host)
        return -1;
    memcpy(host, text, len);
    host[len] = '\0';
    memset(rule, 0, sizeof *rule);
    rule->family = strchr(host, ':') ? AF_INET6 : AF_INET;
    if (inet_pton(rule->family, host, rule->addr) != 1)
        return -1;
    int bits = rule->family == AF_INET ? 32 : 128;
    rule->prefix = bits;
    if (slash) {
        char *end;
        long p = strtol(slash + 1, &end, 10);
        if (end == slash + 1 || *end != '\0' || p < 0 || p > bits)
            return -1;
        rule->prefix = (int)p;
    }
    return 0;
}

static void format_rule(const rtomod_address_rule *rule, char *out, size_t n)
{
    char host[INET6_ADDRSTRLEN];
    inet_ntop(rule->family, rule->addr, host, sizeof host);
    int bits = rule->family == AF_INET ? 32 : 128;
    if (rule->prefix == bits)
        snprintf(out, n, "%s", host);
    else
        snprintf(out, n, "%s/%d", host, rule->prefix);
}

int rtomod_security_parse_allow(const json_t *v, struct rtomod_config *cfg,
                                char *why, size_t n)
{
    rtomod_security_config *s = &cfg->security;
    if (json_is_null(v)) {
        s->n_allow = 0;
        return 0;
    }
    size_t count = json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_array(v) || count > RTOMOD_ALLOW_MAX) {
        snprintf(why, n, "expected null or a list of at most %d addresses "
                 "or networks (\"10.0.0.0/8\", \"::1\")", RTOMOD_ALLOW_MAX);
        return -1;
    }
    rtomod_address_rule rules[RTOMOD_ALLOW_MAX];
    for (size_t i = 0; i < count; i++) {
        const char *text = json_string_value(json_array_get(v, i));
        if (!text || parse_rule(text, &rules[i]) != 0) {
            snprintf(why, n, "element %zu is not an IPv4 or IPv6 address "
                     "with an optional /prefix", i);
            return -1;
        }
    }
    memcpy(s->allow, rules, sizeof rules[0] * count);
    s->n_allow = (int)count;
    return 0;
}

json_t *rtomod_security_dump_allow(const struct rtomod_config *cfg)
{
    const rtomod_security_config *s = &cfg->security;
    json_t *list = json_array();
    for (int i = 0; i < s->n_allow; i++) {
        char text[INET6_ADDRSTRLEN + 8];
        format_rule(&s->allow[i], text, sizeof text);
        json_array_append_new(list, json_string(text));
    }
    return list;
}

/* The host part of "tcp://HOST:PORT" into host (brackets removed). */
static int tcp_host(const char *endpoint, char *host, size_t n)
{
    const char *h = endpoint + 6;
    const char *colon = strrchr(h, ':');
    if (!colon || colon == h)
        return -1;
    size_t len = (size_t)(colon - h);
    if (h[0] == '[' && len >= 2 && h[len - 1] == ']') {
        h++;
        len -= 2;
    }
    if (len >= n)
        return -1;
    memcpy(host, h, len);
    host[len] = '\0';
    return 0;
}

int rtomod_security_endpoint_is_local(const char *endpoint)
{
    if (strncmp(endpoint, "ipc://", 6) == 0 ||
        strncmp(endpoint, "inproc://", 9) == 0)
        return 1;
    char host[256];
    if (strncmp(endpoint, "tcp://", 6) != 0 ||
        tcp_host(endpoint, host, sizeof host) != 0)
        return 0;
    if (strcmp(host, "localhost") == 0 || strcmp(host, "lo") == 0 ||
        strcmp(host, "::1") == 0)
        return 1;
    struct in_addr a4;
    return inet_pton(AF_INET, host, &a4) == 1 &&
           (ntohl(a4.s_addr) >> 24) == 127;
}

static int fail(char *error, size_t n, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *error, size_t n, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    vsnprintf(error, n, format, ap);
    va_end(ap);
    return -1;
}

int rtomod_security_check_config(const struct rtomod_config *cfg,
                                 char *error, size_t n)
{
    const rtomod_security_config *s = &cfg->security;
    int curve = s->curve_secret_key_file[0] != '\0';
    if (curve && !s->client_keys[0])
        return fail(error, n, "security.client_keys: needed with "
                    "security.curve_secret_key_file, else any client that "
                    "knows the daemon's public key could connect");
    if (!curve && s->client_keys[0])
        return fail(error, n, "security.client_keys: needs "
                    "security.curve_secret_key_file (the daemon's key pair)");
    /* Detector inputs that rtomod binds ("@endpoint" or a plain one)
     * listen like ingest; those it connects to (">endpoint") do not, and
     * those left "" are off. */
    const char *s2 = cfg->inputs.stream2_endpoint +
                     (cfg->inputs.stream2_endpoint[0] == '@');
    const char *jh = cfg->inputs.jsonhdr_endpoint +
                     (cfg->inputs.jsonhdr_endpoint[0] == '@');
    const struct {
        const char *key, *endpoint;
    } sockets[] = {{"ingest.endpoint", cfg->ingest.endpoint},
                   {"publish.endpoint", cfg->publish.endpoint},
                   {"control.endpoint", cfg->control.endpoint},
                   {"inputs.stream2.endpoint", s2},
                   {"inputs.jsonhdr.endpoint", jh}};
    for (size_t i = 0; i < sizeof sockets / sizeof sockets[0]; i++)
        if (!curve && !s->allow_insecure_remote &&
            sockets[i].endpoint[0] && sockets[i].endpoint[0] != '>' &&
            !rtomod_security_endpoint_is_local(sockets[i].endpoint))
            return fail(error, n, "%s: %s listens beyond loopback without "
                        "authentication; set security.curve_secret_key_file "
                        "and security.client_keys (docs/rtomod.md, \"Security "
                        "and the trust model\"), or "
                        "security.allow_insecure_remote: true to let anyone "
                        "who reaches the port in", sockets[i].key,
                        sockets[i].endpoint);
    return 0;
}

/* ---------------------------------------------------------- policy ---- */

/* The process's policy (fixed before the handler starts), the handler
 * thread, and the sockets it watches. */
static struct {
    int active;                 /* ZAP and monitors in use */
    int curve;
    char secret_z85[RTOMO_KEY_Z85_SIZE];
    uint8_t (*clients)[32];     /* allowed client keys */
    int n_clients;
    rtomod_address_rule allow[RTOMOD_ALLOW_MAX];
    int n_allow;
    _Atomic uint64_t refused;
    /* the handler */
    void *ctx;
    pthread_t thread;
    int running;
    int wake[2];                /* a byte: new monitors are pending */
    pthread_mutex_t lock;       /* guards the pending monitors and ready */
    pthread_cond_t cond;
    int ready;                  /* 1 bound, -1 failed to bind */
    int bind_errno;
    void *pending[MAX_WATCHED];
    char pending_role[MAX_WATCHED][16];
    int n_pending, n_watched;
} policy = {.wake = {-1, -1},
            .lock = PTHREAD_MUTEX_INITIALIZER,
            .cond = PTHREAD_COND_INITIALIZER};

static int add_client_key(const char *z85, const char *file, void *arg,
                          rtomo_error *err)
{
    (void)arg;
    void *grown = realloc(policy.clients,
                          sizeof *policy.clients * (size_t)(policy.n_clients +
                                                            1));
    if (!grown) {
        rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory reading %s", file);
        return -1;
    }
    policy.clients = grown;
    zmq_z85_decode(policy.clients[policy.n_clients++], z85);
    return 0;
}

static int load_curve(const rtomod_security_config *s, char *error, size_t n)
{
    if (!rtomo_keys_curve_available())
        return fail(error, n, "security.curve_secret_key_file: this libzmq "
                    "was built without CURVE (zmq_has(\"curve\") is false); "
                    "install one built with libsodium (Debian: libzmq5)");
    char public_z85[RTOMO_KEY_Z85_SIZE];
    rtomo_error err;
    if (rtomo_keys_read(s->curve_secret_key_file,
                        "security.curve_secret_key_file", public_z85,
                        policy.secret_z85, &err) != RTOMO_OK)
        return fail(error, n, "%s", err.message);
    int count = 0;
    if (rtomo_keys_read_public_list(s->client_keys, "security.client_keys",
                                    add_client_key, NULL, &count,
                                    &err) != RTOMO_OK)
        return fail(error, n, "%s", err.message);
    if (count == 0)
        return fail(error, n, "security.client_keys: %s holds no public key "
                    "(a directory is searched for *.key files): no client "
                    "could connect", s->client_keys);
    policy.curve = 1;
    log_info("security: CURVE on every socket, server key %s, %d client "
             "key%s from %s", public_z85, count, count == 1 ? "" : "s",
             s->client_keys);
    return 0;
}

static void warn_insecure(const struct rtomod_config *cfg)
{
    const char *endpoints[] = {cfg->ingest.endpoint, cfg->publish.endpoint,
                               cfg->control.endpoint};
    for (int i = 0; i < 3; i++)
        if (!rtomod_security_endpoint_is_local(endpoints[i]))
            log_warn("security: %s listens beyond loopback without "
                     "authentication (security.allow_insecure_remote): "
                     "anyone who reaches it may send, read or control",
                     endpoints[i]);
}

int rtomod_security_load(const struct rtomod_config *cfg, char *error,
                         size_t n)
{
    const rtomod_security_config *s = &cfg->security;
    if (s->curve_secret_key_file[0] && load_curve(s, error, n) != 0) {
        rtomod_security_unload();
        return -1;
    }
    memcpy(policy.allow, s->allow, sizeof s->allow);
    policy.n_allow = s->n_allow;
    policy.active = policy.curve || policy.n_allow > 0;
    if (policy.n_allow > 0)
        log_info("security: %d allowed address%s (security.allow_addresses)",
                 policy.n_allow, policy.n_allow == 1 ? "" : "es");
    if (!policy.curve)
        warn_insecure(cfg);
    return 0;
}

uint64_t rtomod_security_refused(void)
{
    return atomic_load(&policy.refused);
}

/* ------------------------------------------------------- decisions ---- */

static int rule_matches(const rtomod_address_rule *r, int family,
                        const unsigned char *addr)
{
    if (r->family != family)
        return 0;
    int full = r->prefix / 8, rest = r->prefix % 8;
    if (memcmp(r->addr, addr, (size_t)full) != 0)
        return 0;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return rest == 0 || ((r->addr[full] ^ addr[full]) & mask) == 0;
}

/* ZAP gives the peer's address as text; an IPv4 peer on a dual-stack
 * socket comes as ::ffff:a.b.c.d and is compared as IPv4. */
static int address_allowed(const char *text)
{
    unsigned char addr[16];
    int family = AF_INET;
    if (inet_pton(AF_INET, text, addr) != 1) {
        family = AF_INET6;
        if (inet_pton(AF_INET6, text, addr) != 1)
            return 0;
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0,
                                                 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(addr, mapped, 12) == 0) {
            memmove(addr, addr + 12, 4);
            family = AF_INET;
        }
    }
    for (int i = 0; i < policy.n_allow; i++)
        if (rule_matches(&policy.allow[i], family, addr))
            return 1;
    return 0;
}

static int key_allowed(const uint8_t *key)
{
    for (int i = 0; i < policy.n_clients; i++)
        if (memcmp(policy.clients[i], key, 32) == 0)
            return 1;
    return 0;
}

/* ---------------------------------------------------------- logging ---- */

/* Rate limit of refusal lines (the handler thread only). */
static struct {
    double window_start;
    int logged, suppressed;
} limiter;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void log_refusal(const char *format, ...)
    __attribute__((format(printf, 1, 2)));
static void log_refusal(const char *format, ...)
{
    double now = now_s();
    if (now - limiter.window_start >= LOG_WINDOW_S) {
        if (limiter.suppressed > 0)
            log_warn("security: %d more refused connections in the last "
                     "%.0f s were not logged", limiter.suppressed,
                     LOG_WINDOW_S);
        limiter.window_start = now;
        limiter.logged = limiter.suppressed = 0;
    }
    if (limiter.logged >= LOG_BURST) {
        limiter.suppressed++;
        return;
    }
    limiter.logged++;
    char line[512];
    va_list ap;
    va_start(ap, format);
    vsnprintf(line, sizeof line, format, ap);
    va_end(ap);
    log_warn("security: %s", line);
}

/* --------------------------------------------------------------- ZAP ---- */

#define ZAP_FRAMES 7            /* version .. credentials (one for CURVE) */

typedef struct zap_request {
    char part[ZAP_FRAMES][256];
    size_t size[ZAP_FRAMES];
    int n;
} zap_request;

/* Read one request (all its frames); -1 when none waits. */
static int zap_receive(void *zap, zap_request *r)
{
    memset(r, 0, sizeof *r);
    int more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, zap, r->n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(&m);
            return r->n == 0 ? -1 : 0;
        }
        if (r->n < ZAP_FRAMES) {
            size_t size = zmq_msg_size(&m);
            r->size[r->n] = size < 255 ? size : 255;
            memcpy(r->part[r->n], zmq_msg_data(&m), r->size[r->n]);
            r->n++;
        }
        more = zmq_msg_more(&m);
        zmq_msg_close(&m);
    }
    return 0;
}

static void zap_reply(void *zap, const zap_request *r, const char *code,
                      const char *text, const char *user)
{
    zmq_send(zap, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(zap, r->part[1], r->size[1], ZMQ_SNDMORE);
    zmq_send(zap, code, strlen(code), ZMQ_SNDMORE);
    zmq_send(zap, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(zap, user, strlen(user), ZMQ_SNDMORE);
    zmq_send(zap, "", 0, 0);
}

/* The decision on one request: NULL to admit, else why not.  `user`
 * gets the client's key in Z85 (ZeroMQ's User-Id of its messages). */
static const char *zap_decide(const zap_request *r, char *user)
{
    const char *address = r->part[3], *mechanism = r->part[5];
    if (r->n < 6 || strcmp(r->part[0], "1.0") != 0)
        return "malformed ZAP request";
    if (policy.n_allow > 0 && !address_allowed(address))
        return "address not in security.allow_addresses";
    if (strcmp(mechanism, "CURVE") == 0) {
        if (r->n < 7 || r->size[6] != 32)
            return "CURVE request without a client key";
        zmq_z85_encode(user, (const uint8_t *)r->part[6], 32);
        return key_allowed((const uint8_t *)r->part[6])
                   ? NULL : "client key not in security.client_keys";
    }
    if (strcmp(mechanism, "NULL") == 0 && !policy.curve)
        return NULL;
    return "security mechanism not accepted";
}

static void zap_handle(void *zap)
{
    zap_request r;
    while (zap_receive(zap, &r) == 0) {
        char user[RTOMO_KEY_Z85_SIZE] = "";
        const char *why = zap_decide(&r, user);
        if (!why) {
            zap_reply(zap, &r, "200", "OK", user);
            continue;
        }
        zap_reply(zap, &r, "400", why, "");
        atomic_fetch_add(&policy.refused, 1);
        log_refusal("%s: refused a connection from %s (%s%s%s)", r.part[2],
                    r.part[3], why, user[0] ? ", key " : "", user);
    }
}

/* ---------------------------------------------------------- monitors ---- */

typedef struct watched {
    void *pair;                 /* reads the socket's monitor */
    char role[16];
} watched;

/* Failed handshakes of one socket.  Those ZAP refused are counted by the
 * handler already (it knows why); the others never reached it. */
static void monitor_handle(watched *w)
{
    for (;;) {
        zmq_msg_t event, address;
        zmq_msg_init(&event);
        zmq_msg_init(&address);
        if (zmq_msg_recv(&event, w->pair, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&event);
            zmq_msg_close(&address);
            return;
        }
        zmq_msg_recv(&address, w->pair, 0);
        uint16_t id = 0;
        uint32_t value = 0;
        if (zmq_msg_size(&event) >= 6) {
            memcpy(&id, zmq_msg_data(&event), 2);
            memcpy(&value, (char *)zmq_msg_data(&event) + 2, 4);
        }
        if (id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL ||
            id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
            atomic_fetch_add(&policy.refused, 1);
            char detail[96];
            if (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
                snprintf(detail, sizeof detail, "ZMTP protocol error 0x%x",
                         (unsigned)value);
            else
                snprintf(detail, sizeof detail, "%s", strerror((int)value));
            log_refusal("%s: a connection failed its handshake (%s): a "
                        "client without CURVE or the daemon's public key, "
                        "or not speaking ZeroMQ", w->role, detail);
        }
        zmq_msg_close(&event);
        zmq_msg_close(&address);
    }
}

/* Take over the monitors that rtomod_security_prepare() queued. */
static void adopt_pending(watched *w, int *n)
{
    char byte;
    while (read(policy.wake[0], &byte, 1) == 1)
        ;
    pthread_mutex_lock(&policy.lock);
    for (int i = 0; i < policy.n_pending && *n < MAX_WATCHED; i++) {
        w[*n].pair = policy.pending[i];
        snprintf(w[*n].role, sizeof w[*n].role, "%s",
                 policy.pending_role[i]);
        (*n)++;
    }
    policy.n_pending = 0;
    pthread_mutex_unlock(&policy.lock);
}

/* ----------------------------------------------------------- thread ---- */

static void announce(int ready, int error)
{
    pthread_mutex_lock(&policy.lock);
    policy.ready = ready;
    policy.bind_errno = error;
    pthread_cond_broadcast(&policy.cond);
    pthread_mutex_unlock(&policy.lock);
}

static void serve(void *zap)
{
    watched w[MAX_WATCHED];
    int n = 0;
    for (;;) {
        zmq_pollitem_t items[2 + MAX_WATCHED] = {
            {zap, 0, ZMQ_POLLIN, 0}, {NULL, policy.wake[0], ZMQ_POLLIN, 0}};
        for (int i = 0; i < n; i++)
            items[2 + i] = (zmq_pollitem_t){w[i].pair, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(items, 2 + n, -1) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            if (zmq_errno() != ETERM)
                log_error("security: the ZAP handler stops: %s",
                          zmq_strerror(zmq_errno()));
            break;
        }
        if (items[0].revents & ZMQ_POLLIN)
            zap_handle(zap);
        for (int i = 0; i < n; i++)
            if (items[2 + i].revents & ZMQ_POLLIN)
                monitor_handle(&w[i]);
        if (items[1].revents & ZMQ_POLLIN)
            adopt_pending(w, &n);
    }
    adopt_pending(w, &n);       /* queued after the last poll: close too */
    for (int i = 0; i < n; i++)
        zmq_close(w[i].pair);
}

static void *handler_main(void *arg)
{
    (void)arg;
    void *zap = zmq_socket(policy.ctx, ZMQ_REP);
    int linger = 0;
    if (!zap || zmq_setsockopt(zap, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_bind(zap, ZAP_ENDPOINT) != 0) {
        int error = zmq_errno();
        if (zap)
            zmq_close(zap);
        announce(-1, error);
        return NULL;
    }
    announce(1, 0);
    serve(zap);
    zmq_close(zap);
    return NULL;
}

/* Start the handler in ctx and wait until it is bound. */
static int start_handler(void *ctx, char *error, size_t n)
{
    if (pipe(policy.wake) != 0)
        return fail(error, n, "security: cannot make a pipe: %s",
                    strerror(errno));
    for (int i = 0; i < 2; i++)
        fcntl(policy.wake[i], F_SETFL, O_NONBLOCK);
    policy.ctx = ctx;
    policy.ready = 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&policy.thread, NULL, handler_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return fail(error, n, "security: cannot start the ZAP handler: %s",
                    strerror(rc));
    policy.running = 1;
    pthread_mutex_lock(&policy.lock);
    while (policy.ready == 0)
        pthread_cond_wait(&policy.cond, &policy.lock);
    pthread_mutex_unlock(&policy.lock);
    if (policy.ready < 0)
        return fail(error, n, "security: cannot bind the ZAP handler at %s: "
                    "%s", ZAP_ENDPOINT, zmq_strerror(policy.bind_errno));
    return 0;
}

/* Monitor the socket's failed handshakes; the handler reads them. */
static int watch_socket(void *ctx, void *socket, const char *role,
                        char *error, size_t n)
{
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "inproc://rtomod-auth-monitor-%d",
             policy.n_watched++);
    void *pair = NULL;
    if (zmq_socket_monitor(socket, endpoint, MONITORED_EVENTS) != 0 ||
        !(pair = zmq_socket(ctx, ZMQ_PAIR)) ||
        zmq_connect(pair, endpoint) != 0) {
        int e = zmq_errno();
        if (pair)
            zmq_close(pair);
        return fail(error, n, "%s: cannot monitor the socket's handshakes: "
                    "%s", role, zmq_strerror(e));
    }
    pthread_mutex_lock(&policy.lock);
    int room = policy.n_pending < MAX_WATCHED;
    if (room) {
        policy.pending[policy.n_pending] = pair;
        snprintf(policy.pending_role[policy.n_pending],
                 sizeof policy.pending_role[0], "%s", role);
        policy.n_pending++;
    }
    pthread_mutex_unlock(&policy.lock);
    if (!room) {
        zmq_close(pair);
        return fail(error, n, "%s: more than %d sockets to monitor", role,
                    MAX_WATCHED);
    }
    ssize_t unused = write(policy.wake[1], "w", 1);
    (void)unused;
    return 0;
}

static int set_curve_server(void *socket, const char *role, char *error,
                            size_t n)
{
    int one = 1;
    if (zmq_setsockopt(socket, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
        zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, policy.secret_z85,
                       RTOMO_KEY_Z85_SIZE) != 0)
        return fail(error, n, "%s: cannot make the socket a CURVE server: %s",
                    role, zmq_strerror(zmq_errno()));
    return 0;
}

int rtomod_security_prepare(void *ctx, void *socket, const char *role,
                            char *error, size_t n)
{
    if (!policy.active)
        return 0;
    if (policy.running && policy.ctx != ctx)
        return fail(error, n, "%s: security serves one ZeroMQ context per "
                    "process", role);
    if (!policy.running && start_handler(ctx, error, n) != 0)
        return -1;
    if (policy.curve && set_curve_server(socket, role, error, n) != 0)
        return -1;
    /* A ZAP domain makes ZeroMQ ask the handler for NULL connections too
     * (the address rules apply without CURVE); it names the socket in the
     * handler's log. */
    if (zmq_setsockopt(socket, ZMQ_ZAP_DOMAIN, role, strlen(role)) != 0)
        return fail(error, n, "%s: cannot set the ZAP domain: %s", role,
                    zmq_strerror(zmq_errno()));
    return watch_socket(ctx, socket, role, error, n);
}

void rtomod_security_unload(void)
{
    if (policy.running)
        pthread_join(policy.thread, NULL);
    policy.running = 0;
    for (int i = 0; i < 2; i++) {
        if (policy.wake[i] >= 0)
            close(policy.wake[i]);
        policy.wake[i] = -1;
    }
    explicit_bzero(policy.secret_z85, sizeof policy.secret_z85);
    if (policy.clients)
        explicit_bzero(policy.clients,
                       sizeof *policy.clients * (size_t)policy.n_clients);
    free(policy.clients);
    policy.clients = NULL;
    policy.n_clients = 0;
    policy.active = policy.curve = 0;
}
