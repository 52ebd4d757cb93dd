/* sealog's LogDrive store from C, playing a bookie: each ledger is a LogDrive (its id the
 * ledger id, an entry's address its entry id). A writer adds entries to three ledgers with
 * many in flight (callbacks on two, tickets on the third, each with a bounded window).
 * Then a second writer recovers ledger 2 as BookKeeper's ledger recovery does: it fences
 * the ledger at a higher epoch, which makes the first writer's next add fail with
 * SEALOG_FENCED (definite: nothing written), finds the last add confirmed (LAC, from the
 * LogDrive's contiguous tail) and seals the ledger there. The store is closed and opened
 * again (a bookie restart); every entry reads back as written, the seal and the fence held,
 * and error cases show their code, their fields and their message. Exits non-zero on any
 * mismatch.
 *
 * Build (from the workspace root, after `cargo build --release -p sealog-capi`):
 *   cc -std=c99 -Wall -Wextra -Wpedantic -Icapi/include capi/examples/bookie.c \
 *      target/release/libsealog_capi.a -lpthread -ldl -lm -o bookie
 *   ./bookie [DIRECTORY]        (the ring is made in DIRECTORY/ring, else in a new temp dir)
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sealog.h"

#define LEDGERS 3u
#define ENTRIES 600u
#define WINDOW 64u
#define VALUE_MAX_BYTES 300u
#define LEDGER_CAPACITY (1u << 20)
#define WRITER_EPOCH 1u
#define RECOVERY_EPOCH 2u

/* The value of entry `entry` of ledger `ledger`: a label, then bytes that depend on both, of
 * a length that varies from entry to entry. */
static size_t value_for(uint64_t ledger, uint64_t entry, uint8_t *value) {
    int label = snprintf((char *)value, 48, "ledger %llu entry %llu:", (unsigned long long)ledger,
                         (unsigned long long)entry);
    size_t length = (size_t)label + (size_t)((entry * 53u + ledger) % 200u);
    for (size_t i = (size_t)label; i < length; i++) {
        value[i] = (uint8_t)(entry * 7u + ledger * 13u + i);
    }
    return length;
}

/* A writer's window of adds in flight, shared with the store's completion thread. */
typedef struct window {
    pthread_mutex_t lock;
    pthread_cond_t room;
    unsigned in_flight;
    unsigned confirmed;
    unsigned failed;
} window;

static void window_init(window *w) {
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->room, NULL);
    w->in_flight = 0;
    w->confirmed = 0;
    w->failed = 0;
}

/* The add's callback, on the store's completion thread: one fewer in flight. */
static void added(void *user_data, int status, uint64_t entry) {
    window *w = user_data;
    pthread_mutex_lock(&w->lock);
    w->in_flight--;
    if (status == SEALOG_OK) {
        w->confirmed++;
    } else {
        w->failed++;
        fprintf(stderr, "add of entry %llu failed: %s: %s\n", (unsigned long long)entry,
                sealog_status_name(status), sealog_last_error_message());
    }
    pthread_cond_signal(&w->room);
    pthread_mutex_unlock(&w->lock);
}

/* Adds ENTRIES entries to `ledger` with callbacks, at most WINDOW in flight, and waits for
 * every one. */
static void add_with_callbacks(sealog_logdrive *ledger, uint64_t ledger_id) {
    window w;
    window_init(&w);
    uint8_t value[VALUE_MAX_BYTES];
    for (uint64_t entry = 0; entry < ENTRIES; entry++) {
        pthread_mutex_lock(&w.lock);
        while (w.in_flight >= WINDOW) {
            pthread_cond_wait(&w.room, &w.lock);
        }
        w.in_flight++;
        pthread_mutex_unlock(&w.lock);
        size_t length = value_for(ledger_id, entry, value);
        CHECK(sealog_logdrive_write_cb(ledger, entry, WRITER_EPOCH, value, length, added, &w));
    }
    pthread_mutex_lock(&w.lock);
    while (w.in_flight > 0) {
        pthread_cond_wait(&w.room, &w.lock);
    }
    pthread_mutex_unlock(&w.lock);
    EXPECT(w.confirmed == ENTRIES && w.failed == 0, "%u confirmed, %u failed", w.confirmed,
           w.failed);
}

