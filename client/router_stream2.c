/*
 * router_stream2.c — rtomo-router's reading and cutting of DECTRIS Stream
 * V2 messages (router_stream2.h).
 *
 * Why a CBOR walker of its own rather than a CBOR library: the router
 * needs where each item lies in the message (to splice the message, not
 * rebuild it), never the items themselves, and must not copy or allocate
 * for the image bytes it passes on; walking the item heads gives exactly
 * that, in one pass, with no allocation but the bslz4 block table.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "router_stream2.h"

#define TAG_MULTIDIM 40             /* RFC 8746 3.1.1, row-major */
#define TAG_UINT8 64                /* RFC 8746 2.1 */
#define TAG_UINT16_LE 69
#define TAG_UINT32_LE 70
#define TAG_DECTRIS_COMPRESSION 56500
#define EDGE_MAX 65536              /* image sides, as the daemon takes */
#define BSLZ4_HEADER 12             /* uint64 size, uint32 block size */

/* ---------------------------------------------------------- reading ---- */

/* A position in the message. */
typedef struct cursor {
    const uint8_t *p;
    size_t size, pos;
} cursor;

/* One item head: major type, argument (or indefinite), where it lies. */
typedef struct head {
    int major, indefinite;
    uint64_t arg;
    size_t at, length;
} head;

static int read_head(cursor *c, head *h)
{
    if (c->pos >= c->size)
        return -1;
    const int info = c->p[c->pos] & 31;
    size_t n = 0;
    h->major = c->p[c->pos] >> 5;
    h->at = c->pos;
    h->indefinite = 0;
    h->arg = info < 24 ? (uint64_t)info : 0;
    if (info >= 24 && info <= 27)
        n = (size_t)1 << (info - 24);
    else if (info == 31 && h->major >= 2 && h->major != 6)
        h->indefinite = 1;      /* strings and containers; 7: a break */
    else if (info >= 24)
        return -1;              /* reserved, or an indefinite number/tag */
    if (c->size - c->pos - 1 < n)
        return -1;
    for (size_t i = 0; i < n; i++)
        h->arg = h->arg << 8 | c->p[c->pos + 1 + i];
    h->length = 1 + n;
    c->pos += h->length;
    return 0;
}

static int at_break(const cursor *c)
{
    return c->pos < c->size && c->p[c->pos] == 0xff;
}

static int advance(cursor *c, uint64_t n)
{
    if (n > c->size - c->pos)
        return -1;
    c->pos += (size_t)n;
    return 0;
}

static int skip(cursor *c, int depth);

/* The chunks of an indefinite string, up to and past its break. */
static int skip_chunks(cursor *c, int major)
{
    head h;
    while (!at_break(c))
        if (read_head(c, &h) != 0 || h.major != major || h.indefinite ||
            advance(c, h.arg) != 0)
            return -1;
    c->pos++;
    return 0;
}

/* The items of an array (per 1) or map (per 2) whose head is h. */
static int skip_items(cursor *c, const head *h, int per, int depth)
{
    if (h->indefinite) {
        while (!at_break(c))
            if (skip(c, depth + 1) != 0)
                return -1;
        c->pos++;
        return 0;
    }
    /* Every item takes a byte at least: a larger count is a lie. */
    if (h->arg > c->size - c->pos)
        return -1;
    for (uint64_t i = 0; i < h->arg * (uint64_t)per; i++)
        if (skip(c, depth + 1) != 0)
            return -1;
    return 0;
}

/* Move past one whole item. */
static int skip(cursor *c, int depth)
{
    head h;
    if (depth > ROUTER_S2_DEPTH_MAX || read_head(c, &h) != 0)
        return -1;
    switch (h.major) {
    case 2:
    case 3:
        return h.indefinite ? skip_chunks(c, h.major) : advance(c, h.arg);
    case 4:
    case 5:
        return skip_items(c, &h, h.major == 5 ? 2 : 1, depth);
    case 6:
        return skip(c, depth + 1);
    case 7:
        return h.indefinite ? -1 : 0;   /* a break out of place */
    default:
        return 0;
    }
}

/* A map key: *text set when it is a definite text (else NULL, the key
 * skipped). */
static int read_key(cursor *c, const uint8_t **text, size_t *length)
{
    cursor start = *c;
    head h;
    *text = NULL;
    if (read_head(c, &h) == 0 && h.major == 3 && !h.indefinite) {
        *text = c->p + c->pos;
        *length = (size_t)h.arg;
        return advance(c, h.arg);
    }
    *c = start;
    return skip(c, 1);
}

static int text_is(const uint8_t *text, size_t length, const char *s)
{
    return text && length == strlen(s) && memcmp(text, s, length) == 0;
}

