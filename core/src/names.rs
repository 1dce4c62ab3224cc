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

/// A `Copy` name type: `$name(&'static str)`, written and read as its text (JSON keys and
/// values), with `new` (a constant), `named` (text read back, kept by [`intern`]) and `name`.
macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(&'static str);

        impl $name {
            /// The one named `name` (snake_case).
            pub const fn new(name: &'static str) -> $name {
                $name(name)
            }

            /// The one `name` names, as read back: the same value as the constant of that
            /// name, or the name kept for good (a run recorded by another build still opens).
            pub fn named(name: &str) -> $name {
                $name($crate::names::intern(name))
            }

            pub fn name(self) -> &'static str {
                self.0
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                Ok($name::named(&std::borrow::Cow::<str>::deserialize(d)?))
            }
        }
    };
}
pub(crate) use name_type;

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
