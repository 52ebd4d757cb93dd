//! `RaftEngineLogStore`: TiKV's raft-engine as openraft's log store, the peer the benchmarks
//! compare sealog's store with. It owns the mapping of openraft's log onto raft-engine: one
//! `Engine` per node (`RaftEngineNode`), one raft-engine region per Raft group, each openraft
//! entry serialized with postcard into the `data` of a raft `eraftpb::Entry` whose `index` is
//! the log index, and the vote, the committed log id, the last purged log id and a truncation
//! marker as keys of the group's region. It also owns the writer threads that make `append`
//! non-blocking: raft-engine's `Engine::write` blocks until the batch is durable, so batches
//! go to a few OS threads, where concurrent writes of different groups share raft-engine's own
//! write-group commit (one `fdatasync` for all of them).
//!
//! Per-group order: raft-engine applies a write to its memtable after the write group's
//! leader has written the file, each writer on its own thread, so two writers of one region in
//! flight at once could reach the memtable in either order (`Engine::write`, 0.4.2). A group
//! therefore has a FIFO of pending jobs and at most one of them at the writer threads; the
//! next is handed over when it completes. Different groups' jobs run in parallel. Votes,
//! truncations and purges go through the same FIFO (openraft wants a group's writes in
//! order) and their callers await them; the committed log id is queued and not awaited.
//!
//! Reads: openraft wants entries readable once `append` returns, before they are durable, so
//! a group keeps its not yet written entries (encoded) in memory, and serves them from there;
//! they are the log's last entries, and everything below them is read from raft-engine.
//!
//! Truncation: raft-engine has no record that drops a region's entries from an index on. An
//! append starting at index `i` does drop the memtable's entries from `i` on (`MemTable::
//! append` truncates back to `i`, and replay on reopen does the same, in file order), so a
//! truncation followed by an append needs nothing. A truncation with no append after it must
//! survive a restart, so `truncate` writes a marker key holding the truncation index: on
//! opening, entries at or past it are not part of the log. The first append after a marker
//! deletes the key in the same (atomic) batch, since that append drops the stale entries
//! itself (it starts at the marker, or past a purge that compacted them away, or past a hole,
//! which compacts everything below it: raft-engine's memtable panics on a hole).

// openraft's traits fix `StorageError` (some 185 bytes) as the error type; the helpers
// return it too rather than box it only to unbox it at the trait boundary.
#![allow(clippy::result_large_err)]

use std::any::Any;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::{self, Debug, Display};
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use bytes::Bytes;
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{
    AnyError, ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogId, RaftLogReader,
    RaftTypeConfig, StorageError, StorageIOError, Vote,
};
use raft_engine::{Command, Config, Engine, LogBatch, MessageExt};
use raft_proto::eraftpb::Entry as PbEntry;
use tokio::sync::oneshot;

/// The group's vote (postcard `Vote`).
const VOTE_KEY: &[u8] = b"openraft.vote";
/// The group's committed log id (postcard `Option<LogId>`).
const COMMITTED_KEY: &[u8] = b"openraft.committed";
/// The group's last purged log id (postcard `LogId`).
const PURGED_KEY: &[u8] = b"openraft.purged";
/// The truncation marker: entries at or past this log index (postcard `u64`) are not part of
/// the log, until an append deletes the key.
const TRUNCATED_KEY: &[u8] = b"openraft.truncated_from";

/// Writer threads `RaftEngineNode::open` callers usually want: enough for several groups'
/// writes to meet in one raft-engine write group, few enough to leave the cores to openraft.
pub const DEFAULT_WRITER_THREADS: usize = 4;

/// raft-engine's entries are raft's protobuf `Entry`s; this tells it where their index is.
#[derive(Clone)]
struct EntryExt;

impl MessageExt for EntryExt {
    type Entry = PbEntry;

    fn index(entry: &PbEntry) -> u64 {
        entry.index
    }
}

/// Why a `RaftEngineNode` did not open.
#[derive(Debug, thiserror::Error)]
pub enum RaftEngineOpenError {
    /// raft-engine refused to open its directory.
    #[error("raft-engine: open {dir}: {source}")]
    Engine {
        /// The directory in the config.
        dir: String,
        /// What raft-engine said.
        #[source]
        source: raft_engine::Error,
    },
    /// A writer thread did not start.
    #[error("raft-engine: start writer thread {thread_index}: {source}")]
    Spawn {
        /// Which (0-based).
        thread_index: usize,
        /// What the OS said.
        #[source]
        source: io::Error,
    },
    /// `writer_threads` was 0: appends would never complete.
    #[error("raft-engine: writer_threads must be at least 1")]
    NoWriterThreads,
}

