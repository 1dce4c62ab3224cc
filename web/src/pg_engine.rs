//! The playground's two paths behind one type, each stepped in frames of about 20 ms
//! of work, and the bookkeeping the page shows (steps/s while stepping, the tally, the
//! steps/s-against-N measurements).

use hotlab_wgpu::cpu::CpuCartPole;
use hotlab_wgpu::gpu::{Gpu, GpuCartPole};
use hotlab_wgpu::{Setup, Tally};

/// Envs drawn on the canvas.
pub const SAMPLE: usize = 64;
/// Work per frame: long enough that per-frame costs stay small, short enough for 30+ fps.
const FRAME_S: f64 = 0.020;

/// Seconds since the page loaded (`performance.now()`).
pub fn now_s() -> f64 {
    web_sys::window().and_then(|w| w.performance()).map_or(0.0, |p| p.now() / 1e3)
}

/// Which path runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    WebGpu,
    Cpu,
}

impl Path {
    pub fn as_str(self) -> &'static str {
        match self {
            Path::WebGpu => "webgpu",
            Path::Cpu => "cpu",
        }
    }
}

/// When the GPU path reads its results back (catalogue row 4: a sync per dispatch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadBack {
    /// After every dispatch: the page waits for the GPU each time.
    EveryDispatch,
    /// Once per frame, after all of the frame's dispatches.
    OncePerFrame,
}

impl ReadBack {
    pub fn as_str(self) -> &'static str {
        match self {
            ReadBack::EveryDispatch => "every dispatch",
            ReadBack::OncePerFrame => "once per frame",
        }
    }
}

/// The GPU path's knobs: env steps per dispatch (catalogue row 5: launch overhead), and
/// when to read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuKnobs {
    /// `None`: adapt (one dispatch per frame, as many steps as fill it).
    pub steps_per_dispatch: Option<u32>,
    pub read_back: ReadBack,
}

impl Default for GpuKnobs {
    fn default() -> Self {
        Self { steps_per_dispatch: None, read_back: ReadBack::OncePerFrame }
    }
}

/// The steps-per-dispatch settings the page offers.
pub const STEPS_PER_DISPATCH: [u32; 6] = [1, 4, 16, 64, 256, 1024];

/// A playground on one path.
pub enum Engine {
    Gpu { env: GpuCartPole, knobs: GpuKnobs, steps: u32, dispatches: u32 },
    Cpu(CpuCartPole),
}

/// What one frame did.
pub struct FrameOut {
    pub tally: Tally,
    /// Seconds spent stepping (for the GPU: from submit to the read-back).
    pub busy_s: f64,
    pub sample: Vec<[f32; 4]>,
}

impl Engine {
    pub async fn new(path: Path, gpu: Option<&Gpu>, setup: &Setup, knobs: GpuKnobs) -> Result<Self, String> {
        match (path, gpu) {
            (Path::WebGpu, Some(gpu)) => {
                let env = GpuCartPole::new(gpu, setup).await.map_err(|e| e.0)?;
                let steps = knobs.steps_per_dispatch.unwrap_or(1);
                Ok(Engine::Gpu { env, knobs, steps, dispatches: 1 })
            }
            (Path::WebGpu, None) => Err("this browser has no WebGPU adapter".into()),
            (Path::Cpu, _) => CpuCartPole::new(setup).map(Engine::Cpu),
        }
    }

    pub fn path(&self) -> Path {
        match self {
            Engine::Gpu { .. } => Path::WebGpu,
            Engine::Cpu(_) => Path::Cpu,
        }
    }