/* A definite text item equal to s; the cursor moves past it. */
static int read_text_is(cursor *c, const char *s)
{
    head h;
    if (read_head(c, &h) != 0 || h.major != 3 || h.indefinite)
        return 0;
    const uint8_t *text = c->p + c->pos;
    return advance(c, h.arg) == 0 && text_is(text, (size_t)h.arg, s);
}

/* An item head of the given major type and definite argument. */
static int expect(cursor *c, int major, head *h)
{
    return read_head(c, h) == 0 && h->major == major && !h->indefinite;
}

static uint64_t get_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* ---------------------------------------------------------- an image ---- */

/* The bslz4 block table of array a (router_stream2.h), or why not. */
static const char *read_blocks(router_s2_message *m, router_s2_array *a)
{
    const uint8_t *d = m->buf + a->data;
    const size_t len = a->length, e = (size_t)m->elem_size;
    const size_t n = (size_t)m->height * (size_t)m->width;
    if (len < BSLZ4_HEADER)
        return "its bslz4 data is shorter than the 12-byte header";
    if (get_be(d, 8) != (uint64_t)(n * e))
        return "its bslz4 header's size is not the image's";
    const uint32_t block_bytes = (uint32_t)get_be(d + 8, 4);
    if (block_bytes == 0 || block_bytes % (8 * e) != 0)
        return "its bslz4 block size is not a multiple of 8 elements";
    const size_t be = block_bytes / e, full = n / be;
    a->n_blocks = full + (n % be / 8 > 0);
    a->blocks = malloc(sizeof *a->blocks * (a->n_blocks + 1));
    if (!a->blocks)
        return "out of memory for its bslz4 block table";
    size_t pos = BSLZ4_HEADER;
    for (size_t i = 0; i < a->n_blocks; i++) {
        a->blocks[i] = pos;
        if (len - pos < 4 || get_be(d + pos, 4) > len - pos - 4)
            return "a bslz4 block runs past its data";
        pos += 4 + (size_t)get_be(d + pos, 4);
    }
    a->blocks[a->n_blocks] = pos;
    /* After the blocks: the (n mod 8) elements that fit in none. */
    if (len - pos != n % 8 * e)
        return "its bslz4 blocks do not fill its data";
    if (m->n_arrays > 0 && block_bytes != m->block_bytes)
        return "its channels have different bslz4 block sizes";
    m->block_bytes = block_bytes;
    m->block_elements = be;
    return NULL;
}

/* The typed array's content: a byte string, or DECTRIS' compression tag
 * ["bslz4", element size, bytes]. */
static const char *read_content(cursor *c, int elem, int *bslz4,
                                router_s2_array *a)
{
    head h;
    if (read_head(c, &h) != 0)
        return "its typed array is cut short";
    *bslz4 = h.major == 6 && h.arg == TAG_DECTRIS_COMPRESSION;
    if (*bslz4) {
        head size;
        if (!expect(c, 4, &h) || h.arg != 3 || !read_text_is(c, "bslz4") ||
            !expect(c, 0, &size) || size.arg != (uint64_t)elem ||
            !expect(c, 2, &h))
            return "its compression is not [\"bslz4\", element size, bytes]";
    } else if (h.major != 2 || h.indefinite) {
        return "its typed array holds neither bytes nor bslz4";
    }
    a->head = h.at;
    a->data = c->pos;
    a->length = (size_t)h.arg;
    return advance(c, h.arg) == 0 ? NULL : "its typed array is cut short";
}

/* The dimensions and element type of a channel: tag 40 [[height, width],
 * tag 64/69/70 ...]. */
static const char *read_shape(cursor *c, long *height, long *width, int *elem)
{
    head h, y, x;
    if (!expect(c, 6, &h) || h.arg != TAG_MULTIDIM || !expect(c, 4, &h) ||
        h.arg != 2 || !expect(c, 4, &h) || h.arg != 2 || !expect(c, 0, &y) ||
        !expect(c, 0, &x))
        return "a channel is not tag 40 [[height, width], typed array]";
    if (y.arg < 1 || y.arg > EDGE_MAX || x.arg < 1 || x.arg > EDGE_MAX)
        return "its image sides are not 1 to 65536";
    if (!expect(c, 6, &h))
        return "its array is not a typed array";
    *elem = h.arg == TAG_UINT8 ? 1 : h.arg == TAG_UINT16_LE ? 2
            : h.arg == TAG_UINT32_LE ? 4 : 0;
    if (!*elem)
        return "its typed array is none of uint8, uint16 LE, uint32 LE";
    *height = (long)y.arg;
    *width = (long)x.arg;
    return NULL;
}