/// A group's entry point for the writer threads: write its next pending job.
trait GroupWriter: Send + Sync {
    fn write_next(self: Arc<Self>, engine: &Engine);
}

type JobSender = Sender<Arc<dyn GroupWriter>>;

/// What a node's handles share.
struct NodeShared {
    engine: Arc<Engine>,
    /// Feeds the writer threads; taken when the node drops, so that the channel closes (once
    /// the groups are gone too) and the threads end.
    jobs: Mutex<Option<JobSender>>,
    /// Every group opened so far, as `Arc<Group<C>>`: a second `group(id)` must share the
    /// first one's in-memory state (its unwritten entries and queue), not load its own.
    groups: Mutex<HashMap<u64, Arc<dyn Any + Send + Sync>>>,
    writers: Mutex<Vec<JoinHandle<()>>>,
}

/// One raft-engine `Engine` (one directory) and the writer threads appending to it, shared by
/// the Raft groups of one node. Cloning it is cheap; the engine closes when the last clone and
/// the last group handle are dropped.
#[derive(Clone)]
pub struct RaftEngineNode {
    shared: Arc<NodeShared>,
}

/// Takes a lock over a poisoned one: the critical sections here only move entries between
/// maps and flags, and none of them can panic half-way in a way that breaks an invariant
/// worse than the panic itself (which already failed the write it belonged to).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RaftEngineNode {
    /// Opens (or creates) the raft-engine in `config.dir` and starts `writer_threads` threads
    /// that perform the groups' durable writes.
    pub fn open(config: Config, writer_threads: usize) -> Result<Self, RaftEngineOpenError> {
        if writer_threads == 0 {
            return Err(RaftEngineOpenError::NoWriterThreads);
        }
        let dir = config.dir.clone();
        let engine =
            Engine::open(config).map_err(|source| RaftEngineOpenError::Engine { dir, source })?;
        let engine = Arc::new(engine);
        let (sender, receiver) = mpsc::channel::<Arc<dyn GroupWriter>>();
        let receiver = Arc::new(Mutex::new(receiver));
        let mut writers = Vec::with_capacity(writer_threads);
        for thread_index in 0..writer_threads {
            let engine = Arc::clone(&engine);
            let receiver = Arc::clone(&receiver);
            let spawned = std::thread::Builder::new()
                .name(format!("raft-engine-writer-{thread_index}"))
                .spawn(move || writer_loop(&engine, &receiver));
            match spawned {
                Ok(handle) => writers.push(handle),
                Err(source) => {
                    // Closing the channel ends the threads already started.
                    drop(sender);
                    for handle in writers {
                        let _ = handle.join();
                    }
                    return Err(RaftEngineOpenError::Spawn {
                        thread_index,
                        source,
                    });
                }
            }
        }
        Ok(RaftEngineNode {
            shared: Arc::new(NodeShared {
                engine,
                jobs: Mutex::new(Some(sender)),
                groups: Mutex::new(HashMap::new()),
                writers: Mutex::new(writers),
            }),
        })
    }

    /// The engine, for what the store does not do itself: `purge_expired_files` (which the
    /// owner calls now and then, as TiKV does, to delete files holding only purged entries),
    /// metrics.
    pub fn engine(&self) -> &Engine {
        &self.shared.engine
    }

    /// The log store of Raft group `group_id` (raft-engine region `group_id`), loaded from the
    /// engine the first time. Every call for one group returns a handle on the same state.
    pub fn group<C: RaftTypeConfig>(
        &self,
        group_id: u64,
    ) -> Result<RaftEngineLogStore<C>, StorageError<C::NodeId>> {
        let mut groups = lock(&self.shared.groups);
        let group = match groups.get(&group_id) {
            Some(any) => Arc::clone(any).downcast::<Group<C>>().map_err(|_| {
                store_error(
                    ErrorSubject::Store,
                    ErrorVerb::Read,
                    format!("group {group_id} is already open with another RaftTypeConfig"),
                )
            })?,
            None => {
                let jobs = lock(&self.shared.jobs).clone().ok_or_else(|| {
                    store_error(ErrorSubject::Store, ErrorVerb::Read, "node is closing")
                })?;
                let state = load_state::<C>(&self.shared.engine, group_id)?;
                let group = Arc::new(Group {
                    id: group_id,
                    jobs,
                    state: Mutex::new(state),
                });
                groups.insert(group_id, Arc::clone(&group) as Arc<dyn Any + Send + Sync>);
                group
            }
        };
        Ok(RaftEngineLogStore {
            group,
            node: Arc::clone(&self.shared),
        })
    }
}

impl Drop for NodeShared {
    fn drop(&mut self) {
        // No handle is left (each holds this struct), so the groups' queues only drain from
        // here on; once they have, the last sender goes and the threads see the channel close.
        lock(&self.groups).clear();
        drop(lock(&self.jobs).take());
        for handle in lock(&self.writers).drain(..) {
            // A writer that panicked has already failed its group's writes; nothing to add.
            let _ = handle.join();
        }
    }
}

