/*
 * output_hdf5.c — the HDF5/NeXus output sink (see rtomod_output.h).
 *
 * One writer thread takes commands from a FIFO filled by the loop.  A
 * tomography scan's file is laid out as NeXus (NXtomoproc):
 *
 *   /entry                    NXentry: complete, status, reason, counts
 *     data                    NXdata, signal "data"
 *       data                  float32 [slices, height, width], one chunk
 *                             per slice, in published order (`index`)
 *       detector_row          int32 [slices]: the row each slice is of
 *       slice_written         uint8 [slices]: 1 where the slice is in
 *     reconstruction          NXprocess: program, version, date
 *       parameters            NXparameters: filter, axis, phase, rings...
 *       configuration         NXnote: the daemon's configuration (JSON)
 *       scan_begin            NXnote: the scan_begin header as received
 *     sample                  NXsample: rotation_angle (degrees)
 *     instrument/detector     NXdetector: width, height
 *
 * Why a file is always readable: everything but the samples is created
 * when the scan opens and flushed at once, with complete = 0 and status
 * "writing"; the slice stack's chunks are allocated then too (and the
 * space reserved with posix_fallocate), so writing a slice changes no
 * HDF5 metadata, only raw bytes in place.  A crash mid-scan leaves a file
 * that says "writing"; a disk that fills up cannot fail a slice once the
 * file is open (it fails the open, reported as output_error no_space);
 * the closing attributes are rewritten in place.  SBDX streams have no
 * length: their datasets grow per frame (unlimited first dimension) and
 * the file is flushed after every frame.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "rtomod_buffer.h"
#include "rtomod_log.h"
#include "rtomod_output.h"

#define STATUS_LEN 16
#define REASON_LEN 256

typedef enum cmd_kind { CMD_OPEN, CMD_IMAGE, CMD_DROP, CMD_CLOSE } cmd_kind;

typedef struct cmd {
    struct cmd *next;
    cmd_kind kind;
    uint64_t serial;
    char scan[RTOMO_ID_MAX];
    /* OPEN */
    int sbdx;
    json_t *meta;
    char *begin;
    /* IMAGE */
    rtomo_image_header h;
    rtomod_buffer *buffer;
    const void *data;
    size_t size;
    /* CLOSE */
    int complete;
    char reason[32];
    char why[REASON_LEN];
} cmd;

typedef struct notice {
    struct notice *next;
    rtomod_log_level level;
    char event[32], scan[RTOMO_ID_MAX], reason[32];
    char message[RTOMO_REASON_MAX];
} notice;

/* A file being written (writer thread only). */
typedef struct hfile {
    struct hfile *next;
    uint64_t serial;
    char scan[RTOMO_ID_MAX];
    char path[PATH_MAX];
    int sbdx;
    hid_t file, entry, data_group;
    int failed;                 /* no more writes: error says why */
    char error[REASON_LEN];
    /* tomography */
    hid_t stack;                /* data/data, or -1 before the first slice */
    long count, height, width;
    unsigned char *written;
    int *rows;
    long n_written, dropped, rejected;
    double axis;
    /* SBDX */
    hid_t composite, depth, planes;
    long frames, n_planes;
    long plane_height, plane_width;
    uint64_t bytes;
} hfile;

struct rtomod_output {
    char directory[RTOMOD_PATH_MAX];
    size_t limit;               /* queue bytes at most */
    int block;                  /* when_full "block" */
    int sbdx_planes;
    char *config_text;
    struct ev_loop *loop;
    ev_async *wake;

    pthread_mutex_t lock;
    pthread_cond_t work, room;
    cmd *head, *tail;
    size_t queued, reserved;    /* image bytes queued; reserved by gates */
    int stopping, no_wait;
    notice *notices, *notices_tail;
    /* figures */
    uint64_t files_written, files_incomplete, files_failed, files_open;
    uint64_t images_written, images_dropped, bytes_written, errors;
    char last_file[PATH_MAX];
    char last_error[PATH_MAX + REASON_LEN + 8];
    pthread_t thread;
    int started;
    hfile *files;               /* writer thread */
};

/* --------------------------------------------------------- notices ---- */

static void notify(rtomod_output *o, rtomod_log_level level, const char *event,
                   const char *scan, const char *reason, const char *format,
                   ...) __attribute__((format(printf, 6, 7)));
static void notify(rtomod_output *o, rtomod_log_level level, const char *event,
                   const char *scan, const char *reason, const char *format,
                   ...)
{
    notice *n = calloc(1, sizeof *n);
    if (!n)
        return;
    n->level = level;
    snprintf(n->event, sizeof n->event, "%s", event);
    snprintf(n->scan, sizeof n->scan, "%s", scan ? scan : "");
    snprintf(n->reason, sizeof n->reason, "%s", reason ? reason : "");
    va_list ap;
    va_start(ap, format);
    vsnprintf(n->message, sizeof n->message, format, ap);
    va_end(ap);
    pthread_mutex_lock(&o->lock);
    if (o->notices_tail)
        o->notices_tail->next = n;
    else
        o->notices = n;
    o->notices_tail = n;
    pthread_mutex_unlock(&o->lock);
    if (o->loop && o->wake)
        ev_async_send(o->loop, o->wake);
}

