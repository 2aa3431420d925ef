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
    (10, &["db"]),
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
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with('#')
                && !l.starts_with("cycle ")
                && !l.starts_with("long ")
        })
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

/// The import cycles of a graph (node → the nodes it imports): its strongly connected
/// components of more than one node, each sorted.
fn cycles_of<N: Ord + Clone>(graph: &BTreeMap<N, BTreeSet<N>>) -> BTreeSet<Vec<N>> {
    let reachable = |from: &N| {
        let mut seen = BTreeSet::from([from.clone()]);
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for n in graph.get(&m).into_iter().flatten() {
                if seen.insert(n.clone()) {
                    todo.push(n.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&N, BTreeSet<N>> = graph.keys().map(|m| (m, reachable(m))).collect();
    graph
        .keys()
        .map(|m| {
            reach[m]
                .iter()
                .filter(|n| reach.get(n).is_some_and(|r| r.contains(m)))
                .cloned()
                .collect::<Vec<N>>()
        })
        .filter(|c| c.len() > 1)
        .collect()
}

/// No import cycle between top-level modules (a strongly connected component of more than one
/// module), not even inside one layer group; the graph's size is printed with `--nocapture`.
#[test]
fn no_import_cycles_between_top_level_modules() {
    let graph = module_graph();
    let components = cycles_of(&graph);
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

/// A source file's module path (`src/bench/storage/mod.rs` → `bench::storage`), or `None` for
/// `main.rs`, a crate of its own; `#[path]` files are placed by [`path_modules`].
fn module_path(rel: &Path) -> Option<Vec<String>> {
    let mut segs: Vec<String> = rel
        .components()
        .skip(1)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = segs.pop()?;
    let stem = last.strip_suffix(".rs")?;
    match (segs.is_empty(), stem) {
        (true, "main") => return None,
        (true, "lib") | (_, "mod") => {}
        _ => segs.push(stem.to_string()),
    }
    Some(segs)
}

/// Files loaded with `#[path = "x.rs"] mod name;`: their module is the declaring file's plus
/// `name` (`search_tests.rs` is `…::search::tests`).
fn path_modules(files: &[(PathBuf, Vec<String>, String)]) -> BTreeMap<PathBuf, Vec<String>> {
    let mut out = BTreeMap::new();
    for (rel, module, text) in files {
        let mut lines = text.lines();
        while let Some(l) = lines.next() {
            let Some(p) = l.trim().strip_prefix("#[path = \"") else {
                continue;
            };
            let file = p.trim_end_matches("\"]");
            let Some(name) = lines
                .next()
                .and_then(|n| n.trim().strip_prefix("mod "))
                .map(|n| n.trim_end_matches(';').trim())
            else {
                continue;
            };
            let mut m = module.clone();
            m.push(name.to_string());
            out.insert(rel.parent().unwrap().join(file), m);
        }
    }
    out
}

/// A file's text without its comment lines and without test code: an inline
/// `#[cfg(test)] mod … {}` at its end (whose `super::` means the file itself), and the one-line
/// item after any other `#[cfg(test)]` (a test-only `use` or `mod`).
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        let t = l.trim_start();
        if t.starts_with("#[cfg(test)]") {
            let next = lines.peek().map(|n| n.trim()).unwrap_or("");
            if next.starts_with("mod ") && next.ends_with('{') {
                break;
            }
            if next.ends_with(';') {
                lines.next();
                continue;
            }
        }
        if !t.starts_with("//") {
            out.push_str(l);
        }
        out.push('\n');
    }
    out
}

/// The leaf paths of the use tree at `text[at..]` (`a::{b::C, d}` → `a::b::C`, `a::d`), each
/// with `prefix` in front; returns where the tree ends.
fn use_tree(text: &str, mut at: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let b = text.as_bytes();
    let skip_ws = |mut i: usize| {
        while i < b.len() && (b[i] as char).is_whitespace() {
            i += 1;
        }
        i
    };
    let mut path = prefix;
    loop {
        at = skip_ws(at);
        if at < b.len() && b[at] == b'{' {
            at += 1;
            loop {
                at = skip_ws(at);
                if at >= b.len() || b[at] == b'}' {
                    return at + 1;
                }
                at = use_tree(text, at, path.clone(), out);
                at = skip_ws(at);
                if at < b.len() && b[at] == b',' {
                    at += 1;
                }
            }
        }
        let id = ident_at(text, at);
        if id.is_empty() {
            out.push(path);
            return at;
        }
        path.push(id.to_string());
        at += id.len();
        if text[at..].starts_with("::") {
            at += 2;
        } else {
            out.push(path);
            return at;
        }
    }
}

/// The modules a file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`): a path that
/// starts with one of their names leads into it.
fn child_modules(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|l| {
            let t = l.trim();
            let t = t
                .strip_prefix("pub(crate) ")
                .or_else(|| t.strip_prefix("pub(super) "))
                .or_else(|| t.strip_prefix("pub "))
                .unwrap_or(t);
            t.strip_prefix("mod ")?.strip_suffix(';').map(String::from)
        })
        .collect()
}

/// Every `crate::`/`super::`/`self::` path in `code`, and every path that starts with the name
/// of a module the file declares, as absolute module paths of `module`'s crate (leaves of
/// grouped imports each on their own).
fn paths_in(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    let children: Vec<String> = child_modules(code)
        .into_iter()
        .map(|c| format!("{}::", c))
        .collect();
    let mut i = 0;
    while i < b.len() {
        let word_start = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        let after_path = i >= 2 && &b[i - 2..i] == b"::";
        // `$crate::` in a macro, or `pub(in crate::x)`, which says who sees an item, not
        // what a file stands on.
        let dollar = (i >= 1 && b[i - 1] == b'$') || (i >= 7 && &b[i - 7..i] == b"pub(in ");
        let head = ["crate::", "super::", "self::"]
            .into_iter()
            .chain(children.iter().map(String::as_str))
            .find(|h| b[i..].starts_with(h.as_bytes()));
        let (Some(head), true, false, false) = (head, word_start, after_path, dollar) else {
            i += 1;
            continue;
        };
        let mut base: Vec<String> = match head {
            "crate::" => Vec::new(),
            _ => module.to_vec(),
        };
        let mut at = i;
        loop {
            if b[at..].starts_with(b"super::") {
                base.pop();
                at += 7;
            } else if b[at..].starts_with(b"self::") {
                at += 6;
            } else if b[at..].starts_with(b"crate::") {
                at += 7;
            } else {
                break;
            }
        }
        let mut leaves = Vec::new();
        let end = use_tree(code, at, base, &mut leaves);
        out.extend(leaves);
        i = end.max(i + 1);
    }
    out
}

/// The file-level import graph: for each file, the other files its paths lead into (the
/// file of the longest module prefix of each path), with the names taken from each.
fn file_graph() -> BTreeMap<PathBuf, BTreeMap<PathBuf, BTreeSet<String>>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    rust_files(&root.join("src"), &mut paths);
    paths.sort();
    let mut files: Vec<(PathBuf, Vec<String>, String)> = paths
        .iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(&root).unwrap().to_path_buf();
            let m = module_path(&rel)?;
            Some((rel, m, std::fs::read_to_string(p).unwrap()))
        })
        .collect();
    let placed = path_modules(&files);
    for (rel, m, _) in files.iter_mut() {
        if let Some(p) = placed.get(rel) {
            *m = p.clone();
        }
    }
    let by_module: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|(rel, m, _)| (m.clone(), rel.clone()))
        .collect();
    let mut graph = BTreeMap::new();
    for (rel, module, text) in &files {
        let out: &mut BTreeMap<PathBuf, BTreeSet<String>> = graph.entry(rel.clone()).or_default();
        for path in paths_in(&code_of(text), module) {
            let Some(n) = (0..=path.len())
                .rev()
                .find(|n| by_module.contains_key(&path[..*n]))
            else {
                continue;
            };
            let to = &by_module[&path[..n]];
            if to != rel {
                let name = path.get(n).cloned().unwrap_or_else(|| "*".into());
                out.entry(to.clone()).or_default().insert(name);
            }
        }
    }
    graph
}