/// A writer thread: writes whichever group's next job comes, until the channel closes.
fn writer_loop(engine: &Engine, receiver: &Mutex<Receiver<Arc<dyn GroupWriter>>>) {
    loop {
        // The lock is held while waiting: the other idle threads queue on it instead.
        let next = lock(receiver).recv();
        match next {
            Ok(group) => group.write_next(engine),
            Err(mpsc::RecvError) => return,
        }
    }
}

/// What a job writes, for its error messages.
#[derive(Clone, Copy, Debug)]
enum JobKind {
    Append(AppendSpan),
    Vote,
    Committed,
    Truncate { index: u64 },
    Purge { index: u64 },
}

impl Display for JobKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobKind::Append(span) => write!(f, "{span}"),
            JobKind::Vote => write!(f, "save of the vote"),
            JobKind::Committed => write!(f, "save of the committed log id"),
            JobKind::Truncate { index } => write!(f, "truncation at index {index}"),
            JobKind::Purge { index } => write!(f, "purge up to index {index}"),
        }
    }
}

/// The indexes of an append's entries.
#[derive(Clone, Copy, Debug)]
struct AppendSpan {
    first_index: u64,
    last_index: u64,
}

impl Display for AppendSpan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (first, last) = (self.first_index, self.last_index);
        write!(f, "append of entries {first}..={last}")
    }
}

/// Who hears that a job is durable.
enum Done<C: RaftTypeConfig> {
    /// An append: openraft's callback.
    Flushed(LogFlushed<C>),
    /// A write its caller awaits (vote, truncate, purge).
    Reply(oneshot::Sender<Result<(), String>>),
    /// A write nobody waits for (the committed log id, which openraft may lose).
    Detached,
}

impl<C: RaftTypeConfig> Done<C> {
    fn complete(self, result: Result<(), String>) {
        match self {
            Done::Flushed(callback) => callback.log_io_completed(result.map_err(io::Error::other)),
            // The caller may have gone away (its future dropped); nothing is owed to it then.
            Done::Reply(reply) => drop(reply.send(result)),
            Done::Detached => {
                if let Err(message) = result {
                    tracing::error!("{message}");
                }
            }
        }
    }
}

/// One pending write of a group.
struct Job<C: RaftTypeConfig> {
    batch: LogBatch,
    kind: JobKind,
    /// The append sequence number its entries carry in `unwritten` (0 when not an append).
    append_seq: u64,
    done: Done<C>,
}

/// An entry accepted by `append` and not yet in raft-engine's memtable.
struct Unwritten {
    /// The append it came with: its write's completion removes the entries up to it.
    append_seq: u64,
    /// The postcard-encoded openraft entry, as it goes into the batch.
    data: Bytes,
}

/// The span of a group's entries in raft-engine's memtable: a model of what `MemTable::
/// compact_to` and `MemTable::append` (0.4.2) do to it, so that an append that would make
/// raft-engine panic (a hole, or entries below its first) is turned into a compaction or an
/// error before it is queued.
#[derive(Clone, Copy, Debug, Default)]
struct EngineSpan {
    first: u64,
    len: u64,
}

impl EngineSpan {
    fn of(engine: &Engine, group_id: u64) -> EngineSpan {
        match (engine.first_index(group_id), engine.last_index(group_id)) {
            (Some(first), Some(last)) if last >= first => EngineSpan {
                first,
                len: last - first + 1,
            },
            _ => EngineSpan::default(),
        }
    }

    fn last(&self) -> Option<u64> {
        (self.len > 0).then(|| self.first + self.len - 1)
    }

    /// Entries from `index` on would leave a hole after the last one (raft-engine panics).
    fn has_hole_before(&self, index: u64) -> bool {
        self.last()
            .is_some_and(|last| index > last.saturating_add(1))
    }

    /// Entries from `index` on would overwrite compacted ones (raft-engine panics).
    fn overwrites_compacted(&self, index: u64) -> bool {
        self.len > 0 && index < self.first
    }

    fn compact_to(&mut self, index: u64) {
        // An empty memtable keeps its first index: `MemTable::compact_to` returns early.
        if self.len == 0 || index <= self.first {
            return;
        }
        self.len -= (index - self.first).min(self.len);
        self.first = index;
    }

    /// `count` entries from `index` on (the caller has ruled out the panics above).
    fn append(&mut self, index: u64, count: u64) {
        match self.last() {
            // An overwrite: raft-engine drops its entries from `index` on first.
            Some(last) if index <= last => self.len = index - self.first,
            Some(_) => {}
            None => self.first = index,
        }
        self.len += count;
    }
}

