//! A ledger store's index rebuilt through the recovery visitor: entries of several ledgers
//! (each with its ledger id, entry id and epoch in the embedder header, some appended as
//! all-or-nothing groups) are written to a temporary ring, the drive is closed, and the reopen
//! hands every live entry to a visitor that rebuilds (ledger, entry id) -> LSN and each
//! ledger's last entry, in the open's one replay pass: no second read of the log.
//!
//! `cargo run --release -p sealog --example ledger_index`

use std::collections::BTreeMap;
use std::time::Instant;

use sealog::{
    Drive, DriveOptions, EmbedderHeader, EntryRef, FormatOptions, NewEntry, RecoveryVisitor,
};

/// The ledger store's own index, built from the embedder headers alone.
#[derive(Default)]
struct LedgerIndex {
    /// (ledger id, entry id) -> LSN.
    entries: BTreeMap<(u64, u64), u64>,
    /// Ledger id -> its last entry id and the epoch it was written in.
    last: BTreeMap<u64, (u64, u64)>,
}

impl RecoveryVisitor for LedgerIndex {
    fn visit(&mut self, entry: &EntryRef<'_>) {
        let header = entry.header;
        self.entries
            .insert((header.log_id, header.address), entry.lsn);
        self.last
            .insert(header.log_id, (header.address, header.epoch));
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let directory = tempfile::tempdir()?;
    let path = directory.path().join("ring");
    sealog::format(&path, &FormatOptions::new(256 << 20))?;
    let drive = Drive::open(&path, DriveOptions::default())?;
    let mut tickets = Vec::new();
    for entry_id in 0..10_000u64 {
        let ledger = entry_id % 5;
        let header = |id| EmbedderHeader {
            log_id: ledger,
            address: id,
            epoch: 1,
            extra: 0,
        };
        let body = vec![ledger as u8; 512];
        if ledger == 4 {
            // Ledger 4 writes its entries two at a time, all or nothing.
            let group = vec![
                NewEntry::data(body.clone()).with_header(header(2 * entry_id)),
                NewEntry::data(body).with_header(header(2 * entry_id + 1)),
            ];
            tickets.push(drive.append_group(group)?);
        } else {
            tickets.push(drive.append(NewEntry::data(body).with_header(header(entry_id)))?);
        }
    }
    for ticket in tickets {
        ticket.wait()?;
    }
    let written = drive.durable_lsn();
    drive.close();
    drop(drive);

    let started = Instant::now();
    let (drive, index) =
        Drive::open_visiting(&path, DriveOptions::default(), LedgerIndex::default())?;
    let elapsed = started.elapsed();
    println!(
        "reopened with {} entries indexed in the open's replay ({:.1} ms, {} bytes read)",
        index.entries.len(),
        elapsed.as_secs_f64() * 1e3,
        drive.recovery_report().bytes_read
    );
    assert_eq!(index.entries.len() as u64, written);
    for (ledger, (entry_id, epoch)) in &index.last {
        let lsn = index.entries[&(*ledger, *entry_id)];
        let entry = drive.read_entry(lsn)?;
        assert_eq!(entry.header.address, *entry_id);
        println!("ledger {ledger}: last entry {entry_id} (epoch {epoch}) at LSN {lsn}");
    }
    Ok(())
}
