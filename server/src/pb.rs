//! The messages and the client and server stubs that build.rs generates from
//! `proto/logdrive.proto` (at the top) and `proto/sequencer.proto` (in `sequencer`).

#![allow(missing_docs, clippy::all)]

tonic::include_proto!("sealog.logdrive.v1");

/// The sequencer service's messages and stubs.
pub mod sequencer {
    tonic::include_proto!("sealog.sequencer.v1");
}
