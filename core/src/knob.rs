//! What a knob is: a spec field's name (the CLI flag in snake_case), its path in the
//! nested JSON, the workload whose setting it is, its kind, help and range, and how it
//! reads, checks and sets its value in a spec's JSON. The table of every knob is
//! `hotlab_spec::knobs` (the run's own are [`crate::run_knobs`]); each workload declares
//! its own settings as knobs (`hotlab_specs::setting`).

use serde_json::{Map, Value};

/// A knob's value refused: the knob (its name) and what it allows. `hotlab_spec`'s
/// `SpecError` adds where the knob sits in a spec's JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnobError {
    pub knob: &'static str,
    pub message: String,
}

impl KnobError {
    pub fn new(knob: &'static str, message: impl Into<String>) -> Self {
        Self { knob, message: message.into() }
    }
}

/// As the spec's errors read: `--head-ent-coef: …`.
impl std::fmt::Display for KnobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", flag_of(self.knob), self.message)
    }
}

/// What a knob's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobKind {
    /// A whole number.
    Int,
    /// A real number.
    Float,
    Bool,
    /// One of these strings.
    Choice(&'static [&'static str]),
    /// Free text.
    Text,
    /// Free text, `null` when empty.
    OptionalText,
    /// Whole numbers separated by commas (`64,64`).
    IntList,
    /// A JSON object (`{"continuous": true}`).
    Object,
    /// Names and their values, `NAME=VALUE,NAME=VALUE` (or a JSON object of strings): a
    /// map that a change adds to rather than replaces (its knob's setter merges).
    Pairs,
}

impl KnobKind {
    /// A typed value from text (a flag's value, a form's field, a `--change KEY=VALUE`),
    /// or why the text is not one: the one parser of a knob's text. A choice must be one of
    /// its values; ranges are the spec's validation's (which names the knob too).
    pub fn parse(self, text: &str) -> Result<Value, String> {
        let t = text.trim();
        match self {
            KnobKind::Int => t.parse::<u64>().map(Value::from).map_err(|e| e.to_string()),
            KnobKind::Float => match t.parse::<f64>() {
                Ok(f) if f.is_finite() => Ok(Value::from(f)),
                Ok(_) => Err("must be a finite number".into()),
                Err(e) => Err(e.to_string()),
            },
            KnobKind::Choice(allowed) if allowed.contains(&t) => Ok(Value::from(t)),
            KnobKind::Choice(allowed) => Err(format!("allowed: {}", allowed.join(", "))),
            KnobKind::IntList => {
                t.split(',').map(|i| i.trim().parse::<u64>().map(Value::from).map_err(|e| e.to_string())).collect()
            }
            KnobKind::Text | KnobKind::OptionalText => Ok(Value::from(t)),
            KnobKind::Pairs if !t.starts_with('{') => pairs(t).map(Value::Object).ok_or_else(|| {
                format!("write NAME=VALUE pairs separated by commas, e.g. envs=16,async=on (got '{t}')")
            }),
            KnobKind::Object | KnobKind::Pairs => match serde_json::from_str::<Value>(t) {
                Ok(object @ Value::Object(_)) => Ok(object),
                Ok(other) => Err(format!("must be a JSON object, e.g. '{{\"continuous\": true}}' (got {other})")),
                Err(e) => Err(format!("must be a JSON object, e.g. '{{\"continuous\": true}}' ({e})")),
            },
            KnobKind::Bool => match t {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err("allowed: true, false".into()),
            },
        }
    }

    /// [`KnobKind::parse`] for a form's field and a change's text, which the spec's
    /// validation judges: text that does not parse (and any choice) is kept as it is, so
    /// that the validation (the one judge) names the field and what it allows; an empty
    /// optional text is `null`, an empty object `{}`.
    pub fn value(self, text: &str) -> Value {
        let t = text.trim();
        match self {
            KnobKind::Choice(_) => Value::String(t.to_string()),
            KnobKind::OptionalText if t.is_empty() => Value::Null,
            KnobKind::Object | KnobKind::Pairs if t.is_empty() => Value::Object(Map::new()),
            _ => self.parse(text).unwrap_or_else(|_| Value::String(text.to_string())),
        }
    }
}

/// A value as text that its knob's parser reads back (a flag's value, a form's field): a
/// string as it is, a list joined by commas, `null` empty, anything else its JSON.
pub fn text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items.iter().map(|i| text(Some(i))).collect::<Vec<_>>().join(","),
        Some(other) => other.to_string(),
    }
}

