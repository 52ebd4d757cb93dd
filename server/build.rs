//! Compiles `proto/logdrive.proto`. protox parses it in pure Rust, so building needs no
//! system `protoc`; tonic-prost-build generates the messages and the client and server stubs
//! from protox's descriptor set.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/logdrive.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    // Payloads as `Bytes`: a write's payload reaches the drive, and a read's the caller,
    // without a copy into a `Vec`.
    tonic_prost_build::configure().bytes(".").compile_fds(fds)?;
    Ok(())
}
