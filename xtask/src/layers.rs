//! `cargo xtask test layers`: the import rules of docs/architecture.md, checked. Inside
//! each crate a file takes names (`use crate::…`, `use super::…`, a `crate::…` path in the
//! code, or the crate's own name where its root declares one: `extern crate self as name;`)
//! only from files of its own layer or below, and no files take names from each other
//! in a circle, a module's parts taking names from the module itself aside (a child's
//! `super::Type`). Declaring a module (`mod x;`) is not an import; test modules
//! (`#[cfg(test)] mod …`) are left out, as are comments and strings. A crate's files are
//! those its root declares, followed as rustc follows them (`#[path]` too), so the three
//! crates that read the workload folders are three crates here as well.

use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// One crate's rules: its source folder, its root file, its own cfg and its layers, top
/// first. A layer lists paths under `src/` (a folder ends in `/`); a file no layer names is
/// in `rest`.
pub struct Crate {
    pub src: &'static str,
    /// The crate's root, under `src` (`lib.rs`, `main.rs`, `specs.rs`).
    pub root: &'static str,
    pub layers: &'static [(u8, &'static [&'static str])],
    pub rest: u8,
    /// The cfg its build script sets (`hotlab_crate = "specs"`): a module declared under
    /// another value of that key is another crate's.
    pub cfg: Option<(&'static str, &'static str)>,
}

impl Crate {
    const fn new(src: &'static str) -> Self {
        Crate { src, root: "lib.rs", layers: &[], rest: 0, cfg: None }
    }

