//! A run as the page knows it: its events folded into series, totals and the latest
//! frame. Pure (no browser), so it is unit-tested natively.

use hotlab_core::profile::Profile;
use hotlab_protocol::{Event, EventBody, Frame, MetricsPoint, RunStatus, RunSummary};
use hotlab_report::{analyze, Report};
use hotlab_spec::RunSpec;

/// Profile windows kept for the phase-split bars.
pub const WINDOWS: usize = 60;

#[derive(Clone, Debug, Default)]
pub struct RunData {
    /// The last event applied other than a frame (what a reconnect asks to continue after).
    pub last_seq: u64,
    pub status: Option<RunStatus>,
    pub message: Option<String>,
    pub metrics: Vec<MetricsPoint>,
    /// The latest [`WINDOWS`] profile windows, oldest first.
    pub windows: Vec<Profile>,
    /// Every window so far, summed.
    pub total: Profile,
    /// The report at the end of the run.
    pub report: Option<Report>,
    pub frame: Option<Frame>,
}

impl RunData {
    /// Folds one event in; an event already seen (a replay after a reconnect) is ignored.
    /// A frame is shown as it comes, whatever its `seq`: the server sends the history's in
    /// order, then the newest live one at the viewer's rate (`seq` 0 when not kept).
    pub fn apply(&mut self, e: Event) -> bool {
        if let EventBody::Rollout { frame } = e.body {
            // A frame never moves the reconnect point: the server sends a live run's newest
            // frame at the viewer's rate, and a kept one (its `seq` real) can overtake the
            // metrics and profile published just before it; moving the point past them would
            // drop them as replays (the counters then fell short of the header's env steps).
            self.frame = Some(frame);
            return true;
        }
        if e.seq <= self.last_seq {
            return false;
        }
        self.last_seq = e.seq;
        match e.body {
            EventBody::Status { status, message } => {
                self.status = Some(status);
                self.message = message;
            }
            EventBody::Metrics { metrics } => self.metrics.push(metrics),
            EventBody::Profile { profile } => {
                self.total.accumulate(&profile);
                if self.windows.len() == WINDOWS {
                    self.windows.remove(0);
                }
                self.windows.push(profile);
            }
            EventBody::Report { report } => self.report = Some(report),
            EventBody::Rollout { .. } => {} // above
        }
        true
    }

    /// What a run's summary holds (totals, the last update, the report): enough to
    /// compare runs without their events.
    pub fn from_summary(s: RunSummary) -> Self {
        Self {
            last_seq: s.info.events,
            status: Some(s.info.status),
            message: s.info.message,
            metrics: s.last.into_iter().collect(),
            total: s.total,
            report: s.report,
            ..Self::default()
        }
    }

    /// Steps per second so far (the last update's figure).
    pub fn sps(&self) -> Option<f64> {
        self.metrics.last().map(|m| m.sps)
    }

    /// The bottleneck report: the run's own at the end, before that the same analysis of
    /// the windows so far.
    pub fn report(&self, spec: &RunSpec) -> Option<Report> {
        match &self.report {
            Some(r) => Some(r.clone()),
            None if self.total.wall_s > 0.0 => Some(analyze(&self.total, spec)),
            None => None,
        }
    }
}

/// At most `max` points of a series for a chart: evenly strided, always with the last.
pub fn chart_points(series: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if series.len() <= max || max < 2 {
        return series.to_vec();
    }
    let stride = series.len().div_ceil(max - 1);
    let mut out: Vec<(f64, f64)> = series.iter().step_by(stride).copied().collect();
    if out.last() != series.last() {
        out.push(*series.last().expect("not empty"));
    }
    out
}

/// One metric over env steps, skipping updates without a value.
pub fn series(metrics: &[MetricsPoint], value: impl Fn(&MetricsPoint) -> Option<f64>) -> Vec<(f64, f64)> {
    metrics.iter().filter_map(|m| value(m).filter(|v| v.is_finite()).map(|v| (m.global_step as f64, v))).collect()
}

/// Line colours, in the order a learner names its figures.
const PALETTE: [(u8, u8, u8); 6] = [
    (0xf0, 0xa0, 0x30),
    (0x4a, 0x90, 0xe2),
    (0x4c, 0xc3, 0x8a),
    (0xc7, 0x92, 0xea),
    (0xe8, 0x79, 0xa0),
    (0x9a, 0xa0, 0xa6),
];

/// The learner's own figures over the run, a line each (PPO: its losses, entropy, KL and
/// clip fraction; the dreamer: its actor's and critic's), in the order it names them.
/// Grouped figures (`world.image`) have their own charts ([`world_lines`], [`group_lines`]).
pub fn loss_lines(metrics: &[MetricsPoint], max: usize) -> Vec<crate::charts::Line> {
    figure_lines(metrics, |n| (!n.contains('.')).then_some(n), max)
}

/// The learner's figures of one group (`action` for `action.mean_0`…, `norm`), a line
/// each, named without the group, in the order they are first named; none where the run
/// has no such figures.
pub fn group_lines(metrics: &[MetricsPoint], group: &str, max: usize) -> Vec<crate::charts::Line> {
    let prefix = format!("{group}.");
    figure_lines(metrics, |n| n.strip_prefix(prefix.as_str()), max)
}

