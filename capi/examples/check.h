/* What the C examples share: CHECK, for a sealog call that must succeed (on failure it
 * prints where, the status's name and the thread's last error message, and exits 1), and
 * EXPECT, for a condition that must hold (printing why, with a printf-style message). */
#ifndef SEALOG_EXAMPLE_CHECK_H
#define SEALOG_EXAMPLE_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "sealog.h"

#define CHECK(call)                                                                         \
    do {                                                                                    \
        int status_ = (call);                                                               \
        if (status_ != SEALOG_OK) {                                                         \
            fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call,       \
                    sealog_status_name(status_), sealog_last_error_message());              \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

#define EXPECT(condition, ...)                                                              \
    do {                                                                                    \
        if (!(condition)) {                                                                 \
            fprintf(stderr, "%s:%d: %s does not hold: ", __FILE__, __LINE__, #condition);   \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fprintf(stderr, "\n");                                                          \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

#endif