    /// A crate rooted beside the workload folders, reading its part of each.
    const fn reading_folders(root: &'static str, part: &'static str) -> Self {
        Crate { root, cfg: Some(("hotlab_crate", part)), ..Crate::new("workloads/src") }
    }
}

/// The rules of docs/architecture.md ("Inside each crate").
pub const CRATES: &[Crate] = &[
    Crate::new("core/src"),
    Crate::reading_folders("specs.rs", "specs"),
    Crate::new("spec/src"),
    Crate::new("env/src"),
    Crate::new("report/src"),
    Crate::new("protocol/src"),
    Crate {
        layers: &[
            (5, &["gpu_check/"]),
            (4, &["models/"]),
            (2, &["cuda/"]),
            (1, &["exec/"]),
            (0, &["kernels.rs", "profiler.rs", "system.rs"]),
        ],
        rest: 3,
        ..Crate::new("train/src")
    },
    Crate::reading_folders("lib.rs", "workloads"),
    Crate::reading_folders("views.rs", "views"),
    Crate {
        layers: &[
            (4, &["lib.rs", "server.rs", "api.rs", "audit_api.rs", "sweep_api.rs", "worker_api.rs"]),
            (3, &["error.rs", "extract.rs", "state.rs", "guard.rs"]),
            (1, &["wire/"]),
        ],
        rest: 2,
        ..Crate::new("lab/src")
    },
    Crate { root: "main.rs", layers: &[(2, &["main.rs"]), (1, &["commands/"])], ..Crate::new("cli/src") },
    Crate { root: "main.rs", ..Crate::new("web/src") },
    Crate::new("wgpu-env/src"),
];

/// A file of a crate: where it is, its module path, its layer.
struct File {
    path: String,
    module: Vec<String>,
    layer: u8,
}

/// An import of one file by another, and the names it takes.
#[derive(Debug, Default)]
struct Edge {
    names: BTreeSet<String>,
}

/// What the check found in one crate.
#[derive(Debug, Default, PartialEq)]
pub struct Findings {
    pub files: usize,
    pub imports: usize,
    /// "a -> b: names (layer x below layer y)".
    pub upward: Vec<String>,
    /// Each circle: its files, then "a -> b: names" for each import inside it.
    pub circles: Vec<Vec<String>>,
}

/// Checks every crate of the repository at `root`; an error lists each upward import and
/// each circle.
pub fn check(root: &Path) -> Result<()> {
    let mut problems = Vec::new();
    for c in CRATES {
        let f = check_crate(root, c)?;
        let name = format!("{}/{}", c.src, c.root);
        eprintln!(
            "    {:<22} {:>4} files {:>5} imports {:>3} upward {:>3} circles",
            name,
            f.files,
            f.imports,
            f.upward.len(),
            f.circles.len()
        );
        problems.extend(f.upward.iter().map(|u| format!("upward import in {}: {u}", c.src)));
        for circle in &f.circles {
            problems.push(format!("circle in {}:\n        {}", c.src, circle.join("\n        ")));
        }
    }
    if !problems.is_empty() {
        bail!("{} layering problem(s):\n    {}", problems.len(), problems.join("\n    "));
    }
    Ok(())
}

/// The imports of one crate, checked against its layers and for circles.
pub fn check_crate(root: &Path, c: &Crate) -> Result<Findings> {
    let files = crate_files(root, c)?;
    let index: HashMap<&[String], usize> = files.iter().enumerate().map(|(i, f)| (f.module.as_slice(), i)).collect();
    let codes = files
        .iter()
        .map(|f| {
            std::fs::read_to_string(root.join(&f.path))
                .map(|t| code_of(&t))
                .with_context(|| format!("reading {}", f.path))
        })
        .collect::<Result<Vec<String>>>()?;
    // The root's `pub use a::b;` of a module: `crate::b::…` is `crate::a::b::…`.
    let aliases: HashMap<String, Vec<String>> = files
        .iter()
        .zip(&codes)
        .filter(|(f, _)| f.module.is_empty())
        .flat_map(|(_, code)| public_uses(code))
        .filter(|p| index.contains_key(p.as_slice()))
        .filter_map(|p| Some((p.last()?.clone(), p)))
        .collect();
    // A module's `pub use part::*;` of a module of its own: `m::x` is `m::part::x`.
    let globs: HashMap<&[String], Vec<String>> = files
        .iter()
        .zip(&codes)
        .flat_map(|(f, code)| glob_uses(code).into_iter().map(move |g| (f, g)))
        .filter_map(|(f, g)| {
            let target = absolute(&f.module, &g, |m| index.contains_key(m))?;
            index.contains_key(target.as_slice()).then_some((f.module.as_slice(), target))
        })
        .collect();
    // The crate's own name, where its root gives it one (a folder's file beside the crate's
    // root names the crate so): `name::…` is `crate::…`.
    let own = files.iter().zip(&codes).find(|(f, _)| f.module.is_empty()).and_then(|(_, code)| self_name(code));
    let mut edges: BTreeMap<(usize, usize), Edge> = BTreeMap::new();
    for (i, f) in files.iter().enumerate() {
        for path in imports(&codes[i], own.as_deref()) {
            let Some(mut abs) = absolute(&f.module, &path, |m| index.contains_key(m)) else { continue };
            if let Some(target) = abs.first().and_then(|a| aliases.get(a)).filter(|_| !index.contains_key(&abs[..1])) {
                abs.splice(..1, target.iter().cloned());
            }
            through_globs(&mut abs, &globs, |m| index.contains_key(m));
            // The longest prefix that is a file: the file that defines (or re-exports) the name.
            let Some((k, &j)) = (0..=abs.len()).rev().find_map(|k| index.get(&abs[..k]).map(|j| (k, j))) else {
                continue;
            };
            if j != i {
                let name = abs.get(k..).map_or(String::new(), |rest| rest.join("::"));
                let name = if name.is_empty() { "*".to_string() } else { name };
                edges.entry((i, j)).or_default().names.insert(name);
            }
        }
    }
    let show = |a: usize, b: usize, e: &Edge| {
        format!("{} -> {}: {}", files[a].path, files[b].path, e.names.iter().cloned().collect::<Vec<_>>().join(", "))
    };
    let upward = edges
        .iter()
        .filter(|((a, b), _)| files[*a].layer < files[*b].layer)
        .map(|(&(a, b), e)| format!("{} (layer {} below layer {})", show(a, b, e), files[a].layer, files[b].layer))
        .collect();
    // A module's descendants may take names from it (`super::Type`, `crate::f` from the
    // root) while it declares and re-exports them: that is how a module's parts share its
    // types, not a circle. Every other pair of files that import each other is one.
    let ancestor = |a: usize, b: usize| files[a].module.starts_with(&files[b].module) && a != b;
    let counted = || edges.keys().copied().filter(|&(a, b)| !ancestor(a, b));
    let circles = components(files.len(), counted())
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let mut lines: Vec<String> = c.iter().map(|&i| files[i].path.clone()).collect();
            let inside = |&(a, b): &(usize, usize)| c.contains(&a) && c.contains(&b) && !ancestor(a, b);
            lines.extend(edges.iter().filter(|(k, _)| inside(k)).map(|(&(a, b), e)| show(a, b, e)));
            lines
        })
        .collect();
    Ok(Findings { files: files.len(), imports: edges.len(), upward, circles })
}

