//! Names read back from JSON (a profile's phases, a run's own counts) kept as `&'static str`,
//! so a phase or a count read from a stored run is the same small `Copy` value as one the
//! code declares.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// Distinct names kept at most: past it, a name reads back as `unknown` (a stored run can
/// only ever name a few dozen; this bounds what a corrupt one can make the process keep).
const MAX_NAMES: usize = 4096;

static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

/// `name` as a `&'static str`: the same one for the same text, made once per process.
pub fn intern(name: &str) -> &'static str {
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&known) = names.get(name) {
        return known;
    }
    if names.len() >= MAX_NAMES {
        return "unknown";
    }
    let kept: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(kept);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_text_is_the_same_name() {
        let a = intern(&String::from("a_name"));
        let b = intern(&String::from("a_name"));
        assert!(std::ptr::eq(a, b));
        assert_eq!(a, "a_name");
    }
}
