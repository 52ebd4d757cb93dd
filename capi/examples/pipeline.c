/* sealog from C: format a ring, open it, pipeline appends both ways (completion callbacks,
 * whose entries carry an embedder header naming a ledger, an entry id and an epoch, and
 * tickets, each with a bounded window), append a group of 3 entries all or nothing, read
 * entries back and check their bytes, kind and header, iterate, trim, close, reopen with a
 * recovery visitor that rebuilds a small ledger index (entries and last entry id per
 * ledger) from the open's replay and check it against what was appended, check that the
 * entries survived, and show error cases (a trimmed LSN, a payload over the limit, an empty
 * and an oversized group, a NULL argument) with their code and message. Exits non-zero on
 * any mismatch.
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

#include "check.h"
#include "sealog.h"

#define APPENDS_PER_WAY 1000u
#define WINDOW_APPENDS 64u
#define PAYLOAD_MAX_BYTES 400u
#define TRIM_LSN 500u
/* Ledgers 1 to LEDGERS: the entries appended with a header are spread over them. */
#define LEDGERS 3u
/* LSNs the pipelined appends take: 1 (plain), callbacks, tickets, then the group of 3. */
#define CALLBACK_FIRST_LSN 2u
#define TICKET_FIRST_LSN (CALLBACK_FIRST_LSN + APPENDS_PER_WAY)
#define GROUP_FIRST_LSN (TICKET_FIRST_LSN + APPENDS_PER_WAY)
#define GROUP_ENTRIES 3u
#define LAST_LSN (GROUP_FIRST_LSN + GROUP_ENTRIES - 1)

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

/* Whether the entry with this LSN was appended with an embedder header: the callbacks' and
 * the group's were; LSN 1 (sealog_append) and the tickets' (sealog_append_async) were not. */
static int has_header(uint64_t lsn) {
    return (lsn >= CALLBACK_FIRST_LSN && lsn < TICKET_FIRST_LSN) || lsn >= GROUP_FIRST_LSN;
}

/* The embedder header of the entry with this LSN: its ledger (1 to LEDGERS), its entry id
 * in that ledger (consecutive, from 0 for the ledger's first), the epoch it was written
 * under (1 for the pipelined appends, 2 for the group); zeros when it has none. */
static sealog_embedder_header header_for(uint64_t lsn) {
    sealog_embedder_header header = {0, 0, 0, 0};
    if (has_header(lsn)) {
        uint64_t index = lsn < GROUP_FIRST_LSN ? lsn - CALLBACK_FIRST_LSN
                                               : lsn - GROUP_FIRST_LSN + APPENDS_PER_WAY;
        header.log_id = 1 + index % LEDGERS;
        header.address = index / LEDGERS;
        header.epoch = lsn < GROUP_FIRST_LSN ? 1 : 2;
    }
    return header;
}

/* The kind of the entry with this LSN: the group's last entry seals it, all else is data. */
static uint32_t kind_for(uint64_t lsn) {
    return lsn == LAST_LSN ? SEALOG_KIND_SEAL : SEALOG_KIND_DATA;
}

