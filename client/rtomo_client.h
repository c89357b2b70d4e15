/*
 * rtomo_client.h — a small C client of rtomod over ZeroMQ: push scans and
 * frames to the ingest socket, receive published images, events and
 * telemetry, and send control requests.  Messages are built and checked
 * with the protocol codec (rtomo_protocol.h), so what this library sends is
 * exactly what the daemon accepts.  protocol/PROTOCOL.md describes the wire.
 *
 * A client is used by one thread at a time (ZeroMQ sockets are not
 * thread-safe).  Errors come back as an rtomo_status plus err->message;
 * nothing here exits or prints.  Status codes used:
 *   RTOMO_E_UNAVAILABLE  no answer / no message in time, or a send timed out
 *   RTOMO_E_INVALID      bad argument, or the daemon refused a request
 *                        (bad_json, unknown_command, bad_argument)
 *   RTOMO_E_STATE        the daemon replied bad_state; or the socket needed
 *                        (ingest, publish, control) was not configured
 *   RTOMO_E_BACKEND      a ZeroMQ failure, a malformed message or reply,
 *                        or an "internal" error reply
 *   RTOMO_E_NOMEM        out of memory
 *
 * Several daemons (docs/rtomod.md, "Several daemons"): `ingest` may list
 * several endpoints separated by commas; every ingest message then goes to
 * each of them (fan-out: one set of PUSH sockets per daemon, the payload
 * shared, not copied), so that each daemon reconstructs its slice range of
 * the same stream.  `publish` may list several endpoints likewise; the
 * client subscribes to all and merges what they publish.  `control` may
 * list one endpoint per daemon too: rtomo_client_request asks the first,
 * rtomo_client_wait_for_scan and rtomo_client_scan_outcome ask each.
 *
 * Losses: every published header carries a per-topic sequence number
 * ("seq"); the client tracks it per publisher and topic and reports in
 * rtomo_published.missed how many messages of that topic were lost just
 * before this one (PUB drops silently when a subscriber falls behind).
 */
#ifndef RTOMO_CLIENT_H
#define RTOMO_CLIENT_H

#include <jansson.h>
#include <stddef.h>

#include "rtomo_protocol.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rtomo_client_options {
    const char *ingest;         /* e.g. "tcp://host:5555"; several
                                   separated by commas = fan-out; NULL =
                                   none */
    const char *publish;        /* e.g. "tcp://host:5556"; several
                                   separated by commas = merged; NULL =
                                   none */
    const char *control;        /* e.g. "tcp://127.0.0.1:5557"; several
                                   separated by commas = one per daemon;
                                   NULL = none */
    int connections;            /* ingest PUSH sockets (>= 1, default 1):
                                   frames go round-robin over them, begin
                                   and end messages always on the first.
                                   Each has a ZeroMQ I/O thread of its own
                                   (one carries a few GB/s); opening waits
                                   up to 200 ms for each one's handshake so
                                   that rtomod spreads them over its I/O
                                   threads too */
    int control_timeout_ms;     /* wait for a control reply (default 3000) */
    int send_timeout_ms;        /* ingest: -1 (default) blocks while the
                                   daemon's queue is full; >= 0 gives up */
    int send_hwm;               /* ingest high-water mark in messages per
                                   connection; 0 = ZeroMQ's default (1000) */
    int receive_hwm;            /* SUB high-water mark; 0 = default */
    int receive_buffer;         /* SUB kernel receive buffer in bytes
                                   (ZMQ_RCVBUF); 0 = the system's */
    int linger_ms;              /* on close, how long queued frames may still
                                   be delivered (default 10000; -1 forever) */
    const char *server_key;     /* CURVE: file with the daemon's public key
                                   (rtomo-keygen's NAME.key); NULL = plain
                                   ZeroMQ.  Applies to every socket */
    const char *client_key;     /* CURVE: file with this client's key pair
                                   (NAME.key_secret, mode 0600), whose
                                   public key the daemon lists; needed with
                                   server_key */
} rtomo_client_options;

