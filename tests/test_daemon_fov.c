/*
 * test_daemon_fov.c — the circular field of view through the real rtomod
 * (CPU backend, loopback): the configuration key reconstruction.
 * field_of_view accepted and shown (get_config, and the scan's status),
 * a bad value refused with a message naming the key (command line and
 * set_config), a scan's published slices exactly 0 outside the circle
 * (its corners) and equal to the unmasked scan's slices inside, the
 * per-scan override over the configuration, and the combinations that
 * are refused: an iterative method, a cone-beam scan_begin.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <jansson.h>

#include "daemon_harness.h"
#include "rtomo_protocol.h"

#define WIDTH 80
#define ROWS 3
#define N_PROJ 90

static const char *config_value(rtomo_client *c)
{
    json_t *reply = daemon_request(c, "{\"cmd\": \"get_config\"}");
    static char value[32];
    const char *v = json_string_value(json_object_get(json_object_get(
        json_object_get(reply, "config"), "reconstruction"), "field_of_view"));
    snprintf(value, sizeof value, "%s", v ? v : "(none)");
    json_decref(reply);
    return value;
}

/* The status of scan `id` among "scans", or NULL. */
static const char *status_fov(rtomo_client *c, const char *id)
{
    static char value[32];
    json_t *st = daemon_status(c);
    json_t *scans = json_object_get(st, "scans");
    value[0] = '\0';
    for (size_t i = 0; i < json_array_size(scans); i++) {
        json_t *s = json_array_get(scans, i);
        if (strcmp(json_string_value(json_object_get(s, "id")), id) == 0) {
            const char *v = json_string_value(json_object_get(s,
                                                              "field_of_view"));
            snprintf(value, sizeof value, "%s", v ? v : "(none)");
        }
    }
    json_decref(st);
    return value[0] ? value : NULL;
}

START_TEST(config_key_accepted_shown_and_checked)
{
    daemon_session t;
    const char *args[] = {"--set", "reconstruction.field_of_view=circle", NULL};
    daemon_session_open(&t, args, 1);
    ck_assert_str_eq(config_value(t.c), "circle");
    /* A bad value over set_config names the key; the old value stays. */
    json_t *reply = daemon_request(t.c, "{\"cmd\": \"set_config\", "
                                   "\"config\": {\"reconstruction\": "
                                   "{\"field_of_view\": \"square\"}}}");
    const char *message = json_string_value(json_object_get(reply, "message"));
    ck_assert(json_is_false(json_object_get(reply, "ok")));
    ck_assert_msg(message && strstr(message, "field_of_view"),
                  "set_config's refusal does not name the key: %s",
                  message ? message : "(none)");
    json_decref(reply);
    ck_assert_str_eq(config_value(t.c), "circle");
    reply = daemon_request(t.c, "{\"cmd\": \"set_config\", \"config\": "
                           "{\"reconstruction\": {\"field_of_view\": "
                           "\"full\"}}}");
    ck_assert(json_is_true(json_object_get(reply, "ok")));
    json_decref(reply);
    ck_assert_str_eq(config_value(t.c), "full");
    daemon_session_close(&t);

    /* On the command line: exit 2 and the key named. */
    char path[1024], command[1200], out[4096];
    daemon_process_default_path(path, sizeof path);
    snprintf(command, sizeof command, "'%s' --set "
             "reconstruction.field_of_view=square --check-config 2>&1", path);
    FILE *p = popen(command, "r");
    ck_assert(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 2,
                  "rtomod with a bad field_of_view: status %d (%s)", status,
                  out);
    ck_assert_msg(strstr(out, "field_of_view"), "not named: %s", out);
}
END_TEST

/* The published slice of row i of scan `id` (asserting its size). */
static const float *slice_of(daemon_inbox *in, const char *id, int i)
{
    const daemon_image *im = daemon_find_image(in, RTOMO_TOPIC_SLICE, id, -1,
                                               i);
    ck_assert_msg(im, "slice %d of %s missing", i, id);
    ck_assert_int_eq(im->h.width, WIDTH);
    ck_assert_int_eq(im->h.height, WIDTH);
    return im->data;
}

/*
 * One daemon configured with the circle; scan "masked" follows it, scan
 * "plain" (the same frames) overrides it with "full".  The phantom's axis
 * is the detector's centre without shifts: R = (W - 1) / 2 and the
 * circle's edge runs through the grid's edge midpoints, its corners out.
 */
