//! Every knob of the spec as a flag, made from the knob table
//! ([`hotlab_spec::knobs::KNOBS`]): its name (`--total-steps`), its help (`-h`) and its
//! whole story (`--help`), its heading (its group, or its workload), the value it takes
//! (a whole number, a number, one of a list…) and its default under each preset, all read
//! from the table. A setting is written once: its spec field and its knob.

use clap::builder::ValueParser;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};
use hotlab_core::knob::{Knob, KnobKind};
use hotlab_spec::knobs::KNOBS;
use hotlab_spec::{presets, PresetSpec, RunSpec};
use hotlab_specs::{EnvName, WorkloadSpec};
use serde_json::Value;

/// Which knobs a command takes.
pub trait Which {
    fn takes(knob: &Knob) -> bool;
}

/// Every knob (`hotlab train`, `profile`, `audit`, `tune`, `sweep`).
#[derive(Clone, Debug, Default)]
pub struct All;

impl Which for All {
    fn takes(_: &Knob) -> bool {
        true
    }
}

/// A workload's own settings only (`hotlab bench envs`, which has its own `--envs`).
#[derive(Clone, Debug, Default)]
pub struct WorkloadOnly;

impl Which for WorkloadOnly {
    fn takes(knob: &Knob) -> bool {
        knob.workload.is_some()
    }
}