typedef struct rtomo_client rtomo_client;

void rtomo_client_options_init(rtomo_client_options *opt);

/* Create the sockets and connect them (connecting is asynchronous:
 * success does not mean that a daemon is there).  NULL and *err on
 * failure. */
rtomo_client *rtomo_client_open(const rtomo_client_options *opt,
                                rtomo_error *err);
/* Close the sockets; frames still queued get linger_ms to leave. */
void rtomo_client_close(rtomo_client *client);

/* ------------------------------------------------------------ ingest ---- */

rtomo_status rtomo_client_send_scan_begin(rtomo_client *client,
                                          const rtomo_scan_spec *spec,
                                          rtomo_error *err);
rtomo_status rtomo_client_send_sbdx_begin(rtomo_client *client,
                                          const rtomo_sbdx_spec *spec,
                                          rtomo_error *err);
/* "scan_end" or "sbdx_end". */
rtomo_status rtomo_client_send_end(rtomo_client *client, rtomo_msg_type type,
                                   const char *scan, rtomo_error *err);

/* A dark, flat, projection or sbdx_frame with its samples (little-endian,
 * shape x dtype bytes, checked before sending).  The payload is copied:
 * the buffer may be reused on return. */
rtomo_status rtomo_client_send_frame(rtomo_client *client,
                                     const rtomo_frame_header *frame,
                                     const void *payload, size_t size,
                                     rtomo_error *err);

/* Zero-copy variant: ZeroMQ sends straight from `payload`, and calls
 * release(payload, hint) once it is done with it — possibly later, from a
 * ZeroMQ thread, and also when sending fails.  release is called exactly
 * once (it may be NULL for static data). */
typedef void rtomo_client_release_fn(void *payload, void *hint);
rtomo_status rtomo_client_send_frame_zero_copy(
    rtomo_client *client, const rtomo_frame_header *frame, void *payload,
    size_t size, rtomo_client_release_fn *release, void *hint,
    rtomo_error *err);

/* Send bytes as they are (1 or 2 parts), unchecked, on connection
 * `connection` (0-based): for tests and for replaying captured headers. */
rtomo_status rtomo_client_send_raw(rtomo_client *client, int connection,
                                   const void *header, size_t header_size,
                                   int n_parts, const void *payload,
                                   size_t payload_size, rtomo_error *err);

int rtomo_client_connections(const rtomo_client *client);

/* ----------------------------------------------------------- publish ---- */

/* Receive messages whose topic starts with `topic` ("" = all).  May be
 * called several times.  Messages published before the subscription
 * reaches the daemon are not received (ZeroMQ PUB/SUB). */
rtomo_status rtomo_client_subscribe(rtomo_client *client, const char *topic,
                                    rtomo_error *err);

typedef enum rtomo_published_kind {
    RTOMO_PUBLISHED_IMAGE = 0,  /* slice, plane, composite, depth, preview */
    RTOMO_PUBLISHED_EVENT,
    RTOMO_PUBLISHED_TELEMETRY,
    RTOMO_PUBLISHED_OTHER       /* a topic this library does not know */
} rtomo_published_kind;

/* One published message.  Initialise with {0} or rtomo_published_clear;
 * rtomo_client_receive clears it before filling it. */
typedef struct rtomo_published {
    char topic[32];
    rtomo_published_kind kind;
    char *header;               /* header JSON text, NUL-terminated */
    size_t header_size;
    json_t *json;               /* the parsed header (telemetry figures and
                                   any field the structs below lack) */
    const void *payload;        /* NULL when empty; 16-byte aligned */
    size_t payload_size;
    rtomo_image_header image;   /* kind IMAGE */
    rtomo_event event;          /* kind EVENT */
    int source;                 /* which publish endpoint (0-based) */
    int has_seq;                /* the header carried "seq" */
    uint64_t seq;               /* its per-topic sequence number */
    uint64_t missed;            /* messages of this topic from this source
                                   lost just before this one (a seq gap) */
    void *priv;                 /* owns the payload */
} rtomo_published;

