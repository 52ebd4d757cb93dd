//! Entries between C and the engine: kinds (plain `uint32_t` codes in C, [`Kind`] here),
//! embedder headers (the same four words on both sides), and the default `sealog_new_entry`.
//! Safe code: the pointers in these structs are read in [`crate::ffi`].

use sealog::{EmbedderHeader, Kind};

use crate::status::Failure;
use crate::types::*;

/// The kind a C code names. Padding (2) converts, and the engine refuses to append it with a
/// message of its own; a code that names no kind is refused here, naming the field.
pub fn kind(code: u32, field: &str) -> Result<Kind, Failure> {
    u8::try_from(code)
        .ok()
        .and_then(Kind::from_byte)
        .ok_or_else(|| {
            Failure::invalid(format!(
                "{field} is {code}: it takes SEALOG_KIND_DATA, _TRIM, _SEAL or _FENCE"
            ))
        })
}

/// The C code of a kind.
pub fn kind_code(kind: Kind) -> u32 {
    kind as u32
}

/// The engine's embedder header for C's.
pub fn header(header: &sealog_embedder_header) -> EmbedderHeader {
    EmbedderHeader {
        log_id: header.log_id,
        address: header.address,
        epoch: header.epoch,
        extra: header.extra,
    }
}

/// C's embedder header for the engine's.
pub fn c_header(header: &EmbedderHeader) -> sealog_embedder_header {
    sealog_embedder_header {
        log_id: header.log_id,
        address: header.address,
        epoch: header.epoch,
        extra: header.extra,
    }
}

/// What `sealog_new_entry_init` writes: a data entry, header zeros, empty payload.
pub fn new_entry_default() -> sealog_new_entry {
    sealog_new_entry {
        struct_size_bytes: size_of::<sealog_new_entry>() as u32,
        kind: SEALOG_KIND_DATA,
        header: sealog_embedder_header::default(),
        payload: std::ptr::null(),
        payload_len_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_convert_both_ways_and_unknown_codes_are_named() {
        for (code, kind) in [
            (SEALOG_KIND_DATA, Kind::Data),
            (SEALOG_KIND_TRIM, Kind::Trim),
            (SEALOG_KIND_SEAL, Kind::Seal),
            (SEALOG_KIND_FENCE, Kind::Fence),
        ] {
            assert_eq!(super::kind(code, "entry->kind"), Ok(kind));
            assert_eq!(kind_code(kind), code);
        }
        assert_eq!(super::kind(2, "entry->kind"), Ok(Kind::Padding));
        for code in [0, 6, 257, u32::MAX] {
            let failure = super::kind(code, "entries[1].kind").expect_err("no kind");
            assert_eq!(failure.status, sealog_status::SEALOG_INVALID_ARGUMENT);
            assert!(
                failure
                    .message
                    .starts_with(&format!("entries[1].kind is {code}: it takes")),
                "{}",
                failure.message
            );
        }
    }

    #[test]
    fn headers_keep_their_four_words() {
        let c = sealog_embedder_header {
            log_id: 1,
            address: 2,
            epoch: 3,
            extra: u64::MAX,
        };
        assert_eq!(c_header(&header(&c)), c);
        assert_eq!(size_of::<sealog_embedder_header>(), 32);
    }
}