/// One group's state, behind the group's mutex.
struct GroupState<C: RaftTypeConfig> {
    last_purged: Option<LogId<C::NodeId>>,
    /// The index of the last entry in the log (written or not); `None` when it has none, and
    /// the last log id is then `last_purged`.
    last_index: Option<u64>,
    committed: Option<LogId<C::NodeId>>,
    /// raft-engine's entries of the group once the queued jobs have run.
    engine_span: EngineSpan,
    /// Appended entries whose write has not completed, by index. Writes run in order and
    /// truncations and purges cut the log's ends, so these are always the log's last entries:
    /// entries below the first of them are read from raft-engine.
    unwritten: BTreeMap<u64, Unwritten>,
    /// Whether the truncation marker key will be set once the queued jobs have run: the next
    /// append deletes it.
    marker_queued: bool,
    /// Jobs not yet handed to a writer thread, in order.
    queue: VecDeque<Job<C>>,
    /// Whether the group is at the writer threads (in the channel, or being written); then
    /// its completion hands over the next job, else `enqueue` does.
    writing: bool,
    next_append_seq: u64,
    /// The first failed write's message: later writes of the group are refused, since they
    /// would leave a hole behind it.
    failed: Option<String>,
}

/// One Raft group: its state and a way to the writer threads.
struct Group<C: RaftTypeConfig> {
    id: u64,
    jobs: JobSender,
    state: Mutex<GroupState<C>>,
}

/// openraft's log store for one Raft group in a `RaftEngineNode`. Clones share the group
/// (openraft's log reader is one).
pub struct RaftEngineLogStore<C: RaftTypeConfig> {
    // Dropped before `node` (fields drop in order): the node's drop waits for the writer
    // threads, which end only once every group (each holds a sender) is gone.
    group: Arc<Group<C>>,
    node: Arc<NodeShared>,
}

impl<C: RaftTypeConfig> Clone for RaftEngineLogStore<C> {
    fn clone(&self) -> Self {
        RaftEngineLogStore {
            group: Arc::clone(&self.group),
            node: Arc::clone(&self.node),
        }
    }
}

impl<C: RaftTypeConfig> RaftEngineLogStore<C> {
    /// The Raft group (raft-engine region) this store writes.
    pub fn group_id(&self) -> u64 {
        self.group.id
    }
}

fn store_error<NID: openraft::NodeId>(
    subject: ErrorSubject<NID>,
    verb: ErrorVerb,
    message: impl Display,
) -> StorageError<NID> {
    StorageError::IO {
        source: StorageIOError::new(subject, verb, AnyError::error(message)),
    }
}

fn encode<T: serde::Serialize>(value: &T, what: &str, group_id: u64) -> Result<Vec<u8>, String> {
    postcard::to_allocvec(value)
        .map_err(|error| format!("group {group_id}: encode {what}: {error}"))
}

/// Reads and decodes key `key` of the group's region.
fn get_key<T: serde::de::DeserializeOwned>(
    engine: &Engine,
    group_id: u64,
    key: &[u8],
) -> Result<Option<T>, String> {
    match engine.get(group_id, key) {
        None => Ok(None),
        Some(bytes) => postcard::from_bytes(&bytes).map(Some).map_err(|error| {
            let name = String::from_utf8_lossy(key);
            format!("raft-engine group {group_id}: decode key {name}: {error}")
        }),
    }
}

/// The group's state as raft-engine holds it (after a restart: the durable state).
fn load_state<C: RaftTypeConfig>(
    engine: &Engine,
    group_id: u64,
) -> Result<GroupState<C>, StorageError<C::NodeId>> {
    let read_error = |message: String| store_error(ErrorSubject::Store, ErrorVerb::Read, message);
    let last_purged: Option<LogId<C::NodeId>> =
        get_key(engine, group_id, PURGED_KEY).map_err(read_error)?;
    let committed: Option<LogId<C::NodeId>> = get_key(engine, group_id, COMMITTED_KEY)
        .map_err(read_error)?
        .flatten();
    let marker: Option<u64> = get_key(engine, group_id, TRUNCATED_KEY).map_err(read_error)?;
    let first_present = last_purged
        .as_ref()
        .map_or(0, |purged| purged.index.saturating_add(1));
    let last_index = engine.last_index(group_id).and_then(|engine_last| {
        // Entries at or past the marker were truncated; later appends deleted the marker.
        let last = match marker {
            Some(0) => return None,
            Some(truncated_from) => engine_last.min(truncated_from - 1),
            None => engine_last,
        };
        let first = engine.first_index(group_id).unwrap_or(0).max(first_present);
        (last >= first).then_some(last)
    });
    Ok(GroupState {
        last_purged,
        last_index,
        committed,
        engine_span: EngineSpan::of(engine, group_id),
        unwritten: BTreeMap::new(),
        marker_queued: marker.is_some(),
        queue: VecDeque::new(),
        writing: false,
        next_append_seq: 1,
        failed: None,
    })
}

