//! Prints the recovery report of a ring image file (a debugging aid for crash-state dumps):
//! `cargo run -p sealog-wal --example inspect_image -- FILE`.

fn main() {
    let path = std::env::args().nth(1).expect("an image file");
    let image = std::fs::read(&path).expect("reads the image");
    let mut source: &[u8] = &image;
    let mut lsns = Vec::new();
    let result = sealog_wal::replay(&mut source, &Default::default(), &mut |entry| {
        lsns.push((entry.lsn, entry.position, entry.incarnation))
    });
    println!("{result:#?}");
    for (lsn, position, incarnation) in lsns {
        println!("LSN {lsn} at {position} incarnation {incarnation}");
    }
}
