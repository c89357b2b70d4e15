/*
 * rtomo_keys.c — ZeroMQ CURVE key files (see rtomo_keys.h): read a key
 * pair or a list of public keys with their permissions checked, and write
 * a new pair with safe permissions.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "rtomo_keys.h"

/* Key files are a few lines; anything longer is not one. */
#define KEY_FILE_MAX 65536
#define Z85_LEN 40

int rtomo_keys_curve_available(void)
{
    return zmq_has("curve") != 0;
}

/* ----------------------------------------------------------- parsing ---- */

/* Whether `text` starts with 40 valid Z85 characters that decode (and
 * nothing but blanks or a closing quote follows). */
static int is_z85_key(const char *text)
{
    char key[RTOMO_KEY_Z85_SIZE];
    uint8_t bytes[32];
    if (strlen(text) < Z85_LEN)
        return 0;
    memcpy(key, text, Z85_LEN);
    key[Z85_LEN] = '\0';
    const char *rest = text + Z85_LEN;
    while (*rest == '"' || *rest == ' ' || *rest == '\t' || *rest == '\r')
        rest++;
    return *rest == '\0' && zmq_z85_decode(bytes, key) != NULL;
}

/* One line's key: `public-key = "Z85"`, `secret-key = "Z85"` or a bare
 * Z85 key (counted as public).  Returns 'p', 's', or 0 for a line without
 * a key; -1 for a key line whose value is not a key. */
static int parse_line(char *line, char key[RTOMO_KEY_Z85_SIZE])
{
    while (*line == ' ' || *line == '\t')
        line++;
    int kind = 0;
    if (strncmp(line, "public-key", 10) == 0)
        kind = 'p';
    else if (strncmp(line, "secret-key", 10) == 0)
        kind = 's';
    if (kind) {
        line += 10;
        while (*line == ' ' || *line == '\t')
            line++;
        if (*line++ != '=')
            return -1;
        while (*line == ' ' || *line == '\t')
            line++;
        if (*line == '"')
            line++;
    } else if (*line == '#' || !is_z85_key(line)) {
        return 0;
    }
    if (!is_z85_key(line))
        return -1;
    memcpy(key, line, Z85_LEN);
    key[Z85_LEN] = '\0';
    return kind ? kind : 'p';
}

/* The whole file as a string (malloc'd), opened without following a
 * swap of the file between the permission check and the read: fstat on
 * the open descriptor. */
static char *read_small_file(const char *path, const char *what,
                             struct stat *st, rtomo_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rtomo_set_error(err, RTOMO_E_INVALID, "%s: cannot open %s: %s", what,
                        path, strerror(errno));
        return NULL;
    }
    char *text = NULL;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) ||
        st->st_size > KEY_FILE_MAX) {
        rtomo_set_error(err, RTOMO_E_INVALID, "%s: %s is not a key file (a "
                        "regular file of at most %d bytes)", what, path,
                        KEY_FILE_MAX);
    } else if (!(text = malloc((size_t)st->st_size + 1))) {
        rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    } else {
        ssize_t n = read(fd, text, (size_t)st->st_size);
        if (n < 0) {
            rtomo_set_error(err, RTOMO_E_INVALID, "%s: cannot read %s: %s",
                            what, path, strerror(errno));
            free(text);
            text = NULL;
        } else {
            text[n] = '\0';
        }
    }
    close(fd);
    return text;
}

/* Overwrite and free text that held a secret key. */
static void free_secret_text(char *text)
{
    if (text)
        explicit_bzero(text, strlen(text));
    free(text);
}

static rtomo_status private_or_refuse(const char *path, const char *what,
                                      const struct stat *st, rtomo_error *err)
{
    if ((st->st_mode & (S_IRWXG | S_IRWXO)) == 0)
        return RTOMO_OK;
    return rtomo_set_error(err, RTOMO_E_INVALID, "%s: %s holds a secret key "
                           "but group or others may access it (mode %04o); "
                           "run: chmod 600 %s", what, path,
                           (unsigned)(st->st_mode & 07777), path);
}