void rtomod_output_poll(rtomod_output *o, rtomod_publisher *pub)
{
    if (!o)
        return;
    pthread_mutex_lock(&o->lock);
    notice *n = o->notices;
    o->notices = o->notices_tail = NULL;
    pthread_mutex_unlock(&o->lock);
    while (n) {
        notice *next = n->next;
        rtomod_publish_event(pub, n->level, n->event,
                             n->scan[0] ? n->scan : NULL, -1, n->reason,
                             "%s", n->message);
        free(n);
        n = next;
    }
}

/* The short code of an errno for output_error. */
static const char *error_code(int e)
{
    switch (e) {
    case ENOSPC:
    case EDQUOT:
        return "no_space";
    case EFBIG:
        return "file_too_large";
    case EACCES:
    case EPERM:
    case EROFS:
        return "permission";
    case ENOENT:
    case ENOTDIR:
        return "no_directory";
    default:
        return "io_error";
    }
}

/* A file failed: no more writes to it, one output_error event. */
static void file_fail(rtomod_output *o, hfile *f, int e, const char *what)
{
    if (f->failed)
        return;
    f->failed = 1;
    snprintf(f->error, sizeof f->error, "%s: %s", what,
             e ? strerror(e) : "HDF5 error");
    pthread_mutex_lock(&o->lock);
    o->errors++;
    snprintf(o->last_error, sizeof o->last_error, "%s: %s", f->path, f->error);
    pthread_mutex_unlock(&o->lock);
    notify(o, RTOMOD_LOG_ERROR, "output_error", f->scan, error_code(e),
           "output file %s: %s; the scan goes on without it", f->path,
           f->error);
}

/* ---------------------------------------------------- HDF5 helpers ---- */

static herr_t attr_string(hid_t obj, const char *name, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, type, &value);
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
    return rc;
}

/* A fixed-length string attribute (rewritten in place at close). */
static herr_t attr_fixed(hid_t obj, const char *name, const char *value,
                         size_t len)
{
    char *buf = calloc(1, len);
    if (!buf)
        return -1;
    snprintf(buf, len, "%s", value);
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, len);
    H5Tset_strpad(type, H5T_STR_NULLTERM);
    herr_t rc = -1;
    hid_t a = H5Aexists(obj, name) > 0 ? H5Aopen(obj, name, H5P_DEFAULT) : -1;
    if (a < 0) {
        hid_t space = H5Screate(H5S_SCALAR);
        a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
        H5Sclose(space);
    }
    if (a >= 0) {
        rc = H5Awrite(a, type, buf);
        H5Aclose(a);
    }
    H5Tclose(type);
    free(buf);
    return rc;
}

static herr_t attr_scalar(hid_t obj, const char *name, hid_t type,
                          const void *value)
{
    hid_t a = H5Aexists(obj, name) > 0 ? H5Aopen(obj, name, H5P_DEFAULT) : -1;
    if (a < 0) {
        hid_t space = H5Screate(H5S_SCALAR);
        a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
        H5Sclose(space);
    }
    herr_t rc = a < 0 ? -1 : H5Awrite(a, type, value);
    if (a >= 0)
        H5Aclose(a);
    return rc;
}

static herr_t attr_long(hid_t obj, const char *name, long v)
{
    int64_t x = v;
    return attr_scalar(obj, name, H5T_NATIVE_INT64, &x);
}

static hid_t group(hid_t parent, const char *name, const char *nx_class)
{
    hid_t g = H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g >= 0)
        attr_string(g, "NX_class", nx_class);
    return g;
}

static herr_t dset_string(hid_t parent, const char *name, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(parent, name, type, space, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    herr_t rc = d < 0 ? -1 : H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                      &value);
    if (d >= 0)
        H5Dclose(d);
    H5Sclose(space);
    H5Tclose(type);
    return rc;
}

static herr_t dset_double(hid_t parent, const char *name, double v,
                          const char *units)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(parent, name, H5T_IEEE_F64LE, space, H5P_DEFAULT,
                         H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = d < 0 ? -1 : H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL,
                                      H5P_DEFAULT, &v);
    if (d >= 0 && units)
        attr_string(d, "units", units);
    if (d >= 0)
        H5Dclose(d);
    H5Sclose(space);
    return rc;
}

static herr_t dset_long(hid_t parent, const char *name, long v)
{
    int64_t x = v;
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(parent, name, H5T_STD_I64LE, space, H5P_DEFAULT,
                         H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = d < 0 ? -1 : H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL,
                                      H5P_DEFAULT, &x);
    if (d >= 0)
        H5Dclose(d);
    H5Sclose(space);
    return rc;
}

/* A JSON value of the metadata as a dataset: numbers, strings, booleans,
 * lists of numbers; objects become groups (NXcollection). */
