//! What a probe measured of a user's own training script, beyond its phases and counters:
//! how its envs step, what one rollout step and one update cost in reads of tensor values
//! and copies to the device, its forward batch, the torch ops it dispatches per step, the
//! busiest call sites of each, and what could not be measured in its library versions.
//! A window's facts ride in its [`crate::profile::Profile`] (`script`), so the report reads
//! them as it reads the phases.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a script's envs were stepped: its vector env's kind.
pub mod kind {
    /// Python envs stepped one after another in the script's process (`SyncVectorEnv`,
    /// Stable-Baselines3's `DummyVecEnv`).
    pub const PYTHON_IN_PROCESS: &str = "python_in_process";
    /// Envs in worker processes (`AsyncVectorEnv`, `SubprocVecEnv`).
    pub const WORKER_PROCESSES: &str = "worker_processes";
    /// A batch stepped in one call (a vectorized env, EnvPool).
    pub const BATCHED: &str = "batched";
    /// One env, not vectorized.
    pub const SINGLE: &str = "single";
}

/// What the probe counts at a call site.
pub mod site {
    /// A read of a tensor's values by Python (`.item()`, `.cpu()`, `.numpy()`…): a device
    /// sync on a GPU.
    pub const HOST_READ: &str = "host_read";
    /// A read of a gradient statistic (a norm computed during the update).
    pub const GRAD_READ: &str = "grad_read";
    /// A host tensor moved to the device (`.to(device)`, `.cuda()`, `torch.tensor(…, device=)`).
    pub const H2D_COPY: &str = "h2d_copy";
    /// A copy to the device during an update (after its first backward or optimizer step).
    pub const UPDATE_COPY: &str = "update_copy";
}

/// One call site of a counted event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Site {
    /// What happened there ([`site`]).
    pub kind: String,
    pub file: String,
    pub line: u32,
    /// The function the line is in.
    pub function: String,
    pub count: u64,
    /// Bytes moved, for a copy.
    #[serde(default)]
    pub bytes: u64,
}

impl Site {
    /// `file:line (function)`, the file by its name alone.
    pub fn short(&self) -> String {
        let name = self.file.rsplit('/').next().unwrap_or(&self.file);
        format!("{name}:{} ({})", self.line, self.function)
    }
}

/// A script's measured facts over a window (or a whole run: [`ScriptProfile::accumulate`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ScriptProfile {
    /// Calls of the vector env's step (each steps every env once).
    pub vector_steps: u64,
    /// Envs per vector step (the last seen).
    pub num_envs: u64,
    /// The class that steps them (`SyncVectorEnv`).
    pub env_class: Option<String>,
    /// Vector steps by how the envs stepped ([`kind`]).
    pub kinds: BTreeMap<String, u64>,
    /// Rollout steps by their reads of tensor values: `[[reads, steps], …]` (a step is
    /// the script's loop from one env step to the next, outside updates).
    #[serde(with = "histogram")]
    pub reads_per_step: BTreeMap<u32, u64>,
    /// Rollout steps by their copies to the device.
    #[serde(with = "histogram")]
    pub copies_per_step: BTreeMap<u32, u64>,
    /// Updates seen (a stretch between two env steps in which the optimizer stepped).
    pub updates: u64,
    /// Reads, copies and bytes copied during updates.
    pub update_reads: u64,
    pub update_copies: u64,
    pub update_copy_bytes: u64,
    /// Reads of gradient statistics (norms computed during an update).
    pub grad_reads: u64,
    pub optimizer_steps: u64,
    /// Rows of the rollout's forwards (their first input's first dimension), and the
    /// forwards measured: their mean is the forward batch.
    pub forward_rows: u64,
    pub forwards: u64,
    /// Torch ops dispatched in the sampled env steps, and those steps.
    pub ops: u64,
    pub op_steps: u64,
    /// One env step in this many is sampled for its ops.
    pub op_sample_every: u64,
    /// The busiest call sites of each kind of event.
    pub sites: Vec<Site>,
    /// The libraries the script ran with, and their versions.
    pub libs: BTreeMap<String, String>,
    /// What could not be measured, and why (never a 0 where nothing was measured).
    pub not_measured: BTreeMap<String, String>,
    /// The probe's hooks called (its cost is the profile's overhead).
    pub hook_calls: u64,
}

/// Call sites kept per kind in a run's total.
const SITES_PER_KIND: usize = 8;

impl ScriptProfile {
    /// Adds a later window's facts (counts summed, sites merged by place, the newest
    /// versions and gaps).
    pub fn accumulate(&mut self, w: &ScriptProfile) {
        self.vector_steps += w.vector_steps;
        if w.num_envs > 0 {
            self.num_envs = w.num_envs;
        }
        if w.env_class.is_some() {
            self.env_class.clone_from(&w.env_class);
        }
        add_all(&mut self.kinds, &w.kinds);
        add_all(&mut self.reads_per_step, &w.reads_per_step);
        add_all(&mut self.copies_per_step, &w.copies_per_step);
        self.updates += w.updates;
        self.update_reads += w.update_reads;
        self.update_copies += w.update_copies;
        self.update_copy_bytes += w.update_copy_bytes;
        self.grad_reads += w.grad_reads;
        self.optimizer_steps += w.optimizer_steps;
        self.forward_rows += w.forward_rows;
        self.forwards += w.forwards;
        self.ops += w.ops;
        self.op_steps += w.op_steps;
        if w.op_sample_every > 0 {
            self.op_sample_every = w.op_sample_every;
        }
        for s in &w.sites {
            let same = |t: &&mut Site| t.kind == s.kind && t.file == s.file && t.line == s.line;
            match self.sites.iter_mut().find(same) {
                Some(t) => {
                    t.count += s.count;
                    t.bytes += s.bytes;
                }
                None => self.sites.push(s.clone()),
            }
        }
        self.sites.sort_by_key(|s| std::cmp::Reverse(s.count));
        let mut kept: BTreeMap<String, usize> = BTreeMap::new();
        self.sites.retain(|s| {
            let n = kept.entry(s.kind.clone()).or_default();
            *n += 1;
            *n <= SITES_PER_KIND
        });
        self.libs.extend(w.libs.iter().map(|(k, v)| (k.clone(), v.clone())));
        self.not_measured.extend(w.not_measured.iter().map(|(k, v)| (k.clone(), v.clone())));
        self.hook_calls += w.hook_calls;
    }