/// The crate's files with their module paths and layers: its root, then each module
/// declared (`mod x;`), found as rustc finds it: `x.rs` or `x/mod.rs` beside a root, a
/// `mod.rs` or a file loaded by `#[path]`, else in the declaring file's own folder; a
/// `#[path = "…"]` beside the declaring file. Test modules and those under another value
/// of the crate's cfg are left out.
fn crate_files(root: &Path, c: &Crate) -> Result<Vec<File>> {
    let src = root.join(c.src);
    let mut files = Vec::new();
    let mut todo = vec![(c.root.to_string(), Vec::<String>::new(), true)];
    while let Some((rel, module, owns_folder)) = todo.pop() {
        let text = std::fs::read_to_string(src.join(&rel)).with_context(|| format!("reading {}/{rel}", c.src))?;
        let here = rel.rsplit_once('/').map_or("", |(dir, _)| dir).to_string();
        let folder = if owns_folder { here.clone() } else { rel.trim_end_matches(".rs").to_string() };
        let join = |dir: &str, name: &str| if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") };
        for d in declared_modules(&text, c.cfg) {
            let child: Vec<String> = module.iter().cloned().chain([d.name.clone()]).collect();
            let (path, owns) = match d.path {
                Some(p) => (join(&here, &p), true),
                None if src.join(join(&folder, &format!("{}.rs", d.name))).is_file() => {
                    (join(&folder, &format!("{}.rs", d.name)), false)
                }
                None => (join(&folder, &format!("{}/mod.rs", d.name)), true),
            };
            todo.push((path, child, owns));
        }
        let layer = c
            .layers
            .iter()
            .find(|(_, paths)| paths.iter().any(|l| if l.ends_with('/') { rel.starts_with(l) } else { rel == *l }))
            .map_or(c.rest, |(n, _)| *n);
        files.push(File { path: format!("{}/{rel}", c.src), module, layer });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// A module a file declares out of line (`mod x;`), and its `#[path]` if it has one.
struct Declared {
    name: String,
    path: Option<String>,
}

/// The out-of-line modules `text` declares, read line by line as rustfmt lays them out
/// (each attribute on its own line above the item); those under `#[cfg(test)]` or under
/// another value of `cfg`'s key are left out.
fn declared_modules(text: &str, cfg: Option<(&str, &str)>) -> Vec<Declared> {
    let code = code_of(text);
    let raw: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in code.lines().enumerate() {
        let item = line.trim();
        let item = item.strip_prefix("pub(crate) ").or_else(|| item.strip_prefix("pub ")).unwrap_or(item);
        let Some(name) = item.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) else { continue };
        let attributes = raw[..i].iter().rev().map(|l| l.trim()).take_while(|l| l.starts_with("#["));
        let (mut path, mut kept) = (None, true);
        for a in attributes {
            let inner = a.trim_start_matches("#[").trim_end_matches(']');
            if inner == "cfg(test)" {
                kept = false;
            } else if let Some(p) = inner.strip_prefix("path = ") {
                path = Some(p.trim_matches('"').to_string());
            } else if let (Some(ours), Some(inner)) = (cfg, inner.strip_prefix("cfg(")) {
                kept &= holds(inner.trim_end_matches(')'), ours) != Some(false);
            } else if let (Some(ours), Some(inner)) = (cfg, inner.strip_prefix("cfg_attr(")) {
                // `cfg_attr(KEY = "V", path = "X")`: the path where the crate's cfg is V.
                let (predicate, attr) = inner.trim_end_matches(')').split_once(',').unwrap_or_default();
                if let (Some(true), Some(p)) = (holds(predicate, ours), attr.trim().strip_prefix("path = ")) {
                    path = Some(p.trim_matches('"').to_string());
                }
            }
        }
        if kept {
            out.push(Declared { name: name.trim().to_string(), path });
        }
    }
    out
}

/// Whether `KEY = "V"` holds for a crate whose cfg is `ours`; None for another key.
fn holds(predicate: &str, (key, value): (&str, &str)) -> Option<bool> {
    let (k, v) = predicate.split_once('=')?;
    (k.trim() == key).then(|| v.trim().trim_matches('"') == value)
}

/// `abs` followed through the `pub use part::*;` of the modules on its way: where a
/// segment is not a module of its parent, and the parent re-exports one module's names,
/// the segment is that module's.
fn through_globs(
    abs: &mut Vec<String>,
    globs: &HashMap<&[String], Vec<String>>,
    is_module: impl Fn(&[String]) -> bool,
) {
    for _ in 0..8 {
        let Some(k) = (0..=abs.len()).rev().find(|&k| is_module(&abs[..k])) else { return };
        if k == abs.len() {
            return;
        }
        let Some(target) = globs.get(&abs[..k]) else { return };
        abs.splice(..k, target.iter().cloned());
    }
}

/// `path` (as written in `module`) from the crate's root: `crate::`, `super::` and `self::`
/// resolved, and a path that starts with one of the module's children taken as relative.
/// None for another crate's path.
fn absolute(module: &[String], path: &[String], is_module: impl Fn(&[String]) -> bool) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut at: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "self" | "super" => module.to_vec(),
        _ => {
            let child: Vec<String> = module.iter().chain(std::iter::once(first)).cloned().collect();
            let top = vec![first.clone()];
            // A child of this module, or (in the crate's root) of the root.
            return if is_module(&child) {
                Some(module.iter().chain(path).cloned().collect())
            } else if module.is_empty() && is_module(&top) {
                Some(path.to_vec())
            } else {
                None
            };
        }
    };
    let mut rest = path.iter().skip(usize::from(first == "crate")).peekable();
    while let Some(seg) = rest.peek() {
        match seg.as_str() {
            "super" => {
                at.pop()?;
            }
            "self" => {}
            _ => break,
        }
        rest.next();
    }
    at.extend(rest.cloned());
    Some(at)
}