/// Folders ARCHITECTURE.md allows to be one cycle, each with its reason: the `src/…/` paths
/// of the bullets under its "Folders that are one cycle" heading.
fn allowed_cycle_folders() -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    doc.lines()
        .skip_while(|l| !l.starts_with('#') || !l.contains("Folders that are one cycle"))
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .filter_map(|l| l.trim().strip_prefix("* `"))
        .filter_map(|l| l.split('`').next())
        .filter(|p| p.starts_with("src/") && p.ends_with('/'))
        .map(String::from)
        .collect()
}

/// Known file cycles not yet undone: the folders of the `cycle src/…/` lines of
/// `tests/architecture-debt.txt`, which may only shrink.
fn cycle_debt() -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join("tests/architecture-debt.txt"))
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("cycle "))
        .map(|d| d.trim().to_string())
        .collect()
}

/// No import cycle between files (a strongly connected component of more than one file),
/// except inside a folder ARCHITECTURE.md names with its reason, or one listed as debt (a
/// debt line with no cycle left under it fails too); `--nocapture` prints the graph's size and
/// each cycle with the names that tie it.
#[test]
fn no_import_cycles_between_files() {
    let graph = file_graph();
    let allowed = allowed_cycle_folders();
    let debt = cycle_debt();
    let mut debt_seen = BTreeSet::new();
    let edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = graph
        .iter()
        .map(|(f, tos)| (f.clone(), tos.keys().cloned().collect()))
        .collect();
    let cycles = cycles_of(&edges);
    println!(
        "{} files, {} imports between them",
        graph.len(),
        graph.values().map(|m| m.len()).sum::<usize>()
    );
    let mut bad = Vec::new();
    for c in &cycles {
        let inside = |dir: &String| {
            c.iter()
                .all(|f| f.to_string_lossy().starts_with(dir.as_str()))
        };
        let owed = debt.iter().find(|d| inside(d));
        if let Some(d) = owed {
            debt_seen.insert(d.clone());
        }
        let ok = allowed.iter().any(inside) || owed.is_some();
        let mut text = format!(
            "{}cycle of {} files:",
            if owed.is_some() {
                "known (debt) "
            } else if ok {
                "allowed "
            } else {
                ""
            },
            c.len()
        );
        for from in c {
            for (to, names) in &graph[from] {
                if c.contains(to) {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    text += &format!(
                        "\n  {} -> {}: {}",
                        from.display(),
                        to.display(),
                        names.join(", ")
                    );
                }
            }
        }
        println!("{}", text);
        if !ok {
            bad.push(text);
        }
    }
    let paid: Vec<&String> = debt.iter().filter(|d| !debt_seen.contains(*d)).collect();
    assert!(
        bad.is_empty() && paid.is_empty(),
        "import cycles between files:\n{}{}",
        bad.join("\n"),
        if paid.is_empty() {
            String::new()
        } else {
            format!(
                "\nno cycle left in these folders, remove them from tests/architecture-debt.txt: {:?}",
                paid
            )
        }
    );
}