/* Adds ENTRIES entries to `ledger` with tickets, a window of WINDOW waited on in turn. */
static void add_with_tickets(sealog_logdrive *ledger, uint64_t ledger_id) {
    sealog_logdrive_ticket *tickets[WINDOW];
    uint8_t value[VALUE_MAX_BYTES];
    for (uint64_t entry = 0; entry < ENTRIES; entry++) {
        if (entry >= WINDOW) {
            sealog_logdrive_ticket *oldest = tickets[entry % WINDOW];
            CHECK(sealog_logdrive_ticket_wait(oldest, SEALOG_TIMEOUT_NONE_US));
            CHECK(sealog_logdrive_ticket_free(oldest));
        }
        size_t length = value_for(ledger_id, entry, value);
        CHECK(sealog_logdrive_write_async(ledger, entry, WRITER_EPOCH, value, length,
                                          &tickets[entry % WINDOW]));
    }
    for (uint64_t entry = ENTRIES - WINDOW; entry < ENTRIES; entry++) {
        CHECK(sealog_logdrive_ticket_wait(tickets[entry % WINDOW], SEALOG_TIMEOUT_NONE_US));
        CHECK(sealog_logdrive_ticket_free(tickets[entry % WINDOW]));
    }
}

/* The fields of the last LogDrive error on this thread. */
static sealog_logdrive_error last_error(void) {
    sealog_logdrive_error error;
    memset(&error, 0, sizeof error);
    error.struct_size_bytes = sizeof error;
    CHECK(sealog_logdrive_last_error(&error));
    return error;
}

static sealog_logdrive_lengths lengths_of(sealog_logdrive *ledger) {
    sealog_logdrive_lengths lengths;
    memset(&lengths, 0, sizeof lengths);
    lengths.struct_size_bytes = sizeof lengths;
    CHECK(sealog_logdrive_length(ledger, &lengths));
    return lengths;
}

/* Ledger recovery by a second writer: fence at RECOVERY_EPOCH, so the first writer's next
 * add fails; seal at the LAC + 1. Returns the sealed length. */
static uint64_t recover(sealog_store *store, sealog_logdrive *first_writer, uint64_t id) {
    sealog_logdrive *recovery = NULL;
    CHECK(sealog_store_get(store, id, &recovery));
    CHECK(sealog_logdrive_fence(recovery, RECOVERY_EPOCH));
    uint8_t value[VALUE_MAX_BYTES];
    size_t length = value_for(id, ENTRIES, value);
    int status = sealog_logdrive_write(first_writer, ENTRIES, WRITER_EPOCH, value, length);
    sealog_logdrive_error fenced = last_error();
    EXPECT(status == SEALOG_FENCED && fenced.epoch == RECOVERY_EPOCH && fenced.definite == 1,
           "the fenced writer's add: %s, epoch %llu, definite %u", sealog_status_name(status),
           (unsigned long long)fenced.epoch, fenced.definite);
    printf("ledger %llu: fenced at epoch %u by the recovering writer; the first writer's add "
           "of entry %u: %s (definite: nothing written): %s\n",
           (unsigned long long)id, RECOVERY_EPOCH, ENTRIES, sealog_status_name(status),
           sealog_last_error_message());
    sealog_logdrive_lengths lengths = lengths_of(recovery);
    uint64_t lac = lengths.t - 1;
    CHECK(sealog_logdrive_seal(recovery, lengths.t, RECOVERY_EPOCH));
    status = sealog_logdrive_write(recovery, lengths.t, RECOVERY_EPOCH, value, length);
    sealog_logdrive_error sealed = last_error();
    EXPECT(status == SEALOG_SEALED && sealed.length == lengths.t, "an add past the seal: %s",
           sealog_status_name(status));
    printf("ledger %llu: LAC %llu, sealed at %llu; an add past it: %s\n",
           (unsigned long long)id, (unsigned long long)lac, (unsigned long long)lengths.t,
           sealog_status_name(status));
    CHECK(sealog_logdrive_free(recovery));
    return lengths.t;
}