/// The source with comments, string and char literals blanked (newlines kept) and each
/// `#[cfg(test)]` module cut out.
fn code_of(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, s: &[u8]| out.extend(s.iter().map(|&c| if c == b'\n' { '\n' } else { ' ' }));
    while i < b.len() {
        let rest = &b[i..];
        let end = if rest.starts_with(b"//") {
            i + rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len())
        } else if rest.starts_with(b"/*") {
            // Block comments nest.
            let (mut depth, mut j) = (0usize, i);
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            j
        } else if let Some(hashes) = raw_string_start(rest) {
            let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            let open = 2 + hashes + usize::from(rest[0] == b'b');
            i + open
                + rest[open..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(rest.len() - open, |p| p + close.len())
        } else if rest[0] == b'"' || rest.starts_with(b"b\"") {
            let mut j = i + 1 + usize::from(rest[0] == b'b');
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            j + 1
        } else if rest[0] == b'\'' && is_char_literal(rest) {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'\'' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            j + 1
        } else {
            out.push(text[i..].chars().next().unwrap_or(' '));
            i += text[i..].chars().next().map_or(1, char::len_utf8);
            continue;
        };
        let end = end.min(b.len());
        blank(&mut out, &b[i..end]);
        i = end;
    }
    cut_test_modules(&out)
}