#[test]
fn paths_in_resolves_super_self_and_groups() {
    let m = vec![
        "bench".to_string(),
        "protection".to_string(),
        "run".to_string(),
    ];
    let code = "use super::early::BelowCount;\nuse crate::{spec::{Group, JobSpec}, units};\n\
                let x = super::super::runner::now();\nuse self::inner::X;\n$crate::error\n\
                mod inner;\nlet y = inner::f(); let z = a::inner::g();\n";
    let got: Vec<String> = paths_in(code, &m).iter().map(|p| p.join("::")).collect();
    assert_eq!(
        got,
        vec![
            "bench::protection::early::BelowCount",
            "spec::Group",
            "spec::JobSpec",
            "units",
            "bench::runner::now",
            "bench::protection::run::inner::X",
            "bench::protection::run::inner::f",
        ]
    );
}

/// The benches that run others through their entry points: (bench, the benches it composes).
/// Everything else benches share lives in `bench/contract/`, in `bench/hashd_sizing.rs` or
/// lower.
const COMPOSES: &[(&str, &[&str])] = &[
    // An adaptive grid (`vrate-intvs=auto`) picks its vrates from iocost-tune's intervals.
    (
        "iocost_qos",
        &["storage", "protection", "iocost_params", "iocost_tune"],
    ),
    ("protection", &["hashd_params", "iocost_params"]),
    // iocost-tune runs on iocost-qos's data: its runs, with protection's studies inside.
    ("iocost_tune", &["iocost_qos", "protection"]),
    // curve's points are io jobs: it reads io's properties for them.
    ("curve", &["io"]),
    // qos-study's iocost profiles need a model: iocost-params measures one when bench.json
    // has none.
    ("qos_study", &["iocost_params"]),
];

/// The bench modules: the `&module::Type` lines of `BENCHES` in `bench/mod.rs`.
fn bench_modules() -> BTreeSet<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("src/bench/mod.rs")).unwrap();
    text.lines()
        .skip_while(|l| !l.contains("static BENCHES"))
        .skip(1)
        .take_while(|l| !l.starts_with("];"))
        .filter_map(|l| {
            l.trim()
                .strip_prefix('&')?
                .split("::")
                .next()
                .map(String::from)
        })
        .collect()
}

