//! What the lab's viewer draws for the dreamer: env 0's frame, the world model's
//! reconstruction of it from the state the actor acts on, and frames the model imagines
//! ahead under the actor; each at half the side (32 × 32) to keep a frame a few KB.

use super::behavior::Behavior;
use super::world::{State, WorldModel, ACTIONS};
use hotlab_protocol::pixels::{encode, halve};
use hotlab_protocol::Frame;
use hotlab_specs::dreamer::DreamerFrame;
use hotlab_specs::dreamer::DREAMER_IMAGE;
use hotlab_specs::EnvName;
use tch::{Device, Kind, Tensor};

/// Imagined frames shown, and the steps between them.
const IMAGINED: usize = 3;
const EVERY: usize = 5;

/// A decoded `[1, PIXELS]` frame (the encoder's −0.5..0.5 scale) as bytes at half the side.
fn bytes(decoded: &Tensor) -> String {
    let pixels = ((decoded.to_kind(Kind::Float) + 0.5).clamp(0.0, 1.0) * 255.0).round().to_kind(Kind::Uint8);
    let full = Vec::<u8>::try_from(pixels.to_device(Device::Cpu).view([-1])).unwrap_or_default();
    encode(&halve(&full, DREAMER_IMAGE))
}

/// The view of env 0: `observed` its frame; `model`, once the actor acts, the world model,
/// the actor and the posterior state for that frame (env 0's row is used).
pub fn frame(step: u64, observed: &[u8], model: Option<(&WorldModel, &Behavior, &State)>) -> Frame {
    let (reconstruction, imagined) = match model {
        None => (None, Vec::new()),
        Some((world, behavior, state)) => tch::no_grad(|| {
            let mut s = State { deter: state.deter.narrow(0, 0, 1), stoch: state.stoch.narrow(0, 0, 1) };
            let reconstruction = bytes(&world.decode(&s.feat()));
            let mut imagined = Vec::with_capacity(IMAGINED);
            for k in 1..=IMAGINED * EVERY {
                let action = behavior.act(&s.feat(), false).one_hot(ACTIONS).to_kind(Kind::Float);
                s = world.imagine(&s, &action);
                if k % EVERY == 0 {
                    imagined.push(bytes(&world.decode(&s.feat())));
                }
            }
            (Some(reconstruction), imagined)
        }),
    };
    let fields = DreamerFrame {
        side: (DREAMER_IMAGE / 2) as u32,
        observed: encode(&halve(observed, DREAMER_IMAGE)),
        reconstruction,
        imagined,
        every: EVERY as u32,
    };
    Frame::new(EnvName::Dreamer, step, &fields)
}
