//! Compiles `proto/logdrive.proto` and `proto/sequencer.proto`. protox parses them in pure
//! Rust, so building needs no system `protoc`; tonic-prost-build generates the messages and
//! the client and server stubs from protox's descriptor set.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["proto/logdrive.proto", "proto/sequencer.proto"];
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    let fds = protox::compile(protos, ["proto"])?;
    // Payloads as `Bytes`: a write's payload reaches the drive, and a read's the caller,
    // without a copy into a `Vec`.
    tonic_prost_build::configure().bytes(".").compile_fds(fds)?;
    Ok(())
}