/* One channel's array into m->arrays[m->n_arrays]. */
static const char *read_array(cursor *c, router_s2_message *m)
{
    if (m->n_arrays == ROUTER_S2_ARRAYS)
        return "it has more channels than the router cuts (8)";
    router_s2_array *a = &m->arrays[m->n_arrays];
    long height, width;
    int elem, bslz4;
    const char *why = read_shape(c, &height, &width, &elem);
    if (!why)
        why = read_content(c, elem, &bslz4, a);
    if (why)
        return why;
    if (m->n_arrays > 0 && (height != m->height || width != m->width ||
                            elem != m->elem_size || bslz4 != m->bslz4))
        return "its channels differ in size, type or compression";
    m->height = height;
    m->width = width;
    m->elem_size = elem;
    m->bslz4 = bslz4;
    if (!bslz4 && a->length != (size_t)(height * width) * (size_t)elem)
        return "its uncompressed image is not height x width elements";
    why = bslz4 ? read_blocks(m, a) : NULL;
    m->n_arrays++;              /* so that its block table is freed */
    return why;
}

/* "data": a map of channel name -> array. */
static const char *read_data(cursor *c, router_s2_message *m)
{
    head h;
    if (read_head(c, &h) != 0 || h.major != 5)
        return "its data is not a map of channels";
    for (uint64_t i = 0; h.indefinite ? !at_break(c) : i < h.arg; i++) {
        const char *why = skip(c, 1) != 0 ? "its data is not well-formed"
                                          : read_array(c, m);
        if (why)
            return why;
    }
    return m->n_arrays > 0 ? NULL : "it has no channel";
}

/* ------------------------------------------------------ the message ---- */

/* Where the top-level keys the router reads are.  Of a key given twice
 * the first counts, as in the daemon's parser. */
typedef struct top_keys {
    int has_type, has_series;
    size_t data;                /* the value of "data"; 0 = none */
    int has_rows;               /* "rtomo_rows" present */
} top_keys;

/* The value of a key of the top-level map. */
static int read_value(cursor *c, const uint8_t *key, size_t length,
                      router_s2_message *m, top_keys *k)
{
    if (text_is(key, length, "type") && !k->has_type++) {
        cursor at = *c;
        m->is_image = read_text_is(&at, "image");
    } else if (text_is(key, length, "series_id") && !k->has_series++) {
        cursor at = *c;
        head h;
        if (expect(&at, 0, &h))
            m->series_id = h.arg;
    } else if (text_is(key, length, "data") && !k->data) {
        k->data = c->pos;
    } else if (text_is(key, length, "rtomo_rows")) {
        k->has_rows = 1;
    }
    return skip(c, 1);
}

static const char *read_message(router_s2_message *m)
{
    cursor c = {m->buf, m->size, 0};
    head h;
    if (read_head(&c, &h) != 0 || h.major != 5)
        return "it is not a CBOR map";
    if (!h.indefinite && h.arg > m->size)
        return "it is not well-formed CBOR";
    m->map_head = h.at;
    m->map_head_length = h.length;
    m->map_pairs = h.arg;
    m->map_indefinite = h.indefinite;
    top_keys k = {0, 0, 0, 0};
    for (uint64_t i = 0; h.indefinite ? !at_break(&c) : i < h.arg; i++) {
        const uint8_t *key;
        size_t length;
        if (read_key(&c, &key, &length) != 0 ||
            read_value(&c, key, length, m, &k) != 0)
            return "it is not well-formed CBOR";
    }
    if (h.indefinite && advance(&c, 1) != 0)
        return "it is not well-formed CBOR";
    if (c.pos != c.size)
        return "bytes follow its CBOR map";
    if (!m->is_image)
        return "not an image";
    if (k.has_rows)
        return "it already carries rtomo_rows";
    if (!k.data)
        return "it has no data";
    c.pos = k.data;
    return read_data(&c, m);
}

void router_s2_read(router_s2_message *m, const void *buf, size_t size)
{
    memset(m, 0, sizeof *m);
    m->buf = buf;
    m->size = size;
    m->why_whole = read_message(m);
    m->cut = m->why_whole == NULL;
    if (!m->cut) {
        const char *why = m->why_whole;
        int is_image = m->is_image;
        uint64_t series = m->series_id;
        router_s2_clear(m);
        m->why_whole = why;
        m->is_image = is_image;
        m->series_id = series;
    }
}