/// `NAME=VALUE,NAME=VALUE` as an object of strings (None when a pair has no `=` or no name).
pub fn pairs(text: &str) -> Option<Map<String, Value>> {
    text.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (k.to_string(), Value::from(v.trim())))
        })
        .collect()
}

/// How a knob sets its value in a nested spec as JSON, where it is more than its path.
pub type Setter = fn(&mut Map<String, Value>, Value);

/// One field of the launch form.
#[derive(Clone, Copy, Debug)]
pub struct Knob {
    /// The CLI flag in snake_case (`--total-steps` → `total_steps`).
    pub name: &'static str,
    /// Where it sits in the nested spec (`ppo.lr`, `workload.proof.depth`); `workload` for
    /// the workload's name itself.
    pub path: &'static str,
    /// The workload whose own setting this is, by name (None: every workload's).
    pub workload: Option<&'static str>,
    pub group: &'static str,
    pub kind: KnobKind,
    /// One line: the launch form's help, and the CLI's `-h`.
    pub help: &'static str,
    /// The whole story, where one line is not enough: the CLI's `--help` (the help line
    /// when empty).
    pub about: &'static str,
    /// The values a number allows (each number of a list), where they are fixed; a bound
    /// that depends on other knobs (`minibatches` divides envs × steps) is checked by the
    /// spec's validation.
    pub range: Option<Range>,
    /// How it sets its value where setting a path is not all it does (`env`, which
    /// replaces the workload's settings with the new workload's defaults).
    pub setter: Option<Setter>,
}

/// The values a number knob allows: `lo` to `hi`, `lo` itself excluded where `lo_open`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub lo: f64,
    pub hi: f64,
    pub lo_open: bool,
}

impl Range {
    pub fn allows(&self, v: f64) -> bool {
        v.is_finite() && (if self.lo_open { v > self.lo } else { v >= self.lo }) && v <= self.hi
    }

    /// In words, for a knob of `kind`: `1 to 4096`, `(0, 1]`.
    pub fn describe(&self, kind: KnobKind) -> String {
        match kind {
            KnobKind::Int | KnobKind::IntList => format!("{} to {}", self.lo, self.hi),
            _ => format!("{}{}, {}]", if self.lo_open { "(" } else { "[" }, self.lo, self.hi),
        }
    }
}

impl Knob {
    /// A knob of every workload, with no range and no longer story.
    pub const fn new(
        name: &'static str,
        path: &'static str,
        group: &'static str,
        kind: KnobKind,
        help: &'static str,
    ) -> Self {
        Knob { name, path, workload: None, group, kind, help, about: "", range: None, setter: None }
    }

    /// With a longer explanation for `--help`.
    pub const fn about(self, about: &'static str) -> Self {
        Knob { about, ..self }
    }

    /// Allowing `lo ..= hi`.
    pub const fn range(self, lo: f64, hi: f64) -> Self {
        Knob { range: Some(Range { lo, hi, lo_open: false }), ..self }
    }

    /// Allowing more than `lo`, up to `hi`.
    pub const fn above(self, lo: f64, hi: f64) -> Self {
        Knob { range: Some(Range { lo, hi, lo_open: true }), ..self }
    }

    /// Its range in words (`1 to 4096`, `(0, 1]`), where it has one.
    pub fn allowed(&self) -> Option<String> {
        self.range.map(|r| r.describe(self.kind))
    }

    /// Checks its value in a spec's JSON against its range (each number of a list), naming
    /// the knob: `must be between 1 and 4096 (got 0)`, `must be in (0, 1] (got 2)`.
    pub fn check(&self, value: &Value) -> Result<(), KnobError> {
        let Some(range) = self.range else { return Ok(()) };
        let one = |v: &Value| {
            // serde_json writes NaN and the infinities as null.
            let n = v.as_f64().filter(|n| range.allows(*n));
            n.map(|_| ()).ok_or_else(|| {
                let got = match v.as_f64() {
                    Some(n) => format!("got {n}"),
                    None if v.is_null() => "not a finite number".to_string(),
                    None => format!("got {v}"),
                };
                let message = match self.kind {
                    KnobKind::Int | KnobKind::IntList => {
                        format!("must be between {} and {} ({got})", range.lo, range.hi)
                    }
                    _ => format!("must be in {} ({got})", range.describe(self.kind)),
                };
                KnobError::new(self.name, message)
            })
        };
        match value {
            Value::Array(items) => items.iter().try_for_each(one),
            v => one(v),
        }
    }

