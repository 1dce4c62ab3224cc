//! `hotlab bench morpho`: the morpho trainer's decisions/s and host samples/s at each env
//! count, for its defaults, each knob flipped alone and every knob flipped at once, with
//! where each run's time went. The settings of one env count run interleaved, repeat after
//! repeat, and each setting's speed is also given against the defaults run in the same
//! repeat: a machine that drifts moves both.

use anyhow::{Context, Result};
use hotlab_core::choices::Backend;
use hotlab_core::profile::Profile;
use hotlab_report::audit;
use hotlab_report::audit::{interval, Change, Interval};
use hotlab_spec::RunSpec;
use hotlab_specs::morpho::HOST_SAMPLES;
use hotlab_specs::MorphoSpec;
use hotlab_specs::WorkloadSpec;
use serde::Serialize;

/// The knobs flipped, each against the defaults (batched lifecycle, dynamic slots, hosts
/// one by one, stacked action reads, env worker threads).
pub const FLIPS: [&str; 5] =
    ["--lifecycle loop", "--slots sleeper", "--host-exec batched", "--action-sync per_item", "--backend sequential"];

/// What to measure.
#[derive(Clone, Debug)]
pub struct MorphoBench {
    /// Env counts, each measured on its own.
    pub envs: Vec<usize>,
    /// Env steps (decisions) per env in each run: one rollout and one update.
    pub steps: usize,
    /// Rounds of every setting.
    pub repeats: usize,
    pub device: String,
    /// The hosts' first-stage channels and the task's training images.
    pub width: usize,
    pub images: usize,
}

/// One setting at one env count, over the repeats.
#[derive(Clone, Debug, Serialize)]
pub struct SettingFigure {
    pub envs: usize,
    /// `defaults`, a flag flipped, or `every knob flipped`.
    pub setting: String,
    /// Decisions (env steps) per second of training, one per repeat.
    pub decisions_per_s: Vec<f64>,
    /// Images the hosts trained on per second of training, one per repeat.
    pub host_samples_per_s: Vec<f64>,
    pub median_decisions_per_s: f64,
    pub median_host_samples_per_s: f64,
    /// Decisions/s over the defaults' in the same repeat: median and 95 % interval (None
    /// for the defaults, or with one repeat: then `ratios` alone).
    pub vs_defaults: Option<Interval>,
    pub ratios: Vec<f64>,
    /// The largest phases' shares of the training wall time, over every repeat.
    pub phases: Vec<(String, f64)>,
}

#[derive(Clone, Debug, Serialize)]
pub struct MorphoBenchReport {
    pub cpu: String,
    pub cores: usize,
    pub device: String,
    pub steps: usize,
    pub repeats: usize,
    pub width: usize,
    pub images: usize,
    pub figures: Vec<SettingFigure>,
}

/// The settings, by name, each the defaults' spec with its flags applied.
fn settings(base: &RunSpec) -> Result<Vec<(String, RunSpec)>> {
    let mut out = vec![("defaults".to_string(), base.clone())];
    for flags in FLIPS.into_iter().chain(std::iter::once("")) {
        let (name, flags) = match flags {
            "" => ("every knob flipped".to_string(), FLIPS.join(" ")),
            f => (f.to_string(), f.to_string()),
        };
        let spec = Change::flags(&flags, None)?.apply(base).with_context(|| name.clone())?;
        out.push((name, spec));
    }
    Ok(out)
}

/// The defaults at `envs` envs.
fn base(b: &MorphoBench, envs: usize) -> RunSpec {
    let settings = MorphoSpec { width: b.width, images: b.images, tasks: 2, epochs: 6, ..MorphoSpec::default() };
    let mut spec = RunSpec {
        workload: WorkloadSpec::Morpho(settings),
        device: b.device.clone(),
        envs,
        steps: b.steps,
        total_steps: (envs * b.steps) as u64,
        seed: 1,
        ..RunSpec::default()
    };
    spec.exec.backend = Backend::Threads;
    spec.ppo.minibatches = if (envs * b.steps).is_multiple_of(2) { 2 } else { 1 };
    spec
}

