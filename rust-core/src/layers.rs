//! The engine's top-level modules in floors, each depending only on floors below it (checked
//! here, over the source's own `crate::` paths, outside `mod tests` blocks). A new upward or
//! sideways edge fails this test: move the item it needs down, or the caller up.

use std::collections::BTreeSet;
use std::path::Path;

/// Floor by floor, bottom first.
const FLOORS: &[&[&str]] = &[
    // Plain values and services nothing else is needed for.
    &["contract", "error", "runtime", "secrets"],
    // Kinesis records and positions; the processors' settings.
    &["kinesis", "config"],
    // AWS clients and credentials.
    &["aws"],
    // The DynamoDB lease table.
    &["lease"],
    // What PutSnowflake reports back to ConsumeKinesis in one JVM.
    &["feedback"],
    // The two engines.
    &["consumer", "snowflake"],
    // Verify Properties; one processor instance's life.
    &["verify", "component"],
    // JNI: handles, byte layouts, exports. Only here.
    &["ffi"],
    // Test-only: the failover model over feedback, consumer and snowflake together.
    &["failover_model"],
];

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|floor| floor.contains(&module))
}

/// The top-level modules a source text names as `crate::<module>`, outside its `mod tests`.
fn named_modules(source: &str) -> BTreeSet<String> {
    let code = source.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
    code.match_indices("crate::")
        .map(|(at, m)| {
            code[at + m.len()..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>()
        })
        .filter(|name| !name.is_empty())
        .collect()
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source directory").flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_module_depends_only_on_floors_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    let mut seen = BTreeSet::new();
    for entry in std::fs::read_dir(&src).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().trim_end_matches(".rs").to_owned();
        if name == "lib" || name == "layers" {
            continue;
        }
        seen.insert(name.clone());
        let Some(floor) = floor_of(&name) else {
            violations.push(format!("module '{name}' is on no floor: add it to FLOORS"));
            continue;
        };
        let mut files = Vec::new();
        if entry.path().is_dir() {
            sources(&entry.path(), &mut files);
        } else {
            files.push(entry.path());
        }
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for used in named_modules(&text) {
                if used == name {
                    continue;
                }
                match floor_of(&used) {
                    Some(f) if f < floor => {}
                    Some(f) => violations.push(format!(
                        "{} (floor {floor}) uses crate::{used} (floor {f})",
                        file.strip_prefix(&src).unwrap_or(&file).display()
                    )),
                    None => {} // not a module (a macro or an item of lib.rs)
                }
            }
        }
    }
    assert!(violations.is_empty(), "layering broken:\n{}", violations.join("\n"));
    for floor in FLOORS {
        for module in *floor {
            assert!(seen.contains(*module), "FLOORS names '{module}', which is not a module any more");
        }
    }
}

#[test]
fn the_check_sees_an_upward_edge() {
    let names = named_modules(
        "use crate::ffi::batch;\nfn f() { crate::lease::now_ms(); }\n#[cfg(test)]\nmod tests { use crate::verify; }",
    );
    assert_eq!(names, BTreeSet::from(["ffi".to_owned(), "lease".to_owned()]));
    assert!(floor_of("ffi") > floor_of("lease"));
}
