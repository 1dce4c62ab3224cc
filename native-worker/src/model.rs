//! The network a run trains: the MLP actor-critic (f32 observations) or the proof env's
//! embedding policy (index observations). Both keep their parameters in one flat tensor.

use crate::policy::{ActorCritic, ParamSlot};
use crate::proof_policy::ProofNet;
use tch::{Device, Tensor};

pub enum Model {
    Mlp(ActorCritic),
    Proof(ProofNet),
}

impl Model {
    pub fn device(&self) -> Device {
        match self {
            Model::Mlp(n) => n.device(),
            Model::Proof(n) => n.device(),
        }
    }

    pub fn flat(&self) -> &Tensor {
        match self {
            Model::Mlp(n) => &n.flat,
            Model::Proof(n) => &n.flat,
        }
    }

    pub fn layout(&self) -> &[ParamSlot] {
        match self {
            Model::Mlp(n) => &n.layout,
            Model::Proof(n) => &n.layout,
        }
    }

    /// The MLP (panics for the proof policy: callers match on the env first).
    pub fn mlp(&self) -> &ActorCritic {
        match self {
            Model::Mlp(n) => n,
            Model::Proof(_) => unreachable!("the MLP actor runs only on f32 envs"),
        }
    }

    pub fn proof(&self) -> &ProofNet {
        match self {
            Model::Proof(n) => n,
            Model::Mlp(_) => unreachable!("the proof actor runs only on the proof env"),
        }
    }
}