    /// About [`FRAME_S`] of stepping.
    pub async fn frame(&mut self) -> Result<FrameOut, String> {
        let start = now_s();
        match self {
            Engine::Gpu { env, knobs, steps, dispatches } => {
                let (tally, sample) = match knobs.read_back {
                    ReadBack::OncePerFrame => env.run_batched(*dispatches, *steps, SAMPLE).await.map_err(|e| e.0)?,
                    ReadBack::EveryDispatch => {
                        let (mut tally, mut sample) = (Tally::default(), Vec::new());
                        for _ in 0..*dispatches {
                            let (t, s) = env.run(*steps, SAMPLE).await.map_err(|e| e.0)?;
                            tally.add(t);
                            sample = s;
                        }
                        (tally, sample)
                    }
                };
                let busy_s = now_s() - start;
                let max = env.max_steps_per_dispatch();
                // Adapt what is free to fill a frame: the steps of the one dispatch, or
                // (steps per dispatch fixed) the dispatches per frame.
                match knobs.steps_per_dispatch {
                    None => *steps = next_steps(*steps, busy_s, max),
                    Some(k) => *dispatches = next_steps(*dispatches, busy_s, (max / k.max(1)).max(1)),
                }
                Ok(FrameOut { tally, busy_s, sample })
            }
            Engine::Cpu(env) => {
                let tally = env.run(u32::MAX, &mut || now_s() - start > FRAME_S);
                Ok(FrameOut { tally, busy_s: now_s() - start, sample: env.sample(SAMPLE) })
            }
        }
    }
}

/// The two lessons the playground runs on the viewer's own machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PgLesson {
    /// Row 5: env steps per dispatch, the frame read back once.
    StepsPerDispatch,
    /// Row 4: one step per dispatch, read back after each or once per frame.
    ReadBack,
}

impl PgLesson {
    pub fn as_str(self) -> &'static str {
        match self {
            PgLesson::StepsPerDispatch => "steps-per-dispatch",
            PgLesson::ReadBack => "read-back",
        }
    }

    /// Its settings, the slow one first, each with a label.
    pub fn settings(self) -> Vec<(String, GpuKnobs)> {
        match self {
            PgLesson::StepsPerDispatch => STEPS_PER_DISPATCH
                .iter()
                .map(|&k| {
                    let knobs = GpuKnobs { steps_per_dispatch: Some(k), read_back: ReadBack::OncePerFrame };
                    (format!("{k} step{} per dispatch", if k == 1 { "" } else { "s" }), knobs)
                })
                .collect(),
            PgLesson::ReadBack => [ReadBack::EveryDispatch, ReadBack::OncePerFrame]
                .into_iter()
                .map(|r| (format!("read back {}", r.as_str()), GpuKnobs { steps_per_dispatch: Some(1), read_back: r }))
                .collect(),
        }
    }
}

/// One measured setting of a playground lesson.
#[derive(Clone, Debug, PartialEq)]
pub struct LessonRow {
    pub lesson: PgLesson,
    pub setting: String,
    /// Steps/s in each round (the settings take turns, round after round).
    pub rounds: Vec<f64>,
}

impl LessonRow {
    /// The median over the rounds.
    pub fn sps(&self) -> Option<f64> {
        let mut v = self.rounds.clone();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => None,
            n if n % 2 == 1 => Some(v[n / 2]),
            n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
        }
    }
}

/// Steps for the next dispatch: doubled while a frame takes under 60% of [`FRAME_S`],
/// halved above 180% (a dispatch cannot be stopped midway, so aim a little low).
pub fn next_steps(steps: u32, took_s: f64, max: u32) -> u32 {
    let next = if took_s < 0.6 * FRAME_S {
        steps.saturating_mul(2)
    } else if took_s > 1.8 * FRAME_S {
        steps / 2
    } else {
        steps
    };
    next.clamp(1, max.max(1))
}

/// Steps/s over the stepping time of the last `window_s` seconds of frames.
#[derive(Clone, Debug, Default)]
pub struct SpsMeter {
    frames: std::collections::VecDeque<(f64, u64, f64)>,
}

impl SpsMeter {
    pub fn add(&mut self, at_s: f64, steps: u64, busy_s: f64, window_s: f64) {
        self.frames.push_back((at_s, steps, busy_s));
        while self.frames.front().is_some_and(|f| f.0 < at_s - window_s) && self.frames.len() > 1 {
            self.frames.pop_front();
        }
    }

    pub fn sps(&self) -> Option<f64> {
        let (steps, busy) = self.frames.iter().fold((0u64, 0f64), |(s, b), f| (s + f.1, b + f.2));
        (busy > 0.0 && steps > 0).then(|| steps as f64 / busy)
    }

