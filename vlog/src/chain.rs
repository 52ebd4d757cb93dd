//! The VirtualLog's chain (docs/composition.md, "The VirtualLog"): segments, each a half-open
//! range of virtual positions [start, stop) on one loglet, the last one active (its stop not
//! yet known), and the trim point; plus how it is encoded in the MetaStore's register.
//!
//! A segment records the epoch its writes carry (the version of the chain that installed
//! it) and, while a reconfiguration seals it, the epoch that reconfiguration claimed (the
//! version of the chain that recorded the claim). Epochs are chain versions, which only the
//! winner of a compare-and-swap gets, so two coordinators never share one.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::LogError;

/// What a loglet is made of, for the factory that opens it: an id (unique per loglet) and
/// a description the factory reads (which drives, which composition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogletConfig {
    /// The loglet's id.
    pub id: u64,
    /// The factory's description of it.
    pub spec: Bytes,
}

/// One segment of the chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The first virtual position it holds.
    pub start: u64,
    /// One past the last, once sealed and recorded; `None` while active.
    pub stop: Option<u64>,
    /// The epoch its writes carry.
    pub epoch: u64,
    /// The epoch a reconfiguration claimed to seal it, while one is under way.
    pub sealing: Option<u64>,
    /// Its loglet.
    pub loglet: LogletConfig,
}

impl Segment {
    /// Whether virtual position `position` lies in the segment.
    pub fn holds(&self, position: u64) -> bool {
        position >= self.start && self.stop.is_none_or(|stop| position < stop)
    }
}

/// The chain: see the module doc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    /// The MetaStore version it was read at (or written as).
    pub version: u64,
    /// Segments in position order; the last is active.
    pub segments: Vec<Segment>,
    /// The first virtual position not trimmed.
    pub trimmed: u64,
}

/// The encoding's first bytes, so that a register holding something else is told apart.
const MAGIC: &[u8; 4] = b"SLVC";

/// `stop` and `sealing` as stored: `u64::MAX` for none.
const NONE: u64 = u64::MAX;

impl Chain {
    /// A chain of one active segment at 0 on `loglet`, to be installed as version 1.
    pub fn first(loglet: LogletConfig) -> Chain {
        Chain {
            version: 1,
            segments: vec![Segment {
                start: 0,
                stop: None,
                epoch: 1,
                sealing: None,
                loglet,
            }],
            trimmed: 0,
        }
    }

    /// The active segment.
    pub fn active(&self) -> &Segment {
        self.segments.last().expect("a chain has a segment")
    }

    pub(crate) fn active_mut(&mut self) -> &mut Segment {
        self.segments.last_mut().expect("a chain has a segment")
    }

    /// The segment holding virtual position `position`, if any.
    pub fn segment_of(&self, position: u64) -> Option<&Segment> {
        self.segments.iter().find(|segment| segment.holds(position))
    }

    /// The bytes stored in the MetaStore.
    pub fn encode(&self) -> Bytes {
        let mut bytes = BytesMut::new();
        bytes.put_slice(MAGIC);
        bytes.put_u64_le(self.trimmed);
        bytes.put_u32_le(self.segments.len() as u32);
        for segment in &self.segments {
            bytes.put_u64_le(segment.start);
            bytes.put_u64_le(segment.stop.unwrap_or(NONE));
            bytes.put_u64_le(segment.epoch);
            bytes.put_u64_le(segment.sealing.unwrap_or(NONE));
            bytes.put_u64_le(segment.loglet.id);
            bytes.put_u32_le(segment.loglet.spec.len() as u32);
            bytes.put_slice(&segment.loglet.spec);
        }
        bytes.freeze()
    }

    /// The chain stored as version `version`.
    pub fn decode(version: u64, mut bytes: Bytes) -> Result<Chain, LogError> {
        let bad = |reason: &str| LogError::BadChain {
            version,
            reason: reason.to_owned(),
        };
        if bytes.len() < 16 || &bytes[..4] != MAGIC {
            return Err(bad("no chain header"));
        }
        bytes.advance(4);
        let trimmed = bytes.get_u64_le();
        let count = bytes.get_u32_le() as usize;
        let mut segments = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            if bytes.remaining() < 44 {
                return Err(bad("a segment is cut short"));
            }
            let start = bytes.get_u64_le();
            let stop = Some(bytes.get_u64_le()).filter(|stop| *stop != NONE);
            let epoch = bytes.get_u64_le();
            let sealing = Some(bytes.get_u64_le()).filter(|epoch| *epoch != NONE);
            let id = bytes.get_u64_le();
            let spec_bytes = bytes.get_u32_le() as usize;
            if bytes.remaining() < spec_bytes {
                return Err(bad("a loglet description is cut short"));
            }
            let spec = bytes.split_to(spec_bytes);
            let loglet = LogletConfig { id, spec };
            segments.push(Segment {
                start,
                stop,
                epoch,
                sealing,
                loglet,
            });
        }
        let chain = Chain {
            version,
            segments,
            trimmed,
        };
        chain.check().map_err(|reason| bad(&reason))?;
        Ok(chain)
    }

    /// The chain's shape: at least one segment, contiguous, only the last one open.
    fn check(&self) -> Result<(), String> {
        let Some((last, sealed)) = self.segments.split_last() else {
            return Err("no segment".into());
        };
        if last.stop.is_some() {
            return Err("the last segment has a stop".into());
        }
        let mut next = sealed.first().map_or(last.start, |first| first.start);
        for segment in sealed.iter().chain(std::iter::once(last)) {
            if segment.start != next {
                return Err(format!(
                    "a segment starts at {} after {next}",
                    segment.start
                ));
            }
            next = match segment.stop {
                Some(stop) if stop < segment.start => {
                    return Err("a segment stops before it starts".into())
                }
                Some(stop) => stop,
                None => segment.start,
            };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_survives_its_encoding_and_a_cut_one_is_refused() {
        let mut chain = Chain::first(LogletConfig {
            id: 7,
            spec: Bytes::from("one drive"),
        });
        chain.active_mut().stop = Some(40);
        chain.segments.push(Segment {
            start: 40,
            stop: None,
            epoch: 3,
            sealing: Some(4),
            loglet: LogletConfig {
                id: 8,
                spec: Bytes::from("a quorum of three"),
            },
        });
        chain.version = 4;
        let bytes = chain.encode();
        assert_eq!(Chain::decode(4, bytes.clone()).unwrap(), chain);
        for cut in [0, 10, bytes.len() - 1] {
            assert!(Chain::decode(4, bytes.slice(..cut)).is_err());
        }
    }
}