rtomo_status rtomo_keys_read(const char *path, const char *what,
                             char public_z85[RTOMO_KEY_Z85_SIZE],
                             char secret_z85[RTOMO_KEY_Z85_SIZE],
                             rtomo_error *err)
{
    struct stat st;
    char *text = read_small_file(path, what, &st, err);
    if (!text)
        return err ? err->code : RTOMO_E_INVALID;
    rtomo_status status = RTOMO_OK;
    int have_public = 0, have_secret = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save);
         line && status == RTOMO_OK; line = strtok_r(NULL, "\n", &save)) {
        char key[RTOMO_KEY_Z85_SIZE];
        int kind = parse_line(line, key);
        if (kind < 0)
            status = rtomo_set_error(err, RTOMO_E_INVALID, "%s: %s has a key "
                                     "line that is not 40 Z85 characters",
                                     what, path);
        if (kind == 'p' && !have_public++)
            memcpy(public_z85, key, RTOMO_KEY_Z85_SIZE);
        if (kind == 's' && secret_z85 && !have_secret++)
            memcpy(secret_z85, key, RTOMO_KEY_Z85_SIZE);
        explicit_bzero(key, sizeof key);
    }
    free_secret_text(text);
    /* Checked once a secret was found: for a public key where the pair
     * belongs, "no secret key" is the message that helps. */
    if (status == RTOMO_OK && have_secret)
        status = private_or_refuse(path, what, &st, err);
    if (status == RTOMO_OK && (!have_public || (secret_z85 && !have_secret)))
        status = rtomo_set_error(err, RTOMO_E_INVALID, "%s: %s holds no %s "
                                 "(expected a line %s = \"40 Z85 characters\","
                                 " as rtomo-keygen writes)", what, path,
                                 !have_public ? "public key" : "secret key",
                                 !have_public ? "public-key" : "secret-key");
    return status;
}

/* ------------------------------------------------------ public lists ---- */

static rtomo_status not_writable_by_others(const char *path, const char *what,
                                           const struct stat *st,
                                           rtomo_error *err)
{
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) == 0)
        return RTOMO_OK;
    return rtomo_set_error(err, RTOMO_E_INVALID, "%s: group or others may "
                           "write %s (mode %04o), so anyone could add a key to "
                           "it; run: chmod go-w %s", what, path,
                           (unsigned)(st->st_mode & 07777), path);
}

/* Every key of one list file. */
static rtomo_status read_list_file(const char *path, const char *what,
                                   rtomo_keys_each_fn *each, void *arg,
                                   int *count, rtomo_error *err)
{
    struct stat st;
    char *text = read_small_file(path, what, &st, err);
    if (!text)
        return err ? err->code : RTOMO_E_INVALID;
    rtomo_status status = not_writable_by_others(path, what, &st, err);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save);
         line && status == RTOMO_OK; line = strtok_r(NULL, "\n", &save)) {
        char key[RTOMO_KEY_Z85_SIZE];
        int kind = parse_line(line, key);
        if (kind < 0)
            status = rtomo_set_error(err, RTOMO_E_INVALID, "%s: %s has a key "
                                     "line that is not 40 Z85 characters",
                                     what, path);
        else if (kind == 's')
            status = rtomo_set_error(err, RTOMO_E_INVALID, "%s: %s holds a "
                                     "secret key; list only public keys "
                                     "(the NAME.key files, not "
                                     "NAME.key_secret)", what, path);
        else if (kind == 'p' && each(key, path, arg, err) != 0)
            status = err ? err->code : RTOMO_E_INVALID;
        else if (kind == 'p')
            (*count)++;
    }
    free_secret_text(text);
    return status;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

/* Every *.key file of a directory (sorted, so the log is stable). */
static rtomo_status read_list_dir(const char *path, const char *what,
                                  rtomo_keys_each_fn *each, void *arg,
                                  int *count, rtomo_error *err)
{
    struct dirent **names = NULL;
    int n = scandir(path, &names, NULL, alphasort);
    if (n < 0)
        return rtomo_set_error(err, RTOMO_E_INVALID, "%s: cannot read the "
                               "directory %s: %s", what, path,
                               strerror(errno));
    rtomo_status status = RTOMO_OK;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        if (status == RTOMO_OK && name[0] != '.' && ends_with(name, ".key")) {
            char file[4096];
            if ((size_t)snprintf(file, sizeof file, "%s/%s", path, name) >=
                sizeof file)
                status = rtomo_set_error(err, RTOMO_E_INVALID, "%s: path too "
                                         "long in %s", what, path);
            else
                status = read_list_file(file, what, each, arg, count, err);
        }
        free(names[i]);
    }
    free(names);
    return status;
}

