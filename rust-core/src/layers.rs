//! The engine's top-level modules in floors, each depending only on floors below it (checked
//! here, over the source's own `crate::` paths, outside `mod tests` blocks). A new upward or
//! sideways edge fails this test: move the item it needs down, or the caller up.

use std::collections::BTreeSet;
use std::path::Path;

/// Floor by floor, bottom first.
const FLOORS: &[&[&str]] = &[
    // Plain values and services nothing else is needed for.
    &["contract", "error", "runtime", "secrets"],
    // The counts each engine keeps for NiFi's counters.
    &["counters"],
    // Kinesis records, positions and how calls name a stream.
    &["kinesis"],
    // The processors' settings (a stream's ARN is read by `kinesis::address`).
    &["config"],
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
    // The operator's tool (kinesnow-ctl): read-only views of the lease table, the stream and a table.
    &["ops"],
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

/// The sibling modules a file inside `parent/` names (`super::<m>` or `crate::<parent>::<m>`),
/// outside its `mod tests`.
fn named_siblings(source: &str, parent: &str) -> BTreeSet<String> {
    let code = source.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
    let word =
        |at: usize| code[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
    let from_super = code.match_indices("super::").map(|(at, m)| word(at + m.len()));
    let long = format!("crate::{parent}::");
    let from_crate = code.match_indices(long.as_str()).map(|(at, m)| word(at + m.len()));
    from_super.chain(from_crate).filter(|name| !name.is_empty()).collect()
}

/// The module graph inside `src/<parent>/` (one node per file; `mod.rs` is the parent itself and
/// left out: it only declares and re-exports).
fn graph_inside(parent: &str) -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(parent);
    let mut graph = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().trim_end_matches(".rs").to_owned();
        if name == "mod" || entry.path().is_dir() {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap();
        graph.insert(name, named_siblings(&text, parent));
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for (name, used) in graph.iter_mut() {
        used.retain(|m| m != name && modules.contains(m));
    }
    graph
}

/// A cycle in `graph`, if there is one, as the modules on it.
fn a_cycle(graph: &std::collections::BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &std::collections::BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            return Some(path[at..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_cycle_between_the_modules_inside_consumer_and_snowflake() {
    for parent in ["consumer", "snowflake"] {
        let graph = graph_inside(parent);
        assert!(graph.len() > 5, "{parent}: the check reads no modules");
        if let Some(cycle) = a_cycle(&graph) {
            panic!("{parent}: the modules {} depend on each other in a cycle", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_cycle_check_sees_a_cycle() {
    let graph = std::collections::BTreeMap::from([
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["c".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
        ("d".to_owned(), BTreeSet::new()),
    ]);
    assert_eq!(a_cycle(&graph), Some(vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]));
    let siblings = named_siblings("use super::ledger::Batch;\nuse crate::consumer::state::X;", "consumer");
    assert_eq!(siblings, BTreeSet::from(["ledger".to_owned(), "state".to_owned()]));
}