/// The bench a file under `src/bench/` belongs to, if any (`src/bench/storage/props.rs` →
/// `storage`, `src/bench/io.rs` → `io`). In `bench/merge/` only `info.rs` is a bench (the
/// hidden `merge-info`); its other files are the contract's and the procedure's.
fn bench_of(file: &Path, benches: &BTreeSet<String>) -> Option<String> {
    let rest = file.strip_prefix("src/bench").ok()?;
    let first = rest.components().next()?.as_os_str().to_string_lossy();
    if first == "merge" && rest.file_name()? != "info.rs" {
        return None;
    }
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    benches.contains(&name).then_some(name)
}

/// A bench imports another only where it runs it (`COMPOSES`); shared helpers don't live in
/// a bench.
#[test]
fn benches_import_only_the_benches_they_compose() {
    let benches = bench_modules();
    assert!(
        benches.contains("storage") && benches.len() > 5,
        "{:?}",
        benches
    );
    let mut bad = Vec::new();
    for (from, tos) in file_graph() {
        let Some(fb) = bench_of(&from, &benches) else {
            continue;
        };
        for (to, names) in tos {
            let Some(tb) = bench_of(&to, &benches) else {
                continue;
            };
            let composes = COMPOSES
                .iter()
                .any(|(b, cs)| *b == fb && cs.contains(&tb.as_str()));
            if tb != fb && !composes {
                bad.push(format!(
                    "{} -> {}: {} (move what both use to bench/ or lower)",
                    from.display(),
                    to.display(),
                    names.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "a bench imports one it doesn't run:\n{}",
        bad.join("\n")
    );
}

/// The parts of `src/bench/`, bottom to top: the contract a bench is written against; the
/// benches and what several share (`hashd_sizing.rs`); the registry (`mod.rs`); the runner
/// and the commands over result files, which reach the benches through the registry. A file
/// imports its own part or the parts below (a bench another only where `COMPOSES` says).
fn bench_part(file: &Path, benches: &BTreeSet<String>) -> Option<(u8, &'static str)> {
    let rest = file.strip_prefix("src/bench").ok()?;
    let first = rest
        .components()
        .next()?
        .as_os_str()
        .to_string_lossy()
        .to_string();
    Some(match first.as_str() {
        "contract" => (0, "contract"),
        // One capability's files at their three ranks.
        "merge" => match rest.file_name()?.to_str()? {
            "src.rs" => (0, "contract"),
            "info.rs" => (1, "benches"),
            _ => (3, "runner and result-file commands"),
        },
        "hashd_sizing.rs" => (1, "benches"),
        _ if bench_of(file, benches).is_some() => (1, "benches"),
        "mod.rs" => (2, "registry"),
        "runner" | "results" => (3, "runner and result-file commands"),
        _ => return None,
    })
}

#[test]
fn bench_parts_import_down() {
    let benches = bench_modules();
    let mut bad = Vec::new();
    for (from, tos) in file_graph() {
        if !from.starts_with("src/bench") {
            continue;
        }
        let Some((fr, fname)) = bench_part(&from, &benches) else {
            bad.push(format!(
                "{}: in none of bench/'s parts (ARCHITECTURE.md, \"Where a new bench goes\")",
                from.display()
            ));
            continue;
        };
        for (to, names) in tos {
            let Some((tr, tname)) = bench_part(&to, &benches) else {
                continue;
            };
            if tr > fr {
                bad.push(format!(
                    "{} ({}) -> {} ({}): {}",
                    from.display(),
                    fname,
                    to.display(),
                    tname,
                    names.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "imports pointing up inside bench/:\n{}",
        bad.join("\n")
    );
}

/// Every source file under `src/`, sorted, as (path relative to the crate, text).
fn src_texts() -> Vec<(PathBuf, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            (f.strip_prefix(&root).unwrap().to_path_buf(), text)
        })
        .collect()
}

/// The file names a comment line cites: words ending in `.md` or `.rs` (a path or a bare name).
fn cited_files(line: &str) -> Vec<String> {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || "_./-*".contains(c)))
        .map(|w| w.trim_end_matches('.'))
        // A glob (`benches-doc/*-measured.md`) names no one file.
        .filter(|w| !w.contains('*'))
        .filter(|w| (w.ends_with(".md") || w.ends_with(".rs")) && w.len() > 3)
        .map(String::from)
        .collect()
}

/// Whether `cited` (from a comment in `from`) names a file of this repository: a path from the
/// crate's root, from `src/`, from the citing file's folder or one above it, or a bare name
/// that some file under `src/`, `tests/` or `benches-doc/` has.
fn cites_a_file(
    root: &std::path::Path,
    from: &std::path::Path,
    cited: &str,
    names: &BTreeSet<String>,
) -> bool {
    if !cited.contains('/') {
        return names.contains(cited);
    }
    let dir = root.join(from).parent().unwrap().to_path_buf();
    [
        root.to_path_buf(),
        root.join("src"),
        dir.clone(),
        dir.parent().unwrap().to_path_buf(),
    ]
    .iter()
    .any(|base| base.join(cited).exists())
}

/// Comments point at what a reader of this repository can open (ARCHITECTURE.md,
/// `benches-doc/`, the source files), never at a spec document that isn't in it or a file that
/// was moved or removed.
#[test]
fn comments_cite_files_in_this_repository() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut names = BTreeSet::new();
    for dir in ["src", "tests", "benches-doc", "scripts"] {
        let mut all = Vec::new();
        any_files(&root.join(dir), &mut all);
        names.extend(
            all.iter()
                .filter_map(|f| Some(f.file_name()?.to_str()?.to_string())),
        );
    }
    for top in std::fs::read_dir(&root).unwrap().flatten() {
        names.insert(top.file_name().to_string_lossy().into_owned());
    }
    let mut bad = Vec::new();
    for (f, text) in src_texts() {
        for (i, l) in text.lines().enumerate() {
            let Some(comment) = l.trim_start().strip_prefix("//") else {
                continue;
            };
            let missing: Vec<String> = cited_files(comment)
                .into_iter()
                .filter(|c| !cites_a_file(&root, &f, c, &names))
                .collect();
            if comment.contains("spec §") || comment.contains("(§") || !missing.is_empty() {
                bad.push(format!("{}:{}: {}", f.display(), i + 1, l.trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "comments citing what is not in this repository:\n{}",
        bad.join("\n")
    );
}

/// Every file under `dir`, recursively.
fn any_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            any_files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Functions take what they need as a few values or a struct of them: clippy's limit on
/// arguments holds everywhere, without an `allow`.
#[test]
fn no_function_is_allowed_too_many_arguments() {
    let bad: Vec<String> = src_texts()
        .into_iter()
        .filter(|(_, text)| text.contains("clippy::too_many_arguments"))
        .map(|(f, _)| f.display().to_string())
        .collect();
    assert!(bad.is_empty(), "too_many_arguments allowed in: {:?}", bad);
}

/// Functions over this many lines don't fit on a screen; split them along their phases.
const MAX_FN_LINES: usize = 100;

/// The functions of `text` (outside its test code) longer than [`MAX_FN_LINES`], as
/// (name, lines): a `fn` line up to the closing brace at its indentation.
fn long_fns(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if l.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let t = l.trim_start();
        let ind = l.len() - t.len();
        let t = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        let Some(rest) = t.strip_prefix("fn ") else {
            i += 1;
            continue;
        };
        if l.trim_end().ends_with(';') {
            i += 1;
            continue;
        }
        let name = ident_at(rest, 0).to_string();
        let close = " ".repeat(ind) + "}";
        let end = (i + 1..lines.len())
            .find(|&k| {
                lines[k].starts_with(&close) && lines[k].len() - lines[k].trim_start().len() == ind
            })
            .unwrap_or(lines.len() - 1);
        if end + 1 - i > MAX_FN_LINES {
            out.push((name, end + 1 - i));
        }
        i = end + 1;
    }
    out
}

/// No function over [`MAX_FN_LINES`] lines but those listed as `long FILE::NAME` in
/// `tests/architecture-debt.txt`, which may only shrink.
#[test]
fn functions_fit_on_a_screen() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let debt: BTreeSet<String> = std::fs::read_to_string(root.join("tests/architecture-debt.txt"))
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("long "))
        .map(String::from)
        .collect();
    let (mut new, mut seen) = (Vec::new(), BTreeSet::new());
    for (rel, text) in src_texts() {
        for (name, n) in long_fns(&text) {
            let key = format!("{}::{}", rel.display(), name);
            if debt.contains(&key) {
                seen.insert(key);
            } else {
                new.push(format!("{} ({} lines)", key, n));
            }
        }
    }
    let gone: Vec<&String> = debt.difference(&seen).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "functions over {} lines: {:?}; no longer long, remove from the debt list: {:?}",
        MAX_FN_LINES,
        new,
        gone
    );
}
