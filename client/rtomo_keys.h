/*
 * rtomo_keys.h — ZeroMQ CURVE key files, shared by rtomod (its key pair
 * and the list of allowed clients), the client library (the server's
 * public key and the client's key pair) and rtomo-keygen (which writes
 * them).
 *
 * The files are those of CZMQ and pyzmq (zmq.auth.create_certificates):
 * NAME.key holds the public key, NAME.key_secret the key pair, each as a
 * line `public-key = "Z85"` / `secret-key = "Z85"` (40 Z85 characters for
 * 32 bytes).  So pyzmq's zmq.auth.load_certificate reads what rtomo-keygen
 * writes, and certificates made by those tools work here.  A list of
 * allowed clients may also hold bare 40-character Z85 lines.
 *
 * A file holding a secret key must not be readable or writable by group or
 * others (as ssh insists for its private keys): reading one that is is
 * refused, naming the file and the fix.  Errors come back as an
 * rtomo_status with a message naming the file; nothing here prints or
 * exits.
 */
#ifndef RTOMO_KEYS_H
#define RTOMO_KEYS_H

#include "rtomo_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A key in Z85 text: 40 characters and the NUL. */
#define RTOMO_KEY_Z85_SIZE 41

/* 1 when this libzmq was built with CURVE (zmq_has("curve")). */
int rtomo_keys_curve_available(void);

/* Read a key file's public key and, when `secret` is not NULL, its secret
 * key (then the file must be private: mode 0600 or stricter).  `what`
 * names the file's role in messages (e.g. "security.curve_secret_key_file",
 * "--client-key").  RTOMO_E_INVALID names the file and what is wrong. */
rtomo_status rtomo_keys_read(const char *path, const char *what,
                             char public_z85[RTOMO_KEY_Z85_SIZE],
                             char secret_z85[RTOMO_KEY_Z85_SIZE],
                             rtomo_error *err);

/* Called for every public key found; returns 0 to go on, -1 to stop (the
 * reader then fails with the message the callback put in err). */
typedef int rtomo_keys_each_fn(const char *public_z85, const char *file,
                               void *arg, rtomo_error *err);

/* Every public key of `path`: a file (any number of keys) or a directory
 * (each regular file in it named *.key; others are skipped, so a key
 * pair's *.key_secret is never read).  A file holding a secret key is
 * refused (the list is for public keys), and so are a file or directory
 * that group or others may write (anyone who can add a line to it could
 * let themselves in).  *count gets the number of keys. */
rtomo_status rtomo_keys_read_public_list(const char *path, const char *what,
                                         rtomo_keys_each_fn *each, void *arg,
                                         int *count, rtomo_error *err);

/* Make ZeroMQ socket s a CURVE client of the server whose public key is
 * server_z85, with this client's pair (before it connects).  0, or -1
 * with errno set by ZeroMQ. */
int rtomo_keys_set_client(void *s, const char *server_z85,
                          const char *public_z85, const char *secret_z85);

/* Make a new key pair and write BASE.key (the public key, mode 0644) and
 * BASE.key_secret (both keys, mode 0600, never readable by others, not
 * even for a moment).  Existing files are refused unless `overwrite`.
 * The public key is returned in public_z85. */
rtomo_status rtomo_keys_generate(const char *base, int overwrite,
                                 char public_z85[RTOMO_KEY_Z85_SIZE],
                                 rtomo_error *err);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_KEYS_H */
