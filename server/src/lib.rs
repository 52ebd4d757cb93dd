//! A reference log server (docs/server.md): a process that serves the LogDrives of one
//! store over gRPC with mutual TLS, and [`RemoteLogDrive`], the client that is itself a
//! `LogDrive`, so that the compositions (quorum, striped) and the logs above them (the
//! AtomicLog, the VirtualLog) run over servers on other machines unchanged.
//!
//! From the top down (a module imports only modules below it):
//!
//! - [`serve`]: [`LogServer`], a running server; [`service`]: the gRPC handlers over a store,
//!   their authorization and admission; [`drives`]: the stores a server serves (the
//!   engine's, or one in memory for simulations);
//! - [`remote`]: [`RemoteStore`] and [`RemoteLogDrive`], the client; [`etcd`]: the
//!   VirtualLog's MetaStore in etcd; `runtime`: the client library's runtime;
//! - [`tls`]: the server's accept loop and handshakes; [`certs`]: test certificates;
//!   [`auth`]: roles and what each may do;
//! - [`wire`]: the LogDrive trait's values as messages; `pb`: the generated messages.

#![forbid(unsafe_code)]

pub mod auth;
pub mod certs;
pub mod commands;
pub mod drives;
pub mod etcd;
pub mod log_client;
pub mod loglet_spec;
pub mod meta_url;
pub mod pb;
pub mod remote;
pub mod repair;
mod runtime;
pub mod sequencer_client;
pub mod sequencer_host;
pub mod sequencer_service;
pub mod serve;
pub mod service;
pub mod tls;
pub mod wire;

pub use auth::{Identity, Op, Role};
pub use certs::{CertAuthority, Issued, Leaf};
pub use etcd::{EtcdMetaStore, EtcdOptions};
pub use remote::{ClientTls, RemoteLogDrive, RemoteOptions, RemoteStore, ServerLimits};
pub use serve::{LogServer, ServerError, ServerOptions, ServerStats};
pub use tls::{TlsError, TlsFiles, TlsPem};