static void dset_json(hid_t parent, const char *name, json_t *v)
{
    if (json_is_integer(v) || json_is_boolean(v))
        dset_long(parent, name, json_is_boolean(v) ? json_is_true(v)
                                                   : (long)json_integer_value(v));
    else if (json_is_number(v))
        dset_double(parent, name, json_number_value(v), NULL);
    else if (json_is_string(v))
        dset_string(parent, name, json_string_value(v));
    else if (json_is_array(v)) {
        size_t n = json_array_size(v);
        double *x = malloc(sizeof(double) * (n ? n : 1));
        if (!x)
            return;
        for (size_t i = 0; i < n; i++)
            x[i] = json_number_value(json_array_get(v, i));
        hsize_t dims[1] = {n};
        hid_t space = H5Screate_simple(1, dims, NULL);
        hid_t d = H5Dcreate2(parent, name, H5T_IEEE_F64LE, space, H5P_DEFAULT,
                             H5P_DEFAULT, H5P_DEFAULT);
        if (d >= 0) {
            if (n)
                H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                         x);
            H5Dclose(d);
        }
        H5Sclose(space);
        free(x);
    } else if (json_is_object(v)) {
        hid_t g = group(parent, name, "NXcollection");
        const char *key;
        json_t *value;
        json_object_foreach(v, key, value)
            dset_json(g, key, value);
        if (g >= 0)
            H5Gclose(g);
    }
}

static void iso_time(char *out, size_t n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(out, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
             (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100,
             tm.tm_mday % 100, tm.tm_hour % 100, tm.tm_min % 100,
             tm.tm_sec % 100, (int)(ts.tv_nsec / 1000000) % 1000);
}

/* errno after a failed HDF5 call: the sec2 driver leaves the system
 * call's. */
static int hdf5_errno(void)
{
    return errno ? errno : EIO;
}

/* ------------------------------------------------------------ files ---- */

static hfile *find_file(rtomod_output *o, uint64_t serial)
{
    for (hfile *f = o->files; f; f = f->next)
        if (f->serial == serial)
            return f;
    return NULL;
}

/* A free name: SCAN.h5, else SCAN-1.h5, SCAN-2.h5 ...: an earlier file of
 * the same id is never overwritten.  Scan ids are safe in a file name
 * (PROTOCOL.md section 2: letters, digits, "._-"), but a leading dot
 * would hide the file: it is kept, the file is still found with ls -a. */
static void choose_path(const rtomod_output *o, const char *scan, char *path,
                        size_t n)
{
    struct stat st;
    snprintf(path, n, "%s/%s.h5", o->directory, scan);
    for (int i = 1; lstat(path, &st) == 0 && i < 10000; i++)
        snprintf(path, n, "%s/%s-%d.h5", o->directory, scan, i);
}

static void write_status(hfile *f, const char *status, int complete,
                         const char *reason)
{
    int8_t c = (int8_t)complete;
    attr_scalar(f->entry, "complete", H5T_NATIVE_INT8, &c);
    attr_fixed(f->entry, "status", status, STATUS_LEN);
    attr_fixed(f->entry, "reason", reason, REASON_LEN);
}

static void open_file(rtomod_output *o, cmd *c)
{
    hfile *f = calloc(1, sizeof *f);
    if (!f)
        return;
    f->serial = c->serial;
    f->sbdx = c->sbdx;
    f->stack = f->composite = f->depth = f->planes = -1;
    f->file = f->entry = f->data_group = -1;
    f->axis = NAN;
    snprintf(f->scan, sizeof f->scan, "%s", c->scan);
    choose_path(o, c->scan, f->path, sizeof f->path);
    f->next = o->files;
    o->files = f;
    pthread_mutex_lock(&o->lock);
    o->files_open++;
    pthread_mutex_unlock(&o->lock);

    /* Creating the file is where a missing or read-only directory shows:
     * ask the system first, for its errno. */
    int fd = open(f->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        file_fail(o, f, errno, "cannot create the file");
        return;
    }
    close(fd);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_EARLIEST, H5F_LIBVER_LATEST);
    errno = 0;
    f->file = H5Fcreate(f->path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f->file < 0) {
        file_fail(o, f, hdf5_errno(), "HDF5 cannot create the file");
        unlink(f->path);
        return;
    }
    char now[64];
    iso_time(now, sizeof now);
    hid_t root = H5Gopen2(f->file, "/", H5P_DEFAULT);
    attr_string(root, "default", "entry");
    attr_string(root, "creator", "rtomod " PACKAGE_VERSION);
    attr_string(root, "file_time", now);
    attr_string(root, "file_name", f->path);
    H5Gclose(root);
    f->entry = group(f->file, "entry", "NXentry");
    attr_string(f->entry, "default", "data");
    dset_string(f->entry, "definition", "NXtomoproc");
    dset_string(f->entry, "title", c->scan);
    dset_string(f->entry, "start_time", now);
    attr_long(f->entry, "images_written", 0);
    attr_long(f->entry, "images_dropped", 0);
    if (!f->sbdx) {
        attr_long(f->entry, "slices_expected",
                  json_integer_value(json_object_get(c->meta, "slices")));
        attr_long(f->entry, "slices_written", 0);
        attr_long(f->entry, "slices_dropped", 0);
    } else {
        attr_long(f->entry, "frames_written", 0);
    }
    write_status(f, "writing", 0, "");
    f->data_group = group(f->entry, "data", "NXdata");
    attr_string(f->data_group, "signal", f->sbdx ? "composite" : "data");

    hid_t recon = group(f->entry, "reconstruction", "NXprocess");
    dset_string(recon, "program", "rtomod");
    dset_string(recon, "version", PACKAGE_VERSION);
    dset_string(recon, "date", now);
    hid_t params = group(recon, "parameters", "NXparameters");
    const char *key;
    json_t *value;
    json_object_foreach(c->meta, key, value) {
        if (strcmp(key, "rotation_angle") != 0)
            dset_json(params, key, value);
    }
    H5Gclose(params);
    hid_t note = group(recon, "configuration", "NXnote");
    dset_string(note, "type", "application/json");
    dset_string(note, "description", "the daemon's effective configuration");
    dset_string(note, "data", o->config_text ? o->config_text : "{}");
    H5Gclose(note);
    note = group(recon, "scan_begin", "NXnote");
    dset_string(note, "type", "application/json");
    dset_string(note, "description", "the scan's begin header as received");
    dset_string(note, "data", c->begin ? c->begin : "");
    H5Gclose(note);
    H5Gclose(recon);

    hid_t sample = group(f->entry, "sample", "NXsample");
    dset_string(sample, "name", c->scan);
    json_t *angles = json_object_get(c->meta, "rotation_angle");
    if (angles) {
        dset_json(sample, "rotation_angle", angles);
        hid_t d = H5Dopen2(sample, "rotation_angle", H5P_DEFAULT);
        if (d >= 0) {
            attr_string(d, "units", "degree");
            H5Dclose(d);
        }
    }
    H5Gclose(sample);
    hid_t inst = group(f->entry, "instrument", "NXinstrument");
    hid_t det = group(inst, "detector", "NXdetector");
    json_t *detector = json_object_get(c->meta, "detector");
    if (detector) {
        dset_json(det, "width", json_object_get(detector, "width"));
        dset_json(det, "height", json_object_get(detector, "height"));
    }
    H5Gclose(det);
    H5Gclose(inst);
    errno = 0;
    if (H5Fflush(f->file, H5F_SCOPE_GLOBAL) < 0)
        file_fail(o, f, hdf5_errno(), "cannot write the file's metadata");
    else
        log_info("output: scan %s: writing %s", f->scan, f->path);
}

