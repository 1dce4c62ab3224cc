//! Hosts on CUDA under `--host-exec per_env`: each env's host on a stream of its own (seed
//! 003's per-env streams), a batch's minibatches queued minibatch-first across its hosts
//! (its inverted control flow) so that the streams' kernels overlap, nothing read before
//! each epoch's end, and the waits `--stream-wait` asks for (seed 002 #4).
//!
//! What a host's stream must wait for is on the default stream: the surgery (a grafted
//! seed's weights) and the data and weights made there. `moved` waits once per epoch,
//! before its indices are copied; `every` again before every minibatch, as seed 002's
//! trainer did. An epoch's end reads its loss on the host's stream (a sync of that stream
//! alone), after which the default stream may use the host again.

use super::env::MorphoEnv;
use anyhow::{bail, Result};
use hotlab_specs::morpho::StreamWait;
use hotlab_specs::morpho::STREAM_WAITS;
use hotlab_train::cuda::shim::Stream;
use tch::Device;

pub struct HostStreams {
    default: Stream,
    own: Vec<Stream>,
    wait: StreamWait,
}

impl HostStreams {
    /// A stream for each of `count` hosts on `device`, or why there are none (the CPU, a
    /// build without the CUDA shim).
    pub fn new(device: Device, count: usize, wait: StreamWait) -> Result<Self> {
        let Device::Cuda(index) = device else { bail!("hosts on {device:?} have no CUDA streams") };
        let own = (0..count).map(|_| Stream::unique(index)).collect::<Result<_>>()?;
        Ok(Self { default: Stream::current(index)?, own, wait })
    }

    /// One host epoch each for `envs` (the tempo head's choice each), minibatch by
    /// minibatch across the hosts, each host on its own stream.
    pub fn train(&self, envs: &mut [&mut MorphoEnv], tempos: &[usize]) -> Result<()> {
        let result = self.queue(envs, tempos);
        self.default.make_current()?;
        result
    }

    fn queue(&self, envs: &mut [&mut MorphoEnv], tempos: &[usize]) -> Result<()> {
        let mut epochs = Vec::new();
        for ((env, stream), &tempo) in envs.iter_mut().zip(&self.own).zip(tempos) {
            stream.make_current()?;
            self.wait(stream, env)?;
            epochs.push(env.begin_epoch(tempo)?);
        }
        loop {
            let mut queued = false;
            for ((env, stream), epoch) in envs.iter_mut().zip(&self.own).zip(&mut epochs) {
                if epoch.remaining() == 0 {
                    continue;
                }
                stream.make_current()?;
                if self.wait == StreamWait::Every {
                    self.wait(stream, env)?;
                }
                queued |= env.minibatch(epoch);
            }
            if !queued {
                break;
            }
        }
        for ((env, stream), epoch) in envs.iter_mut().zip(&self.own).zip(epochs) {
            stream.make_current()?;
            env.end_epoch(epoch);
        }
        Ok(())
    }

    /// `stream` waits for the default stream, counted on the env's clock.
    fn wait(&self, stream: &Stream, env: &MorphoEnv) -> Result<()> {
        stream.wait_for(&self.default)?;
        env.clock().count(STREAM_WAITS, 1);
        Ok(())
    }
}
