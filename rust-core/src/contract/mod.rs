//! What the engine and the Java processors must agree on, written once: FlowFile attribute names
//! (`attributes`). Java gets them from a generated, checked-in twin
//! (`io.kinesnow.nifi.contract.Attributes`), which a unit test here keeps current. Depends on
//! nothing but `std`.

pub mod attributes;

/// Where the generated Java twins live, from the crate's directory.
#[cfg(test)]
const JAVA_DIR: &str = "../java-shim/src/main/java/io/kinesnow/nifi/contract";

/// Compares `generated` with the checked-in Java file `name`, or writes it when
/// `KINESNOW_WRITE_CONTRACT=1`.
#[cfg(test)]
fn check_java_twin(name: &str, generated: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(JAVA_DIR).join(name);
    if std::env::var("KINESNOW_WRITE_CONTRACT").is_ok_and(|v| v == "1") {
        std::fs::write(&path, generated).expect("the Java twin is written");
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == generated,
        "{} is not what the contract says: run KINESNOW_WRITE_CONTRACT=1 cargo test -p kinesnow-core --lib contract",
        path.display()
    );
}