    /// How most vector steps stepped their envs ([`kind`]), if any was seen.
    pub fn kind(&self) -> Option<&str> {
        self.kinds.iter().max_by_key(|(_, n)| **n).map(|(k, _)| k.as_str())
    }

    /// The reads of a typical rollout step (the most common count), if a step was seen.
    pub fn reads_per_step(&self) -> Option<u32> {
        mode(&self.reads_per_step)
    }

    /// The copies of a typical rollout step.
    pub fn copies_per_step(&self) -> Option<u32> {
        mode(&self.copies_per_step)
    }

    /// The rollout's mean forward batch (rows per forward).
    pub fn forward_batch(&self) -> Option<f64> {
        (self.forwards > 0).then(|| self.forward_rows as f64 / self.forwards as f64)
    }

    /// Torch ops dispatched per env step, from the sampled steps.
    pub fn ops_per_step(&self) -> Option<f64> {
        (self.op_steps > 0).then(|| self.ops as f64 / self.op_steps as f64)
    }

    /// The busiest site of `kind`.
    pub fn busiest(&self, kind: &str) -> Option<&Site> {
        self.sites.iter().filter(|s| s.kind == kind).max_by_key(|s| s.count)
    }

    /// The sites of `kind`, the busiest first.
    pub fn sites_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Site> + 'a {
        self.sites.iter().filter(move |s| s.kind == kind)
    }
}

/// A histogram as a list of `[count, steps]` pairs: a map with number keys would not read
/// back inside an event (serde reads a tagged enum's fields with string keys only).
mod histogram {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(h: &BTreeMap<u32, u64>, s: S) -> Result<S::Ok, S::Error> {
        h.iter().map(|(&k, &n)| (k, n)).collect::<Vec<_>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<u32, u64>, D::Error> {
        Ok(Vec::<(u32, u64)>::deserialize(d)?.into_iter().collect())
    }
}

fn add_all<K: Ord + Clone>(into: &mut BTreeMap<K, u64>, from: &BTreeMap<K, u64>) {
    for (k, n) in from {
        *into.entry(k.clone()).or_default() += n;
    }
}

/// The most common key of a histogram (the smaller one on a tie).
fn mode(hist: &BTreeMap<u32, u64>) -> Option<u32> {
    hist.iter()
        .fold(None, |best: Option<(u32, u64)>, (&k, &n)| match best {
            Some((_, m)) if m >= n => best,
            _ => Some((k, n)),
        })
        .map(|(k, _)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(kind: &str, line: u32, count: u64) -> Site {
        Site { kind: kind.into(), file: "/a/train.py".into(), line, function: "main".into(), count, bytes: 0 }
    }

    #[test]
    fn windows_add_up_and_a_step_s_typical_counts_are_its_mode() {
        let mut total = ScriptProfile::default();
        let w1 = ScriptProfile {
            vector_steps: 10,
            num_envs: 4,
            kinds: [(kind::PYTHON_IN_PROCESS.to_string(), 10)].into(),
            reads_per_step: [(5, 9), (7, 1)].into(),
            sites: vec![site(site::HOST_READ, 3, 40), site(site::H2D_COPY, 4, 10)],
            ..Default::default()
        };
        let w2 = ScriptProfile {
            vector_steps: 6,
            reads_per_step: [(5, 5), (2, 1)].into(),
            sites: vec![site(site::HOST_READ, 3, 24), site(site::HOST_READ, 9, 30)],
            ..Default::default()
        };
        total.accumulate(&w1);
        total.accumulate(&w2);
        assert_eq!(total.vector_steps, 16);
        assert_eq!(total.num_envs, 4, "a window that saw no env keeps the last count");
        assert_eq!(total.reads_per_step(), Some(5));
        assert_eq!(total.kind(), Some(kind::PYTHON_IN_PROCESS));
        let busiest = total.busiest(site::HOST_READ).unwrap();
        assert_eq!((busiest.line, busiest.count), (3, 64), "one place's counts merged");
        assert_eq!(busiest.short(), "train.py:3 (main)");
        assert_eq!(total.sites_of(site::HOST_READ).count(), 2);
        assert_eq!(mode(&[(1, 3), (2, 3)].into()), Some(1), "a tie goes to the smaller count");
        assert_eq!(ScriptProfile::default().reads_per_step(), None, "no step seen: no count, not 0");
        // It reads back inside a tagged enum (a lab's event), where a map's keys are strings.
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        #[serde(tag = "kind", rename_all = "snake_case")]
        enum Event {
            Script { script: ScriptProfile },
        }
        let e = Event::Script { script: total };
        let json = serde_json::to_string(&e).unwrap();
        assert!(json.contains(r#""reads_per_step":[[2,1],[5,14],[7,1]]"#), "{json}");
        assert_eq!(serde_json::from_str::<Event>(&json).unwrap(), e);
    }
}