/* The slice stack, at the first slice (its header gives the set's size
 * and the image size): every chunk allocated now, the space reserved, so
 * that no slice write changes metadata or can run out of space. */
static int create_stack(rtomod_output *o, hfile *f, const rtomo_image_header *h)
{
    f->count = h->count;
    f->height = h->height;
    f->width = h->width;
    f->written = calloc((size_t)f->count, 1);
    f->rows = malloc(sizeof(int) * (size_t)f->count);
    if (!f->written || !f->rows) {
        file_fail(o, f, ENOMEM, "no memory for the slice table");
        return -1;
    }
    for (long i = 0; i < f->count; i++)
        f->rows[i] = -1;
    /* Reserve the volume's blocks before HDF5 allocates them: the disk
     * fills up here, not mid-volume, and a refusal leaves the file as it
     * was (readable, no stack), marked incomplete with the reason. */
    int *fdp = NULL;
    hsize_t eof = 0;
    off_t bytes = (off_t)f->count * f->height * f->width * 4 +
                  (off_t)f->count * 8 + (1 << 20);
    if (H5Fget_vfd_handle(f->file, H5P_DEFAULT, (void **)&fdp) >= 0 && fdp &&
        H5Fget_filesize(f->file, &eof) >= 0) {
        int rc = posix_fallocate(*fdp, (off_t)eof, bytes);
        if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
            char what[96];
            snprintf(what, sizeof what, "cannot reserve %.1f MB for the "
                     "volume", (double)bytes / (1 << 20));
            file_fail(o, f, rc, what);
            return -1;
        }
    }
    hsize_t dims[3] = {(hsize_t)f->count, (hsize_t)f->height,
                       (hsize_t)f->width};
    hsize_t chunk[3] = {1, dims[1], dims[2]};
    hid_t space = H5Screate_simple(3, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 3, chunk);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    errno = 0;
    f->stack = H5Dcreate2(f->data_group, "data", H5T_IEEE_F32LE, space,
                          H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);
    if (f->stack < 0) {
        file_fail(o, f, hdf5_errno(), "cannot create the slice stack");
        return -1;
    }
    attr_string(f->stack, "long_name", "linear attenuation coefficient "
                "times the pixel size");
    attr_string(f->stack, "units", "1");
    attr_string(f->stack, "interpretation", "image");
    /* Per-slice tables, written at close (allocated now: in place). */
    hsize_t n[1] = {(hsize_t)f->count};
    space = H5Screate_simple(1, n, NULL);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    hid_t d = H5Dcreate2(f->data_group, "detector_row", H5T_STD_I32LE, space,
                         H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d >= 0)
        H5Dclose(d);
    d = H5Dcreate2(f->data_group, "slice_written", H5T_STD_U8LE, space,
                   H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d >= 0)
        H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    attr_string(f->data_group, "slice_indices", "0");
    errno = 0;
    if (H5Fflush(f->file, H5F_SCOPE_GLOBAL) < 0) {
        file_fail(o, f, hdf5_errno(), "cannot write the slice stack's "
                  "metadata");
        return -1;
    }
    return 0;
}

