//! Compiles `proto/raft.proto` for the key-value example (src/kv/). protox parses it in pure
//! Rust, so building needs no system `protoc`; tonic-prost-build generates the messages and
//! the client and server stubs from protox's descriptor set.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/raft.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
