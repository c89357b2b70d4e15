/*
 * rtomod_security.h — who may connect to rtomod: the `security`
 * configuration section, ZeroMQ CURVE on the listening sockets (ingest,
 * publish, control), a ZAP handler (RFC 27) that admits only listed client
 * keys and addresses, and the count of refused connections.
 * docs/rtomod.md, "Security and the trust model", is the operator's view.
 *
 * The policy is the process's: rtomod_security_load() reads the key files
 * once at start-up (before the sockets exist), and every listening socket
 * made by rtomod_zsock_bind() passes through rtomod_security_prepare(),
 * which starts the ZAP handler in the socket's ZeroMQ context the first
 * time and sets the socket's CURVE server keys, ZAP domain and a monitor of
 * failed handshakes.  The handler stops by itself when the context is
 * terminated; rtomod_security_unload() then joins it and wipes the keys.
 */
#ifndef RTOMOD_SECURITY_H
#define RTOMOD_SECURITY_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define RTOMOD_PATH_MAX 1024
#define RTOMOD_ALLOW_MAX 64

struct rtomod_config;

/* One entry of security.allow_addresses: an address and prefix length. */
typedef struct rtomod_address_rule {
    int family;                 /* AF_INET or AF_INET6 */
    unsigned char addr[16];     /* network byte order */
    int prefix;                 /* leading bits that must match */
} rtomod_address_rule;

typedef struct rtomod_security_config {
    char curve_secret_key_file[RTOMOD_PATH_MAX];  /* "" = no CURVE */
    char client_keys[RTOMOD_PATH_MAX];  /* file or directory of allowed
                                           client public keys */
    rtomod_address_rule allow[RTOMOD_ALLOW_MAX];
    int n_allow;                /* 0 = any address */
    int allow_insecure_remote;  /* listen beyond loopback without CURVE */
} rtomod_security_config;

/* ------------------------------------------------- configuration ---- */

/* The custom keys of config.c's table: null or a path; a list of
 * addresses and CIDR networks.  Same contract as config.c's parsers. */
int rtomod_security_parse_secret_key_file(const json_t *v,
                                          struct rtomod_config *cfg,
                                          char *why, size_t n);
json_t *rtomod_security_dump_secret_key_file(const struct rtomod_config *cfg);
int rtomod_security_parse_client_keys(const json_t *v,
                                      struct rtomod_config *cfg, char *why,
                                      size_t n);
json_t *rtomod_security_dump_client_keys(const struct rtomod_config *cfg);
int rtomod_security_parse_allow(const json_t *v, struct rtomod_config *cfg,
                                char *why, size_t n);
json_t *rtomod_security_dump_allow(const struct rtomod_config *cfg);

/* Checks across keys: CURVE needs both key settings; an endpoint beyond
 * loopback needs CURVE or security.allow_insecure_remote.  0, or -1 with
 * `error` naming the key. */
int rtomod_security_check_config(const struct rtomod_config *cfg,
                                 char *error, size_t n);

/* Whether a bind endpoint is reachable from this host only: tcp on a
 * loopback address (127.0.0.0/8, ::1, localhost, lo), ipc or inproc. */
int rtomod_security_endpoint_is_local(const char *endpoint);

/* ------------------------------------------------------- run time ---- */

/* Read the key files of cfg's security section, check their permissions
 * and that libzmq has CURVE, and make this the process's policy.  Logs a
 * warning for each endpoint left open by allow_insecure_remote.  0, or -1
 * with `error` naming the file or key and what is wrong. */
int rtomod_security_load(const struct rtomod_config *cfg, char *error,
                         size_t n);
/* Called for each listening socket before it binds (`role` names it:
 * "ingest", "publish", "control").  Without a policy that restricts
 * anything, nothing is done.  0, or -1 with `error` filled. */
int rtomod_security_prepare(void *ctx, void *socket, const char *role,
                            char *error, size_t n);
/* Connections refused so far: denied by the ZAP handler, or failed at the
 * handshake (no key, the wrong server key, not ZeroMQ at all).  Any
 * thread. */
uint64_t rtomod_security_refused(void);
/* After the ZeroMQ context was terminated: join the handler, wipe the
 * keys. */
void rtomod_security_unload(void);

#endif /* RTOMOD_SECURITY_H */
