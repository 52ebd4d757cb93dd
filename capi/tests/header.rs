//! The checked-in header (`capi/include/sealog.h`) is what cbindgen makes of the crate's
//! sources now: the test regenerates it with cbindgen's library and fails, naming the command
//! that rewrites it, when the two differ. `SEALOG_BLESS_HEADER=1` makes it rewrite the file.

use std::path::Path;

#[test]
fn the_checked_in_header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("capi/cbindgen.toml is readable and valid");
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header from capi/src");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).expect("the header is UTF-8");
    let path = crate_dir.join("include/sealog.h");
    if std::env::var_os("SEALOG_BLESS_HEADER").is_some_and(|value| value == "1") {
        std::fs::write(&path, &generated).expect("capi/include/sealog.h is writable");
        println!("wrote {}", path.display());
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if checked_in != generated {
        let line = checked_in
            .lines()
            .zip(generated.lines())
            .position(|(old, new)| old != new)
            .map_or_else(
                || "the end".to_string(),
                |index| format!("line {}", index + 1),
            );
        panic!(
            "capi/include/sealog.h is stale (it first differs at {line}): run \
             `SEALOG_BLESS_HEADER=1 cargo test -p sealog-capi --test header` and commit it"
        );
    }
}
