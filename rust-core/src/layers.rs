//! The engine's top-level modules in floors, each depending only on floors below it (checked
//! here, over the source's own `crate::` paths, `use crate::{a, b}` groups included, outside
//! `mod tests` blocks). A new upward or sideways edge fails this test: move the item it needs
//! down, or the caller up. Inside `consumer` and `snowflake` no two modules depend on each other
//! in a cycle. And every module is on its parent's map: each `mod x;` is named, as code (`x`), in
//! the `//!` doc of the file that declares it, so the maps cannot go stale. And no engine code
//! starts a task that drops its component's span or names the component on a log call itself (see
//! `runtime`), so a new log line cannot miss its processor's bulletins.

use std::collections::BTreeSet;
use std::path::Path;

/// Floor by floor, bottom first.
const FLOORS: &[&[&str]] = &[
    // The one tokio runtime, and how panics and poisoned locks are read.
    &["runtime"],
    // Plain values and services nothing else is needed for.
    &["contract", "error", "secrets"],
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

/// The leading word of `text`: letters, digits and `_`.
fn word(text: &str) -> String {
    text.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
}

/// The first path segment after each `prefix` in `code`: `a` of `prefix a::b`, and `a` and `b` of
/// a group `prefix {a::x, b}` (one level; nested groups belong to their first segment).
fn heads_after(code: &str, prefix: &str) -> Vec<String> {
    let mut heads = Vec::new();
    for (at, m) in code.match_indices(prefix) {
        let rest = &code[at + m.len()..];
        let Some(group) = rest.strip_prefix('{') else {
            heads.push(word(rest));
            continue;
        };
        let mut depth = 0usize;
        let mut item_start = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    heads.push(word(group[item_start..i].trim_start()));
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    heads.push(word(group[item_start..i].trim_start()));
                    item_start = i + 1;
                }
                _ => {}
            }
        }
    }
    heads.retain(|h| !h.is_empty() && h != "self");
    heads
}

/// A source text without its `mod tests` block.
fn without_tests(source: &str) -> &str {
    source.split("#[cfg(test)]\nmod tests").next().unwrap_or_default()
}

/// The top-level modules a source text names as `crate::<module>` (or in a `crate::{..}` group),
/// outside its `mod tests`.
fn named_modules(source: &str) -> BTreeSet<String> {
    heads_after(without_tests(source), "crate::").into_iter().collect()
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

#[test]
fn the_check_reads_use_groups() {
    let names = named_modules("use crate::{\n    consumer::{engine, output::X},\n    ops, self,\n};\nuse crate::aws;");
    assert_eq!(names, BTreeSet::from(["aws".to_owned(), "consumer".to_owned(), "ops".to_owned()]));
    let siblings = named_siblings("use super::{ledger::{Batch, Ledger}, state};", "consumer");
    assert_eq!(siblings, BTreeSet::from(["ledger".to_owned(), "state".to_owned()]));
}

/// The sibling modules a file inside `parent/` names (`super::<m>` or `crate::<parent>::<m>`),
/// outside its `mod tests`.
fn named_siblings(source: &str, parent: &str) -> BTreeSet<String> {
    let code = without_tests(source);
    let mut names: BTreeSet<String> = heads_after(code, "super::").into_iter().collect();
    names.extend(heads_after(code, &format!("crate::{parent}::")));
    names
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

/// Modules known to be missing from their parent's map, in files other work is changing now:
/// `(file under src/, module)`. To be emptied by naming them in those maps; a module not listed
/// here is always checked.
const NOT_YET_ON_THE_MAP: &[(&str, &str)] = &[];

/// The modules a source file declares with `mod x;` (any visibility, attributes on the line),
/// leaving out `tests`.
fn declared_modules(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|line| {
            let mut rest = line.trim();
            while let Some(attribute) = rest.strip_prefix("#[") {
                rest = attribute.split_once(']').map_or("", |(_, after)| after.trim_start());
            }
            if let Some(public) = rest.strip_prefix("pub") {
                rest = match public.trim_start().strip_prefix('(') {
                    Some(scope) => scope.split_once(')').map_or("", |(_, after)| after),
                    None => public,
                }
                .trim_start();
            }
            let name = word(rest.strip_prefix("mod ")?.trim_start());
            let after = rest.strip_prefix("mod ")?.trim_start()[name.len()..].trim_start();
            (after.starts_with(';') && !name.is_empty() && name != "tests").then_some(name)
        })
        .collect()
}

/// Whether the file's `//!` doc names `module` as code: a word of a `` `...` `` span.
fn map_names(source: &str, module: &str) -> bool {
    let doc: String = source.lines().filter_map(|l| l.trim_start().strip_prefix("//!")).collect::<Vec<_>>().join("\n");
    doc.split('`')
        .skip(1)
        .step_by(2)
        .any(|code| code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).any(|w| w == module))
}

