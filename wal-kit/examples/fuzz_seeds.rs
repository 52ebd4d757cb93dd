//! Writes the sample rings of `sealog_wal_kit::model::sample_rings` into a directory, as the seed
//! corpus of the `replay` fuzz target: `cargo run -p sealog-wal-kit --example fuzz_seeds -- DIR`.

fn main() -> std::io::Result<()> {
    let directory = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "wal/fuzz/corpus/replay".into());
    std::fs::create_dir_all(&directory)?;
    for (index, ring) in sealog_wal_kit::model::sample_rings().iter().enumerate() {
        let path = std::path::Path::new(&directory).join(format!("ring-{index}"));
        std::fs::write(&path, ring)?;
        println!("{} ({} bytes)", path.display(), ring.len());
    }
    Ok(())
}
