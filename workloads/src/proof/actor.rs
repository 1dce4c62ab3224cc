//! The embedding policy's rollout forward: libtorch ops (`eager`; the three index fields
//! go to the device) or the native forward on the host (`fused`, [`ProofHost`]).

use super::host::ProofHost;
use super::ProofAgent;
use hotlab_core::counters::Counters;
use hotlab_core::profile::Phase;
use hotlab_env::FieldData;
use hotlab_specs::proof::EMBEDDING_LOOKUP;
use hotlab_train::distribution;
use hotlab_train::exec::transfer::{read_into, Eager};
use hotlab_train::models::mlp::host::{draw_uniforms, ActOut};
use hotlab_train::ppo::{device_outputs, ActStep, Actor, ValueRows};
use hotlab_train::rollout::{OnDevice, Rollout};
use std::time::Instant;
use tch::Tensor;

pub enum ProofActor {
    /// libtorch ops: the index fields go to the device (`--transfer`, one copy per field
    /// or per env and field), actions come back (`--action-sync`).
    Eager(Eager),
    /// The native forward on the host.
    Fused { policy: Box<ProofHost> },
}

impl Actor<ProofAgent> for ProofActor {
    fn act(&mut self, agent: &ProofAgent, rollout: &mut Rollout, step: ActStep<'_>) -> Instant {
        let ActStep { t, heads, rng, counters: c, prof, start } = step;
        let envs = rollout.envs;
        match self {
            ProofActor::Fused { policy } => {
                let uniforms = draw_uniforms(envs, rng);
                let (fields, slot) = rollout.index_and_slot(t);
                let out =
                    ActOut { actions: slot.actions, real: &mut [], log_probs: slot.log_probs, values: slot.values };
                let lookup_s = policy.act(fields[0], fields[1], fields[2], &uniforms, out);
                prof.stop_split(Phase::POLICY_FORWARD, EMBEDDING_LOOKUP, lookup_s, start)
            }
            ProofActor::Eager(io) => tch::no_grad(|| {
                let net = &agent.net;
                let fields: Vec<Tensor> = (rollout.index_step(t).into_iter().enumerate())
                    .map(|(f, (rows, width))| io.mover.field_to_device(f, rows, envs, width, c))
                    .collect();
                let s = prof.stop(Phase::OBS_TRANSFER, start);
                let out = net.forward(&fields[0], &fields[1]);
                let mask = fields[2].ne(0);
                let actions = distribution::sample(&out.logits, Some(&mask), heads);
                let (lp, _) = distribution::log_prob_and_entropy(&out.logits, Some(&mask), heads, &actions);
                let inputs: Vec<&Tensor> = fields.iter().collect();
                let step =
                    OnDevice { inputs: &inputs, actions: &actions, real: None, log_probs: &lp, values: &out.value };
                rollout.record_on_device(t, step);
                let s = prof.stop_split(Phase::POLICY_FORWARD, EMBEDDING_LOOKUP, out.lookup_s, s);
                io.read_actions(&actions, rollout.step_mut(t).actions, c);
                prof.stop(Phase::ACTION_READBACK, s)
            }),
        }
    }

    fn values(&mut self, agent: &ProofAgent, rows: ValueRows<'_>, c: &mut Counters) -> Vec<f32> {
        fn index<'v>(rows: &ValueRows<'_>, f: &'v FieldData) -> (&'v [i64], usize) {
            let FieldData::I64(v) = f else { unreachable!("the proof env's fields are indices") };
            rows.of(v)
        }
        match self {
            ProofActor::Fused { policy } => policy.values(index(&rows, &rows.obs.fields[0]).0),
            ProofActor::Eager(io) => tch::no_grad(|| {
                let n = rows.count();
                let fields: Vec<Tensor> = rows.obs.fields[..2]
                    .iter()
                    .map(|f| {
                        let (v, w) = index(&rows, f);
                        io.mover.upload_i64(v, &[n as i64, w as i64], c)
                    })
                    .collect();
                let mut out = vec![0f32; n];
                read_into(&agent.net.forward(&fields[0], &fields[1]).value, &mut out, c);
                out
            }),
        }
    }

    fn sync_weights(&mut self, agent: &ProofAgent) {
        if let ProofActor::Fused { policy } = self {
            policy.load(&agent.net.host_params());
        }
    }

    fn finish(&mut self, rollout: &mut Rollout, c: &mut Counters) -> Option<(Tensor, Tensor)> {
        match self {
            ProofActor::Fused { .. } => None,
            ProofActor::Eager(_) => device_outputs(rollout, c),
        }
    }
}