/* Reads every entry of every ledger back and checks its bytes. */
static void read_back(sealog_store *store) {
    uint8_t expected[VALUE_MAX_BYTES];
    for (uint64_t id = 1; id <= LEDGERS; id++) {
        sealog_logdrive *ledger = NULL;
        CHECK(sealog_store_get(store, id, &ledger));
        for (uint64_t entry = 0; entry < ENTRIES; entry++) {
            sealog_logdrive_value value;
            memset(&value, 0, sizeof value);
            value.struct_size_bytes = sizeof value;
            CHECK(sealog_logdrive_read(ledger, entry, &value));
            size_t length = value_for(id, entry, expected);
            EXPECT(value.outcome == SEALOG_LOGDRIVE_VALUE && value.payload_len_bytes == length &&
                       memcmp(value.payload, expected, length) == 0,
                   "ledger %llu entry %llu read back otherwise (outcome %u)",
                   (unsigned long long)id, (unsigned long long)entry, value.outcome);
            CHECK(sealog_buffer_free(value.payload, value.payload_len_bytes));
        }
        sealog_logdrive_value past;
        memset(&past, 0, sizeof past);
        past.struct_size_bytes = sizeof past;
        CHECK(sealog_logdrive_read(ledger, ENTRIES, &past));
        EXPECT(past.outcome == SEALOG_LOGDRIVE_UNWRITTEN, "entry %u: outcome %u", ENTRIES,
               past.outcome);
        CHECK(sealog_logdrive_free(ledger));
    }
    printf("read back: %u ledgers of %u entries, every one as written\n", LEDGERS, ENTRIES);
}

/* Error cases, with their code, fields and message. */
static void error_cases(sealog_store *store) {
    sealog_logdrive *ledger = NULL;
    int status = sealog_store_get(store, 99, &ledger);
    sealog_logdrive_error missing = last_error();
    EXPECT(status == SEALOG_MISSING && missing.id == 99, "ledger 99: %s",
           sealog_status_name(status));
    printf("ledger 99: %s: %s\n", sealog_status_name(status), sealog_last_error_message());
    CHECK(sealog_store_get(store, 1, &ledger));
    sealog_logdrive_value value;
    memset(&value, 0, sizeof value);
    value.struct_size_bytes = sizeof value;
    status = sealog_logdrive_read(ledger, LEDGER_CAPACITY, &value);
    sealog_logdrive_error range = last_error();
    EXPECT(status == SEALOG_OUT_OF_RANGE && range.address == LEDGER_CAPACITY &&
               range.valid_end == LEDGER_CAPACITY,
           "a read past the capacity: %s", sealog_status_name(status));
    printf("entry %u of ledger 1: %s (allowed %llu..%llu)\n", LEDGER_CAPACITY,
           sealog_status_name(status), (unsigned long long)range.valid_start,
           (unsigned long long)range.valid_end);
    const uint8_t other[] = "other bytes";
    status = sealog_logdrive_write(ledger, 3, WRITER_EPOCH, other, sizeof other);
    sealog_logdrive_error conflict = last_error();
    EXPECT(status == SEALOG_CONFLICT && conflict.address == 3, "a second value at entry 3: %s",
           sealog_status_name(status));
    printf("entry 3 of ledger 1 again with other bytes: %s: %s\n", sealog_status_name(status),
           sealog_last_error_message());
    status = sealog_store_create(store, 1, 10, &ledger);
    EXPECT(status == SEALOG_EXISTS, "ledger 1 again: %s", sealog_status_name(status));
    CHECK(sealog_logdrive_free(ledger));
}

