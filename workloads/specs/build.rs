//! The registry's list as a macro: `workload_list!`, made from `workloads/src/registry.rs`
//! (a line `pub mod name;` with its doc lines above it), so that a new workload is its
//! folder and one line there. Also this crate's part of each folder (`hotlab_crate`).

use std::fmt::Write;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rustc-check-cfg=cfg(hotlab_crate, values(\"specs\", \"workloads\", \"views\"))");
    println!("cargo::rustc-cfg=hotlab_crate=\"specs\"");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let folders = manifest.join("../src");
    let list = folders.join("registry.rs");
    println!("cargo::rerun-if-changed={}", list.display());
    let text = std::fs::read_to_string(&list).unwrap_or_else(|e| panic!("reading {}: {e}", list.display()));
    let workloads = parse(&text);
    check_folders(&folders, &workloads);
    let mut lines = String::new();
    for w in &workloads {
        for doc in &w.docs {
            writeln!(lines, "            #[doc = {doc:?}]").unwrap();
        }
        let variant = camel(&w.name);
        writeln!(lines, "            {variant} = {:?} in {} ({variant}Spec),", w.name, w.name).unwrap();
    }
    let out = format!(
        "/// Calls `CALLBACK! {{ … }}` with the workloads of `workloads/src/registry.rs`, one per\n\
         /// line: its doc, then `Variant = \"name\" in folder (SettingsType)`. Each crate that\n\
         /// knows the workloads invokes it with its own macro: `hotlab_specs::workload_list!(registry);`.\n\
         #[macro_export]\n\
         macro_rules! workload_list {{\n    ($callback:ident) => {{\n        $callback! {{\n{lines}        }}\n    }};\n}}\n"
    );
    let dest = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("workload_list.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("writing {}: {e}", dest.display()));
}

/// A line of the list: its module (the folder's name) and its doc lines.
struct Listed {
    name: String,
    docs: Vec<String>,
}

fn parse(text: &str) -> Vec<Listed> {
    let mut found = Vec::new();
    let mut docs = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(doc) = line.strip_prefix("///") {
            docs.push(doc.to_string());
        } else if let Some(name) = line.strip_prefix("pub mod ").and_then(|l| l.strip_suffix(';')) {
            found.push(Listed { name: name.trim().to_string(), docs: std::mem::take(&mut docs) });
        } else if !line.starts_with("//!") && !line.is_empty() {
            panic!("workloads/src/registry.rs: a line that is neither a doc nor `pub mod name;`: {line}");
        }
    }
    assert!(!found.is_empty(), "workloads/src/registry.rs lists no workload");
    found
}

/// Each listed folder exists (that each folder is listed is a test of this crate's: a
/// build script watching every folder would rebuild the registry at each edit).
fn check_folders(src: &Path, listed: &[Listed]) {
    for w in listed {
        let folder = src.join(&w.name);
        if !folder.join("mod.rs").is_file() {
            panic!("workloads/src/registry.rs lists `{}`, but {} has no mod.rs", w.name, folder.display());
        }
    }
}

/// `envpool` → `Envpool`: the variant (and, with `Spec`, the settings type) of a folder.
fn camel(name: &str) -> String {
    let upper = |part: &str| {
        let mut c = part.chars();
        c.next().map(|first| first.to_uppercase().chain(c).collect::<String>())
    };
    name.split('_').filter_map(upper).collect()
}
