//! A command as a template: the words a shell would split it into, with placeholders that a
//! change (an audit's variant, the report's advice) can set without rewriting it.
//!
//! - `{NAME=DEFAULT}`: a value, DEFAULT unless NAME is set (`--num-envs {envs=8}`);
//! - `{NAME}`: a value that must be set;
//! - `{NAME?TEXT}`: TEXT when the switch NAME is on, nothing when off (the default); a word
//!   that is the switch alone disappears when off and splits into TEXT's words when on
//!   (`{fast?--mode fast}`);
//! - `{{` and `}}`: literal braces.

use std::collections::BTreeMap;

/// One placeholder of a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placeholder {
    pub name: String,
    /// A switch (`{NAME?TEXT}`), rather than a value.
    pub switch: bool,
    /// A value's default, a switch's text.
    pub text: Option<String>,
}

impl Placeholder {
    /// Whether this switch is on in `vars`.
    pub fn is_on(&self, vars: &BTreeMap<String, String>) -> bool {
        vars.get(&self.name).is_some_and(|v| switch_value(v) == Some(true))
    }
}

/// What a switch's value says: on or off (None: neither).
fn switch_value(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "1" | "yes" => Some(true),
        "off" | "false" | "0" | "no" | "" => Some(false),
        _ => None,
    }
}

/// A piece of one word.
#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Text(String),
    Slot(usize),
}

/// A parsed command.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    words: Vec<Vec<Piece>>,
    placeholders: Vec<Placeholder>,
}

impl Template {
    /// Splits `command` as a shell would and finds its placeholders; refused with what is
    /// wrong (unbalanced quotes, an unclosed brace, a bad name, one name used two ways).
    pub fn parse(command: &str) -> Result<Self, String> {
        let words = shlex::split(command).ok_or_else(|| format!("'{command}': a quote is not closed"))?;
        if words.is_empty() {
            return Err("is empty: give the command that trains, e.g. python train.py".into());
        }
        let mut t = Template { words: Vec::new(), placeholders: Vec::new() };
        for word in &words {
            let pieces = t.pieces(word)?;
            t.words.push(pieces);
        }
        Ok(t)
    }

    pub fn placeholders(&self) -> &[Placeholder] {
        &self.placeholders
    }

