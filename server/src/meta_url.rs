//! Where a log's chain lives, as the command line names it: `etcd://HOST:PORT/KEY` (the
//! register in one etcd key) or `logdrive://HOST:PORT/ID/GENERATION` (a LogDriveMetaStore on
//! one LogDrive of one server, which decides racing proposals by itself). Each handle gets
//! a proposer id of its own (the process id and the clock), as both stores require.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use sealog_vlog::{LogDriveMetaStore, MetaError, MetaStore};

use crate::etcd::{EtcdMetaStore, EtcdOptions};
use crate::remote::{RemoteOptions, RemoteStore};

/// A MetaStore location, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaUrl {
    /// An etcd key.
    Etcd {
        /// `http://HOST:PORT`.
        endpoint: String,
        /// The key, with its leading slash.
        key: String,
    },
    /// A LogDrive on a server.
    LogDrive {
        /// The server's `HOST:PORT`.
        addr: String,
        /// The LogDrive's id.
        id: u64,
        /// Its generation.
        generation: u64,
    },
}

impl MetaUrl {
    /// Parses `url`; the error says what is wrong.
    pub fn parse(url: &str) -> Result<MetaUrl, String> {
        if let Some(rest) = url.strip_prefix("etcd://") {
            let (host, key) = rest
                .split_once('/')
                .ok_or(format!("{url}: etcd://HOST:PORT/KEY needs a key"))?;
            if host.is_empty() || key.is_empty() {
                return Err(format!(
                    "{url}: etcd://HOST:PORT/KEY needs a host and a key"
                ));
            }
            return Ok(MetaUrl::Etcd {
                endpoint: format!("http://{host}"),
                key: format!("/{key}"),
            });
        }
        if let Some(rest) = url.strip_prefix("logdrive://") {
            let parts: Vec<&str> = rest.split('/').collect();
            let [addr, id, generation] = parts[..] else {
                return Err(format!("{url}: logdrive://HOST:PORT/ID/GENERATION"));
            };
            let number = |text: &str| {
                text.parse::<u64>()
                    .map_err(|_| format!("{url}: {text:?} is not a number"))
            };
            return Ok(MetaUrl::LogDrive {
                addr: addr.into(),
                id: number(id)?,
                generation: number(generation)?,
            });
        }
        Err(format!(
            "{url}: a MetaStore is etcd://HOST:PORT/KEY or logdrive://HOST:PORT/ID/GEN"
        ))
    }

    /// Opens the store, reaching a LogDrive server with `remote`.
    pub async fn open(&self, remote: &RemoteOptions) -> Result<Arc<dyn MetaStore>, MetaError> {
        let proposer = proposer_id();
        match self {
            MetaUrl::Etcd { endpoint, key } => {
                let options = EtcdOptions::new(vec![endpoint.clone()], key, proposer);
                Ok(Arc::new(EtcdMetaStore::connect(options).await?))
            }
            MetaUrl::LogDrive {
                addr,
                id,
                generation,
            } => {
                let store = RemoteStore::connect(addr, remote.clone())
                    .await
                    .map_err(MetaError::Store)?;
                let drive = Arc::new(store.drive(*id, *generation));
                Ok(Arc::new(LogDriveMetaStore::new(drive, proposer)))
            }
        }
    }
}

/// A proposer id unlikely to be any other handle's: the process id and the clock's
/// nanoseconds.
fn proposer_id() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (u64::from(std::process::id()) << 40) ^ nanos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_or_say_what_is_wrong() {
        assert_eq!(
            MetaUrl::parse("etcd://127.0.0.1:2379/sealog/log1").unwrap(),
            MetaUrl::Etcd {
                endpoint: "http://127.0.0.1:2379".into(),
                key: "/sealog/log1".into()
            }
        );
        assert_eq!(
            MetaUrl::parse("logdrive://10.0.0.1:7101/5/2").unwrap(),
            MetaUrl::LogDrive {
                addr: "10.0.0.1:7101".into(),
                id: 5,
                generation: 2
            }
        );
        for bad in [
            "",
            "etcd://host",
            "etcd:///key",
            "logdrive://a/1",
            "logdrive://a/x/1",
            "zk://a",
        ] {
            assert!(MetaUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