/// The knobs given on the command line, each with its value, in the table's order.
#[derive(Clone, Debug)]
pub struct KnobArgs<W = All> {
    pub given: Vec<(&'static Knob, Value)>,
    which: std::marker::PhantomData<W>,
}

impl<W> Default for KnobArgs<W> {
    fn default() -> Self {
        Self { given: Vec::new(), which: std::marker::PhantomData }
    }
}

impl<W: Which> KnobArgs<W> {
    /// `spec` with the knobs given applied ([`hotlab_spec::knobs::apply`]).
    pub fn apply(&self, spec: RunSpec) -> Result<RunSpec, hotlab_spec::SpecError> {
        hotlab_spec::knobs::apply(spec, &self.given)
    }
}

/// The flag of a knob: `--total-steps`.
fn flag(knob: &Knob) -> String {
    knob.name.replace('_', "-")
}

/// The id of `--no-X` for a yes/no knob.
fn negated(knob: &Knob) -> String {
    format!("no_{}", knob.name)
}

/// Where `--help` lists it: the workload's own settings under the workload.
fn heading(knob: &Knob) -> String {
    match knob.workload {
        Some(w) => format!("{} settings (--env {w})", capitalized(w)),
        None => knob.group.to_string(),
    }
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
}

/// A knob's value in a spec, as a person reads it.
fn shown(v: &Value) -> String {
    match v {
        Value::Null => "none".into(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(shown).collect::<Vec<_>>().join(","),
        // `0`, `64`, `0.0003`: as a flag would be written.
        Value::Number(n) => {
            n.as_u64().map_or_else(|| n.as_f64().map_or_else(|| n.to_string(), |f| f.to_string()), |u| u.to_string())
        }
        other => other.to_string(),
    }
}

/// `[default: 4]`, or each preset's value where they differ: `[cleanrl: 4, wide: 1024,
/// proof: 64, …]`. A workload's own setting has its workload's default.
fn defaults(knob: &Knob) -> String {
    let json = |spec: RunSpec| serde_json::to_value(spec).ok().and_then(|v| v.as_object().cloned());
    if let Some(w) = EnvName::of(knob) {
        let spec = RunSpec { workload: WorkloadSpec::default_for(w), ..RunSpec::default() };
        return json(spec).and_then(|j| knob.get(&j)).map_or_else(String::new, |v| format!("[default: {}]", shown(&v)));
    }
    let values: Vec<(&str, String)> =
        presets::all().filter_map(|p| Some((p.name, shown(&knob.get(&json(p.spec())?)?)))).collect();
    match values.first() {
        Some((_, first)) if values.iter().all(|(_, v)| v == first) => format!("[default: {first}]"),
        Some(_) => format!("[{}]", values.iter().map(|(p, v)| format!("{p}: {v}")).collect::<Vec<_>>().join(", ")),
        None => String::new(),
    }
}

/// A value typed by the knob's kind ([`KnobKind::parse`]); text that is not one is
/// refused here, naming the flag (ranges are the spec's validation's, which names the flag
/// too). `--env NAME:VALUE` (`gym:Acrobot-v1`) is a workload named with an argument.
fn parse(kind: KnobKind, text: &str) -> Result<Value, String> {
    match kind {
        KnobKind::Choice(allowed)
            if EnvName::with_argument(text.trim()).is_some_and(|(e, ..)| allowed.contains(&e.as_str())) =>
        {
            Ok(Value::from(text.trim()))
        }
        _ => kind.parse(text),
    }
}

/// The flag(s) of a knob: a yes/no knob is `--X` and `--no-X`, each overriding the other.
fn args(knob: &'static Knob) -> Vec<Arg> {
    let help = format!("{} {}", knob.help, defaults(knob));
    let allowed = knob.allowed().map_or_else(String::new, |a| format!(" [allowed: {a}]"));
    let long_help = format!("{} {}{allowed}", knob.long_help(), defaults(knob));
    let base = Arg::new(knob.name).long(flag(knob)).help(help).long_help(long_help).help_heading(heading(knob));
    match knob.kind {
        KnobKind::Bool => vec![
            base.action(ArgAction::SetTrue).overrides_with(negated(knob)),
            Arg::new(negated(knob))
                .long(format!("no-{}", flag(knob)))
                .action(ArgAction::SetTrue)
                .help(format!("the opposite of --{}", flag(knob)))
                .help_heading(heading(knob))
                .overrides_with(knob.name),
        ],
        kind => {
            let value = match kind {
                KnobKind::Choice(allowed) => allowed.join("|"),
                KnobKind::IntList => "N,N,…".into(),
                KnobKind::Object => "JSON".into(),
                KnobKind::Pairs => "NAME=VALUE,…".into(),
                _ => knob.name.to_uppercase(),
            };
            vec![base.value_name(value).value_parser(ValueParser::new(move |s: &str| parse(kind, s)))]
        }
    }
}

impl<W: Which> clap::Args for KnobArgs<W> {
    /// The run's own knobs by group, then each workload's settings under its name.
    fn augment_args(cmd: Command) -> Command {
        let (own, workloads): (Vec<&'static Knob>, Vec<_>) =
            KNOBS.iter().filter(|k| W::takes(k)).partition(|k| k.workload.is_none());
        own.into_iter().chain(workloads).flat_map(args).fold(cmd, Command::arg)
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl<W: Which> clap::FromArgMatches for KnobArgs<W> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let given_here = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
        let mut given = Vec::new();
        for knob in KNOBS.iter().filter(|k| W::takes(k)) {
            let value = match knob.kind {
                KnobKind::Bool if given_here(&negated(knob)) && m.get_flag(&negated(knob)) => Some(Value::Bool(false)),
                KnobKind::Bool if given_here(knob.name) && m.get_flag(knob.name) => Some(Value::Bool(true)),
                KnobKind::Bool => None,
                _ => m.get_one::<Value>(knob.name).cloned(),
            };
            given.extend(value.map(|v| (knob, v)));
        }
        Ok(Self { given, which: std::marker::PhantomData })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    #[command(args_override_self = true, allow_negative_numbers = true)]
    struct Cli {
        #[command(flatten)]
        knobs: KnobArgs,
    }

    fn spec(args: &[&str]) -> Result<RunSpec, String> {
        let cli = Cli::try_parse_from(std::iter::once("hotlab").chain(args.iter().copied()))
            .map_err(|e| e.to_string().lines().next().unwrap_or_default().to_string())?;
        cli.knobs.apply(RunSpec::default()).map_err(|e| e.to_string())
    }

    #[test]
    fn every_knob_is_a_flag_that_sets_its_spec_field() {
        let s = spec(&["--envs", "8", "--lr", "1e-3", "--hidden", "32,16", "--backend", "threads", "--no-anneal-lr"])
            .unwrap();
        assert_eq!(
            (s.envs, s.ppo.lr, s.ppo.hidden.clone(), s.exec.backend.as_str()),
            (8, 1e-3, vec![32, 16], "threads")
        );
        assert!(!s.ppo.anneal_lr);
        assert!(spec(&["--no-anneal-lr", "--anneal-lr"]).unwrap().ppo.anneal_lr, "the last one counts");
        let m = spec(&["--env", "morpho", "--host-epochs", "3", "--slots", "sleeper"]).unwrap();
        let morpho = m.settings::<hotlab_specs::MorphoSpec>().unwrap();
        assert_eq!((morpho.epochs, morpho.slots.as_str()), (3, "sleeper"));
        let p = spec(&["--kb", "x.pl", "--env", "proof"]).unwrap();
        assert_eq!(
            p.settings::<hotlab_specs::ProofSpec>().unwrap().kb,
            "x.pl",
            "the workload is chosen before its settings, wherever --env is"
        );
        assert_eq!(spec(&[]).unwrap(), RunSpec::default(), "nothing given changes nothing");
    }

    /// Each preset's flags, given alone, make its spec: what its card shows is what it runs.
    #[test]
    fn each_presets_flags_make_its_spec() {
        for p in hotlab_spec::presets::all() {
            let flags = p.flags();
            let args: Vec<&str> = flags.iter().map(String::as_str).collect();
            assert_eq!(spec(&args), Ok(p.spec()), "{}: {}", p.name, p.flags_line());
        }
    }

    #[test]
    fn a_bad_value_is_refused_naming_the_flag() {
        for (args, named) in [
            (&["--envs", "-3"][..], "--envs"),
            (&["--lr", "abc"], "--lr"),
            (&["--lr", "nan"], "--lr"),
            (&["--hidden", "64,x"], "--hidden"),
            (&["--backend", "gpu"], "--backend"),
            (&["--kb", "x.pl"], "--kb"),
            (&["--env", "proof", "--host-epochs", "3"], "--host-epochs"),
        ] {
            let e = spec(args).unwrap_err();
            assert!(e.contains(named), "{args:?}: {e}");
        }
        assert!(spec(&["--backend", "gpu"]).unwrap_err().contains("allowed: sequential"), "and says what is allowed");
    }

    /// A value of `knob` other than `default` that its kind and range allow, as a flag
    /// writes it; None where the kind has no value to give alone (`env`, which its own
    /// tests cover, and free text whose workload reads it at load).
    fn another_value(knob: &Knob, default: &Value) -> Option<String> {
        let number = |lo: f64, hi: f64, int: bool| {
            let candidates = [lo, lo + 1.0, (lo + hi.min(lo + 100.0)) / 2.0, hi];
            let allowed = |v: f64| knob.range.is_none_or(|r| r.allows(v)) && (!int || v.fract() == 0.0);
            candidates.into_iter().find(|v| allowed(*v) && default.as_f64() != Some(*v)).map(|v| v.to_string())
        };
        let (lo, hi) = knob.range.map_or((1.0, 8.0), |r| (r.lo, r.hi));
        match knob.kind {
            _ if knob.path == "workload" => None,
            KnobKind::Int => number(lo, hi, true),
            KnobKind::Float => number(lo, hi, false),
            KnobKind::IntList => number(lo, hi, true).map(|v| format!("{v},{v}")),
            KnobKind::Choice(allowed) => allowed.iter().find(|c| default.as_str() != Some(**c)).map(|c| c.to_string()),
            KnobKind::Text | KnobKind::OptionalText => Some("given-text".into()),
            KnobKind::Object => Some(r#"{"given": 1}"#.into()),
            KnobKind::Pairs => Some("given=1".into()),
            KnobKind::Bool => None,
        }
    }

    /// Issue 79: the knob table is the one declaration of every setting, and each surface
    /// comes from it. Walking the table, every knob is a flag whose short help is its line
    /// and whose long help is its story; a value other than its default given to the flag
    /// lands at the knob's path in the spec, typed (a yes/no knob through `--X` and
    /// `--no-X`); a number out of its range is refused by the spec's validation naming
    /// the flag, and the same value in a REST body naming the field, as its JSON path.
    #[test]
    fn every_knob_of_the_table_is_its_flag_its_help_its_field_and_its_refusal() {
        let command = <Cli as clap::CommandFactory>::command();
        let mut checked = (0, 0);
        for knob in KNOBS.iter() {
            let arg = command.get_arguments().find(|a| a.get_id() == knob.name);
            let arg = arg.unwrap_or_else(|| panic!("{}: no flag", knob.name));
            assert_eq!(arg.get_long(), Some(flag(knob).as_str()), "{}", knob.name);
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            assert!(help.starts_with(knob.help), "{}: '{help}'", knob.name);
            let long = arg.get_long_help().map(ToString::to_string).unwrap_or_default();
            assert!(long.starts_with(knob.long_help()), "{}: '{long}'", knob.name);
            // Its workload's spec, with the workload named first on the command line.
            let env: Vec<String> = knob.workload.map(|w| vec!["--env".into(), w.into()]).unwrap_or_default();
            let base = RunSpec {
                workload: EnvName::of(knob).map_or_else(WorkloadSpec::default, WorkloadSpec::default_for),
                ..RunSpec::default()
            };
            let json = |s: &RunSpec| serde_json::to_value(s).unwrap().as_object().cloned().unwrap();
            let default = knob.get(&json(&base)).unwrap_or(Value::Null);
            let given: Vec<String> = match (knob.kind, &default) {
                (KnobKind::Bool, Value::Bool(true)) => vec![format!("--no-{}", flag(knob))],
                (KnobKind::Bool, _) => vec![format!("--{}", flag(knob))],
                _ => match another_value(knob, &default) {
                    Some(v) => vec![format!("--{}", flag(knob)), v],
                    None => continue,
                },
            };
            let args: Vec<&str> = env.iter().chain(&given).map(String::as_str).collect();
            let set = spec(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let value = knob.get(&json(&set)).unwrap_or(Value::Null);
            assert_ne!(value, default, "{args:?} changes {}", knob.path);
            let text = given.last().unwrap();
            let typed = match knob.kind {
                KnobKind::Bool => Value::Bool(default != Value::Bool(true)),
                kind => kind.parse(text).unwrap(),
            };
            assert_eq!(value, typed, "{args:?} sets {} to what it says", knob.path);
            checked.0 += 1;
            // Out of range: refused by the spec's validation naming the flag, and in a
            // REST body naming the field.
            let Some(range) = knob.range.filter(|_| matches!(knob.kind, KnobKind::Int | KnobKind::Float)) else {
                continue;
            };
            let bad = range.hi * 2.0 + 1.0;
            let bad_text = if knob.kind == KnobKind::Int { format!("{}", bad as i64) } else { bad.to_string() };
            let bad_flag = format!("--{}", flag(knob));
            let args: Vec<&str> =
                env.iter().map(String::as_str).chain([bad_flag.as_str(), bad_text.as_str()]).collect();
            let refused = spec(&args).and_then(|s| s.validate().map_err(|e| e.to_string()));
            let e = refused.expect_err(&format!("{args:?} is out of range"));
            assert!(e.contains(&format!("--{}", flag(knob))), "{args:?}: {e}");
            let mut body = json(&base);
            knob.set(&mut body, kind_value(knob.kind, bad));
            let r =
                hotlab_spec::json::parse(Value::Object(body)).expect_err(&format!("{} = {bad} in a body", knob.path));
            assert_eq!(
                (r.unknown, r.error.field.as_str(), r.error.path.as_str()),
                (false, knob.name, knob.path),
                "{r:?}"
            );
            checked.1 += 1;
        }
        // Every knob but env (a workload's whole settings: its own tests), every ranged number.
        let ranged = KNOBS.iter().filter(|k| k.range.is_some() && matches!(k.kind, KnobKind::Int | KnobKind::Float));
        assert_eq!(checked, (KNOBS.len() - 1, ranged.count()), "of {} knobs", KNOBS.len());
    }

    /// `v` as a JSON value of `kind` (a whole number for an Int).
    fn kind_value(kind: KnobKind, v: f64) -> Value {
        match kind {
            KnobKind::Int => Value::from(v as i64),
            _ => Value::from(v),
        }
    }

    #[test]
    fn help_shows_each_presets_default_and_the_workloads_under_their_own_headings() {
        let help = <Cli as clap::CommandFactory>::command().render_long_help().to_string();
        assert!(
            help.contains("[cleanrl: 4, wide: 1024, gpu: 4096, proof: 64, morpho: 8, grow: 8, dreamer: 4, mujoco: 1, atari: 8, mujoco-fast: 8, atari-lstm: 8, memory: 16, atari-envpool: 8, atari-gpu: 64]"),
            "{help}"
        );
        assert!(help.contains("[default: 0.99]"), "{help}");
        assert!(help.contains("Morpho settings (--env morpho)") && help.contains("[default: 12]"), "{help}");
        assert!(help.contains("--no-anneal-lr"), "{help}");
        assert!(help.contains("[allowed: (0, 1]]") && help.contains("[allowed: 1 to 4096]"), "each range: {help}");
    }
}
