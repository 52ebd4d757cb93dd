//! The messages and the client and server stubs that build.rs generates from
//! `proto/logdrive.proto`.

#![allow(missing_docs, clippy::all)]

tonic::include_proto!("sealog.logdrive.v1");