static void write_slice(rtomod_output *o, hfile *f, cmd *c)
{
    const rtomo_image_header *h = &c->h;
    if (f->stack < 0 && create_stack(o, f, h) != 0)
        return;
    if (h->count != f->count || h->width != f->width ||
        h->height != f->height || h->index < 0 || h->index >= f->count ||
        h->dtype != RTOMO_DTYPE_F32) {
        f->rejected++;
        log_warn("output: scan %s: slice %lld (%dx%d of %d) does not fit the "
                 "file's stack (%ldx%ld of %ld): not written", f->scan,
                 (long long)h->index, h->width, h->height, (int)h->count,
                 f->width, f->height, f->count);
        return;
    }
    hsize_t start[3] = {(hsize_t)h->index, 0, 0};
    hsize_t count[3] = {1, (hsize_t)f->height, (hsize_t)f->width};
    hid_t fspace = H5Dget_space(f->stack);
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t mspace = H5Screate_simple(3, count, NULL);
    errno = 0;
    herr_t rc = H5Dwrite(f->stack, H5T_NATIVE_FLOAT, mspace, fspace,
                         H5P_DEFAULT, c->data);
    H5Sclose(mspace);
    H5Sclose(fspace);
    if (rc < 0) {
        file_fail(o, f, hdf5_errno(), "cannot write a slice");
        return;
    }
    if (!f->written[h->index])
        f->n_written++;
    f->written[h->index] = 1;
    f->rows[h->index] = (int)h->slice;
    if (isfinite(h->axis))
        f->axis = h->axis;
    f->bytes += c->size;
    pthread_mutex_lock(&o->lock);
    o->images_written++;
    o->bytes_written += c->size;
    pthread_mutex_unlock(&o->lock);
}

/* An SBDX dataset that grows by frame: [frames, (planes,) h, w]. */
static hid_t growing(hfile *f, const char *name, hid_t type, int rank,
                     const hsize_t *image)
{
    hsize_t dims[4] = {0}, max[4] = {H5S_UNLIMITED}, chunk[4] = {1};
    for (int i = 1; i < rank; i++)
        dims[i] = max[i] = image[i - 1];
    for (int i = 1; i < rank; i++)
        chunk[i] = i == rank - 3 ? 1 : image[i - 1];
    if (rank == 4)
        chunk[1] = 1;
    hid_t space = H5Screate_simple(rank, dims, max);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, rank, chunk);
    hid_t d = H5Dcreate2(f->data_group, name, type, space, H5P_DEFAULT, dcpl,
                         H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);
    return d;
}

static void write_sbdx(rtomod_output *o, hfile *f, cmd *c)
{
    const rtomo_image_header *h = &c->h;
    int is_plane = strcmp(h->topic, RTOMO_TOPIC_PLANE) == 0;
    int is_depth = strcmp(h->topic, RTOMO_TOPIC_DEPTH) == 0;
    if (is_plane && !o->sbdx_planes)
        return;
    hid_t *dset = is_plane ? &f->planes : is_depth ? &f->depth : &f->composite;
    hid_t type = h->dtype == RTOMO_DTYPE_U16 ? H5T_STD_U16LE : H5T_IEEE_F32LE;
    hid_t mem = h->dtype == RTOMO_DTYPE_U16 ? H5T_NATIVE_UINT16
                                            : H5T_NATIVE_FLOAT;
    int rank = is_plane ? 4 : 3;
    errno = 0;
    if (*dset < 0) {
        hsize_t image[3] = {(hsize_t)h->count, (hsize_t)h->height,
                            (hsize_t)h->width};
        *dset = growing(f, is_plane ? "planes" : is_depth ? "depth"
                                                          : "composite",
                        type, rank, is_plane ? image : image + 1);
        if (*dset < 0) {
            file_fail(o, f, hdf5_errno(), "cannot create an SBDX dataset");
            return;
        }
        if (is_plane)
            f->n_planes = h->count;
    }
    hsize_t dims[4];
    hid_t fspace = H5Dget_space(*dset);
    H5Sget_simple_extent_dims(fspace, dims, NULL);
    H5Sclose(fspace);
    if (h->frame < 0 || (is_plane && (h->index < 0 || h->index >= (int64_t)dims[1])) ||
        dims[rank - 1] != (hsize_t)h->width ||
        dims[rank - 2] != (hsize_t)h->height) {
        f->rejected++;
        return;
    }
    if ((hsize_t)h->frame >= dims[0]) {
        dims[0] = (hsize_t)h->frame + 1;
        if (H5Dset_extent(*dset, dims) < 0) {
            file_fail(o, f, hdf5_errno(), "cannot extend an SBDX dataset");
            return;
        }
    }
    hsize_t start[4] = {(hsize_t)h->frame, 0, 0, 0};
    hsize_t count[4] = {1, 1, 1, 1};
    if (is_plane)
        start[1] = (hsize_t)h->index;
    count[rank - 2] = (hsize_t)h->height;
    count[rank - 1] = (hsize_t)h->width;
    fspace = H5Dget_space(*dset);
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t mspace = H5Screate_simple(rank, count, NULL);
    herr_t rc = H5Dwrite(*dset, mem, mspace, fspace, H5P_DEFAULT, c->data);
    H5Sclose(mspace);
    H5Sclose(fspace);
    if (rc < 0) {
        file_fail(o, f, hdf5_errno(), "cannot write an SBDX image");
        return;
    }
    if (is_depth || (!is_plane && f->depth < 0)) {
        f->frames = h->frame + 1 > f->frames ? h->frame + 1 : f->frames;
        /* A frame is whole on disk once its depth map is: flush, so that
         * what was written stays readable whatever comes. */
        if (is_depth && H5Fflush(f->file, H5F_SCOPE_GLOBAL) < 0)
            file_fail(o, f, hdf5_errno(), "cannot flush the file");
    }
    f->bytes += c->size;
    pthread_mutex_lock(&o->lock);
    o->images_written++;
    o->bytes_written += c->size;
    pthread_mutex_unlock(&o->lock);
}

