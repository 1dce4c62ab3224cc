//! `sequential`: one scalar env object per env, stepped one after another on the
//! trainer thread, with a dynamic call per env per step — the per-env loop of seeds 000
//! and 003 (catalogue row 8's "CPU trench").

use super::{write_row, EnvMaker};
use hotlab_env::{BatchEnv, EnvError, EnvSpec, EpisodeEnd, FieldData, Observations, ScalarEnv, StepBatch};

pub struct Sequential {
    spec: EnvSpec,
    envs: Vec<Box<dyn ScalarEnv>>,
    /// One observation row per env (the scalar envs write here).
    rows: Vec<Vec<FieldData>>,
    returns: Vec<f64>,
    lengths: Vec<u32>,
}

impl Sequential {
    pub fn new(env: &dyn EnvMaker, count: usize, seed: u64) -> Self {
        let envs: Vec<Box<dyn ScalarEnv>> = (0..count as u64).map(|i| env.scalar_env(seed, i)).collect();
        let spec = envs[0].spec().clone();
        let rows = (0..count).map(|_| spec.fields.iter().map(|f| FieldData::zeros(f, 1)).collect()).collect();
        Self { spec, envs, rows, returns: vec![0.0; count], lengths: vec![0; count] }
    }
}

impl BatchEnv for Sequential {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn num_envs(&self) -> usize {
        self.envs.len()
    }

    fn reset(&mut self, out: &mut Observations) -> Result<(), EnvError> {
        for (e, (env, row)) in self.envs.iter_mut().zip(&mut self.rows).enumerate() {
            env.reset(row);
            for (f, field) in row.iter().enumerate() {
                write_row(&mut out.fields[f], e, field);
            }
        }
        self.returns.fill(0.0);
        self.lengths.fill(0);
        Ok(())
    }

    fn step(&mut self, actions: &[i64], out: &mut StepBatch) -> Result<(), EnvError> {
        let heads = self.spec.heads.len();
        out.episodes.clear();
        for (e, (env, row)) in self.envs.iter_mut().zip(&mut self.rows).enumerate() {
            let (reward, term, trunc) = env.step(&actions[e * heads..(e + 1) * heads], row);
            self.returns[e] += reward;
            self.lengths[e] += 1;
            out.reward[e] = reward as f32;
            out.terminated[e] = term;
            out.truncated[e] = trunc;
            if term || trunc {
                out.episodes.push(EpisodeEnd {
                    env: e,
                    episode_return: self.returns[e],
                    length: self.lengths[e],
                    terminated: term,
                });
                for (f, field) in row.iter().enumerate() {
                    write_row(&mut out.final_obs.fields[f], e, field);
                }
                env.reset(row);
                self.returns[e] = 0.0;
                self.lengths[e] = 0;
            }
            for (f, field) in row.iter().enumerate() {
                write_row(&mut out.obs.fields[f], e, field);
            }
        }
        Ok(())
    }
}