/* Wait up to timeout_ms (-1 = forever) for the next message.  Returns
 * RTOMO_E_UNAVAILABLE when none came in time, RTOMO_E_BACKEND (message
 * consumed, err says why) when it is malformed. */
rtomo_status rtomo_client_receive(rtomo_client *client, rtomo_published *msg,
                                  int timeout_ms, rtomo_error *err);
void rtomo_published_clear(rtomo_published *msg);

/* Messages lost so far (sum of every rtomo_published.missed). */
uint64_t rtomo_client_missed(const rtomo_client *client);
/* Number of daemons fed by ingest, and of publish endpoints merged. */
int rtomo_client_daemons(const rtomo_client *client);
int rtomo_client_publishers(const rtomo_client *client);

/* ----------------------------------------------------------- control ---- */

/* Send a request object and wait control_timeout_ms for the reply.
 * RTOMO_OK when the reply says "ok": true.  When it says "ok": false the
 * status follows its "error" code (see above), err->message quotes it, and
 * *reply is still set.  When the daemon does not answer in time, returns
 * RTOMO_E_UNAVAILABLE and recreates the control socket so that the next
 * request can proceed.  *reply (a new reference, or NULL) is the caller's. */
rtomo_status rtomo_client_request(rtomo_client *client, const json_t *request,
                                  json_t **reply, rtomo_error *err);
/* {"cmd": cmd} — "ping", "status", "get_config", "abort". */
rtomo_status rtomo_client_command(rtomo_client *client, const char *cmd,
                                  json_t **reply, rtomo_error *err);

/*
 * Frames sent over several connections may overtake each other (only each
 * connection keeps its order, PROTOCOL.md 3.2).  Before sending frames on
 * other connections than the one that carried scan_begin, and before
 * scan_end, wait with this until `scan` acquires on the daemon (among
 * the scans its status lists) and holds at least `frames` frames (its
 * "received" + "darks" + "flats"; 0 = just begun).  Polls "status" on the control socket.
 * RTOMO_E_UNAVAILABLE when the count has not grown for stall_ms (or the
 * daemon does not answer), RTOMO_E_STATE without a control endpoint.
 */
rtomo_status rtomo_client_wait_for_scan(rtomo_client *client,
                                        const char *scan, long frames,
                                        int stall_ms, rtomo_error *err);

/* ------------------------------------------------------ scan outcome ---- */

/*
 * What became of a scan: the daemon's answer to {"cmd": "scan"}
 * (PROTOCOL.md 3.9), merged over every daemon the client has a control
 * endpoint for.  The ingest socket never answers, so this is how a sender
 * learns whether what it sent was reconstructed.
 */
typedef enum rtomo_scan_state {
    RTOMO_SCAN_UNKNOWN = 0,     /* "unknown": no record of it (not arrived
                                   yet, never, or long forgotten) */
    RTOMO_SCAN_ACQUIRING,       /* "acquiring": frames coming in */
    RTOMO_SCAN_ENDING,          /* "ending": end received, frames pending */
    RTOMO_SCAN_RECONSTRUCTING,  /* "reconstructing": images coming */
    RTOMO_SCAN_COMPLETE,        /* "complete": every image published */
    RTOMO_SCAN_ABORTED,         /* "aborted": abort, failure, shutdown */
    RTOMO_SCAN_REFUSED,         /* "refused": its begin was rejected */
    RTOMO_SCAN_OTHER            /* a state this library does not know */
} rtomo_scan_state;

/* "acquiring", ...; "other" for RTOMO_SCAN_OTHER. */
const char *rtomo_scan_state_name(rtomo_scan_state state);

#define RTOMO_OUTCOME_REJECTS 32    /* reject names kept per outcome */

typedef struct rtomo_reject_tally {
    char name[32];              /* a reject name (PROTOCOL.md 4) */
    long count;
} rtomo_reject_tally;