impl<C: RaftTypeConfig> GroupWriter for Group<C> {
    fn write_next(self: Arc<Self>, engine: &Engine) {
        // Its own statement, so that the guard is gone before the else branch locks again.
        let next = lock(&self.state).queue.pop_front();
        let Some(mut job) = next else {
            lock(&self.state).writing = false;
            return;
        };
        // sync = true: durable before the callback says so. Other groups' threads writing now
        // join the same raft-engine write group, and its leader syncs once for all.
        let result = engine
            .write(&mut job.batch, true)
            .map(drop)
            .map_err(|error| format!("raft-engine group {}: {}: {error}", self.id, job.kind));
        {
            let mut state = lock(&self.state);
            match &result {
                // In the memtable now: readers get these entries from raft-engine.
                Ok(()) => remove_written(&mut state.unwritten, job.append_seq),
                Err(message) => state.failed = Some(message.clone()),
            }
        }
        // Completed before the next job starts, so that completions reach openraft in order.
        job.done.complete(result);
        self.continue_or_idle();
    }
}

/// Drops the unwritten entries of appends up to `append_seq` (the oldest ones, at the front).
fn remove_written(unwritten: &mut BTreeMap<u64, Unwritten>, append_seq: u64) {
    if append_seq == 0 {
        return;
    }
    while let Some(first) = unwritten.first_entry() {
        if first.get().append_seq > append_seq {
            break;
        }
        first.remove();
    }
}

impl<C: RaftTypeConfig> Group<C> {
    /// After a job: hands the group's next job to the writer threads, or marks it idle; after
    /// a failure, fails every queued job.
    fn continue_or_idle(self: Arc<Self>) {
        let mut state = lock(&self.state);
        if let Some(message) = state.failed.clone() {
            let failed: Vec<Job<C>> = state.queue.drain(..).collect();
            state.writing = false;
            drop(state);
            for job in failed {
                job.done
                    .complete(Err(format!("{}: not written: {message}", job.kind)));
            }
        } else if state.queue.is_empty() {
            state.writing = false;
        } else {
            self.submit(&mut state);
        }
    }

    /// Sends the group to the writer threads (the caller has set or kept `writing`).
    fn submit(self: &Arc<Self>, state: &mut GroupState<C>) {
        let me: Arc<dyn GroupWriter> = Arc::clone(self) as Arc<dyn GroupWriter>;
        if self.jobs.send(me).is_err() {
            // Every writer thread has ended (only a panic does that while groups exist).
            let message = format!("raft-engine group {}: no writer thread is left", self.id);
            state.failed = Some(message.clone());
            state.writing = false;
            for job in state.queue.drain(..) {
                job.done.complete(Err(message.clone()));
            }
        }
    }

    /// Queues `job` behind the group's earlier ones; the caller holds the state's lock and has
    /// checked `failed`.
    fn enqueue(self: &Arc<Self>, state: &mut GroupState<C>, job: Job<C>) {
        state.queue.push_back(job);
        if !state.writing {
            state.writing = true;
            self.submit(state);
        }
    }

    /// Builds an append's batch and makes its entries readable; returns the batch and its
    /// sequence number. The caller holds the state's lock, has checked `failed`, and queues
    /// the batch next.
    fn stage_append(
        &self,
        state: &mut GroupState<C>,
        entries: Vec<PbEntry>,
        first_index: u64,
        last_index: u64,
    ) -> Result<(LogBatch, u64), String> {
        let mut batch = LogBatch::with_capacity(1);
        let mut span = state.engine_span;
        // raft-engine's memtable cannot hold a hole (it panics). openraft never appends past
        // one (the v2 contract), but its test suite does, and an empty log may start
        // anywhere: then whatever raft-engine holds below the first entry is compacted away,
        // stale entries past a truncation with it. Entries below a hole are then not found,
        // which readers allow.
        let expected_index = match (state.last_index, &state.last_purged) {
            (Some(last), _) => last.saturating_add(1),
            (None, Some(purged)) => purged.index.saturating_add(1),
            (None, None) => 0,
        };
        let hole = first_index > expected_index || span.has_hole_before(first_index);
        if hole {
            batch.add_command(self.id, Command::Compact { index: first_index });
            span.compact_to(first_index);
        }
        if span.overwrites_compacted(first_index) {
            // raft-engine would panic; only an append below the purge point gets here.
            let first = span.first;
            return Err(format!(
                "entry {first_index} is below raft-engine's first, {first}"
            ));
        }
        batch
            .add_entries::<EntryExt>(self.id, &entries)
            .map_err(|error| error.to_string())?;
        if state.marker_queued {
            // raft-engine's append drops its entries from `first_index` on, and the ones below
            // it are the log's, or compacted (by a purge or the hole's compaction): no stale
            // entry is left, and the marker goes with this append, atomically.
            batch.delete(self.id, TRUNCATED_KEY.to_vec());
            state.marker_queued = false;
        }
        if hole {
            state.unwritten = state.unwritten.split_off(&first_index);
        }
        span.append(first_index, entries.len() as u64);
        state.engine_span = span;
        let append_seq = state.next_append_seq;
        state.next_append_seq += 1;
        // openraft truncates before it overwrites, so this drops nothing; it keeps the
        // unwritten entries the log's tail whatever a caller does.
        drop(state.unwritten.split_off(&last_index.saturating_add(1)));
        state.last_index = Some(last_index);
        for entry in entries {
            let data = entry.data;
            let unwritten = Unwritten { append_seq, data };
            state.unwritten.insert(entry.index, unwritten);
        }
        Ok((batch, append_seq))
    }