/// A line per figure that `label` keeps (its label: the name, or a part of it), coloured
/// in the order the figures are first named.
fn figure_lines<'a>(
    metrics: &'a [MetricsPoint],
    label: impl Fn(&'a str) -> Option<&'a str>,
    max: usize,
) -> Vec<crate::charts::Line> {
    let mut names: Vec<(&str, &str)> = Vec::new();
    for m in metrics {
        for n in m.losses.names() {
            if let Some(shown) = label(n).filter(|_| !names.iter().any(|(known, _)| *known == n)) {
                names.push((n, shown));
            }
        }
    }
    names
        .into_iter()
        .enumerate()
        .map(|(i, (name, shown))| crate::charts::Line {
            name: shown.replace('_', " "),
            color: PALETTE[i % PALETTE.len()],
            points: chart_points(&series(metrics, |m| m.losses.get(name)), max),
        })
        .collect()
}

/// A world model's loss terms over the run, each divided by its first value (they start
/// orders of magnitude apart: a frame's squared error against a reward's): falling lines.
pub fn world_lines(metrics: &[MetricsPoint], max: usize) -> Vec<crate::charts::Line> {
    let terms: [(&'static str, &str); 4] =
        [("image", "world.image"), ("reward", "world.reward"), ("continue", "world.cont"), ("KL", "world.kl")];
    terms
        .into_iter()
        .enumerate()
        .map(|(i, (name, term))| {
            let first = metrics.iter().find_map(|m| m.losses.get(term)).filter(|v| *v > 0.0);
            let points = match first {
                Some(first) => chart_points(&series(metrics, |m| m.losses.get(term).map(|v| v / first)), max),
                None => Vec::new(),
            };
            crate::charts::Line { name: name.into(), color: PALETTE[[0, 2, 1, 3][i]], points }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_core::profile::{Phase, PhaseTime};
    use hotlab_specs::cartpole::CartpoleFrame;

    fn event(seq: u64, body: EventBody) -> Event {
        Event { v: 1, run: 1, seq, body }
    }

    #[test]
    fn live_frames_show_without_moving_the_reconnect_point() {
        let mut d = RunData::default();
        let frame = |step| EventBody::Rollout { frame: cartpole(step) };
        d.apply(event(5, EventBody::Metrics { metrics: point(1, 10.0) }));
        assert!(d.apply(event(0, frame(7))), "a live frame (seq 0) is shown");
        assert_eq!((d.last_seq, d.frame.clone()), (5, Some(cartpole(7))));
        d.apply(event(6, frame(9)));
        assert_eq!((d.last_seq, d.frame.clone()), (5, Some(cartpole(9))), "a kept frame is shown; the point stays");
        assert!(!d.apply(event(5, EventBody::Metrics { metrics: point(1, 10.0) })), "replays are still ignored");
    }

    /// A kept frame sent live ahead of the events published before it: those events still
    /// count, so the counters' env steps and the header's (the last metrics) agree.
    #[test]
    fn events_a_frame_overtook_still_count() {
        let mut d = RunData::default();
        for update in 1..=4u64 {
            let first = update * 10;
            if update % 2 == 0 {
                // The ticker's frame (seq first + 2) arrives before its update's events.
                d.apply(event(first + 2, EventBody::Rollout { frame: cartpole(update) }));
            }
            let mut profile = Profile::default();
            profile.counters.env_steps = 1024;
            assert!(d.apply(event(first, EventBody::Metrics { metrics: point(update, 10.0) })), "update {update}");
            assert!(d.apply(event(first + 1, EventBody::Profile { profile })), "update {update}");
        }
        assert_eq!(d.total.counters.env_steps, d.metrics.last().unwrap().global_step);
        assert_eq!((d.metrics.len(), d.windows.len(), d.last_seq), (4, 4, 41));
    }

    /// A group's figures are its chart's lines, named without the group; other groups and
    /// the ungrouped losses are not among them, and a run without the group has none.
    #[test]
    fn a_groups_figures_are_its_own_lines() {
        let with = |update: u64, figures: &[(&str, f64)]| {
            let mut m = point(update, 1.0);
            m.losses = figures.iter().copied().collect();
            m
        };
        let metrics = [
            with(
                1,
                &[("policy_loss", 0.1), ("action.mean_0", 0.5), ("action.log_std_0", 0.0), ("norm.return_std", 2.0)],
            ),
            with(
                2,
                &[("policy_loss", 0.2), ("action.mean_0", 0.4), ("action.log_std_0", -0.1), ("norm.return_std", 3.0)],
            ),
        ];
        let lines = group_lines(&metrics, "action", 100);
        let names: Vec<&str> = lines.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["mean 0", "log std 0"]);
        assert!(lines.iter().all(|l| l.points.len() == 2));
        assert_eq!(group_lines(&metrics, "norm", 100).len(), 1);
        assert!(group_lines(&metrics, "world", 100).is_empty());
        assert!(loss_lines(&metrics, 100).iter().all(|l| l.name == "policy loss"));
    }

    #[test]
    fn world_losses_are_drawn_relative_to_their_first_value_and_only_when_present() {
        let mut a = point(1, 10.0);
        a.losses = [("world.image", 800.0), ("world.reward", 0.4), ("world.cont", 0.6), ("world.kl", 2.0)]
            .into_iter()
            .collect();
        let mut b = point(2, 10.0);
        b.losses = [("world.image", 200.0), ("world.reward", 0.1), ("world.cont", 0.3), ("world.kl", 0.0)]
            .into_iter()
            .collect();
        let lines = world_lines(&[point(0, 1.0), a, b], 100);
        let image = &lines[0].points;
        assert_eq!(image, &vec![(1024.0, 1.0), (2048.0, 0.25)]);
        assert_eq!(lines[2].points[1], (2048.0, 0.5));
        assert!(world_lines(&[point(1, 1.0)], 100).iter().all(|l| l.points.is_empty()), "a run without a world model");
    }

    #[test]
    fn a_summary_is_enough_to_compare() {
        let mut s = RunSummary::default();
        s.info.events = 40;
        s.last = Some(point(3, 123.0));
        s.total.wall_s = 2.0;
        let d = RunData::from_summary(s);
        assert_eq!((d.sps(), d.last_seq, d.total.wall_s), (Some(123.0), 40, 2.0));
    }

    fn cartpole(step: u64) -> Frame {
        let fields = CartpoleFrame { states: vec![[0.0; 4]], actions: vec![0] };
        Frame::new(hotlab_specs::EnvName::Cartpole, step, &fields)
    }

    fn point(update: u64, sps: f64) -> MetricsPoint {
        MetricsPoint {
            update,
            updates: 10,
            global_step: update * 1024,
            wall_s: update as f64,
            sps,
            episodes: 0,
            mean_return_last_100: (update > 1).then_some(20.0),
            lr: 2.5e-4,
            losses: [("policy_loss", 0.0), ("value_loss", 0.0), ("entropy", 0.69)].into_iter().collect(),
            rollout_s: 0.5,
            update_s: 0.5,
        }
    }

    fn window(env: f64, other: f64) -> Profile {
        let mut p = Profile { wall_s: env + other, ..Profile::default() };
        p.phases = hotlab_specs::PHASES
            .iter()
            .map(|i| i.phase)
            .map(|phase| PhaseTime {
                phase,
                wall_s: match phase {
                    Phase::ENV_STEP => env,
                    Phase::OTHER => other,
                    _ => 0.0,
                },
                calls: 1,
                device_s: None,
            })
            .collect();
        p.counters.env_steps = 1024;
        p
    }

    #[test]
    fn events_fold_in_once_and_windows_sum() {
        let mut d = RunData::default();
        assert!(d.apply(event(1, EventBody::Status { status: RunStatus::Running, message: None })));
        assert!(d.apply(event(2, EventBody::Metrics { metrics: point(1, 100.0) })));
        assert!(d.apply(event(3, EventBody::Profile { profile: window(1.0, 1.0) })));
        assert!(d.apply(event(4, EventBody::Profile { profile: window(3.0, 1.0) })));
        assert!(!d.apply(event(3, EventBody::Metrics { metrics: point(9, 1.0) })), "a replayed event is skipped");
        assert_eq!(d.metrics.len(), 1);
        assert_eq!(d.sps(), Some(100.0));
        assert_eq!(d.total.wall_s, 6.0);
        assert_eq!(d.total.phase(Phase::ENV_STEP), 4.0);
        assert_eq!(d.total.counters.env_steps, 2048);
        let report = d.report(&RunSpec::default()).unwrap();
        assert_eq!(report.rows[0].phase, Phase::ENV_STEP, "ranked by time");
        assert!((report.rows[0].percent - 66.67).abs() < 0.01);
        d.apply(event(5, EventBody::Status { status: RunStatus::Finished, message: None }));
        assert_eq!(d.status, Some(RunStatus::Finished));
    }

    #[test]
    fn windows_keep_the_latest() {
        let mut d = RunData::default();
        for seq in 1..=(WINDOWS as u64 + 5) {
            d.apply(event(seq, EventBody::Profile { profile: window(seq as f64, 0.0) }));
        }
        assert_eq!(d.windows.len(), WINDOWS);
        assert_eq!(d.windows[0].wall_s, 6.0);
    }

    #[test]
    fn chart_data_is_strided_down_to_a_bound_and_keeps_the_last_point() {
        let s: Vec<(f64, f64)> = (0..1000).map(|i| (i as f64, i as f64)).collect();
        let c = chart_points(&s, 100);
        assert!(c.len() <= 101, "{}", c.len());
        assert_eq!(c.first(), Some(&(0.0, 0.0)));
        assert_eq!(c.last(), Some(&(999.0, 999.0)));
        assert_eq!(chart_points(&s[..10], 100).len(), 10);
        let m = [point(1, 10.0), point(2, 20.0)];
        assert_eq!(series(&m, |m| m.mean_return_last_100), vec![(2048.0, 20.0)], "updates without a value skipped");
    }
}