void router_s2_clear(router_s2_message *m)
{
    for (int i = 0; i < m->n_arrays; i++)
        free(m->arrays[i].blocks);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------- cutting ---- */

/* Writes bytes at p (NULL: only counts them). */
typedef struct writer {
    uint8_t *p;
    size_t pos;
} writer;

static void put_bytes(writer *w, const void *src, size_t n)
{
    if (w->p && n)
        memcpy(w->p + w->pos, src, n);
    w->pos += n;
}

/* An item head with its argument in the fewest bytes. */
static void put_head(writer *w, int major, uint64_t arg)
{
    uint8_t b[9];
    int n = arg < 24 ? 0 : arg <= 0xff ? 1 : arg <= 0xffff ? 2
            : arg <= 0xffffffffu ? 4 : 8;
    static const int info[9] = {0, 24, 25, 0, 26, 0, 0, 0, 27};
    b[0] = (uint8_t)(major << 5 | (n ? info[n] : (int)arg));
    for (int i = 0; i < n; i++)
        b[1 + i] = (uint8_t)(arg >> (8 * (n - 1 - i)));
    put_bytes(w, b, 1 + (size_t)n);
}

static void put_text(writer *w, const char *s)
{
    put_head(w, 3, strlen(s));
    put_bytes(w, s, strlen(s));
}

/* "rtomo_rows": {"first": F, "count": C, "offset": E} */
static void put_extension(writer *w, router_rows rows, size_t offset)
{
    put_text(w, "rtomo_rows");
    put_head(w, 5, 3);
    put_text(w, "first");
    put_head(w, 0, (uint64_t)rows.first);
    put_text(w, "count");
    put_head(w, 0, (uint64_t)rows.count);
    put_text(w, "offset");
    put_head(w, 0, offset);
}

size_t router_s2_offset(const router_s2_message *m, router_rows rows)
{
    size_t first = (size_t)rows.first * (size_t)m->width;
    return m->bslz4 ? first / m->block_elements * m->block_elements : first;
}

/* What a cut keeps of one array: a new bslz4 header (or nothing) and its
 * bytes [from, to). */
typedef struct piece {
    uint8_t prefix[BSLZ4_HEADER];
    size_t prefix_length, from, to;
} piece;

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static void cut_piece(const router_s2_message *m, const router_s2_array *a,
                      router_rows rows, piece *p)
{
    const size_t e = (size_t)m->elem_size, w = (size_t)m->width;
    const size_t lo = (size_t)rows.first * w;
    const size_t hi = (size_t)(rows.first + rows.count) * w;
    if (!m->bslz4) {
        p->prefix_length = 0;
        p->from = lo * e;
        p->to = hi * e;
        return;
    }
    const size_t be = m->block_elements, n = (size_t)m->height * w;
    const size_t k0 = lo / be;
    size_t elements;
    /* Whole blocks up to the one holding the last row's end; when that is
     * the last partial block or beyond, everything to the end, so that
     * the kept blocks frame the data exactly as the original's did. */
    if (hi <= n / be * be) {
        size_t k1 = (hi + be - 1) / be;
        elements = (k1 - k0) * be;
        p->to = a->blocks[k1];
    } else {
        elements = n - k0 * be;
        p->to = a->length;
    }
    p->from = a->blocks[k0];
    put_be(p->prefix, (uint64_t)(elements * e), 8);
    put_be(p->prefix + 8, m->block_bytes, 4);
    p->prefix_length = BSLZ4_HEADER;
}

/* The message with the extension after the top-level map's head and each
 * array's bytes cut. */
static void write_cut(writer *w, const router_s2_message *m, router_rows rows)
{
    const uint8_t *b = m->buf;
    put_bytes(w, b, m->map_head);
    if (m->map_indefinite)
        put_bytes(w, b + m->map_head, m->map_head_length);
    else
        put_head(w, 5, m->map_pairs + 1);
    put_extension(w, rows, router_s2_offset(m, rows));
    size_t from = m->map_head + m->map_head_length;
    for (int i = 0; i < m->n_arrays; i++) {
        const router_s2_array *a = &m->arrays[i];
        piece p;
        cut_piece(m, a, rows, &p);
        put_bytes(w, b + from, a->head - from);
        put_head(w, 2, p.prefix_length + (p.to - p.from));
        put_bytes(w, p.prefix, p.prefix_length);
        put_bytes(w, b + a->data + p.from, p.to - p.from);
        from = a->data + a->length;
    }
    put_bytes(w, b + from, m->size - from);
}

uint8_t *router_s2_cut(const router_s2_message *m, router_rows rows,
                       size_t *size)
{
    writer w = {NULL, 0};
    write_cut(&w, m, rows);
    uint8_t *out = malloc(w.pos ? w.pos : 1);
    if (!out)
        return NULL;
    *size = w.pos;
    w = (writer){out, 0};
    write_cut(&w, m, rows);
    return out;
}