    /// What `--help` says of it: [`Knob::about`], or the help line.
    pub fn long_help(&self) -> &'static str {
        if self.about.is_empty() {
            self.help
        } else {
            self.about
        }
    }

    /// Whether a spec of the workload named `env` has this knob.
    pub fn applies_to(&self, env: &str) -> bool {
        self.workload.is_none_or(|w| w == env)
    }

    /// This knob's value in a nested spec as JSON (the workload's name for `env`).
    pub fn get(&self, spec: &Map<String, Value>) -> Option<Value> {
        if self.path == "workload" {
            return workload_name(spec).map(Value::from);
        }
        get_path(spec, self.path).cloned()
    }

    /// Sets this knob in a nested spec as JSON (through its [`Knob::setter`] where it has
    /// one); a workload's own setting is ignored for another workload.
    pub fn set(&self, spec: &mut Map<String, Value>, value: Value) {
        if let Some(setter) = self.setter {
            return setter(spec, value);
        }
        if let Some(w) = self.workload {
            if workload_name(spec).as_deref() != Some(w) {
                return;
            }
        }
        set_path(spec, self.path, value);
    }
}

/// The CLI flag of a knob or spec field named `name` (`total_steps` → `--total-steps`).
pub fn flag_of(name: &str) -> String {
    format!("--{}", name.replace('_', "-"))
}

/// The workload's name in a nested spec as JSON.
pub fn workload_name(spec: &Map<String, Value>) -> Option<String> {
    match spec.get("workload")? {
        Value::String(name) => Some(name.clone()),
        Value::Object(o) if o.len() == 1 => o.keys().next().cloned(),
        _ => None,
    }
}

/// The value at a dotted path (`ppo.lr`).
pub fn get_path<'a>(spec: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut at = spec.get(parts.next()?)?;
    for part in parts {
        at = at.as_object()?.get(part)?;
    }
    Some(at)
}

/// Sets the value at a dotted path, making the objects on the way.
pub fn set_path(spec: &mut Map<String, Value>, path: &str, value: Value) {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().unwrap_or_default();
    let mut at = spec;
    for part in parts {
        let next = at.entry(part.to_string()).or_insert_with(|| Value::Object(Map::new()));
        if !next.is_object() {
            *next = Value::Object(Map::new());
        }
        at = next.as_object_mut().expect("made an object above");
    }
    at.insert(last.to_string(), value);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One parser of a knob's text: `parse` types it or says why not (the CLI's flags);
    /// `value` keeps what does not parse as text for the spec's validation to name (a
    /// form's field, a change), an empty optional text `null` and an empty object `{}`.
    #[test]
    fn a_knobs_text_is_typed_or_refused_in_one_place() {
        let choice = KnobKind::Choice(&["eager", "fused"]);
        assert_eq!(KnobKind::Int.parse(" 8 "), Ok(Value::from(8u64)));
        assert!(KnobKind::Int.parse("eight").is_err());
        assert_eq!(KnobKind::Float.parse("inf"), Err("must be a finite number".into()));
        assert_eq!(choice.parse("fused"), Ok(Value::from("fused")));
        assert_eq!(choice.parse("graph"), Err("allowed: eager, fused".into()));
        assert_eq!(KnobKind::IntList.parse("64, 64"), Ok(serde_json::json!([64, 64])));
        assert_eq!(KnobKind::Pairs.parse("envs=16,async=on"), Ok(serde_json::json!({"envs": "16", "async": "on"})));
        assert!(KnobKind::Object.parse("[1]").unwrap_err().starts_with("must be a JSON object"));
        assert_eq!(KnobKind::Bool.parse("yes"), Err("allowed: true, false".into()));
        assert_eq!(KnobKind::Int.value("eight"), Value::from("eight"));
        assert_eq!(choice.value(" graph "), Value::from("graph"), "a choice is the validation's to judge");
        assert_eq!(KnobKind::OptionalText.value(""), Value::Null);
        assert_eq!(KnobKind::Object.value(" "), serde_json::json!({}));
        assert_eq!(KnobKind::Float.value("2.5e-4"), Value::from(2.5e-4));
    }
}