static void free_file(hfile *f)
{
    free(f->written);
    free(f->rows);
    free(f);
}

static void close_file(rtomod_output *o, hfile *f, int complete,
                       const char *reason, const char *why)
{
    for (hfile **link = &o->files; *link; link = &(*link)->next)
        if (*link == f) {
            *link = f->next;
            break;
        }
    long missing = f->sbdx ? 0 : f->count - f->n_written;
    if (f->stack < 0 && !f->sbdx)
        missing = -1;           /* no slice ever came */
    complete = complete && !f->failed && f->dropped == 0 && f->rejected == 0 &&
               (f->sbdx || (f->stack >= 0 && missing == 0));
    char text[REASON_LEN];
    if (f->failed)
        snprintf(text, sizeof text, "%s", f->error);
    else if (!complete && why && *why)
        snprintf(text, sizeof text, "%s", why);
    else if (!complete && f->dropped)
        snprintf(text, sizeof text, "%ld images dropped: the output queue "
                 "was full (output.hdf5.queue_mb)", f->dropped);
    else
        snprintf(text, sizeof text, "%s", complete ? "" : "incomplete");
    if (f->file >= 0) {
        errno = 0;
        if (f->stack >= 0) {
            hid_t d = H5Dopen2(f->data_group, "slice_written", H5P_DEFAULT);
            if (d >= 0) {
                H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                         f->written);
                H5Dclose(d);
            }
            d = H5Dopen2(f->data_group, "detector_row", H5P_DEFAULT);
            if (d >= 0) {
                H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                         f->rows);
                H5Dclose(d);
            }
            H5Dclose(f->stack);
        }
        if (f->sbdx) {
            attr_long(f->entry, "frames_written", f->frames);
        } else {
            attr_long(f->entry, "slices_written", f->n_written);
            attr_long(f->entry, "slices_dropped", f->dropped);
        }
        attr_long(f->entry, "images_dropped", f->dropped);
        attr_long(f->entry, "images_written",
                  f->sbdx ? f->frames : f->n_written);
        if (isfinite(f->axis))
            attr_scalar(f->entry, "rotation_axis", H5T_NATIVE_DOUBLE,
                        &f->axis);
        write_status(f, complete ? "complete" : "incomplete", complete,
                     complete ? (reason ? reason : "") : text);
        if (!complete && !f->sbdx && f->count > 0 && missing > 0) {
            /* Best effort (new space): the mask above is the record. */
            int64_t *list = malloc(sizeof(int64_t) * (size_t)missing);
            long k = 0;
            for (long i = 0; list && i < f->count; i++)
                if (!f->written[i])
                    list[k++] = i;
            if (list) {
                hsize_t n[1] = {(hsize_t)k};
                hid_t space = H5Screate_simple(1, n, NULL);
                hid_t a = H5Acreate2(f->entry, "missing_slices",
                                     H5T_STD_I64LE, space, H5P_DEFAULT,
                                     H5P_DEFAULT);
                if (a >= 0) {
                    H5Awrite(a, H5T_NATIVE_INT64, list);
                    H5Aclose(a);
                }
                H5Sclose(space);
            }
            free(list);
        }
        char now[64];
        iso_time(now, sizeof now);
        dset_string(f->entry, "end_time", now);
        if (f->composite >= 0)
            H5Dclose(f->composite);
        if (f->depth >= 0)
            H5Dclose(f->depth);
        if (f->planes >= 0)
            H5Dclose(f->planes);
        H5Gclose(f->data_group);
        H5Gclose(f->entry);
        if (H5Fclose(f->file) < 0 && !f->failed)
            file_fail(o, f, hdf5_errno(), "cannot close the file");
    }
    pthread_mutex_lock(&o->lock);
    o->files_open--;
    if (f->file < 0 || f->failed)
        o->files_failed++;
    else if (complete)
        o->files_written++;
    else
        o->files_incomplete++;
    if (f->file >= 0)
        snprintf(o->last_file, sizeof o->last_file, "%s", f->path);
    pthread_mutex_unlock(&o->lock);
    if (f->file >= 0) {
        if (f->sbdx)
            notify(o, complete ? RTOMOD_LOG_INFO : RTOMOD_LOG_WARN,
                   "output_file", f->scan, complete ? "complete" : "incomplete",
                   "%s: %ld frames, %ld images dropped%s%s", f->path,
                   f->frames, f->dropped, complete ? "" : "; incomplete: ",
                   complete ? "" : text);
        else
            notify(o, complete ? RTOMOD_LOG_INFO : RTOMOD_LOG_WARN,
                   "output_file", f->scan, complete ? "complete" : "incomplete",
                   "%s: %ld of %ld slices, %ld dropped%s%s", f->path,
                   f->n_written, f->count > 0 ? f->count : 0, f->dropped,
                   complete ? "" : "; incomplete: ", complete ? "" : text);
    }
    free_file(f);
}

