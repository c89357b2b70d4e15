/*
 * fuzz_common.h — what the libFuzzer harnesses of tests/fuzz/ share: exact
 * copies of input slices (so that AddressSanitizer sees one byte past any
 * part the code under test reads), the split of an input into its parts,
 * and a check that turns a broken invariant into a crash libFuzzer keeps.
 * Header-only: each harness is one translation unit.
 */
#ifndef RTOMO_FUZZ_COMMON_H
#define RTOMO_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An invariant of the code under test: on failure, say which and abort
 * (libFuzzer saves the input as crash-*). */
#define FUZZ_CHECK(cond, ...)                                               \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "fuzz invariant failed at %s:%d: %s\n  ",      \
                    __FILE__, __LINE__, #cond);                             \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, "\n");                                          \
            abort();                                                        \
        }                                                                   \
    } while (0)

/* A malloc'd copy of n bytes with nothing after them (a zero-size copy is
 * still a valid pointer), or with a NUL after them when `terminate`. */
static inline void *fuzz_copy(const uint8_t *data, size_t n, int terminate)
{
    char *p = malloc(n + (terminate ? 1 : 0) + (n == 0 && !terminate));
    if (!p)
        abort();
    if (n)
        memcpy(p, data, n);
    if (terminate)
        p[n] = '\0';
    return p;
}

/* Split data at the first NUL byte: the header is what comes before, the
 * payload what comes after (absent when there is no NUL).  The seed
 * corpora (tests/fuzz/make-corpus) write messages in this form. */
static inline void fuzz_split(const uint8_t *data, size_t size,
                              const uint8_t **header, size_t *header_size,
                              const uint8_t **payload, size_t *payload_size,
                              int *has_payload)
{
    const uint8_t *nul = memchr(data, 0, size);
    *header = data;
    if (!nul) {
        *header_size = size;
        *payload = NULL;
        *payload_size = 0;
        *has_payload = 0;
        return;
    }
    *header_size = (size_t)(nul - data);
    *payload = nul + 1;
    *payload_size = size - *header_size - 1;
    *has_payload = 1;
}

#endif /* RTOMO_FUZZ_COMMON_H */