    /// Queues a batch whose caller waits for it to be durable, and waits.
    async fn write_and_wait(
        self: &Arc<Self>,
        batch: LogBatch,
        kind: JobKind,
        subject: ErrorSubject<C::NodeId>,
        update: impl FnOnce(&mut GroupState<C>) -> bool,
    ) -> Result<(), StorageError<C::NodeId>> {
        let (reply, replied) = oneshot::channel();
        {
            let mut state = lock(&self.state);
            if let Some(message) = &state.failed {
                let message = format!("group {}: {kind} refused: {message}", self.id);
                return Err(store_error(subject, ErrorVerb::Write, message));
            }
            if !update(&mut state) {
                return Ok(());
            }
            let done = Done::Reply(reply);
            self.enqueue(&mut state, job(batch, kind, done));
        }
        let result = replied.await.unwrap_or_else(|_| {
            Err(format!(
                "raft-engine group {}: {kind}: writer thread ended",
                self.id
            ))
        });
        result.map_err(|message| store_error(subject, ErrorVerb::Write, message))
    }
}

fn job<C: RaftTypeConfig>(batch: LogBatch, kind: JobKind, done: Done<C>) -> Job<C> {
    Job {
        batch,
        kind,
        append_seq: 0,
        done,
    }
}

/// Decodes an openraft entry from raft-engine's entry, checking it sits at its own index.
fn decode_entry<C: RaftTypeConfig>(
    group_id: u64,
    index: u64,
    data: &[u8],
) -> Result<C::Entry, StorageError<C::NodeId>> {
    let subject = ErrorSubject::LogIndex(index);
    let entry: C::Entry = postcard::from_bytes(data).map_err(|error| {
        let message = format!("raft-engine group {group_id}: decode entry {index}: {error}");
        store_error(subject.clone(), ErrorVerb::Read, message)
    })?;
    if entry.get_log_id().index != index {
        let message = format!(
            "raft-engine group {group_id}: entry at index {index} has log id {}",
            entry.get_log_id()
        );
        return Err(store_error(subject, ErrorVerb::Read, message));
    }
    Ok(entry)
}

/// `[start, end)` of a range of log indexes.
fn index_span(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(&index) => index,
        Bound::Excluded(&index) => index.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&index) => index.saturating_add(1),
        Bound::Excluded(&index) => index,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

impl<C: RaftTypeConfig> RaftEngineLogStore<C> {
    fn engine(&self) -> &Engine {
        &self.node.engine
    }

    /// Reads entries `[start, end)` from raft-engine (all of them below the unwritten ones).
    /// Entries missing there (purged meanwhile by a concurrent `purge`) are left out, as
    /// openraft's reader contract allows.
    fn read_engine(&self, start: u64, end: u64) -> Result<Vec<PbEntry>, StorageError<C::NodeId>> {
        let group_id = self.group.id;
        let mut entries = Vec::new();
        if start >= end {
            return Ok(entries);
        }
        let fetched =
            self.engine()
                .fetch_entries_to::<EntryExt>(group_id, start, end, None, &mut entries);
        match fetched {
            Ok(_) => Ok(entries),
            Err(raft_engine::Error::EntryCompacted | raft_engine::Error::EntryNotFound) => {
                entries.clear();
                for index in start..end {
                    if let Some(entry) = self.get_engine_entry(index)? {
                        entries.push(entry);
                    }
                }
                Ok(entries)
            }
            Err(error) => {
                let message = format!("raft-engine group {group_id}: read {start}..{end}: {error}");
                Err(store_error(ErrorSubject::Logs, ErrorVerb::Read, message))
            }
        }
    }