START_TEST(published_slices_masked)
{
    daemon_session t;
    const char *args[] = {"--set", "reconstruction.field_of_view=circle",
                          NULL};
    daemon_session_open(&t, args, 1);
    daemon_scan a, b;
    daemon_scan_make(&a, "masked", WIDTH, ROWS, N_PROJ, 1, 1, 0xf0f0);
    daemon_scan_make(&b, "plain", WIDTH, ROWS, N_PROJ, 1, 1, 0xf0f0);
    b.spec.given |= RTOMO_SPEC_HAS_FOV;
    b.spec.geometry.field_of_view = RTOMO_FOV_FULL;
    daemon_send_begin(t.c, &a);
    daemon_send_begin(t.c, &b);
    /* Status shows each scan's own (composed) field of view. */
    for (int tries = 0; tries < 300 && !status_fov(t.c, "plain"); tries++)
        daemon_inbox_pump(&t.in, 10);
    ck_assert_str_eq(status_fov(t.c, "masked"), "circle");
    ck_assert_str_eq(status_fov(t.c, "plain"), "full");
    daemon_send_fields(t.c, &a);
    daemon_send_fields(t.c, &b);
    for (int p = 0; p < N_PROJ; p++) {
        daemon_send_projection(t.c, &a, p);
        daemon_send_projection(t.c, &b, p);
    }
    daemon_send_end(t.c, &a);
    daemon_send_end(t.c, &b);
    daemon_wait_images(&t.in, RTOMO_TOPIC_SLICE, "masked", ROWS);
    daemon_wait_images(&t.in, RTOMO_TOPIC_SLICE, "plain", ROWS);
    const double r = 0.5 * (WIDTH - 1), c = 0.5 * (WIDTH - 1);
    long inside = 0, outside = 0, nonzero_plain = 0;
    for (int i = 0; i < ROWS; i++) {
        const float *m = slice_of(&t.in, "masked", i);
        const float *f = slice_of(&t.in, "plain", i);
        /* The four corners, named for the message. */
        const size_t corners[4] = {0, WIDTH - 1, (size_t)(WIDTH - 1) * WIDTH,
                                   (size_t)WIDTH * WIDTH - 1};
        for (int k = 0; k < 4; k++)
            ck_assert_msg(m[corners[k]] == 0.0f, "slice %d corner %d is %g",
                          i, k, m[corners[k]]);
        for (int y = 0; y < WIDTH; y++)
            for (int x = 0; x < WIDTH; x++) {
                const size_t o = (size_t)y * WIDTH + x;
                if ((x - c) * (x - c) + (y - c) * (y - c) <= r * r) {
                    ck_assert_msg(memcmp(&m[o], &f[o], sizeof(float)) == 0,
                                  "slice %d (%d, %d) inside: %.9g, unmasked "
                                  "%.9g", i, x, y, m[o], f[o]);
                    inside++;
                } else {
                    ck_assert_msg(m[o] == 0.0f, "slice %d (%d, %d) outside "
                                  "is %g", i, x, y, m[o]);
                    outside++;
                    nonzero_plain += f[o] != 0.0f;
                }
            }
    }
    printf("published: %ld pixels inside equal, %ld outside 0 (%ld of them "
           "not 0 unmasked)\n", inside, outside, nonzero_plain);
    ck_assert(outside > 0 && nonzero_plain > 0);
    daemon_wait_event(&t.in, "scan_complete", NULL, "plain", 0);
    ck_assert_int_eq(daemon_counter(t.c, "rejected"), 0);
    daemon_scan_free(&a);
    daemon_scan_free(&b);
    daemon_session_close(&t);
}
END_TEST

/* scan_begin of `s` with its header edited by `edit`; asserts that the
 * daemon rejects it (reason field or geometry) with `words` in the
 * message. */
static void expect_begin_refused(daemon_session *t, const daemon_scan *s,
                                 const char *extra_rec, const char *words)
{
    char *header = rtomo_proto_encode_scan_begin(&s->spec);
    ck_assert_ptr_nonnull(header);
    json_error_t jerr;
    json_t *root = json_loads(header, 0, &jerr);
    ck_assert_ptr_nonnull(root);
    free(header);
    json_t *rec = json_object_get(root, "reconstruction");
    if (!rec) {
        rec = json_object();
        json_object_set_new(root, "reconstruction", rec);
    }
    json_t *more = json_loads(extra_rec, 0, &jerr);
    ck_assert_ptr_nonnull(more);
    json_object_update(rec, more);
    json_decref(more);
    char *edited = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    const int before = t->in.n_events;
    daemon_send_header(t->c, edited);
    free(edited);
    const rtomo_event *ev = daemon_wait_event(&t->in, "rejected", NULL,
                                              s->spec.scan, before);
    ck_assert_msg(strstr(ev->message, words), "refusal '%s' does not say "
                  "'%s'", ev->message, words);
    printf("refused: %s\n", ev->message);
}

START_TEST(iterative_and_cone_refused)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    daemon_scan s;
    daemon_scan_make(&s, "sirt-circle", WIDTH, ROWS, N_PROJ, 0, 1, 0xf1f1);
    expect_begin_refused(&t, &s, "{\"method\": \"sirt\", \"field_of_view\": "
                         "\"circle\"}", "field_of_view");
    daemon_scan_free(&s);
    daemon_scan_make(&s, "bad-fov", WIDTH, ROWS, N_PROJ, 0, 1, 0xf1f2);
    expect_begin_refused(&t, &s, "{\"field_of_view\": \"oval\"}",
                         "field_of_view");
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        config_key_accepted_shown_and_checked,
        published_slices_masked,
        iterative_and_cone_refused,
    };
    return daemon_run_tests("daemon_fov", tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
