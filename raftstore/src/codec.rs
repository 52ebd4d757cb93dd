//! How a group's entries and metadata sit in LogDrive registers: a format byte, then the
//! value in postcard (a compact serde encoding with a stable specification). The format byte
//! lets a later version read what this one wrote; an unknown one is a typed decode error,
//! never a panic.

use openraft::{LogId, NodeId, Vote};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::RaftStoreError;

/// The format byte of an entry or metadata record written by this version.
const FORMAT_V1: u8 = 1;

/// One LogDrive of a group's log: the indices from `first_index` up to the next segment's
/// first live at address `index - first_index` of LogDrive `drive_id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SegmentRef {
    /// The first index this segment holds.
    pub first_index: u64,
    /// The LogDrive's id in the store.
    pub drive_id: u64,
}

/// A group's durable metadata: the vote, the committed log id, the purge point and the map
/// from indices to LogDrives. Each change writes all of it at the metadata LogDrive's next
/// address, so the highest written address is the whole current state.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub(crate) struct GroupMeta<NID: NodeId> {
    /// The last vote saved.
    pub vote: Option<Vote<NID>>,
    /// The last committed log id saved.
    pub committed: Option<LogId<NID>>,
    /// The last purged log id.
    pub last_purged: Option<LogId<NID>>,
    /// The segments, by first index, the last one open for appends.
    pub segments: Vec<SegmentRef>,
}

impl<NID: NodeId> GroupMeta<NID> {
    /// A new group's metadata: one segment from index 0.
    pub fn new(drive_id: u64) -> GroupMeta<NID> {
        GroupMeta {
            vote: None,
            committed: None,
            last_purged: None,
            segments: vec![SegmentRef {
                first_index: 0,
                drive_id,
            }],
        }
    }
}

/// `value` as a register's bytes (`what` and `location` name it in an error: postcard fails
/// only when a value's own `Serialize` does, such as a map that cannot tell its length).
pub(crate) fn encode<T: Serialize>(
    group: u64,
    what: &'static str,
    location: u64,
    value: &T,
) -> Result<Vec<u8>, RaftStoreError> {
    postcard::to_extend(value, vec![FORMAT_V1]).map_err(|e| RaftStoreError::Encode {
        group,
        what,
        location,
        reason: e.to_string(),
    })
}

/// A register's bytes as a `T`, or why not (`what` and `location` say which record).
pub(crate) fn decode<T: DeserializeOwned>(
    group: u64,
    what: &'static str,
    location: u64,
    bytes: &[u8],
) -> Result<T, RaftStoreError> {
    let error = |reason: String| RaftStoreError::Decode {
        group,
        what,
        location,
        reason,
    };
    match bytes.split_first() {
        Some((&FORMAT_V1, body)) => postcard::from_bytes(body).map_err(|e| error(e.to_string())),
        Some((format, _)) => Err(error(format!("unknown format byte {format}"))),
        None => Err(error("no bytes".to_string())),
    }
}
