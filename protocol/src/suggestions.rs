//! The values a machine can offer for a knob (`GET /api/knobs/{knob}/suggestions`): the
//! launch form's suggestions for a workload's suggested knob (`Settings::SUGGESTED`), in
//! groups, each saying what installs it where it cannot be used. The gym workload offers
//! the Gymnasium ids its Python can make, by family; another workload brings its own.

use serde::{Deserialize, Serialize};

/// What a machine offers for one knob.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Suggestions {
    /// The knob (`gym_id`).
    pub knob: String,
    /// Where the values come from (`Gymnasium 1.2.0 in /path/to/python`), or what was asked
    /// where there is no list.
    pub source: String,
    /// What one value is, plural (`ids`).
    pub unit: String,
    pub groups: Vec<SuggestionGroup>,
    /// Why there is no list (no such interpreter, no package): what to do about it.
    pub error: Option<String>,
}

/// One group of values (a Gymnasium family: `classic_control`, `mujoco`, a package's own).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SuggestionGroup {
    pub group: String,
    pub values: Vec<String>,
    /// What its values need and why it is not there, where it is not: they are known
    /// but cannot be used.
    pub missing: Option<String>,
    /// The command that installs what is missing.
    pub install: Option<String>,
}

impl Suggestions {
    /// The values that can be used here, group by group.
    pub fn usable(&self) -> impl Iterator<Item = &str> {
        self.groups.iter().filter(|g| g.missing.is_none()).flat_map(|g| g.values.iter().map(String::as_str))
    }

    /// The line the launch form shows for a group: how many values, or what installs it.
    pub fn line(&self, group: &SuggestionGroup) -> String {
        match (&group.missing, &group.install) {
            (None, _) => format!("{}: {} {}", group.group, group.values.len(), self.unit),
            (Some(m), Some(cmd)) => format!("{}: not installed ({m}): {cmd}", group.group),
            (Some(m), None) => format!("{}: not installed ({m})", group.group),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_installed_groups_are_usable_and_each_line_says_why() {
        let group = |name: &str, values: &[&str], missing: Option<&str>, install: Option<&str>| SuggestionGroup {
            group: name.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
            missing: missing.map(Into::into),
            install: install.map(Into::into),
        };
        let s = Suggestions {
            knob: "gym_id".into(),
            source: "Gymnasium 1.2.0 in python3".into(),
            unit: "ids".into(),
            groups: vec![
                group("classic_control", &["CartPole-v1", "Acrobot-v1"], None, None),
                group("box2d", &["LunarLander-v3"], Some("no module named Box2D"), Some("pip install box2d")),
                group("mine", &["Mine-v0"], Some("no module named mine"), None),
            ],
            error: None,
        };
        assert_eq!(s.usable().collect::<Vec<_>>(), ["CartPole-v1", "Acrobot-v1"]);
        let lines: Vec<String> = s.groups.iter().map(|g| s.line(g)).collect();
        assert_eq!(
            lines,
            [
                "classic_control: 2 ids",
                "box2d: not installed (no module named Box2D): pip install box2d",
                "mine: not installed (no module named mine)",
            ]
        );
    }
}