    fn pieces(&mut self, word: &str) -> Result<Vec<Piece>, String> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut chars = word.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    text.push('}');
                }
                '{' => {
                    let inner: String = chars.by_ref().take_while(|&c| c != '}').collect();
                    if !word.contains('}') {
                        return Err(format!("'{word}': a placeholder's brace is not closed (write {{{{ for a brace)"));
                    }
                    if !text.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    pieces.push(Piece::Slot(self.slot(&inner)?));
                }
                '}' => return Err(format!("'{word}': a lone }} (write }}}} for a brace)")),
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(pieces)
    }

    /// The placeholder `inner` (`NAME=DEFAULT`, `NAME?TEXT`, `NAME`) declares, by index.
    fn slot(&mut self, inner: &str) -> Result<usize, String> {
        let (name, switch, text) = match inner.find(['=', '?']) {
            Some(i) => (&inner[..i], &inner[i..i + 1] == "?", Some(inner[i + 1..].to_string())),
            None => (inner, false, None),
        };
        let name = name.trim();
        let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!(
                "{{{inner}}}: a placeholder is {{NAME=DEFAULT}}, {{NAME}} or {{NAME?TEXT}}, NAME letters, digits and _"
            ));
        }
        let p = Placeholder { name: name.to_string(), switch, text };
        match self.placeholders.iter().position(|q| q.name == p.name) {
            Some(i) if self.placeholders[i] == p => Ok(i),
            Some(_) => Err(format!("{{{inner}}}: '{name}' is declared twice, differently")),
            None => {
                self.placeholders.push(p);
                Ok(self.placeholders.len() - 1)
            }
        }
    }

    /// The words with each placeholder filled from `vars` (else its default); refused
    /// naming a value that is not a placeholder, a switch's value that is not on or off, or
    /// a value that must be set and is not.
    pub fn expand(&self, vars: &BTreeMap<String, String>) -> Result<Vec<String>, String> {
        let names: Vec<&str> = self.placeholders.iter().map(|p| p.name.as_str()).collect();
        for (name, value) in vars {
            let Some(p) = self.placeholders.iter().find(|p| &p.name == name) else {
                let known = if names.is_empty() {
                    "it has none".to_string()
                } else {
                    format!("its placeholders: {}", names.join(", "))
                };
                return Err(format!("'{name}' is not a placeholder of the command ({known})"));
            };
            if p.switch && switch_value(value).is_none() {
                return Err(format!("{name}={value}: '{name}' is a switch; allowed: on, off"));
            }
        }
        let mut out = Vec::new();
        for word in &self.words {
            if let [Piece::Slot(i)] = word.as_slice() {
                let p = &self.placeholders[*i];
                if p.switch {
                    if p.is_on(vars) {
                        out.extend(p.text.as_deref().unwrap_or("").split_whitespace().map(String::from));
                    }
                    continue;
                }
            }
            let mut s = String::new();
            for piece in word {
                match piece {
                    Piece::Text(t) => s.push_str(t),
                    Piece::Slot(i) => s.push_str(&self.value(*i, vars)?),
                }
            }
            out.push(s);
        }
        if out.is_empty() {
            return Err("the command is empty once its switches are off".into());
        }
        Ok(out)
    }

    fn value(&self, i: usize, vars: &BTreeMap<String, String>) -> Result<String, String> {
        let p = &self.placeholders[i];
        if p.switch {
            return Ok(if p.is_on(vars) { p.text.clone().unwrap_or_default() } else { String::new() });
        }
        vars.get(&p.name)
            .cloned()
            .or_else(|| p.text.clone())
            .ok_or_else(|| format!("'{}' has no default ({{{}}}): set it, e.g. {}=VALUE", p.name, p.name, p.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn values_and_switches_fill_the_words() {
        let t = Template::parse(
            "python 'my train.py' --num-envs {envs=8} {async?--async} '{mode?--mode fast}' x{n}y {{lit}}",
        )
        .unwrap();
        let names: Vec<&str> = t.placeholders().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["envs", "async", "mode", "n"]);
        let words = t.expand(&vars(&[("n", "3")])).unwrap();
        assert_eq!(words, ["python", "my train.py", "--num-envs", "8", "x3y", "{lit}"]);
        let words = t.expand(&vars(&[("n", "3"), ("envs", "16"), ("async", "on"), ("mode", "true")])).unwrap();
        assert_eq!(words, ["python", "my train.py", "--num-envs", "16", "--async", "--mode", "fast", "x3y", "{lit}"]);
    }

    #[test]
    fn a_bad_template_or_value_is_refused_with_what_is_allowed() {
        for (command, says) in [
            ("python 't.py", "quote is not closed"),
            ("python {envs=8", "brace is not closed"),
            ("python envs}", "lone }"),
            ("python {8x=1}", "NAME letters"),
            ("python {a=1} {a=2}", "declared twice"),
            ("", "is empty"),
        ] {
            let e = Template::parse(command).unwrap_err();
            assert!(e.contains(says), "{command}: {e}");
        }
        let t = Template::parse("python t.py {n} {fast?--fast}").unwrap();
        assert!(t.expand(&vars(&[])).unwrap_err().contains("'n' has no default"));
        assert!(t.expand(&vars(&[("n", "1"), ("fast", "maybe")])).unwrap_err().contains("allowed: on, off"));
        assert!(t.expand(&vars(&[("n", "1"), ("m", "2")])).unwrap_err().contains("its placeholders: n, fast"));
        assert_eq!(
            Template::parse("{x?}").unwrap().expand(&vars(&[])).unwrap_err(),
            "the command is empty once its switches are off"
        );
    }
}