/// The phases above 2 % of the wall, largest first.
fn shares(p: &Profile) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> =
        p.phases.iter().map(|t| (t.phase.name().to_string(), p.share(t.phase))).filter(|(_, s)| *s >= 0.02).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

fn median(v: &[f64]) -> f64 {
    audit::median(v.to_vec()).unwrap_or(f64::NAN)
}

/// Runs every setting at every env count; `progress` hears of each run before it starts.
pub fn run(b: &MorphoBench, progress: &mut dyn FnMut(&str, usize, usize)) -> Result<MorphoBenchReport> {
    let per_count: Vec<Vec<(String, RunSpec)>> =
        b.envs.iter().map(|&n| settings(&base(b, n))).collect::<Result<_>>()?;
    let total = per_count.iter().map(Vec::len).sum::<usize>() * b.repeats;
    let mut done = 0;
    let mut figures = Vec::new();
    for (settings, &envs) in per_count.iter().zip(&b.envs) {
        // [setting][repeat]: decisions/s, host samples/s; a profile summed per setting.
        let mut sps = vec![Vec::new(); settings.len()];
        let mut samples = vec![Vec::new(); settings.len()];
        let mut profiles: Vec<Option<Profile>> = vec![None; settings.len()];
        for repeat in 0..b.repeats {
            for (i, (name, spec)) in settings.iter().enumerate() {
                progress(&format!("{envs} envs, {name} (repeat {})", repeat + 1), done, total);
                let report = crate::measure(spec).with_context(|| format!("{envs} envs, {name}"))?;
                sps[i].push(report.sps);
                samples[i].push(report.counters.own.get(HOST_SAMPLES) as f64 / report.wall_s);
                match &mut profiles[i] {
                    Some(p) => p.accumulate(&report.profile),
                    slot => *slot = Some(report.profile),
                }
                done += 1;
            }
        }
        for (i, (name, _)) in settings.iter().enumerate() {
            let ratios: Vec<f64> = sps[i].iter().zip(&sps[0]).map(|(v, d)| v / d).collect();
            figures.push(SettingFigure {
                envs,
                setting: name.clone(),
                median_decisions_per_s: median(&sps[i]),
                median_host_samples_per_s: median(&samples[i]),
                decisions_per_s: sps[i].clone(),
                host_samples_per_s: samples[i].clone(),
                vs_defaults: if i == 0 { None } else { interval(&ratios) },
                ratios: if i == 0 { Vec::new() } else { ratios },
                phases: profiles[i].as_ref().map(shares).unwrap_or_default(),
            });
        }
    }
    let info = hotlab_train::system::info();
    Ok(MorphoBenchReport {
        cpu: info.devices.first().map(|d| d.name.clone()).unwrap_or_default(),
        cores: info.cpu_cores,
        device: b.device.clone(),
        steps: b.steps,
        repeats: b.repeats,
        width: b.width,
        images: b.images,
        figures,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_is_the_defaults_with_its_flags() {
        let b = MorphoBench { envs: vec![4], steps: 2, repeats: 1, device: "cpu".into(), width: 4, images: 64 };
        let base = base(&b, 4);
        let all = settings(&base).unwrap();
        let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[0], "defaults");
        assert_eq!(names[1..6], FLIPS);
        assert_eq!(names[6], "every knob flipped");
        let morpho = |s: &RunSpec| s.settings::<MorphoSpec>().cloned().unwrap();
        assert_eq!(
            all[1].1.settings::<MorphoSpec>().map(|m| m.lifecycle),
            Some(hotlab_specs::morpho::LifecycleMode::Loop)
        );
        assert_eq!(all[5].1.exec.backend, Backend::Sequential);
        assert_eq!(morpho(&all[1].1).slots, morpho(&base).slots, "one knob at a time");
        let every = &all[6].1;
        assert_eq!(every.exec.backend, Backend::Sequential);
        assert_eq!(morpho(every).slots, hotlab_specs::morpho::SlotPool::Sleeper);
        assert_eq!(morpho(every).host_exec, hotlab_specs::morpho::HostExec::Batched);
    }
}