/// `parent: module` for each module its parent's map leaves out, not counting `allowed`.
fn missing_from_maps(files: &[(String, String)], allowed: &[(&str, &str)]) -> Vec<String> {
    let mut missing = Vec::new();
    for (path, source) in files {
        for module in declared_modules(source) {
            if !map_names(source, &module) && !allowed.contains(&(path.as_str(), module.as_str())) {
                missing.push(format!("{path}: `mod {module};` is not named in its //! doc"));
            }
        }
    }
    missing
}

/// Every source file of the crate: its path under `src/` (with `/`) and its text.
fn source_files() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    sources(&src, &mut paths);
    paths
        .iter()
        .map(|p| {
            let name = p.strip_prefix(&src).unwrap_or(p).to_string_lossy().replace('\\', "/");
            (name, std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

#[test]
fn every_module_is_named_on_its_parents_map() {
    let files = source_files();
    assert!(files.len() > 50, "the check reads no sources");
    let missing = missing_from_maps(&files, NOT_YET_ON_THE_MAP);
    assert!(missing.is_empty(), "module maps gone stale:\n{}", missing.join("\n"));
    for (path, module) in NOT_YET_ON_THE_MAP {
        let source = files.iter().find(|(p, _)| p == path).map(|(_, s)| s.as_str()).unwrap_or_default();
        assert!(
            declared_modules(source).contains(&module.to_string()) && !map_names(source, module),
            "{path}: `{module}` is on NOT_YET_ON_THE_MAP but is named (or gone): take it off the list"
        );
    }
}

#[test]
fn the_map_check_sees_a_missing_module() {
    let parent = "//! The parts: `reader` and [`keeper::Keeper`].\n\npub mod reader;\n#[cfg(test)] pub(crate) mod keeper;\nmod watchdog ;\n#[cfg(test)]\nmod tests;\nmod inline { }\n";
    assert_eq!(declared_modules(parent), ["reader", "keeper", "watchdog"]);
    let files = vec![("consumer/mod.rs".to_owned(), parent.to_owned())];
    assert_eq!(missing_from_maps(&files, &[]), ["consumer/mod.rs: `mod watchdog;` is not named in its //! doc"]);
    assert!(missing_from_maps(&files, &[("consumer/mod.rs", "watchdog")]).is_empty());
    assert!(!map_names("//! reads the watchdog's answer\nmod watchdog;", "watchdog"), "only code spans count");
}

/// Where a source text (outside its `mod tests`) starts a task with `tokio::spawn`, which drops the
/// caller's span, or names a component on a log call, which the span carries once (see
/// `runtime`): `file:line: what`, in line order, for every file but `runtime.rs` and the FFI layer,
/// which make the spans (and this one).
fn unrouted_events(path: &str, source: &str) -> Vec<String> {
    if ["runtime.rs", "layers.rs"].contains(&path) || path.starts_with("ffi/") {
        return Vec::new();
    }
    let macros = ["trace!(", "debug!(", "info!(", "warn!(", "error!("];
    let code = without_tests(source);
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        if line.contains("tokio::spawn(") {
            found.push(format!("{path}:{}: tokio::spawn (use crate::runtime::spawn, which keeps the span)", n + 1));
        }
    }
    for start in macros.iter().flat_map(|m| code.match_indices(m).map(|(i, m)| i + m.len())) {
        let head = code[start..].trim_start();
        if head.starts_with("component,") || head.starts_with("component =") {
            let line = code[..start].lines().count();
            found.push(format!("{path}:{line}: a log call names its component (the span carries it)"));
        }
    }
    found.sort_by_key(|f| f.split(':').nth(1).and_then(|n| n.parse::<usize>().ok()));
    found
}

#[test]
fn every_engine_event_reaches_its_component_through_the_span() {
    let found: Vec<String> = source_files().iter().flat_map(|(name, text)| unrouted_events(name, text)).collect();
    assert!(found.is_empty(), "events that may miss their processor's log:\n{}", found.join("\n"));
}

#[test]
fn the_span_check_sees_a_spawn_and_a_named_component() {
    let source = "fn a() {\n    tokio::spawn(run());\n    warn!(\n        component = self.id, \"x\");\n    info!(component, \"y\");\n    error!(\"z\");\n}\n#[cfg(test)]\nmod tests { fn t() { tokio::spawn(x()); } }\n";
    assert_eq!(
        unrouted_events("consumer/reader.rs", source),
        [
            "consumer/reader.rs:2: tokio::spawn (use crate::runtime::spawn, which keeps the span)",
            "consumer/reader.rs:3: a log call names its component (the span carries it)",
            "consumer/reader.rs:5: a log call names its component (the span carries it)",
        ]
    );
    assert!(unrouted_events("ffi/exports.rs", source).is_empty(), "the FFI layer makes the spans");
}
