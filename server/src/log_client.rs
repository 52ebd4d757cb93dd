//! [`LogClient`]: the replicated log as a client sees it, a VirtualLog whose segments live
//! on LogDrive servers and whose slots come from sequencer processes. Appends write their
//! values to the servers themselves (the sequencer sees none); when the active segment's
//! sequencer is gone, the client asks another sequencer to install a segment (a client may
//! not seal or fence) and appends there. An append whose first try's outcome could not be
//! learned answers with an indeterminate error rather than trying again, so that no value is
//! appended twice behind the caller's back.

use std::sync::Arc;

use bytes::Bytes;
use sealog_vlog::{
    AtomicOptions, Chain, LogError, LogletFactory, MetaStore, VirtualLog, VirtualOptions,
};

use crate::loglet_spec::Pool;
use crate::remote::RemoteOptions;
use crate::sequencer_client::{ClientFactory, SequencerReconfigurer, Sequencers};

/// How a client reaches the log.
#[derive(Clone)]
pub struct LogClientOptions {
    /// The sequencers' addresses, asked in turn to install a segment.
    pub sequencers: Vec<String>,
    /// Connections to servers and sequencers (TLS, deadlines).
    pub remote: RemoteOptions,
    /// How appends run (the window and epoch are each segment's).
    pub atomic: AtomicOptions,
    /// How the VirtualLog handle runs.
    pub virtual_options: VirtualOptions,
}

/// A client of the replicated log: see the module doc.
pub struct LogClient {
    log: VirtualLog,
    factory: Arc<ClientFactory>,
    reconfigurer: Arc<SequencerReconfigurer>,
}

impl LogClient {
    /// A client of the log whose chain is in `meta`; with `create`, the log is made first if
    /// it does not exist (by the first sequencer that answers).
    pub async fn open(
        meta: Arc<dyn MetaStore>,
        options: LogClientOptions,
        create: bool,
    ) -> Result<LogClient, LogError> {
        let sequencers = Arc::new(Sequencers::new(options.remote.clone()));
        let pool = Arc::new(Pool::new(options.remote.clone()));
        let factory = Arc::new(ClientFactory::new(
            pool,
            Arc::clone(&sequencers),
            options.atomic.clone(),
        ));
        let reconfigurer = Arc::new(SequencerReconfigurer::new(
            sequencers,
            options.sequencers.clone(),
        ));
        if create && meta.read().await?.is_none() {
            let mut last = LogError::SequencerDown;
            let mut made = false;
            for addr in &options.sequencers {
                match reconfigurer.install(addr, None).await {
                    Ok(_) => {
                        made = true;
                        break;
                    }
                    Err(error) => last = error,
                }
            }
            if !made {
                return Err(last);
            }
        }
        let log = VirtualLog::open(meta, factory.clone(), options.virtual_options.clone()).await?;
        let log = log.with_reconfigurer(reconfigurer.clone());
        Ok(LogClient {
            log,
            factory,
            reconfigurer,
        })
    }

    /// Appends `payload`: its position in the log.
    pub async fn append(&self, payload: Bytes) -> Result<u64, LogError> {
        self.log.append(payload).await
    }

    /// The entry at `position`, or `None` at or past the tail.
    pub async fn read(&self, position: u64) -> Result<Option<Bytes>, LogError> {
        self.log.read(position).await
    }

    /// The first position not written, linearizable with appends.
    pub async fn tail(&self) -> Result<u64, LogError> {
        self.log.check_tail().await
    }

    /// The chain, read afresh.
    pub async fn chain(&self) -> Result<Chain, LogError> {
        self.log.refresh().await
    }

    /// Sets the active segment's seal bit: appends that complete after it fail, and the next
    /// append moves the log to a new segment (which a sequencer installs). The sealed
    /// loglet and its epoch.
    pub async fn seal(&self) -> Result<(u64, u64), LogError> {
        let segment = self.log.refresh().await?.active().clone();
        let loglet = self.factory.open(&segment).await?;
        loglet.seal(segment.epoch).await?;
        Ok((segment.loglet.id, segment.epoch))
    }

    /// Asks the sequencers to seal the active segment and install a new one: the loglet
    /// active afterwards.
    pub async fn reconfigure(&self) -> Result<u64, LogError> {
        let active = self.log.refresh().await?.active().loglet.id;
        sealog_vlog::Reconfigurer::extend_from(self.reconfigurer.as_ref(), active).await?;
        Ok(self.log.refresh().await?.active().loglet.id)
    }
}
