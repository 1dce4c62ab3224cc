//! What the lab's viewer draws of this workload: the first few envs' hosts (epoch,
//! validation accuracy, slots) read back from their observations, and the decision taken.

use super::blueprint::Blueprint;
use super::env::{OBS, OBS_PER_SLOT};
use super::host::SLOTS;
use super::rules::STAGES;
use crate::morpho::rules::{self, ALPHA_EPOCHS, ALPHA_TARGETS, CURVES, OPS, SEED_LR, TEMPOS};
use hotlab_protocol::Frame;
use hotlab_specs::morpho::{HeadChoice, MorphoFrame, MorphoView, SlotView};
use hotlab_specs::EnvName;

/// Envs shown per frame.
pub const FRAME_ENVS: usize = 4;

/// A frame from the features `[envs × OBS]` and the actions `[envs × 8]` just chosen.
pub fn frame(step: u64, features: &[f32], actions: &[i64], epochs: u32) -> Frame {
    let envs = features
        .chunks_exact(OBS)
        .zip(actions.chunks_exact(8))
        .take(FRAME_ENVS)
        .enumerate()
        .map(|(env, (f, a))| MorphoView {
            env,
            epoch: (f[0] * epochs as f32).round() as u32,
            epochs,
            accuracy: f[4],
            slots: (0..SLOTS).map(|s| slot(&f[5 + s * OBS_PER_SLOT..5 + (s + 1) * OBS_PER_SLOT])).collect(),
            decision: decision(a),
        })
        .collect();
    Frame::new(EnvName::Morpho, step, &MorphoFrame { envs })
}

fn slot(f: &[f32]) -> SlotView {
    let stage = STAGES.iter().zip(f).find(|(_, &x)| x > 0.5).map_or(rules::Stage::Dormant, |(s, _)| *s);
    let bp = &f[9..9 + Blueprint::ALL.len()];
    let blueprint = Blueprint::ALL.iter().zip(bp).find(|(_, &x)| x > 0.5).map(|(b, _)| b.name().to_string());
    SlotView { stage: format!("{stage:?}").to_lowercase(), alpha: f[7], blueprint, credit: f[OBS_PER_SLOT - 1] }
}

fn decision(a: &[i64]) -> Vec<HeadChoice> {
    let op = OPS.get(a[0] as usize).copied().unwrap_or(rules::Op::Wait);
    let pick = |h: usize| a[h].max(0) as usize;
    let choices = [
        op.name().to_string(),
        format!("{}", pick(1)),
        Blueprint::ALL.get(pick(2)).map_or("?", |b| b.name()).to_string(),
        CURVES.get(pick(3)).map_or("?".into(), |c| format!("{c:?}").to_lowercase()),
        ALPHA_TARGETS.get(pick(4)).map_or("?".into(), |x| format!("{x}")),
        ALPHA_EPOCHS.get(pick(5)).map_or("?".into(), |x| format!("{x} epochs")),
        TEMPOS.get(pick(6)).map_or("?".into(), |x| format!("{x} minibatches")),
        SEED_LR.get(pick(7)).map_or("?".into(), |x| format!("×{x}")),
    ];
    let names = rules::heads(SLOTS, Blueprint::ALL.len());
    (names.iter().zip(choices).enumerate())
        .map(|(h, ((head, _), choice))| HeadChoice { head: head.to_string(), choice, read: op.reads(h) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::morpho::env::{MorphoConfig, MorphoEnv};
    use crate::morpho::glyphs::{generate, TaskSpec};
    use crate::morpho::rules::Action;

    /// The viewer reads back what the env holds: a germinated slot with its blueprint, and
    /// the decision's heads, the unread ones marked.
    #[test]
    fn a_frame_shows_the_slots_and_the_decision() {
        let task = generate(&TaskSpec { seed: 3, train: 128, val: 64, ..TaskSpec::default() });
        let mut env = MorphoEnv::new(&task, MorphoConfig { epochs: 8, ..MorphoConfig::default() }, 2).unwrap();
        let germinate = Action { op: 1, slot: 2, blueprint: 1, seed_lr: 2, ..Action::default() };
        env.step(&germinate).unwrap();
        let f = frame(7, &env.observe(), &germinate.to_heads(), 8);
        let MorphoFrame { envs } = f.read(EnvName::Morpho).expect("a morpho frame");
        let v = &envs[0];
        assert_eq!((v.epoch, v.epochs), (1, 8));
        assert_eq!(v.slots[2].stage, "germinated");
        assert_eq!(v.slots[2].blueprint.as_deref(), Some("depthwise"));
        assert_eq!(v.slots[0].stage, "dormant");
        assert!(v.slots.iter().all(|s| s.credit == 0.0), "nothing blended, nothing credited");
        // Into training, then blended in, at the longest tempo (the host learns enough for a
        // seed to move its accuracy): the frame shows the blend and the seed's credit.
        let advance = Action { op: 2, slot: 2, alpha_target: 3, tempo: 2, ..Action::default() };
        let wait = Action { tempo: 2, ..Action::default() };
        for a in [&advance, &wait, &advance, &wait] {
            env.step(a).unwrap();
        }
        let f = frame(8, &env.observe(), &Action::default().to_heads(), 8);
        let MorphoFrame { envs } = f.read(EnvName::Morpho).expect("a morpho frame");
        let s = &envs[0].slots[2];
        assert!((s.stage == "blending" || s.stage == "holding") && s.alpha > 0.0, "{s:?}");
        assert!(s.credit != 0.0 && s.credit == env.credit()[2] as f32, "{s:?} against {:?}", env.credit());
        assert_eq!((v.decision[0].choice.as_str(), v.decision[7].choice.as_str()), ("germinate", "×2"));
        assert!(v.decision[2].read && !v.decision[3].read, "a germination reads the blueprint, not the curve");
    }
}
