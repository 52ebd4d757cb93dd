//! Appends without copies on the client's side: from borrowed slices (several at once, one
//! entry, never concatenated), from shared `Bytes` and from owned `Vec`s, all read back
//! byte for byte and after a reopen; a lent payload is copied before `append` of borrowed
//! slices returns; more lending clients than the drive's channel has slots all complete; and
//! lenders waiting on a drive that closes get their slices back with a typed error.

use std::sync::Arc;

use bytes::Bytes;
use sealog::{format, AppendError, Drive, DriveOptions, Entry, FormatOptions, SyncMethod};

fn ring(directory: &tempfile::TempDir) -> std::path::PathBuf {
    let path = directory.path().join("ring");
    format(
        &path,
        &FormatOptions {
            size_bytes: 16 << 20,
            segment_size_bytes: Some(2 << 20),
            sync_method: Some(SyncMethod::Fdatasync),
            ..FormatOptions::default()
        },
    )
    .expect("formats");
    path
}

#[test]
fn slices_bytes_and_vecs_are_one_entry_each_and_read_back_byte_for_byte() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory);
    let header = b"embedder header: 0123456789".to_vec();
    let body: Vec<u8> = (0..10_000u32).map(|index| (index * 7) as u8).collect();
    let shared = Bytes::from((0..3_000u32).map(|index| index as u8).collect::<Vec<_>>());
    let owned = b"an owned payload".to_vec();
    let mut expected = Vec::new();
    {
        let drive = Drive::open(&path, DriveOptions::default()).expect("opens");
        let lsn = drive
            .append(Entry::slices(&[&header, &body]))
            .expect("queued")
            .wait()
            .expect("durable");
        expected.push((lsn, [header.as_slice(), body.as_slice()].concat()));
        let lsn = drive
            .append(shared.clone())
            .expect("queued")
            .wait()
            .expect("durable");
        expected.push((lsn, shared.to_vec()));
        let lsn = drive
            .append(owned.clone())
            .expect("queued")
            .wait()
            .expect("durable");
        expected.push((lsn, owned.clone()));
        let lsn = drive
            .append(Entry::slices(&[]))
            .expect("queued")
            .wait()
            .expect("durable");
        expected.push((lsn, Vec::new()));
        for (lsn, payload) in &expected {
            assert_eq!(&drive.read(*lsn).expect("reads"), payload);
        }
    }
    let drive = Drive::open(&path, DriveOptions::default()).expect("reopens");
    let replayed: Vec<(u64, Vec<u8>)> = drive
        .iter_from(1)
        .payloads()
        .collect::<Result<_, _>>()
        .expect("replays");
    assert_eq!(replayed, expected);
}

#[test]
fn a_lent_payload_is_copied_before_append_returns() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory);
    let drive = Drive::open(&path, DriveOptions::default()).expect("opens");
    let mut buffer = vec![0xabu8; 4096];
    let ticket = drive.append(Entry::slices(&[&buffer])).expect("queued");
    // The borrow ended when `append` returned: the drive has its own copy.
    buffer.fill(0);
    let lsn = ticket.wait().expect("durable");
    assert_eq!(drive.read(lsn).expect("reads"), vec![0xabu8; 4096]);
}

#[test]
fn more_lenders_than_channel_slots_all_complete() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory);
    let drive = Arc::new(
        Drive::open(
            &path,
            DriveOptions {
                channel_capacity: 2,
                ..DriveOptions::default()
            },
        )
        .expect("opens"),
    );
    let lenders: Vec<_> = (0..16u8)
        .map(|lender| {
            let drive = Arc::clone(&drive);
            std::thread::spawn(move || {
                (0..50u8)
                    .map(|round| {
                        let header = [lender, round];
                        let body = vec![lender ^ round; 300 + usize::from(round)];
                        let lsn = drive
                            .append(Entry::slices(&[&header, &body]))
                            .expect("queued")
                            .wait()
                            .expect("durable");
                        (lsn, [&header[..], &body[..]].concat())
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut written: Vec<(u64, Vec<u8>)> = lenders
        .into_iter()
        .flat_map(|lender| lender.join().expect("lender"))
        .collect();
    written.sort();
    assert_eq!(written.len(), 16 * 50);
    let read: Vec<(u64, Vec<u8>)> = drive
        .iter_from(1)
        .payloads()
        .collect::<Result<_, _>>()
        .expect("reads");
    assert_eq!(read, written);
}

#[test]
fn a_lender_on_a_closed_drive_gets_its_slices_back_and_an_error() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory);
    let drive = Drive::open(&path, DriveOptions::default()).expect("opens");
    drive.close();
    let body = vec![1u8; 100];
    match drive.append(Entry::slices(&[&body])) {
        Err(AppendError::Closed(_)) => {}
        Err(other) => panic!("expected Closed, got {other}"),
        Ok(ticket) => assert!(matches!(ticket.wait(), Err(AppendError::Closed(_)))),
    }
}
