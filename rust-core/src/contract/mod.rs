//! What the engine and the Java processors must agree on, written once: FlowFile attribute names
//! (`attributes`), the `kinesisMetadata` fields (`metadata`), each processor's property names,
//! defaults and allowed values (`properties`), the counters NiFi shows (`counters`), the
//! exactly-once key (`exactly_once`), and the JNI layouts' magics and route codes (`wire`). Java
//! gets them from generated, checked-in twins in `io.kinesnow.nifi.contract` (`Attributes`,
//! `KinesisMetadataFields`, `ConsumeKinesisSpecs` and `PutSnowflakeSpecs` of `PropertySpec`s,
//! `ConsumeKinesisCounters`, `PutSnowflakeCounters`, `Wire`) and tests its own key against cases
//! generated here; unit tests here keep them current. Depends on nothing but `std`.

pub mod attributes;
pub mod counters;
pub mod exactly_once;
pub mod metadata;
pub mod properties;
pub mod wire;

/// Where the generated Java twins live, from the crate's directory.
#[cfg(test)]
const JAVA_DIR: &str = "../java-shim/src/main/java/io/kinesnow/nifi/contract";
/// Where the cases Java's tests check live, from the crate's directory.
#[cfg(test)]
const JAVA_TEST_RESOURCES: &str = "../java-shim/src/test/resources/contract";

/// Compares `generated` with the checked-in Java file `name`, or writes it when
/// `KINESNOW_WRITE_CONTRACT=1`.
#[cfg(test)]
fn check_java_twin(name: &str, generated: &str) {
    check_twin(JAVA_DIR, name, generated);
}

#[cfg(test)]
fn check_twin(dir: &str, name: &str, generated: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join(name);
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

/// The first lines of a generated Java file: where it comes from and how to regenerate it, then its package.
#[cfg(test)]
fn generated_head(source: &str) -> String {
    format!(
        "// Generated from rust-core/src/contract/{source} by its unit test; do not edit.\n\
         // Regenerate: KINESNOW_WRITE_CONTRACT=1 cargo test -p kinesnow-core --lib contract\n\
         package io.kinesnow.nifi.contract;\n\n"
    )
}

/// A generated Java class of constants: the head, then its doc, name and private constructor.
#[cfg(test)]
fn java_class_head(source: &str, doc: &str, class: &str) -> String {
    format!("{}/** {doc} */\npublic final class {class} {{\n    private {class}() {{\n    }}\n", generated_head(source))
}

#[cfg(test)]
mod tests {
    /// Every Java twin is what the contract generates.
    #[test]
    fn the_java_twins_are_current() {
        let mut twins = vec![
            ("Attributes.java".to_owned(), super::attributes::java_twin()),
            ("KinesisMetadataFields.java".to_owned(), super::metadata::java_twin()),
            ("Wire.java".to_owned(), super::wire::java_twin()),
        ];
        twins.extend(super::counters::java_twins());
        twins.extend(super::properties::java_twins());
        for (name, text) in twins {
            super::check_java_twin(&name, &text);
        }
    }
}