    /// Seconds of stepping measured so far in the window.
    pub fn busy_s(&self) -> f64 {
        self.frames.iter().map(|f| f.2).sum()
    }
}

/// One point of the steps/s-against-N chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub path: Path,
    pub envs: usize,
    pub sps: f64,
}

/// Keeps one measurement per (path, envs): the newest.
pub fn record(points: &mut Vec<Measurement>, m: Measurement) {
    match points.iter_mut().find(|p| p.path == m.path && p.envs == m.envs) {
        Some(p) => *p = m,
        None => points.push(m),
    }
    points.sort_by_key(|p| (p.path.as_str(), p.envs));
}

/// The batch sizes a sweep measures.
pub const SWEEP: [usize; 6] = [1, 16, 256, 4096, 65_536, 1_048_576];

/// The envs field of the form: a whole number from 1 to 1,048,576 (spaces, `_` and `,`
/// allowed as separators).
pub fn parse_envs(text: &str) -> Result<usize, String> {
    let digits: String = text.chars().filter(|c| !matches!(c, ' ' | '_' | ',')).collect();
    match digits.parse::<usize>() {
        Ok(n) if (1..=hotlab_wgpu::MAX_ENVS).contains(&n) => Ok(n),
        _ => Err(format!("envs: a whole number from 1 to {} (got '{}')", hotlab_wgpu::MAX_ENVS, text.trim())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_per_dispatch_grow_until_a_frame_is_long_enough_and_shrink_when_too_long() {
        assert_eq!(next_steps(4, 0.001, 4096), 8);
        assert_eq!(next_steps(4, 0.020, 4096), 4);
        assert_eq!(next_steps(4, 0.100, 4096), 2);
        assert_eq!(next_steps(1, 1.0, 4096), 1);
        assert_eq!(next_steps(4096, 0.0, 4096), 4096);
    }

    #[test]
    fn the_meter_divides_steps_by_stepping_time_over_its_window() {
        let mut m = SpsMeter::default();
        assert_eq!(m.sps(), None);
        m.add(0.0, 1000, 0.01, 1.0);
        m.add(0.5, 3000, 0.01, 1.0);
        assert_eq!(m.sps(), Some(200_000.0));
        m.add(2.0, 500, 0.01, 1.0);
        assert_eq!(m.sps(), Some(50_000.0), "frames older than the window are dropped");
    }

    #[test]
    fn measurements_keep_the_newest_per_path_and_size() {
        let mut v = Vec::new();
        record(&mut v, Measurement { path: Path::WebGpu, envs: 16, sps: 1.0 });
        record(&mut v, Measurement { path: Path::Cpu, envs: 16, sps: 2.0 });
        record(&mut v, Measurement { path: Path::WebGpu, envs: 16, sps: 3.0 });
        assert_eq!(v.len(), 2);
        assert_eq!(v.iter().find(|p| p.path == Path::WebGpu).unwrap().sps, 3.0);
    }

    #[test]
    fn playground_lessons_start_from_the_slow_setting() {
        let steps = PgLesson::StepsPerDispatch.settings();
        assert_eq!(steps.len(), STEPS_PER_DISPATCH.len());
        assert_eq!(steps[0].1.steps_per_dispatch, Some(1));
        assert!(steps.iter().all(|(_, k)| k.read_back == ReadBack::OncePerFrame));
        let read = PgLesson::ReadBack.settings();
        assert_eq!(read[0].0, "read back every dispatch");
        assert_eq!(read[1].1, GpuKnobs { steps_per_dispatch: Some(1), read_back: ReadBack::OncePerFrame });
        let row = LessonRow { lesson: PgLesson::ReadBack, setting: String::new(), rounds: vec![3.0, 1.0] };
        assert_eq!(row.sps(), Some(2.0));
    }

    #[test]
    fn envs_are_checked_naming_the_field() {
        assert_eq!(parse_envs("4096"), Ok(4096));
        assert_eq!(parse_envs("1_048_576"), Ok(1 << 20));
        assert!(parse_envs("0").unwrap_err().starts_with("envs: a whole number from 1 to 1048576"));
        assert!(parse_envs("1048577").is_err());
        assert!(parse_envs("many").is_err());
    }
}