/* ----------------------------------------------------------- thread ---- */

static void cmd_free(cmd *c)
{
    json_decref(c->meta);
    free(c->begin);
    rtomod_buffer_unref(c->buffer);
    free(c);
}

static void handle(rtomod_output *o, cmd *c)
{
    hfile *f = c->kind == CMD_OPEN ? NULL : find_file(o, c->serial);
    switch (c->kind) {
    case CMD_OPEN:
        open_file(o, c);
        break;
    case CMD_IMAGE:
        if (!f || f->failed)
            break;
        if (f->sbdx)
            write_sbdx(o, f, c);
        else
            write_slice(o, f, c);
        break;
    case CMD_DROP:
        if (f && f->dropped++ == 0)
            notify(o, RTOMOD_LOG_WARN, "output_dropped", f->scan,
                   "queue_full", "the output queue is full (the disk is "
                   "slower than the reconstruction): images of scan %s are "
                   "dropped from %s, counted in status and the file",
                   f->scan, f->path);
        break;
    case CMD_CLOSE:
        if (f)
            close_file(o, f, c->complete, c->reason, c->why);
        break;
    }
}

static void *writer_main(void *arg)
{
    rtomod_output *o = arg;
    pthread_mutex_lock(&o->lock);
    for (;;) {
        while (!o->head && !o->stopping)
            pthread_cond_wait(&o->work, &o->lock);
        cmd *c = o->head;
        if (!c)
            break;
        o->head = c->next;
        if (!o->head)
            o->tail = NULL;
        pthread_mutex_unlock(&o->lock);
        handle(o, c);
        pthread_mutex_lock(&o->lock);
        if (c->kind == CMD_IMAGE) {
            o->queued -= c->size;
            pthread_cond_broadcast(&o->room);
        }
        pthread_mutex_unlock(&o->lock);
        cmd_free(c);
        pthread_mutex_lock(&o->lock);
    }
    pthread_mutex_unlock(&o->lock);
    /* Files still open: the daemon stops before their scans ended. */
    while (o->files)
        close_file(o, o->files, 0, "shutdown", "rtomod stopped before the "
                   "scan ended");
    return NULL;
}

static void push(rtomod_output *o, cmd *c)
{
    pthread_mutex_lock(&o->lock);
    if (o->tail)
        o->tail->next = c;
    else
        o->head = c;
    o->tail = c;
    pthread_cond_signal(&o->work);
    pthread_mutex_unlock(&o->lock);
}

/* ----------------------------------------------------------- public ---- */

