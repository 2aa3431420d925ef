//! The layer rule of ARCHITECTURE.md, enforced: every `crate::…` path in `src/` may only point
//! to its own top-level module, its own layer group, or a layer below. An import that points up
//! or sideways fails this test with its file and line — unless it is one of the arrows listed in
//! `tests/architecture-debt.txt`, today's known violations, which may only shrink: an entry that
//! no longer occurs fails the test too, so the list stays true.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers bottom to top: (rank, top-level modules). A module may use its own group and any
/// module of a lower rank.
const LAYERS: &[(u8, &[&str])] = &[
    (0, &["error", "util", "logging"]),
    (1, &["units"]),
    (2, &["spec"]),
    (3, &["result"]),
    (4, &["system"]),
    (5, &["report"]),
    (6, &["workload"]),
    (7, &["study"]),
    (8, &["format"]),
    (9, &["bench"]),
    (9, &["vm"]),
    (10, &["cli"]),
    (11, &["config"]),
    (12, &["doc"]),
    (12, &["testaid"]),
    (13, &["commands"]),
];

/// Layer group of a top-level module: (rank, index of the group in LAYERS).
fn group(module: &str) -> Option<(u8, usize)> {
    LAYERS
        .iter()
        .enumerate()
        .find(|(_, (_, mods))| mods.contains(&module))
        .map(|(i, (rank, _))| (*rank, i))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a source file belongs to (`src/system/cgroup.rs` → `system`); `None`
/// for the crate roots.
fn module_of(rel: &Path) -> Option<String> {
    let first = rel
        .components()
        .nth(1)?
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (!["lib", "main"].contains(&name.as_str())).then_some(name)
}

fn ident_at(text: &str, at: usize) -> &str {
    let rest = &text[at..];
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    &rest[..end]
}

/// Every top-level module a file's text names through `crate::`, with the line it's on;
/// `crate::{a::x, b}` names `a` and `b`.
fn crate_refs(text: &str) -> Vec<(usize, String)> {
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let mut refs = Vec::new();
    let mut from = 0;
    while let Some(pos) = text[from..].find("crate::") {
        let at = from + pos;
        from = at + 7;
        // Skip `$crate::` in macros and comments naming paths in prose.
        if at > 0 && text.as_bytes()[at - 1] == b'$' {
            continue;
        }
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let line = text[line_start..].lines().next().unwrap_or("");
        if line.trim_start().starts_with("//") {
            continue;
        }
        if text[from..].starts_with('{') {
            // A grouped import: the names at brace depth 1.
            let mut depth = 0;
            let mut i = from;
            let mut expect_name = true;
            while i < text.len() {
                let c = text.as_bytes()[i];
                match c {
                    b'{' => {
                        depth += 1;
                        expect_name = depth == 1;
                    }
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    b',' if depth == 1 => expect_name = true,
                    c if expect_name && depth == 1 && (c.is_ascii_alphabetic() || c == b'_') => {
                        refs.push((line_of(i), ident_at(text, i).to_string()));
                        expect_name = false;
                    }
                    _ => {}
                }
                i += 1;
            }
        } else {
            let name = ident_at(text, from);
            if !name.is_empty() {
                refs.push((line_of(at), name.to_string()));
            }
        }
    }
    refs
}

#[test]
fn imports_point_down_the_layers() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    let debt_path = root.join("tests/architecture-debt.txt");
    let debt: BTreeSet<String> = std::fs::read_to_string(&debt_path)
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();

    let mut new = Vec::new();
    let mut seen = BTreeSet::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap();
        let Some(from) = module_of(rel) else { continue };
        let Some((from_rank, from_group)) = group(&from) else {
            new.push(format!(
                "{}: module {:?} has no layer in the rule",
                rel.display(),
                from
            ));
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for (line, to) in crate_refs(&text) {
            let Some((to_rank, to_group)) = group(&to) else {
                continue;
            };
            if to == from || to_group == from_group || to_rank < from_rank {
                continue;
            }
            let arrow = format!("{} -> {}", rel.display(), to);
            if debt.contains(&arrow) {
                seen.insert(arrow);
            } else {
                new.push(format!(
                    "{}:{}: `{}` (layer {}) imports `{}` (layer {}), which isn't below it",
                    rel.display(),
                    line,
                    from,
                    from_rank,
                    to,
                    to_rank
                ));
            }
        }
    }
    let gone: Vec<&String> = debt.difference(&seen).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "layer rule (ARCHITECTURE.md):\n{}{}",
        new.join("\n"),
        if gone.is_empty() {
            String::new()
        } else {
            format!(
                "\nno longer true, remove from {}:\n{}",
                debt_path.display(),
                gone.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        }
    );
}

/// The top-level module graph: which modules each one imports.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let Some(from) = module_of(f.strip_prefix(&root).unwrap()) else {
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        let out = graph.entry(from.clone()).or_default();
        for (_, to) in crate_refs(&text) {
            if to != from && group(&to).is_some() {
                out.insert(to);
            }
        }
    }
    graph
}

/// Modules reachable from `from` (itself included).
fn reachable(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::from([from.to_string()]);
    let mut todo = vec![from.to_string()];
    while let Some(m) = todo.pop() {
        for n in graph.get(&m).into_iter().flatten() {
            if seen.insert(n.clone()) {
                todo.push(n.clone());
            }
        }
    }
    seen
}

/// No import cycle between top-level modules (a strongly connected component of more than one
/// module), not even inside one layer group; the graph's size is printed with `--nocapture`.
#[test]
fn no_import_cycles_between_top_level_modules() {
    let graph = module_graph();
    let reach: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reachable(&graph, m))).collect();
    let mut components: BTreeSet<Vec<String>> = BTreeSet::new();
    for m in graph.keys() {
        let comp: Vec<String> = reach[m]
            .iter()
            .filter(|n| reach.get(n).is_some_and(|r| r.contains(m)))
            .cloned()
            .collect();
        if comp.len() > 1 {
            components.insert(comp);
        }
    }
    println!(
        "{} top-level modules, {} imports between them",
        graph.len(),
        graph.values().map(|v| v.len()).sum::<usize>()
    );
    for c in &components {
        println!("cycle: {}", c.join(" <-> "));
    }
    if components.is_empty() {
        println!("no import cycles between top-level modules");
    }
    assert!(components.is_empty(), "import cycles: {:?}", components);
}

#[test]
fn crate_refs_reads_plain_and_grouped_paths() {
    let text =
        "use crate::units::fmt;\nuse crate::{\n    spec::JobSpec,\n    result::{a, b},\n};\n\
                // crate::vm in a comment\nlet x = crate::report::f();\nmacro $crate::error\n";
    let refs = crate_refs(text);
    assert_eq!(
        refs,
        vec![
            (1, "units".to_string()),
            (3, "spec".to_string()),
            (4, "result".to_string()),
            (7, "report".to_string()),
        ]
    );
}
