//! The gRPC messages, clients and servers that build.rs generates from proto/raft.proto; kept
//! in a module of their own so the lints the generated code does not meet stay scoped to it.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("sealog.kv");