rtomod_output *rtomod_output_start(const rtomod_config *cfg,
                                   struct ev_loop *loop, ev_async *wake,
                                   char *error, size_t error_size)
{
    error[0] = '\0';
    if (!cfg->output.hdf5_directory[0])
        return NULL;
    rtomod_output *o = calloc(1, sizeof *o);
    if (!o) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    snprintf(o->directory, sizeof o->directory, "%s",
             cfg->output.hdf5_directory);
    o->limit = (size_t)(cfg->output.hdf5_queue_mb * 1024.0 * 1024.0);
    o->block = cfg->output.hdf5_block;
    o->sbdx_planes = cfg->output.hdf5_sbdx_planes;
    json_t *c = rtomod_config_to_json(cfg);
    o->config_text = c ? json_dumps(c, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    json_decref(c);
    o->loop = loop;
    o->wake = wake;
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->work, NULL);
    pthread_cond_init(&o->room, NULL);
    /* HDF5 reports failures through return codes here, not on stderr. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int rc = pthread_create(&o->thread, NULL, writer_main, o);
    if (rc != 0) {
        snprintf(error, error_size, "cannot start the output thread: %s",
                 strerror(rc));
        free(o->config_text);
        free(o);
        return NULL;
    }
    o->started = 1;
    log_info("output: HDF5 files in %s (queue %.0f MB, when full: %s%s)",
             o->directory, cfg->output.hdf5_queue_mb,
             o->block ? "block" : "drop",
             o->sbdx_planes ? "; SBDX planes too" : "");
    return o;
}

void rtomod_output_no_wait(rtomod_output *o)
{
    if (!o)
        return;
    pthread_mutex_lock(&o->lock);
    o->no_wait = 1;
    pthread_cond_broadcast(&o->room);
    pthread_mutex_unlock(&o->lock);
}

void rtomod_output_stop(rtomod_output *o, rtomod_publisher *pub)
{
    if (!o)
        return;
    rtomod_output_no_wait(o);
    pthread_mutex_lock(&o->lock);
    o->stopping = 1;
    pthread_cond_signal(&o->work);
    pthread_mutex_unlock(&o->lock);
    if (o->started)
        pthread_join(o->thread, NULL);
    o->loop = NULL;
    if (pub && pub->socket)
        rtomod_output_poll(o, pub);
    while (o->notices) {
        notice *n = o->notices->next;
        free(o->notices);
        o->notices = n;
    }
    pthread_mutex_destroy(&o->lock);
    pthread_cond_destroy(&o->work);
    pthread_cond_destroy(&o->room);
    free(o->config_text);
    free(o);
}

static int open_cmd(rtomod_output *o, uint64_t serial, const char *scan,
                    json_t *meta, const char *begin, size_t begin_size,
                    int sbdx)
{
    if (!o) {
        json_decref(meta);
        return 0;
    }
    cmd *c = calloc(1, sizeof *c);
    if (!c) {
        json_decref(meta);
        return 0;
    }
    c->kind = CMD_OPEN;
    c->serial = serial;
    c->sbdx = sbdx;
    c->meta = meta;
    snprintf(c->scan, sizeof c->scan, "%s", scan);
    if (begin && (c->begin = malloc(begin_size + 1))) {
        memcpy(c->begin, begin, begin_size);
        c->begin[begin_size] = '\0';
    }
    push(o, c);
    return 1;
}

int rtomod_output_open_tomo(rtomod_output *o, uint64_t serial,
                            const char *scan, json_t *meta,
                            const char *begin, size_t begin_size)
{
    return open_cmd(o, serial, scan, meta, begin, begin_size, 0);
}

int rtomod_output_open_sbdx(rtomod_output *o, uint64_t serial,
                            const char *scan, json_t *meta,
                            const char *begin, size_t begin_size)
{
    return open_cmd(o, serial, scan, meta, begin, begin_size, 1);
}

void rtomod_output_image(rtomod_output *o, uint64_t serial, rtomod_result *r)
{
    if (!o || !r->buffer)
        return;
    cmd *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->serial = serial;
    pthread_mutex_lock(&o->lock);
    size_t reserved = r->output_reserved;
    r->output_reserved = 0;
    o->reserved -= reserved;
    int room = reserved || o->queued == 0 || o->queued + r->size <= o->limit;
    if (room) {
        c->kind = CMD_IMAGE;
        c->h = r->header;
        c->buffer = rtomod_buffer_ref(r->buffer);
        c->data = r->data;
        c->size = r->size;
        o->queued += r->size;
    } else {
        c->kind = CMD_DROP;
        o->images_dropped++;
    }
    pthread_mutex_unlock(&o->lock);
    push(o, c);
}

void rtomod_output_close(rtomod_output *o, uint64_t serial, int complete,
                         const char *reason, const char *why)
{
    if (!o)
        return;
    cmd *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->kind = CMD_CLOSE;
    c->serial = serial;
    c->complete = complete;
    snprintf(c->reason, sizeof c->reason, "%s", reason ? reason : "");
    snprintf(c->why, sizeof c->why, "%s", why ? why : "");
    push(o, c);
}

void rtomod_output_gate(void *output, rtomod_result *r)
{
    rtomod_output *o = output;
    if (!o || !o->block || r->kind != RTOMOD_RESULT_IMAGE || !r->buffer)
        return;
    pthread_mutex_lock(&o->lock);
    while (!o->no_wait && o->queued + o->reserved > 0 &&
           o->queued + o->reserved + r->size > o->limit)
        pthread_cond_wait(&o->room, &o->lock);
    o->reserved += r->size;
    r->output_reserved = r->size;
    r->output_hold = o;
    pthread_mutex_unlock(&o->lock);
}

void rtomod_output_unreserve(rtomod_output *o, size_t bytes)
{
    if (!o || !bytes)
        return;
    pthread_mutex_lock(&o->lock);
    o->reserved -= bytes;
    pthread_cond_broadcast(&o->room);
    pthread_mutex_unlock(&o->lock);
}

json_t *rtomod_output_json(rtomod_output *o)
{
    if (!o)
        return json_null();
    pthread_mutex_lock(&o->lock);
    json_t *j = json_pack(
        "{s:s, s:s, s:f, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, "
        "s:s}",
        "directory", o->directory, "when_full", o->block ? "block" : "drop",
        "queue_mb", (double)o->limit / (1 << 20),
        "queued_mb", (double)(o->queued + o->reserved) / (1 << 20),
        "files_open", (json_int_t)o->files_open,
        "files_written", (json_int_t)o->files_written,
        "files_incomplete", (json_int_t)o->files_incomplete,
        "files_failed", (json_int_t)o->files_failed,
        "images_written", (json_int_t)o->images_written,
        "images_dropped", (json_int_t)o->images_dropped,
        "bytes_written", (json_int_t)o->bytes_written,
        "errors", (json_int_t)o->errors, "last_file", o->last_file,
        "last_error", o->last_error);
    pthread_mutex_unlock(&o->lock);
    return j;
}
