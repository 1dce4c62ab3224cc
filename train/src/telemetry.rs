//! Gradient telemetry off the hot path (catalogue row 7): every K updates, the global
//! and per-layer gradient norms come from one device reduction and one read-back, and
//! go through a bounded queue to a background thread that publishes them. The trainer
//! never waits: when the queue is full the event is dropped and counted.

use crate::params::ParamSlot;
use hotlab_core::counters::Counters;
use serde::Serialize;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::thread::JoinHandle;
use tch::{Device, Kind, Tensor};

/// Events the queue holds before new ones are dropped.
pub const QUEUE: usize = 64;

/// One telemetry event: the norms of an update's last minibatch gradient, before clipping.
#[derive(Clone, Debug, Serialize)]
pub struct GradNorms {
    pub update: u64,
    pub global: f64,
    /// `(parameter name, norm)` in layout order.
    pub layers: Vec<(String, f64)>,
}

/// Where events end up (a file, the lab server); runs on the background thread.
pub type Sink = Box<dyn FnMut(&GradNorms) + Send>;

/// What telemetry did in a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TelemetrySummary {
    /// Every K updates; 0 = off.
    pub every: u64,
    /// Events handed to the queue.
    pub sent: u64,
    /// Events dropped because the queue was full.
    pub dropped: u64,
    /// Events the background thread published.
    pub published: u64,
}

pub struct Telemetry {
    every: u64,
    /// Which parameter each entry of the flat gradient belongs to.
    ids: Tensor,
    names: Vec<String>,
    tx: Option<SyncSender<GradNorms>>,
    worker: Option<JoinHandle<u64>>,
    sent: u64,
    dropped: u64,
}

impl Telemetry {
    /// Telemetry every `every` updates (0 = off), published to `sink` from a background thread.
    pub fn new(every: u64, layout: &[ParamSlot], device: Device, mut sink: Sink) -> Self {
        let ids: Vec<i64> =
            layout.iter().enumerate().flat_map(|(i, s)| std::iter::repeat_n(i as i64, s.numel() as usize)).collect();
        let (tx, worker) = if every > 0 {
            let (tx, rx) = sync_channel::<GradNorms>(QUEUE);
            let worker = std::thread::Builder::new()
                .name("hotlab-telemetry".into())
                .spawn(move || {
                    let mut published = 0;
                    for event in rx {
                        sink(&event);
                        published += 1;
                    }
                    published
                })
                .expect("spawning the telemetry thread");
            (Some(tx), Some(worker))
        } else {
            (None, None)
        };
        Self {
            every,
            ids: Tensor::from_slice(&ids).to_device(device),
            names: layout.iter().map(|s| s.name.clone()).collect(),
            tx,
            worker,
            sent: 0,
            dropped: 0,
        }
    }

    /// Whether update `update` (1-based) records telemetry.
    pub fn due(&self, update: u64) -> bool {
        self.every > 0 && update.is_multiple_of(self.every)
    }

    /// Squared norm of each parameter's gradient, `[params]`, on the device (no sync).
    pub fn squared_norms(&self, grad: &Tensor) -> Tensor {
        tch::no_grad(|| {
            Tensor::zeros([self.names.len() as i64], (Kind::Float, grad.device())).index_add(
                0,
                &self.ids,
                &grad.square(),
            )
        })
    }

    /// Reads `squared` back (one copy) and queues the event without waiting.
    pub fn publish(&mut self, update: u64, squared: &Tensor, c: &mut Counters) {
        let Some(tx) = &self.tx else { return };
        let sq = Vec::<f32>::try_from(squared.to_device(tch::Device::Cpu)).unwrap_or_default();
        c.host_syncs += 1;
        c.d2h_copies += 1;
        c.d2h_bytes += 4 * sq.len() as u64;
        let global = sq.iter().map(|&x| x as f64).sum::<f64>().sqrt();
        let layers = self.names.iter().cloned().zip(sq.iter().map(|&x| (x as f64).sqrt())).collect();
        match tx.try_send(GradNorms { update, global, layers }) {
            Ok(()) => self.sent += 1,
            Err(TrySendError::Full(_)) => self.dropped += 1,
            Err(TrySendError::Disconnected(_)) => self.dropped += 1,
        }
    }

    /// Closes the queue, lets the background thread publish what is left, and sums up.
    pub fn finish(mut self) -> TelemetrySummary {
        drop(self.tx.take());
        let published = self.worker.take().and_then(|w| w.join().ok()).unwrap_or(0);
        TelemetrySummary { every: self.every, sent: self.sent, dropped: self.dropped, published }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::mlp::policy::{ActorCritic, Architecture};
    use std::sync::{Arc, Barrier, Mutex};

    fn net() -> ActorCritic {
        let _seeded = crate::testing::torch_seed(0);
        ActorCritic::new(Architecture { obs_dim: 3, hidden: vec![4], logits: 2, gaussian: 0 }, Device::Cpu)
    }

    #[test]
    fn norms_per_layer_and_global_from_one_reduction() {
        let net = net();
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink_got = got.clone();
        let mut t =
            Telemetry::new(2, &net.layout, net.device(), Box::new(move |e| sink_got.lock().unwrap().push(e.clone())));
        assert!(!t.due(1) && t.due(2) && t.due(4));
        let grad = Tensor::ones([net.arch.num_params()], (Kind::Float, Device::Cpu));
        let mut c = Counters::default();
        t.publish(2, &t.squared_norms(&grad), &mut c);
        let summary = t.finish();
        assert_eq!((summary.sent, summary.dropped, summary.published), (1, 0, 1));
        assert_eq!(c.host_syncs, 1, "one read-back");
        let events = got.lock().unwrap();
        let e = &events[0];
        assert_eq!(e.layers[0], ("actor.0.w".to_string(), (12f64).sqrt()), "3×4 weights of 1");
        assert!((e.global - (net.arch.num_params() as f64).sqrt()).abs() < 1e-9);
    }

    #[test]
    fn a_stalled_publisher_drops_events_and_never_blocks_the_trainer() {
        let net = net();
        let gate = Arc::new(Barrier::new(2));
        let sink_gate = gate.clone();
        let mut first = true;
        let mut t = Telemetry::new(
            1,
            &net.layout,
            net.device(),
            Box::new(move |_| {
                if first {
                    first = false;
                    sink_gate.wait(); // the publisher stalls until the trainer is done
                }
            }),
        );
        let sq = t.squared_norms(&Tensor::ones([net.arch.num_params()], (Kind::Float, Device::Cpu)));
        let mut c = Counters::default();
        let n = QUEUE as u64 + 20;
        for u in 1..=n {
            t.publish(u, &sq, &mut c);
        }
        gate.wait();
        let s = t.finish();
        assert_eq!(s.sent + s.dropped, n);
        assert!(s.dropped >= 19, "the queue holds {QUEUE}, one is in the stalled sink: {s:?}");
        assert_eq!(s.published, s.sent);
    }
}
