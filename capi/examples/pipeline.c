/* sealog from C: format a ring, open it, pipeline appends both ways (completion callbacks
 * and tickets, each with a bounded window), read entries back and check their bytes,
 * iterate, trim, close, reopen and check that the entries survived, and show error cases
 * (a trimmed LSN, a payload over the limit, a NULL argument) with their code and message.
 * Exits non-zero on any mismatch.
 *
 * Build (from the workspace root, after `cargo build --release -p sealog-capi`):
 *   cc -std=c99 -Wall -Wextra -Icapi/include capi/examples/pipeline.c \
 *      target/release/libsealog_capi.a -lpthread -ldl -lm -o pipeline
 *   ./pipeline [DIRECTORY]      (the ring is made in DIRECTORY/ring, else in a new temp dir)
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sealog.h"

#define APPENDS_PER_WAY 1000u
#define WINDOW_APPENDS 64u
#define PAYLOAD_MAX_BYTES 400u
#define TRIM_LSN 500u

/* Calls a sealog function that must succeed; on failure prints where, the code and the
 * message, and exits 1. */
#define CHECK(call)                                                                         \
    do {                                                                                    \
        int status_ = (call);                                                               \
        if (status_ != SEALOG_OK) {                                                         \
            fprintf(stderr, "pipeline.c:%d: %s returned %s: %s\n", __LINE__, #call,         \
                    sealog_status_name(status_), sealog_last_error_message());              \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

/* A condition that must hold. */
#define EXPECT(condition, ...)                                                              \
    do {                                                                                    \
        if (!(condition)) {                                                                 \
            fprintf(stderr, "pipeline.c:%d: %s does not hold: ", __LINE__, #condition);     \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fprintf(stderr, "\n");                                                          \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

/* The payload of the entry with this LSN: a label, then bytes that depend on the LSN, of a
 * length that varies from entry to entry (the ring is fresh, so LSNs start at 1). */
static size_t payload_for(uint64_t lsn, uint8_t *payload) {
    int label_bytes = snprintf((char *)payload, 32, "entry %06llu:", (unsigned long long)lsn);
    size_t length_bytes = (size_t)label_bytes + (size_t)((lsn * 37u) % 300u);
    for (size_t i = (size_t)label_bytes; i < length_bytes; i++) {
        payload[i] = (uint8_t)(lsn * 31u + i);
    }
    return length_bytes;
}

/* Checks that an entry holds the payload its LSN was appended with. */
static void check_entry(const sealog_entry *entry, uint64_t lsn) {
    uint8_t expected[PAYLOAD_MAX_BYTES];
    size_t expected_bytes = payload_for(lsn, expected);
    EXPECT(entry->lsn == lsn, "entry LSN %llu, expected %llu", (unsigned long long)entry->lsn,
           (unsigned long long)lsn);
    EXPECT(entry->payload_len_bytes == expected_bytes && entry->payload != NULL &&
               memcmp(entry->payload, expected, expected_bytes) == 0,
           "LSN %llu: %zu bytes read, %zu appended, or other bytes", (unsigned long long)lsn,
           entry->payload_len_bytes, expected_bytes);
}

/* What the callbacks share with the thread that appends: the window's count, and the LSNs
 * the callbacks saw (they must be the submission order, which is LSN order). */
struct callbacks {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    unsigned in_flight;
    unsigned completed;
    uint64_t next_lsn_expected;
    int failures;
};

/* One append's callback: runs on the drive's completion thread, in LSN order. It only
 * records and signals: a callback that blocked would delay every later one. */
static void appended(void *user_data, int status, uint64_t lsn) {
    struct callbacks *callbacks = user_data;
    pthread_mutex_lock(&callbacks->lock);
    if (status != SEALOG_OK || lsn != callbacks->next_lsn_expected) {
        fprintf(stderr, "callback: %s, LSN %llu (expected %llu): %s\n",
                sealog_status_name(status), (unsigned long long)lsn,
                (unsigned long long)callbacks->next_lsn_expected, sealog_last_error_message());
        callbacks->failures++;
    }
    callbacks->next_lsn_expected = lsn + 1;
    callbacks->in_flight--;
    callbacks->completed++;
    pthread_cond_signal(&callbacks->changed);
    pthread_mutex_unlock(&callbacks->lock);
}

/* Appends with completion callbacks, at most WINDOW_APPENDS in flight. */
static void append_with_callbacks(sealog_drive *drive, uint64_t first_lsn) {
    struct callbacks callbacks = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0,
                                  first_lsn, 0};
    uint8_t payload[PAYLOAD_MAX_BYTES];
    for (unsigned i = 0; i < APPENDS_PER_WAY; i++) {
        pthread_mutex_lock(&callbacks.lock);
        while (callbacks.in_flight >= WINDOW_APPENDS) {
            pthread_cond_wait(&callbacks.changed, &callbacks.lock);
        }
        callbacks.in_flight++;
        pthread_mutex_unlock(&callbacks.lock);
        size_t length_bytes = payload_for(first_lsn + i, payload);
        /* The payload is copied before the call returns: the buffer is reused at once. */
        CHECK(sealog_append_cb(drive, payload, length_bytes, appended, &callbacks));
    }
    pthread_mutex_lock(&callbacks.lock);
    while (callbacks.completed < APPENDS_PER_WAY) {
        pthread_cond_wait(&callbacks.changed, &callbacks.lock);
    }
    pthread_mutex_unlock(&callbacks.lock);
    EXPECT(callbacks.failures == 0, "%d callbacks failed", callbacks.failures);
    printf("callbacks: %u appends durable, LSN %llu to %llu, in order, window %u\n",
           APPENDS_PER_WAY, (unsigned long long)first_lsn,
           (unsigned long long)(first_lsn + APPENDS_PER_WAY - 1), WINDOW_APPENDS);
}

/* Waits for the oldest ticket of the window (after a poll that may find it done). */
static void retire(sealog_ticket *ticket, uint64_t lsn_expected, unsigned *polled_done) {
    uint64_t lsn = 0;
    int status = sealog_ticket_poll(ticket, &lsn);
    if (status == SEALOG_OK) {
        (*polled_done)++;
    } else {
        EXPECT(status == SEALOG_PENDING, "poll: %s: %s", sealog_status_name(status),
               sealog_last_error_message());
        CHECK(sealog_ticket_wait(ticket, SEALOG_TIMEOUT_NONE_US, &lsn));
    }
    EXPECT(lsn == lsn_expected, "ticket LSN %llu, expected %llu", (unsigned long long)lsn,
           (unsigned long long)lsn_expected);
    CHECK(sealog_ticket_free(ticket));
}

/* Appends with tickets, at most WINDOW_APPENDS in flight, retired oldest first. */
static void append_with_tickets(sealog_drive *drive, uint64_t first_lsn) {
    sealog_ticket *window[WINDOW_APPENDS];
    uint8_t payload[PAYLOAD_MAX_BYTES];
    unsigned polled_done = 0;
    for (unsigned i = 0; i < APPENDS_PER_WAY; i++) {
        if (i >= WINDOW_APPENDS) {
            unsigned oldest = i - WINDOW_APPENDS;
            retire(window[oldest % WINDOW_APPENDS], first_lsn + oldest, &polled_done);
        }
        size_t length_bytes = payload_for(first_lsn + i, payload);
        CHECK(sealog_append_async(drive, payload, length_bytes, &window[i % WINDOW_APPENDS]));
    }
    for (unsigned i = APPENDS_PER_WAY - WINDOW_APPENDS; i < APPENDS_PER_WAY; i++) {
        retire(window[i % WINDOW_APPENDS], first_lsn + i, &polled_done);
    }
    printf("tickets: %u appends durable, LSN %llu to %llu (%u already done when polled)\n",
           APPENDS_PER_WAY, (unsigned long long)first_lsn,
           (unsigned long long)(first_lsn + APPENDS_PER_WAY - 1), polled_done);
}

/* Reads one entry and checks its bytes; the library allocated the payload, freed here. */
static void read_one(sealog_drive *drive, uint64_t lsn) {
    sealog_entry entry;
    CHECK(sealog_entry_init(&entry));
    CHECK(sealog_read(drive, lsn, &entry));
    check_entry(&entry, lsn);
    CHECK(sealog_buffer_free(entry.payload, entry.payload_len_bytes));
}

/* Reads every 97th live entry and the last one, and checks their bytes. */
static void read_back(sealog_drive *drive, uint64_t first_lsn, uint64_t last_lsn) {
    unsigned reads = 0;
    for (uint64_t lsn = first_lsn; lsn < last_lsn; lsn += 97) {
        read_one(drive, lsn);
        reads++;
    }
    read_one(drive, last_lsn);
    printf("reads: %u entries from LSN %llu to %llu match what was appended\n", reads + 1,
           (unsigned long long)first_lsn, (unsigned long long)last_lsn);
}

/* Iterates from `first_lsn` to the durable tail, checking every entry; returns how many. */
static uint64_t iterate(sealog_drive *drive, uint64_t first_lsn) {
    sealog_iter *iter = NULL;
    sealog_entry entry;
    uint64_t entries = 0;
    CHECK(sealog_entry_init(&entry));
    CHECK(sealog_iter_from(drive, first_lsn, &iter));
    int status;
    while ((status = sealog_iter_next(iter, &entry)) == SEALOG_OK) {
        check_entry(&entry, first_lsn + entries);
        entries++;
    }
    EXPECT(status == SEALOG_END, "iterator stopped with %s: %s", sealog_status_name(status),
           sealog_last_error_message());
    CHECK(sealog_iter_free(iter));
    return entries;
}

static sealog_shape shape_of(sealog_drive *drive) {
    sealog_shape shape;
    CHECK(sealog_shape_init(&shape));
    CHECK(sealog_drive_shape(drive, &shape));
    printf("shape: first live %llu, trim %llu, durable %llu, next %llu, %llu live entries, "
           "%llu of %llu bytes occupied, payloads up to %u bytes, %s\n",
           (unsigned long long)shape.first_live_lsn, (unsigned long long)shape.trim_lsn,
           (unsigned long long)shape.durable_lsn, (unsigned long long)shape.next_lsn,
           (unsigned long long)shape.live_entries, (unsigned long long)shape.occupied_bytes,
           (unsigned long long)shape.capacity_bytes, shape.payload_size_max_bytes,
           shape.state == SEALOG_DRIVE_RUNNING ? "running" : "not running");
    return shape;
}

/* An error case: the call must fail with `expected`; prints its code and message. */
static void expect_error(const char *what, int status, int expected) {
    EXPECT(status == expected, "%s: %s, expected %s (%s)", what, sealog_status_name(status),
           sealog_status_name(expected), sealog_last_error_message());
    EXPECT(strlen(sealog_last_error_message()) > 0, "%s: no message", what);
    printf("error case, %s: %s: %s\n", what, sealog_status_name(status),
           sealog_last_error_message());
}

/* The error cases of a drive whose log was trimmed to TRIM_LSN. */
static void error_cases(sealog_drive *drive, const sealog_shape *shape) {
    sealog_entry entry;
    CHECK(sealog_entry_init(&entry));
    expect_error("read of a trimmed LSN", sealog_read(drive, 10, &entry), SEALOG_TRIMMED);
    size_t too_large_bytes = (size_t)shape->payload_size_max_bytes + 1;
    uint8_t *too_large = calloc(too_large_bytes, 1);
    EXPECT(too_large != NULL, "calloc");
    uint64_t lsn = 0;
    expect_error("payload over the limit",
                 sealog_append(drive, too_large, too_large_bytes, &lsn), SEALOG_TOO_LARGE);
    free(too_large);
    expect_error("read past the durable tail",
                 sealog_read(drive, shape->next_lsn + 5, &entry), SEALOG_NOT_YET_DURABLE);
    expect_error("NULL drive", sealog_trim(NULL, 1), SEALOG_INVALID_ARGUMENT);
}

int main(int argc, char **argv) {
    char directory[4096];
    if (argc > 1) {
        snprintf(directory, sizeof directory, "%s", argv[1]);
    } else {
        snprintf(directory, sizeof directory, "/tmp/sealog-pipeline-XXXXXX");
        EXPECT(mkdtemp(directory) != NULL, "mkdtemp");
    }
    char ring[4200];
    snprintf(ring, sizeof ring, "%s/ring", directory);

    sealog_format_options format;
    CHECK(sealog_format_options_init(&format, 16u << 20));
    format.sync_method = SEALOG_SYNC_FDATASYNC; /* skip the format-time measurement */
    CHECK(sealog_format(ring, &format));
    printf("formatted %s: 16 MiB\n", ring);

    sealog_drive_options options;
    CHECK(sealog_drive_options_init(&options));
    sealog_drive *drive = NULL;
    CHECK(sealog_open(ring, &options, &drive));

    uint8_t payload[PAYLOAD_MAX_BYTES];
    uint64_t lsn = 0;
    CHECK(sealog_append(drive, payload, payload_for(1, payload), &lsn));
    EXPECT(lsn == 1, "the first append got LSN %llu", (unsigned long long)lsn);
    append_with_callbacks(drive, 2);
    append_with_tickets(drive, 2 + APPENDS_PER_WAY);
    uint64_t last_lsn = 1 + 2 * APPENDS_PER_WAY;
    uint64_t durable_lsn = 0;
    CHECK(sealog_durable_lsn(drive, &durable_lsn));
    EXPECT(durable_lsn == last_lsn, "durable LSN %llu", (unsigned long long)durable_lsn);

    read_back(drive, 1, last_lsn);
    uint64_t entries = iterate(drive, 1);
    EXPECT(entries == last_lsn, "iterated %llu entries", (unsigned long long)entries);
    printf("iterator: %llu entries from LSN 1, every one as appended\n",
           (unsigned long long)entries);

    CHECK(sealog_trim(drive, TRIM_LSN));
    uint64_t first_live_lsn = 0;
    CHECK(sealog_first_live_lsn(drive, &first_live_lsn));
    EXPECT(first_live_lsn == TRIM_LSN + 1, "first live %llu", (unsigned long long)first_live_lsn);
    sealog_shape shape = shape_of(drive);
    error_cases(drive, &shape);
    CHECK(sealog_close(drive));
    printf("closed\n");

    CHECK(sealog_open(ring, NULL, &drive));
    shape = shape_of(drive);
    EXPECT(shape.first_live_lsn == TRIM_LSN + 1 && shape.durable_lsn == last_lsn &&
               shape.live_entries == last_lsn - TRIM_LSN,
           "after the reopen: first live %llu, durable %llu",
           (unsigned long long)shape.first_live_lsn, (unsigned long long)shape.durable_lsn);
    read_back(drive, TRIM_LSN + 1, last_lsn);
    entries = iterate(drive, TRIM_LSN + 1);
    EXPECT(entries == last_lsn - TRIM_LSN, "iterated %llu entries after the reopen",
           (unsigned long long)entries);
    printf("reopened: %llu entries survived, LSN %u to %llu, every one as appended\n",
           (unsigned long long)entries, TRIM_LSN + 1, (unsigned long long)last_lsn);
    sealog_iter *iter = NULL;
    sealog_entry entry;
    CHECK(sealog_entry_init(&entry));
    CHECK(sealog_iter_from(drive, 1, &iter));
    expect_error("iterator from a trimmed LSN", sealog_iter_next(iter, &entry), SEALOG_TRIMMED);
    CHECK(sealog_iter_free(iter));
    CHECK(sealog_close(drive));
    printf("pipeline: ok\n");
    return 0;
}