    fn get_engine_entry(&self, index: u64) -> Result<Option<PbEntry>, StorageError<C::NodeId>> {
        let group_id = self.group.id;
        self.engine()
            .get_entry::<EntryExt>(group_id, index)
            .map_err(|error| {
                let message = format!("raft-engine group {group_id}: read entry {index}: {error}");
                store_error(ErrorSubject::LogIndex(index), ErrorVerb::Read, message)
            })
    }

    /// The encoded bytes of entry `index`, from the unwritten ones or raft-engine.
    fn entry_data(
        &self,
        index: u64,
        unwritten: Option<Bytes>,
    ) -> Result<Bytes, StorageError<C::NodeId>> {
        if let Some(data) = unwritten {
            return Ok(data);
        }
        match self.get_engine_entry(index)? {
            Some(entry) => Ok(entry.data),
            None => {
                let message = format!(
                    "raft-engine group {}: entry {index} is missing",
                    self.group.id
                );
                Err(store_error(
                    ErrorSubject::LogIndex(index),
                    ErrorVerb::Read,
                    message,
                ))
            }
        }
    }

    /// Encodes `entries` into raft-engine entries: their index and the postcard openraft entry.
    fn encode_entries<I>(&self, entries: I) -> Result<Vec<PbEntry>, StorageError<C::NodeId>>
    where
        I: IntoIterator<Item = C::Entry>,
    {
        let group_id = self.group.id;
        entries
            .into_iter()
            .map(|entry| {
                let log_id = entry.get_log_id();
                let data = encode(&entry, "entry", group_id).map_err(|message| {
                    store_error(ErrorSubject::Log(log_id.clone()), ErrorVerb::Write, message)
                })?;
                Ok(PbEntry {
                    index: log_id.index,
                    data: Bytes::from(data),
                    ..PbEntry::default()
                })
            })
            .collect()
    }
}

impl<C: RaftTypeConfig> RaftLogReader<C> for RaftEngineLogStore<C> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        let (start, end) = index_span(&range);
        // The log's part of the range, split at the first unwritten entry: what is below it
        // is in raft-engine, the rest is in memory.
        let (engine_end, unwritten) = {
            let state = lock(&self.group.state);
            let first_present = state
                .last_purged
                .as_ref()
                .map_or(0, |purged| purged.index.saturating_add(1));
            let start = start.max(first_present);
            let end = state
                .last_index
                .map_or(start, |last| end.min(last.saturating_add(1)));
            if start >= end {
                return Ok(Vec::new());
            }
            let first_unwritten = state.unwritten.keys().next().copied().unwrap_or(end);
            let engine_end = first_unwritten.clamp(start, end);
            let unwritten: Vec<(u64, Bytes)> = (state.unwritten.range(engine_end..end))
                .map(|(index, entry)| (*index, entry.data.clone()))
                .collect();
            ((start, engine_end), unwritten)
        };
        let group_id = self.group.id;
        let mut entries = Vec::new();
        for pb in self.read_engine(engine_end.0, engine_end.1)? {
            entries.push(decode_entry::<C>(group_id, pb.index, &pb.data)?);
        }
        for (index, data) in unwritten {
            entries.push(decode_entry::<C>(group_id, index, &data)?);
        }
        Ok(entries)
    }
}

impl<C: RaftTypeConfig> RaftLogStorage<C> for RaftEngineLogStore<C> {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<C>, StorageError<C::NodeId>> {
        let (last_purged, last) = {
            let state = lock(&self.group.state);
            let last = state.last_index.map(|index| {
                let unwritten = state.unwritten.get(&index).map(|entry| entry.data.clone());
                (index, unwritten)
            });
            (state.last_purged.clone(), last)
        };
        let last_log_id = match last {
            // No entry: the last purged id is the last one.
            None => last_purged.clone(),
            Some((index, unwritten)) => {
                let data = self.entry_data(index, unwritten)?;
                let entry = decode_entry::<C>(self.group.id, index, &data)?;
                Some(entry.get_log_id().clone())
            }
        };
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let group_id = self.group.id;
        let batch = put_batch(group_id, VOTE_KEY, vote, "vote")
            .map_err(|message| store_error(ErrorSubject::Vote, ErrorVerb::Write, message))?;
        let write = self
            .group
            .write_and_wait(batch, JobKind::Vote, ErrorSubject::Vote, |_| true);
        write.await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<C::NodeId>>, StorageError<C::NodeId>> {
        get_key(self.engine(), self.group.id, VOTE_KEY)
            .map_err(|message| store_error(ErrorSubject::Vote, ErrorVerb::Read, message))
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<C::NodeId>>,
    ) -> Result<(), StorageError<C::NodeId>> {
        let group_id = self.group.id;
        let write_error = |message| store_error(ErrorSubject::Store, ErrorVerb::Write, message);
        let batch = put_batch(group_id, COMMITTED_KEY, &committed, "committed log id")
            .map_err(write_error)?;
        let mut state = lock(&self.group.state);
        if let Some(message) = &state.failed {
            return Err(write_error(format!("group {group_id}: refused: {message}")));
        }
        state.committed = committed;
        // Not awaited: openraft may lose the committed id (it then re-learns it), so a slow
        // disk must not hold up its storage task here. Queued, it still lands in order.
        self.group
            .enqueue(&mut state, job(batch, JobKind::Committed, Done::Detached));
        Ok(())
    }