static sealog_store *open_store(const char *ring, uint64_t expected_ledgers) {
    sealog_store_options options;
    CHECK(sealog_store_options_init(&options));
    sealog_store_report report;
    memset(&report, 0, sizeof report);
    report.struct_size_bytes = sizeof report;
    sealog_store *store = NULL;
    CHECK(sealog_store_open(ring, &options, &store, &report));
    EXPECT(report.logdrives == expected_ledgers && report.damaged_records == 0,
           "%llu LogDrives, %llu damaged", (unsigned long long)report.logdrives,
           (unsigned long long)report.damaged_records);
    printf("opened the store: %llu ledgers, %llu damaged records\n",
           (unsigned long long)report.logdrives, (unsigned long long)report.damaged_records);
    return store;
}

int main(int argc, char **argv) {
    char directory[4096];
    if (argc > 1) {
        snprintf(directory, sizeof directory, "%s", argv[1]);
    } else {
        snprintf(directory, sizeof directory, "/tmp/sealog-bookie-XXXXXX");
        EXPECT(mkdtemp(directory) != NULL, "mkdtemp");
    }
    char ring[4200];
    snprintf(ring, sizeof ring, "%s/ring", directory);
    sealog_format_options format;
    CHECK(sealog_store_format_options_init(&format, 64u << 20));
    format.sync_method = SEALOG_SYNC_FDATASYNC; /* skip the format-time measurement */
    CHECK(sealog_format(ring, &format));
    printf("formatted %s for a LogDrive store: 64 MiB, segments of %llu bytes\n", ring,
           (unsigned long long)format.segment_size_bytes);

    sealog_store *store = open_store(ring, 0);
    sealog_logdrive *writers[LEDGERS];
    for (uint64_t id = 1; id <= LEDGERS; id++) {
        CHECK(sealog_store_create(store, id, LEDGER_CAPACITY, &writers[id - 1]));
        if (id < LEDGERS) {
            add_with_callbacks(writers[id - 1], id);
        } else {
            add_with_tickets(writers[id - 1], id);
        }
        printf("ledger %llu: %u entries added, %u in flight at most (%s)\n",
               (unsigned long long)id, ENTRIES, WINDOW, id < LEDGERS ? "callbacks" : "tickets");
    }
    uint64_t sealed = recover(store, writers[1], 2);
    EXPECT(sealed == ENTRIES, "sealed at %llu", (unsigned long long)sealed);
    for (unsigned i = 0; i < LEDGERS; i++) {
        CHECK(sealog_logdrive_free(writers[i]));
    }
    CHECK(sealog_store_close(store));
    printf("closed (a bookie restart)\n");

    store = open_store(ring, LEDGERS);
    uint64_t ids[LEDGERS + 1];
    size_t count = 0;
    CHECK(sealog_store_list(store, ids, LEDGERS + 1, &count));
    EXPECT(count == LEDGERS && ids[0] == 1 && ids[2] == 3, "%zu ledgers listed", count);
    read_back(store);
    sealog_logdrive *ledger = NULL;
    CHECK(sealog_store_get(store, 2, &ledger));
    sealog_logdrive_lengths lengths = lengths_of(ledger);
    EXPECT(lengths.sealed == 1 && lengths.sealed_length == ENTRIES &&
               lengths.fence == RECOVERY_EPOCH,
           "ledger 2 after the restart: sealed %u at %llu, fence %llu", lengths.sealed,
           (unsigned long long)lengths.sealed_length, (unsigned long long)lengths.fence);
    printf("ledger 2 after the restart: sealed at %llu, fenced at epoch %llu, N %llu, T %llu\n",
           (unsigned long long)lengths.sealed_length, (unsigned long long)lengths.fence,
           (unsigned long long)lengths.n, (unsigned long long)lengths.t);
    CHECK(sealog_logdrive_free(ledger));
    error_cases(store);
    CHECK(sealog_store_close(store));
    printf("bookie: ok\n");
    return 0;
}