/// `r"`, `r#"`, `br"`…: the number of `#`s of a raw string starting here.
fn raw_string_start(s: &[u8]) -> Option<usize> {
    let s = s.strip_prefix(b"b").unwrap_or(s);
    let s = s.strip_prefix(b"r")?;
    let hashes = s.iter().take_while(|&&c| c == b'#').count();
    (s.get(hashes) == Some(&b'"')).then_some(hashes)
}

/// `'x'`, `'\n'`, `'\u{1F600}'` (not a lifetime `'a`).
fn is_char_literal(s: &[u8]) -> bool {
    match s.get(1) {
        Some(b'\\') => true,
        Some(_) => {
            let width = std::str::from_utf8(&s[1..]).ok().and_then(|t| t.chars().next()).map_or(1, char::len_utf8);
            s.get(1 + width) == Some(&b'\'')
        }
        None => false,
    }
}

fn cut_test_modules(code: &str) -> String {
    let mut out = code.to_string();
    let mut from = 0;
    while let Some(at) = out[from..].find("#[cfg(test)]").map(|p| p + from) {
        let mut after = at + "#[cfg(test)]".len();
        // Other attributes may stand between it and the module.
        while out[after..].trim_start().starts_with("#[") {
            let skip = out[after..].find(']').map_or(out.len() - after, |p| p + 1);
            after += skip;
        }
        let next = out[after..].trim_start();
        let opens = next.find(['{', ';']).is_some_and(|p| next.as_bytes()[p] == b'{');
        if !(next.starts_with("mod ") || next.starts_with("pub mod ")) || !opens {
            from = after;
            continue;
        }
        let Some(open) = out[after..].find('{').map(|p| p + after) else { break };
        let mut depth = 0;
        let mut end = out.len();
        for (k, c) in out[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        let blanked: String = out[at..end].chars().map(|c| if c == '\n' { '\n' } else { ' ' }).collect();
        out.replace_range(at..end, &blanked);
        from = end;
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every path the code imports: each `use` tree's leaves, and each `crate::…`, `super::…`
/// and `self::…` path written in the code.
fn imports(code: &str, own: Option<&str>) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut rest = code.to_string();
    // The `use` items, then blanked so that their paths are not read twice.
    let mut from = 0;
    while let Some(at) = find_word(&rest[from..], "use").map(|p| p + from) {
        let Some(end) = rest[at..].find(';').map(|p| p + at) else { break };
        let tree: String = rest[at + 3..end].split_whitespace().collect::<Vec<_>>().join(" ");
        expand(&[], &tree, &mut paths);
        let blanked = " ".repeat(end - at);
        rest.replace_range(at..end, &blanked);
        from = end;
    }
    let own_start = own.map(|name| format!("{name}::"));
    for start in ["crate::", "super::", "self::"].into_iter().chain(own_start.as_deref()) {
        let mut from = 0;
        while let Some(at) = find_word(&rest[from..], start.trim_end_matches("::")).map(|p| p + from) {
            from = at + 1;
            if !rest[at..].starts_with(start) {
                continue;
            }
            let len = rest[at..].find(|c: char| !(is_ident(c) || c == ':')).unwrap_or(rest.len() - at);
            let path: Vec<String> =
                rest[at..at + len].split("::").filter(|s| !s.is_empty()).map(String::from).collect();
            paths.push(path);
        }
    }
    for path in &mut paths {
        if own.is_some_and(|name| path.first().is_some_and(|first| first == name)) {
            path[0] = "crate".to_string();
        }
    }
    paths
}

/// The name a crate's root gives the crate itself (`extern crate self as name;`).
fn self_name(code: &str) -> Option<String> {
    let at = code.find("extern crate self as ")? + "extern crate self as ".len();
    let name: String = code[at..].chars().take_while(|&c| is_ident(c)).collect();
    (!name.is_empty()).then_some(name)
}

/// The leaves of the `pub use` items of a crate's root, from the root.
fn public_uses(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = find_word(&code[from..], "pub").map(|p| p + from) {
        from = at + 3;
        let Some(tree) = code[from..].trim_start().strip_prefix("use ") else { continue };
        let Some(end) = tree.find(';') else { break };
        let mut leaves = Vec::new();
        expand(&[], &tree[..end].split_whitespace().collect::<Vec<_>>().join(" "), &mut leaves);
        out.extend(leaves.into_iter().filter_map(|p| absolute(&[], &p, |_| true)));
    }
    out
}

/// The modules a file re-exports whole (`pub use part::*;`), as written.
fn glob_uses(code: &str) -> Vec<Vec<String>> {
    code.lines().filter_map(|l| l.trim().strip_prefix("pub use ")?.strip_suffix("::*;").map(segments)).collect()
}

/// Where `word` stands as a whole word in `s`.
fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = s[from..].find(word).map(|p| p + from) {
        let before = s[..at].chars().next_back();
        let after = s[at + word.len()..].chars().next();
        if !before.is_some_and(|c| is_ident(c) || c == ':') && !after.is_some_and(is_ident) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The leaves of a use tree (`a::{b, c::{d as e, *}}`), each with `prefix` before it.
fn expand(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
    for item in split_top(tree) {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        if let Some(open) = item.find('{') {
            let head: Vec<String> = segments(&item[..open]);
            let inner = &item[open + 1..item.rfind('}').unwrap_or(item.len())];
            let joined: Vec<String> = prefix.iter().cloned().chain(head).collect();
            expand(&joined, inner, out);
        } else {
            let item = item.split(" as ").next().unwrap_or(item);
            let mut path: Vec<String> = prefix.iter().cloned().chain(segments(item)).collect();
            if matches!(path.last().map(String::as_str), Some("*" | "self")) {
                path.pop();
            }
            out.push(path);
        }
    }
}

fn segments(s: &str) -> Vec<String> {
    s.split("::").map(str::trim).filter(|p| !p.is_empty()).map(String::from).collect()
}

/// `s` split at its commas outside braces.
fn split_top(s: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// The strongly connected components of a graph of `n` nodes (Tarjan's algorithm).
fn components(n: usize, edges: impl Iterator<Item = (usize, usize)>) -> Vec<Vec<usize>> {
    let mut next = vec![Vec::new(); n];
    for (a, b) in edges {
        next[a].push(b);
    }
    struct Walk {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        count: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, next: &[Vec<usize>], w: &mut Walk) {
        w.index[v] = Some(w.count);
        w.low[v] = w.count;
        w.count += 1;
        w.stack.push(v);
        w.on_stack[v] = true;
        for &u in &next[v] {
            match w.index[u] {
                None => {
                    visit(u, next, w);
                    w.low[v] = w.low[v].min(w.low[u]);
                }
                Some(i) if w.on_stack[u] => w.low[v] = w.low[v].min(i),
                Some(_) => {}
            }
        }
        if Some(w.low[v]) == w.index[v] {
            let mut c = Vec::new();
            while let Some(u) = w.stack.pop() {
                w.on_stack[u] = false;
                c.push(u);
                if u == v {
                    break;
                }
            }
            c.sort_unstable();
            w.out.push(c);
        }
    }
    let mut w = Walk {
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        count: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if w.index[v].is_none() {
            visit(v, &next, &mut w);
        }
    }
    w.out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile_dir::Dir {
        let dir = tempfile_dir::Dir::new();
        for (path, text) in files {
            let p = dir.0.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    /// A tiny temporary folder (xtask has no dependencies for tests).
    mod tempfile_dir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                use std::sync::atomic::{AtomicUsize, Ordering};
                static N: AtomicUsize = AtomicUsize::new(0);
                let n = N.fetch_add(1, Ordering::Relaxed);
                let p = std::env::temp_dir().join(format!("xtask-layers-{}-{n}", std::process::id()));
                let _ = std::fs::remove_dir_all(&p);
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    const RULES: Crate = Crate { layers: &[(2, &["top/"]), (0, &["low.rs"])], rest: 1, ..Crate::new("k/src") };

    /// A lower layer taking a name from a higher one is refused, naming both files, the
    /// name and the layers; the same import downward passes.
    #[test]
    fn an_upward_import_fails_and_a_downward_one_passes() {
        let down = tree(&[
            ("k/src/lib.rs", "mod top;\nmod low;\nmod mid;\n"),
            ("k/src/top/mod.rs", "use crate::mid::Mid;\nuse crate::{low::{Low, self}};\n"),
            ("k/src/mid.rs", "use super::low::Low;\npub struct Mid;\n"),
            ("k/src/low.rs", "pub struct Low; // crate::top::Top in a comment\nconst S: &str = \"crate::top::Top\";\n"),
        ]);
        let f = check_crate(&down.0, &RULES).unwrap();
        assert_eq!((f.files, f.imports), (4, 3), "{f:?}");
        assert!(f.upward.is_empty() && f.circles.is_empty(), "{f:?}");

        let up = tree(&[
            ("k/src/lib.rs", "mod top;\nmod low;\n"),
            ("k/src/top/mod.rs", "pub struct Top;\n"),
            ("k/src/low.rs", "pub fn f() -> crate::top::Top { crate::top::Top }\n"),
        ]);
        let f = check_crate(&up.0, &RULES).unwrap();
        assert_eq!(f.upward, ["k/src/low.rs -> k/src/top/mod.rs: Top (layer 0 below layer 2)"], "{f:?}");

        // The crate's own name, where its root gives it one, is the crate: the same import
        // written so is upward too, in a `use` and in the code.
        let named = tree(&[
            (
                "k/src/lib.rs",
                "extern crate self as k;
mod top;
mod low;
",
            ),
            (
                "k/src/top/mod.rs",
                "pub struct Top;
pub struct Up;
",
            ),
            (
                "k/src/low.rs",
                "use k::top::Top;
pub fn f() -> k::top::Up { k::top::Up }
",
            ),
        ]);
        let f = check_crate(&named.0, &RULES).unwrap();
        assert_eq!(f.upward, ["k/src/low.rs -> k/src/top/mod.rs: Top, Up (layer 0 below layer 2)"], "{f:?}");
    }

    /// Two files that take names from each other are a circle, named with each import in it;
    /// a test module's import and a module declaration are not imports.
    #[test]
    fn a_circle_is_found_and_test_modules_are_left_out() {
        let dir = tree(&[
            ("k/src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
            ("k/src/a.rs", "use crate::b::B;\npub struct A;\n"),
            ("k/src/b.rs", "pub struct B;\npub fn f(_: super::a::A) {}\n"),
            (
                "k/src/c.rs",
                "pub struct C;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n    fn g() { let s = '}'; }\n}\n",
            ),
        ]);
        let f = check_crate(&dir.0, &RULES).unwrap();
        assert_eq!(
            f.circles,
            [vec!["k/src/a.rs", "k/src/b.rs", "k/src/a.rs -> k/src/b.rs: B", "k/src/b.rs -> k/src/a.rs: A"]],
            "{f:?}"
        );
        assert_eq!(f.imports, 2, "c's test module imports nothing: {f:?}");

        // A module and its parts: the part takes the module's type, the module re-exports
        // the part's; not a circle.
        let dir = tree(&[
            ("k/src/lib.rs", "mod m;\n"),
            ("k/src/m/mod.rs", "mod part;\npub use part::Part;\npub struct M;\n"),
            ("k/src/m/part.rs", "use super::M;\npub struct Part(M);\n"),
        ]);
        let f = check_crate(&dir.0, &RULES).unwrap();
        assert_eq!((f.imports, f.circles.len()), (2, 0), "{f:?}");

        // A module the root names again (`pub use m::part;`) is followed to its file.
        let dir = tree(&[
            ("k/src/lib.rs", "mod m;\npub use m::part;\nmod low;\n"),
            ("k/src/m/mod.rs", "pub mod part;\n"),
            ("k/src/m/part.rs", "use crate::low::f;\npub struct Part;\n"),
            ("k/src/low.rs", "pub fn f() -> crate::part::Part { crate::part::Part }\n"),
        ]);
        let f = check_crate(&dir.0, &RULES).unwrap();
        assert_eq!(f.circles.len(), 1, "low.rs -> m/part.rs through the root's alias: {f:?}");
    }

    /// Two crates rooted beside one folder, each reading its part of it as the folder's
    /// `mod.rs` says (`#[cfg_attr(hotlab_crate = …, path = …)]`, a module by `path` owning
    /// the folder): each crate has its own files, and a name re-exported whole (`pub use
    /// part::*;`) is followed to the file that holds it.
    #[test]
    fn a_folder_read_by_two_crates_gives_each_its_part() {
        let dir = tree(&[
            ("k/src/a.rs", "#[path = \"list.rs\"]\nmod list;\npub use list::*;\n"),
            ("k/src/b.rs", "#[path = \"list.rs\"]\nmod list;\npub use list::*;\n"),
            ("k/src/list.rs", "/// The folder.\npub mod w;\n"),
            (
                "k/src/w/mod.rs",
                "#[cfg_attr(hotlab_crate = \"a\", path = \"spec.rs\")]\n#[cfg_attr(hotlab_crate = \"b\", path = \"native.rs\")]\npub mod part;\npub use part::*;\n",
            ),
            ("k/src/w/spec.rs", "pub struct S;\n"),
            ("k/src/w/native.rs", "pub mod more;\npub struct N(more::P);\n"),
            ("k/src/w/more.rs", "pub struct P;\npub fn f() -> crate::w::N { crate::w::N(P) }\n"),
        ]);
        // native.rs and mod.rs high, more.rs low: more.rs's `crate::w::N` is upward, and
        // the check must find N in native.rs, not in the mod.rs that re-exports it.
        let layers: &[(u8, &[&str])] = &[(2, &["w/native.rs", "w/mod.rs"]), (0, &["w/more.rs"])];
        let files = |root, part| {
            let c = Crate { root, layers, rest: 1, cfg: Some(("hotlab_crate", part)), ..Crate::new("k/src") };
            let found: Vec<String> = crate_files(&dir.0, &c).unwrap().into_iter().map(|f| f.path).collect();
            (found, check_crate(&dir.0, &c).unwrap())
        };
        let (a, _) = files("a.rs", "a");
        assert_eq!(a, ["k/src/a.rs", "k/src/list.rs", "k/src/w/mod.rs", "k/src/w/spec.rs"]);
        let (b, f) = files("b.rs", "b");
        assert_eq!(b, ["k/src/b.rs", "k/src/list.rs", "k/src/w/mod.rs", "k/src/w/more.rs", "k/src/w/native.rs"]);
        assert_eq!(f.upward, ["k/src/w/more.rs -> k/src/w/native.rs: N (layer 0 below layer 2)"], "{f:?}");
        assert!(f.circles.is_empty(), "a module's part taking its type is no circle: {f:?}");
    }

    #[test]
    fn use_trees_expand_to_their_leaves() {
        let mut out = Vec::new();
        expand(&[], "crate::a::{b, c::{d as e, *}, self}", &mut out);
        let shown: Vec<String> = out.iter().map(|p| p.join("::")).collect();
        assert_eq!(shown, ["crate::a::b", "crate::a::c::d", "crate::a::c", "crate::a"]);
        let m = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let no_child = |_: &[String]| false;
        assert_eq!(absolute(&m(&["x", "y"]), &m(&["super", "super", "z"]), no_child), Some(m(&["z"])));
        assert_eq!(absolute(&m(&["x"]), &m(&["std", "fmt"]), no_child), None, "another crate's");
    }
}