rtomo_status rtomo_keys_read_public_list(const char *path, const char *what,
                                         rtomo_keys_each_fn *each, void *arg,
                                         int *count, rtomo_error *err)
{
    *count = 0;
    struct stat st;
    if (stat(path, &st) != 0)
        return rtomo_set_error(err, RTOMO_E_INVALID, "%s: %s: %s", what, path,
                               strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return read_list_file(path, what, each, arg, count, err);
    rtomo_status status = not_writable_by_others(path, what, &st, err);
    if (status == RTOMO_OK)
        status = read_list_dir(path, what, each, arg, count, err);
    return status;
}

/* ----------------------------------------------------------- writing ---- */

/* Create `path` with `mode` (never wider while written: the mode is given
 * to open, and the umask can only narrow it), write `text`.  An existing
 * file is removed first when overwrite, else refused. */
static rtomo_status write_new_file(const char *path, mode_t mode,
                                   const char *text, int overwrite,
                                   rtomo_error *err)
{
    if (overwrite && unlink(path) != 0 && errno != ENOENT)
        return rtomo_set_error(err, RTOMO_E_INVALID, "cannot replace %s: %s",
                               path, strerror(errno));
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return rtomo_set_error(err, RTOMO_E_INVALID, "cannot create %s: %s%s",
                               path, strerror(errno),
                               errno == EEXIST ? " (use --force to replace "
                                                 "it)" : "");
    size_t n = strlen(text);
    int ok = write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
    int saved = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (!ok) {
        unlink(path);
        return rtomo_set_error(err, RTOMO_E_INVALID, "cannot write %s: %s",
                               path, strerror(saved));
    }
    return RTOMO_OK;
}

static const char public_format[] =
    "#   ZeroMQ CURVE public certificate, written by rtomo-keygen.\n"
    "#   Give it to the other side: a client's goes into rtomod's\n"
    "#   security.client_keys, the daemon's to its clients (--server-key).\n"
    "\n"
    "metadata\n"
    "curve\n"
    "    public-key = \"%s\"\n";

static const char secret_format[] =
    "#   ZeroMQ CURVE **secret** certificate, written by rtomo-keygen.\n"
    "#   Keep it private (mode 0600): whoever reads it can act as its owner.\n"
    "\n"
    "metadata\n"
    "curve\n"
    "    public-key = \"%s\"\n"
    "    secret-key = \"%s\"\n";

rtomo_status rtomo_keys_generate(const char *base, int overwrite,
                                 char public_z85[RTOMO_KEY_Z85_SIZE],
                                 rtomo_error *err)
{
    char secret[RTOMO_KEY_Z85_SIZE];
    if (zmq_curve_keypair(public_z85, secret) != 0)
        return rtomo_set_error(err, RTOMO_E_UNAVAILABLE, "cannot make a key "
                               "pair: %s (libzmq built without CURVE?)",
                               zmq_strerror(errno));
    char public_path[4096], secret_path[4096];
    char public_text[512], secret_text[512];
    rtomo_status status = RTOMO_OK;
    if ((size_t)snprintf(public_path, sizeof public_path, "%s.key", base) >=
            sizeof public_path ||
        (size_t)snprintf(secret_path, sizeof secret_path, "%s.key_secret",
                         base) >= sizeof secret_path)
        status = rtomo_set_error(err, RTOMO_E_INVALID, "key file name too "
                                 "long: %s", base);
    snprintf(public_text, sizeof public_text, public_format, public_z85);
    snprintf(secret_text, sizeof secret_text, secret_format, public_z85,
             secret);
    /* The secret first: a public key without its pair is useless. */
    if (status == RTOMO_OK)
        status = write_new_file(secret_path, 0600, secret_text, overwrite,
                                err);
    if (status == RTOMO_OK) {
        status = write_new_file(public_path, 0644, public_text, overwrite,
                                err);
        if (status != RTOMO_OK)
            unlink(secret_path);
    }
    explicit_bzero(secret, sizeof secret);
    explicit_bzero(secret_text, sizeof secret_text);
    return status;
}

int rtomo_keys_set_client(void *s, const char *server_z85,
                          const char *public_z85, const char *secret_z85)
{
    return zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server_z85,
                          RTOMO_KEY_Z85_SIZE) != 0 ||
                   zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, public_z85,
                                  RTOMO_KEY_Z85_SIZE) != 0 ||
                   zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, secret_z85,
                                  RTOMO_KEY_Z85_SIZE) != 0
               ? -1
               : 0;
}