typedef struct rtomo_scan_outcome {
    char scan[RTOMO_ID_MAX];
    char kind[8];               /* "tomo", "sbdx"; "" when no begin of it
                                   was accepted */
    rtomo_scan_state state;     /* merged: the worst of the daemons' */
    int final;                  /* 1: no daemon's state will change */
    long frames;                /* frames accepted */
    long rejected;              /* ingest messages of it rejected, its
                                   begin included */
    long dropped;               /* accepted frames not reconstructed */
    long missing;               /* projections that never arrived */
    long images;                /* images published */
    int incomplete;             /* ended by idle timeout or shutdown */
    rtomo_reject_tally rejects[RTOMO_OUTCOME_REJECTS];  /* by reason */
    int n_rejects;
    char code[32];              /* short code ("idle_timeout", a reject
                                   name, ...), "" if none */
    char reason[512];           /* the daemon's sentence, "" if none */
    int daemons;                /* answers merged (0: none yet) */
} rtomo_scan_outcome;

/* An outcome with no answer in it yet (daemons = 0) for `scan`. */
void rtomo_scan_outcome_init(rtomo_scan_outcome *out, const char *scan);

/* One daemon's answer: the "scan" object of its reply (daemons = 1).
 * RTOMO_E_BACKEND when a field is missing or of the wrong type. */
rtomo_status rtomo_scan_outcome_from_json(const json_t *scan,
                                          rtomo_scan_outcome *out,
                                          rtomo_error *err);

/* Fold another daemon's answer into `into`: counts and rejects add up,
 * final only when both are, incomplete when either is, and the state (with
 * its code and reason) is the worse one: a state still changing over any
 * final one (the least advanced first), then refused, aborted, a final
 * state not known, unknown, complete. */
void rtomo_scan_outcome_merge(rtomo_scan_outcome *into,
                              const rtomo_scan_outcome *from);

/*
 * Ask every daemon for the fate of `scan`, polling until each answer is
 * final or timeout_ms passes (-1: no limit; 0: ask once and return
 * RTOMO_OK with the answers as they are).  "unknown" counts as not final
 * while the wait lasts, unless the daemon rejected messages of it (a begin
 * it could not decode): right after sending, the scan's messages may
 * still be on their way.  For the same reason a scan that failed (refused,
 * aborted) may still gather rejects after its state became final: the
 * wait goes on until its counts held still for 500 ms (within the
 * timeout).  RTOMO_OK once settled; RTOMO_E_UNAVAILABLE
 * when not settled in time (*out then holds the last answers, daemons >
 * 0) or a daemon did not answer (daemons = 0); RTOMO_E_INVALID when the
 * daemon refused the request (a bad id, or a daemon without the "scan"
 * command); RTOMO_E_BACKEND for a malformed answer; RTOMO_E_STATE without
 * a control endpoint.
 */
rtomo_status rtomo_client_scan_outcome(rtomo_client *client, const char *scan,
                                       int timeout_ms,
                                       rtomo_scan_outcome *out,
                                       rtomo_error *err);

/* The success rule (PROTOCOL.md 3.9), in four verdicts. */
typedef enum rtomo_scan_verdict {
    RTOMO_VERDICT_SUCCEEDED = 0,    /* complete; nothing rejected, dropped
                                       or missing; not incomplete */
    RTOMO_VERDICT_PARTIAL,          /* complete, but something was rejected,
                                       dropped or missing */
    RTOMO_VERDICT_FAILED,           /* refused, aborted, incomplete, unknown,
                                       or final in a state not known */
    RTOMO_VERDICT_PENDING           /* not final yet */
} rtomo_scan_verdict;

/* Judge the outcome and write one line for people (no newline) into
 * line[size] (line may be NULL), e.g. "scan s1 refused: bad_state: another
 * scan is active; 0 frames accepted, 512 rejected (unknown_scan: 512)". */
rtomo_scan_verdict rtomo_scan_outcome_verdict(const rtomo_scan_outcome *out,
                                              char *line, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_CLIENT_H */