/* Checks that an entry holds the payload, kind and header its LSN was appended with. */
static void check_entry(const sealog_entry *entry, uint64_t lsn) {
    uint8_t expected[PAYLOAD_MAX_BYTES];
    size_t expected_bytes = payload_for(lsn, expected);
    sealog_embedder_header header = header_for(lsn);
    EXPECT(entry->lsn == lsn, "entry LSN %llu, expected %llu", (unsigned long long)entry->lsn,
           (unsigned long long)lsn);
    EXPECT(entry->kind == kind_for(lsn), "LSN %llu: kind %u", (unsigned long long)lsn,
           entry->kind);
    EXPECT(entry->header_valid == 1 && entry->header.log_id == header.log_id &&
               entry->header.address == header.address && entry->header.epoch == header.epoch &&
               entry->header.extra == header.extra,
           "LSN %llu: header (%llu, %llu, %llu), appended (%llu, %llu, %llu)",
           (unsigned long long)lsn, (unsigned long long)entry->header.log_id,
           (unsigned long long)entry->header.address, (unsigned long long)entry->header.epoch,
           (unsigned long long)header.log_id, (unsigned long long)header.address,
           (unsigned long long)header.epoch);
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

/* Appends with completion callbacks, at most WINDOW_APPENDS in flight; each entry carries
 * its embedder header (ledger, entry id, epoch). */
static void append_with_callbacks(sealog_drive *drive, uint64_t first_lsn) {
    struct callbacks callbacks = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0,
                                  first_lsn, 0};
    uint8_t payload[PAYLOAD_MAX_BYTES];
    sealog_new_entry entry;
    CHECK(sealog_new_entry_init(&entry));
    for (unsigned i = 0; i < APPENDS_PER_WAY; i++) {
        pthread_mutex_lock(&callbacks.lock);
        while (callbacks.in_flight >= WINDOW_APPENDS) {
            pthread_cond_wait(&callbacks.changed, &callbacks.lock);
        }
        callbacks.in_flight++;
        pthread_mutex_unlock(&callbacks.lock);
        entry.header = header_for(first_lsn + i);
        entry.payload = payload;
        entry.payload_len_bytes = payload_for(first_lsn + i, payload);
        /* The payload is copied before the call returns: the buffer is reused at once. */
        CHECK(sealog_append_entry_cb(drive, &entry, appended, &callbacks));
    }
    pthread_mutex_lock(&callbacks.lock);
    while (callbacks.completed < APPENDS_PER_WAY) {
        pthread_cond_wait(&callbacks.changed, &callbacks.lock);
    }
    pthread_mutex_unlock(&callbacks.lock);
    EXPECT(callbacks.failures == 0, "%d callbacks failed", callbacks.failures);
    printf("callbacks: %u appends with embedder headers (%u ledgers, epoch 1) durable, LSN %llu "
           "to %llu, in order, window %u\n",
           APPENDS_PER_WAY, LEDGERS, (unsigned long long)first_lsn,
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

/* Appends the group of GROUP_ENTRIES entries (the last one a seal) all or nothing: one
 * batch, consecutive LSNs, one completion with the first LSN. */
static void append_group(sealog_drive *drive) {
    uint8_t payloads[GROUP_ENTRIES][PAYLOAD_MAX_BYTES];
    sealog_new_entry group[GROUP_ENTRIES];
    for (unsigned i = 0; i < GROUP_ENTRIES; i++) {
        uint64_t lsn = GROUP_FIRST_LSN + i;
        CHECK(sealog_new_entry_init(&group[i]));
        group[i].kind = kind_for(lsn);
        group[i].header = header_for(lsn);
        group[i].payload = payloads[i];
        group[i].payload_len_bytes = payload_for(lsn, payloads[i]);
    }
    uint64_t first_lsn = 0;
    CHECK(sealog_append_group(drive, group, GROUP_ENTRIES, &first_lsn));
    EXPECT(first_lsn == GROUP_FIRST_LSN, "the group starts at LSN %llu",
           (unsigned long long)first_lsn);
    printf("group: %u entries all or nothing (ledger entries in epoch 2, the last a seal), "
           "LSN %llu to %llu, one completion\n",
           GROUP_ENTRIES, (unsigned long long)first_lsn,
           (unsigned long long)(first_lsn + GROUP_ENTRIES - 1));
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
    for (uint64_t lsn = GROUP_FIRST_LSN; lsn <= last_lsn; lsn++) {
        read_one(drive, lsn);
        reads++;
    }
    printf("reads: %u entries from LSN %llu to %llu match what was appended, payload, kind "
           "and embedder header\n",
           reads, (unsigned long long)first_lsn, (unsigned long long)last_lsn);
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

/* A ledger store's index, rebuilt from the open's replay by the recovery visitor: entries
 * and last entry id per ledger (index 0: entries without a header). */
struct ledger_index {
    pthread_t opener;
    uint64_t entries[LEDGERS + 1];
    uint64_t last_entry_id[LEDGERS + 1];
    uint64_t first_lsn;
    uint64_t last_lsn;
    uint64_t visited;
    uint64_t payload_bytes;
    unsigned on_opener_thread;
    unsigned out_of_order;
};

/* The recovery visitor: runs on the drive thread during sealog_open_visiting, once per live
 * entry in LSN order. The entry and its payload are borrowed for this call only; it calls
 * nothing of sealog (there is no drive handle yet). No lock: the opening thread is blocked in
 * sealog_open_visiting until every call has returned. */
static void index_entry(void *user_data, const sealog_entry_view *entry) {
    struct ledger_index *index = user_data;
    if (pthread_equal(pthread_self(), index->opener)) {
        index->on_opener_thread++;
    }
    if (index->visited > 0 && entry->lsn != index->last_lsn + 1) {
        index->out_of_order++;
    }
    if (index->visited == 0) {
        index->first_lsn = entry->lsn;
    }
    index->last_lsn = entry->lsn;
    index->visited++;
    index->payload_bytes += entry->payload_len_bytes;
    uint64_t ledger = entry->header.log_id <= LEDGERS ? entry->header.log_id : 0;
    index->entries[ledger]++;
    index->last_entry_id[ledger] = entry->header.address;
}

/* Reopens the ring with the visitor and checks the index it built against what was appended
 * (the live entries: every one after TRIM_LSN). */
static sealog_drive *reopen_indexing(const char *ring) {
    struct ledger_index index;
    memset(&index, 0, sizeof index);
    index.opener = pthread_self();
    sealog_drive *drive = NULL;
    CHECK(sealog_open_visiting(ring, NULL, index_entry, &index, &drive));
    uint64_t entries[LEDGERS + 1] = {0};
    uint64_t last_entry_id[LEDGERS + 1] = {0};
    for (uint64_t lsn = TRIM_LSN + 1; lsn <= LAST_LSN; lsn++) {
        sealog_embedder_header header = header_for(lsn);
        entries[header.log_id]++;
        last_entry_id[header.log_id] = header.address;
    }
    EXPECT(index.visited == LAST_LSN - TRIM_LSN && index.first_lsn == TRIM_LSN + 1 &&
               index.last_lsn == LAST_LSN && index.out_of_order == 0,
           "visited %llu entries, LSN %llu to %llu, %u out of order",
           (unsigned long long)index.visited, (unsigned long long)index.first_lsn,
           (unsigned long long)index.last_lsn, index.out_of_order);
    EXPECT(index.on_opener_thread == 0, "the visitor ran on the opening thread");
    printf("visitor: %llu live entries (%llu payload bytes), LSN %llu to %llu in order, on the "
           "drive thread (not the opener's), all before sealog_open_visiting returned\n",
           (unsigned long long)index.visited, (unsigned long long)index.payload_bytes,
           (unsigned long long)index.first_lsn, (unsigned long long)index.last_lsn);
    for (unsigned ledger = 1; ledger <= LEDGERS; ledger++) {
        EXPECT(index.entries[ledger] == entries[ledger] &&
                   index.last_entry_id[ledger] == last_entry_id[ledger],
               "ledger %u: %llu entries, last id %llu; appended %llu, last id %llu", ledger,
               (unsigned long long)index.entries[ledger],
               (unsigned long long)index.last_entry_id[ledger],
               (unsigned long long)entries[ledger], (unsigned long long)last_entry_id[ledger]);
        printf("ledger index: ledger %u: %llu live entries, last entry id %llu, as appended\n",
               ledger, (unsigned long long)index.entries[ledger],
               (unsigned long long)index.last_entry_id[ledger]);
    }
    EXPECT(index.entries[0] == entries[0], "%llu entries without a header, %llu appended",
           (unsigned long long)index.entries[0], (unsigned long long)entries[0]);
    printf("ledger index: %llu live entries without an embedder header (the tickets' appends)\n",
           (unsigned long long)index.entries[0]);
    return drive;
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
    sealog_new_entry group[GROUP_ENTRIES];
    for (unsigned i = 0; i < GROUP_ENTRIES; i++) {
        CHECK(sealog_new_entry_init(&group[i]));
    }
    expect_error("empty group", sealog_append_group(drive, group, 0, &lsn), SEALOG_EMPTY_GROUP);
    /* Each entry at the payload limit fits on its own; together they pass the batch limit. */
    size_t limit_bytes = shape->payload_size_max_bytes;
    uint8_t *large = calloc(limit_bytes, 1);
    EXPECT(large != NULL, "calloc");
    for (unsigned i = 0; i < GROUP_ENTRIES; i++) {
        group[i].payload = large;
        group[i].payload_len_bytes = limit_bytes;
    }
    expect_error("group over the batch limit",
                 sealog_append_group(drive, group, GROUP_ENTRIES, &lsn), SEALOG_GROUP_TOO_LARGE);
    free(large);
    uint64_t durable_lsn = 0;
    CHECK(sealog_durable_lsn(drive, &durable_lsn));
    EXPECT(durable_lsn == LAST_LSN, "a refused group appended something: durable LSN %llu",
           (unsigned long long)durable_lsn);
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
    append_with_callbacks(drive, CALLBACK_FIRST_LSN);
    append_with_tickets(drive, TICKET_FIRST_LSN);
    append_group(drive);
    uint64_t last_lsn = LAST_LSN;
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

    drive = reopen_indexing(ring);
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
