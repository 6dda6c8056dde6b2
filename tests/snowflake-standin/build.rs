//! Where the stand-in finds a prebuilt libduckdb at run time. When `DUCKDB_LIB_DIR` names one (env.sh sets it,
//! unless `KINESNOW_DUCKDB_BUNDLED=1` compiles DuckDB from source), every binary of this package (the server,
//! its tests and examples) gets that directory as an rpath. This replaces `RUSTFLAGS`, which would apply to every
//! crate and make cargo rebuild all dependencies in the target directory the stand-in shares with the engine.
fn main() {
    println!("cargo:rerun-if-env-changed=DUCKDB_LIB_DIR");
    match std::env::var("DUCKDB_LIB_DIR") {
        Ok(dir) if !dir.is_empty() => println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}"),
        _ => {}
    }
}