    async fn read_committed(
        &mut self,
    ) -> Result<Option<LogId<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(lock(&self.group.state).committed.clone())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<C>,
    ) -> Result<(), StorageError<C::NodeId>>
    where
        I: IntoIterator<Item = C::Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let pbs = self.encode_entries(entries)?;
        let (Some(first), Some(last)) = (pbs.first(), pbs.last()) else {
            callback.log_io_completed(Ok(()));
            return Ok(());
        };
        let kind = AppendSpan {
            first_index: first.index,
            last_index: last.index,
        };
        let subject = ErrorSubject::LogIndex(kind.last_index);
        let group_id = self.group.id;
        let mut state = lock(&self.group.state);
        if let Some(message) = &state.failed {
            let message = format!("group {group_id}: {kind} refused: {message}");
            return Err(store_error(subject, ErrorVerb::Write, message));
        }
        let (batch, append_seq) = self
            .group
            .stage_append(&mut state, pbs, kind.first_index, kind.last_index)
            .map_err(|error| {
                let message = format!("raft-engine group {group_id}: {kind}: {error}");
                store_error(subject, ErrorVerb::Write, message)
            })?;
        let job = Job {
            batch,
            kind: JobKind::Append(kind),
            append_seq,
            done: Done::Flushed(callback),
        };
        self.group.enqueue(&mut state, job);
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let index = log_id.index;
        let subject = ErrorSubject::Log(log_id);
        let batch = put_batch(self.group.id, TRUNCATED_KEY, &index, "truncation marker")
            .map_err(|message| store_error(subject.clone(), ErrorVerb::Delete, message))?;
        let update = |state: &mut GroupState<C>| {
            drop(state.unwritten.split_off(&index));
            let first_present = state
                .last_purged
                .as_ref()
                .map_or(0, |purged| purged.index.saturating_add(1));
            state.last_index = state.last_index.and_then(|last| {
                let kept_last = last.min(index.checked_sub(1)?);
                (kept_last >= first_present).then_some(kept_last)
            });
            // raft-engine keeps the entries from `index` on until an append overwrites them
            // or a purge compacts them; the marker hides them across a restart meanwhile.
            state.marker_queued = true;
            true
        };
        let kind = JobKind::Truncate { index };
        self.group
            .write_and_wait(batch, kind, subject, update)
            .await
    }

    async fn purge(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let index = log_id.index;
        let subject = ErrorSubject::Log(log_id.clone());
        let mut batch = put_batch(self.group.id, PURGED_KEY, &log_id, "last purged log id")
            .map_err(|message| store_error(subject.clone(), ErrorVerb::Delete, message))?;
        // Compact drops the memtable's entries below its index, and lets raft-engine's purge
        // delete files that hold only such entries; one batch, so that the key and the
        // entries agree after a crash.
        let first_kept = index.saturating_add(1);
        batch.add_command(self.group.id, Command::Compact { index: first_kept });
        let update = |state: &mut GroupState<C>| {
            if state
                .last_purged
                .as_ref()
                .is_some_and(|purged| purged.index >= index)
            {
                // Purging never moves back: writing the smaller id would.
                return false;
            }
            state.last_purged = Some(log_id);
            state.unwritten = state.unwritten.split_off(&first_kept);
            if state.last_index.is_some_and(|last| last < first_kept) {
                state.last_index = None;
            }
            state.engine_span.compact_to(first_kept);
            true
        };
        let kind = JobKind::Purge { index };
        self.group
            .write_and_wait(batch, kind, subject, update)
            .await
    }
}

/// A batch that puts `value` (postcard) at key `key` of the group's region.
fn put_batch<T: serde::Serialize>(
    group_id: u64,
    key: &[u8],
    value: &T,
    what: &str,
) -> Result<LogBatch, String> {
    let mut batch = LogBatch::with_capacity(1);
    let bytes = encode(value, what, group_id)?;
    batch
        .put(group_id, key.to_vec(), bytes)
        .map_err(|error| format!("raft-engine group {group_id}: put {what}: {error}"))?;
    Ok(batch)
}
