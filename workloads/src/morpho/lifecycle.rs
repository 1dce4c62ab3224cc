//! `--lifecycle loop|batched` (catalogue row 8, seed 003 §2.1): how a batch of morpho envs
//! takes its decisions, ages its slots and computes its rewards around the hosts' training.
//!
//! Both keep every env's slot state in tensors, as a record of [`FIELDS`] numbers per slot,
//! the way seed 003's trainer kept it on the device. [`Looped`] is that trainer's "CPU
//! trench": env after env, it reads the env's record one value at a time, checks and
//! applies the env's action with the scalar rules of [`crate::morpho::rules`], computes
//! the env's reward and writes the record back with one small op. [`Batched`] is its
//! "tensor-driven state machine": one `[envs, FIELDS, slots]` tensor, whose masks,
//! transitions and rewards are a fixed handful of tensor ops for the whole batch, read back
//! once per pass. Both give the same slots, masks, surgeries and rewards, bit for bit
//! (tested): α's curves come from one table computed by [`rules::Curve::at`], and the
//! arithmetic is the same IEEE operations in the same order.

use super::rules::STAGES;
use crate::morpho::rules::{
    self, Action, Blend, Curve, Gates, Op, Slot, Stage, Surgery, ALPHA_EPOCHS, ALPHA_TARGETS, CURVES, OPS, SEED_LR,
    TEMPOS,
};
use hotlab_specs::morpho::LifecycleMode;
use hotlab_specs::morpho::LIFECYCLE_READS;
use hotlab_train::exec::parts::PartClock;
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

/// Numbers per slot in a record: stage, age, blueprint (−1: none), α, the seed's learning
/// rate, then the blend's from, to, curve, epochs and epochs done (stale unless blending).
pub const FIELDS: usize = 10;
const STAGE: usize = 0;
const AGE: usize = 1;
const BLUEPRINT: usize = 2;
const ALPHA: usize = 3;
const LR: usize = 4;
const FROM: usize = 5;
const TO: usize = 6;
const CURVE: usize = 7;
const EPOCHS: usize = 8;
const DONE: usize = 9;

/// Longest blend, in epochs: the curve table's side.
const MAX_EPOCHS: usize = 6;

fn code(stage: Stage) -> f64 {
    STAGES.iter().position(|&s| s == stage).unwrap_or(0) as f64
}

/// The slots as a record: [`FIELDS`] rows of one value per slot.
pub fn record(slots: &[Slot]) -> Vec<f64> {
    let k = slots.len();
    let mut r = vec![0.0; FIELDS * k];
    for (i, s) in slots.iter().enumerate() {
        let b = s.blend.unwrap_or(Blend { from: 0.0, to: 0.0, curve: Curve::Linear, epochs: 0, done: 0 });
        let curve = CURVES.iter().position(|&c| c == b.curve).unwrap_or(0) as f64;
        let blueprint = s.blueprint.map_or(-1.0, |b| b as f64);
        let values = [code(s.stage), s.age as f64, blueprint, s.alpha, s.lr_scale, b.from, b.to, curve];
        for (f, v) in values.into_iter().chain([b.epochs as f64, b.done as f64]).enumerate() {
            r[f * k + i] = v;
        }
    }
    r
}

/// The slots a record holds (`k` of them).
pub fn slots_of(r: &[f64], k: usize) -> Vec<Slot> {
    (0..k)
        .map(|i| {
            let v = |f: usize| r[f * k + i];
            let stage = STAGES[v(STAGE) as usize];
            let blend = (stage == Stage::Blending).then(|| Blend {
                from: v(FROM),
                to: v(TO),
                curve: CURVES[v(CURVE) as usize],
                epochs: v(EPOCHS) as u32,
                done: v(DONE) as u32,
            });
            let blueprint = (v(BLUEPRINT) >= 0.0).then(|| v(BLUEPRINT) as usize);
            Slot { stage, age: v(AGE) as u32, blueprint, alpha: v(ALPHA), blend, lr_scale: v(LR) }
        })
        .collect()
}

/// Whether one index per head `a` is inside the masks of `slots` now.
pub fn legal(slots: &[Slot], gates: &Gates, blueprints: usize, a: &[i64]) -> bool {
    let heads = rules::heads(slots.len(), blueprints);
    let table = rules::mask_table(slots, gates, blueprints);
    let width = table.len() / OPS.len();
    let Some(&op) = a.first().filter(|&&op| op >= 0 && (op as usize) < OPS.len()) else { return false };
    let row = &table[op as usize * width..(op as usize + 1) * width];
    let mut start = 0;
    a.len() == heads.len()
        && heads.iter().zip(a).all(|(&(_, n), &x)| {
            let ok = x >= 0 && (x as usize) < n && row[start + x as usize];
            start += n;
            ok
        })
}

/// The action taken for heads `a`: itself when legal, else a wait at its tempo.
pub fn effective(legal: bool, a: &[i64]) -> Action {
    let action = Action::from_heads(a);
    if legal {
        action
    } else {
        Action { tempo: action.tempo.min(TEMPOS.len() - 1), ..Action::default() }
    }
}

/// The surgery a legal action asks of its host.
fn surgery(a: &Action) -> Option<Surgery> {
    match OPS[a.op] {
        Op::Germinate => Some(Surgery::Graft { slot: a.slot, blueprint: a.blueprint, lr_scale: SEED_LR[a.seed_lr] }),
        Op::Prune => Some(Surgery::Remove { slot: a.slot }),
        _ => None,
    }
}

/// An env's reward for an epoch: the change in validation accuracy less its share of the
/// rent on the parameters its seeds added (`added / base` hosts' worth over its episode's
/// `epochs`).
pub fn reward(r: &RewardInputs, e: usize) -> f64 {
    r.accuracy[e] - r.last[e] - r.rent * (r.added[e] / r.base[e] / r.epochs[e])
}

/// What the rewards of a batch are computed from, one value per env.
pub struct RewardInputs {
    pub accuracy: Vec<f64>,
    pub last: Vec<f64>,
    /// Parameters the env's seeds added, and the bare host's.
    pub added: Vec<f64>,
    pub base: Vec<f64>,
    pub rent: f64,
    /// Host epochs of each env's episode.
    pub epochs: Vec<f64>,
}

/// Each env's decision: the action taken (a wait where the heads were outside the masks),
/// whether it was refused, and the surgery its host must do.
pub struct Decisions {
    pub actions: Vec<Action>,
    pub refused: Vec<bool>,
    pub surgeries: Vec<Option<Surgery>>,
}

/// The lifecycles of a batch of envs.
pub trait Lifecycle: Send {
    /// Checks and applies each env's action (`heads`: 8 indices per env).
    fn decide(&mut self, heads: &[i64]) -> Decisions;
    /// The end of a host epoch: every slot ages and every blend moves on.
    fn tick(&mut self);
    /// Env `e`'s slots.
    fn slots(&self, e: usize) -> &[Slot];
    /// Every env's mask table ([`rules::mask_table`]), one row of `out` per env.
    fn masks(&mut self, out: &mut [i64]);
    /// Every env's reward.
    fn rewards(&mut self, inputs: &RewardInputs) -> Vec<f64>;
    /// Env `e` starts an episode: every slot dormant.
    fn reset(&mut self, e: usize);
}

/// `envs` envs' lifecycles of `slots` slots each, run as `mode` says with their state on
/// `device` (the hosts' and the agent's: every read a sync there), their reads counted on
/// `clock`.
pub fn new(
    mode: LifecycleMode,
    envs: usize,
    slots: usize,
    blueprints: usize,
    gates: Gates,
    device: Device,
    clock: Arc<PartClock>,
) -> Box<dyn Lifecycle> {
    let fresh = vec![Slot::default(); slots];
    match mode {
        LifecycleMode::Loop => Box::new(Looped {
            records: (0..envs).map(|_| f64s(&record(&fresh), device)).collect(),
            views: vec![fresh; envs],
            gates,
            blueprints,
            device,
            clock,
        }),
        LifecycleMode::Batched => Box::new(Batched::new(envs, slots, blueprints, gates, device, clock)),
    }
}

/// Env after env, one value at a time.
pub struct Looped {
    /// Each env's record, `[FIELDS · slots]`.
    records: Vec<Tensor>,
    views: Vec<Vec<Slot>>,
    gates: Gates,
    blueprints: usize,
    device: Device,
    clock: Arc<PartClock>,
}

impl Looped {
    /// Env `e`'s slots, read from its record value by value.
    fn read(&self, e: usize) -> Vec<Slot> {
        let r = &self.records[e];
        let values: Vec<f64> = (0..r.numel() as i64).map(|i| r.double_value(&[i])).collect();
        self.clock.count(LIFECYCLE_READS, values.len() as u64);
        slots_of(&values, self.views[e].len())
    }

    fn write(&mut self, e: usize, slots: Vec<Slot>) {
        self.records[e].copy_(&f64s(&record(&slots), self.device));
        self.views[e] = slots;
    }
}

impl Lifecycle for Looped {
    fn decide(&mut self, heads: &[i64]) -> Decisions {
        let h = heads.len() / self.views.len().max(1);
        let mut d = Decisions { actions: Vec::new(), refused: Vec::new(), surgeries: Vec::new() };
        for e in 0..self.views.len() {
            let mut slots = self.read(e);
            let a = &heads[e * h..(e + 1) * h];
            let ok = legal(&slots, &self.gates, self.blueprints, a);
            let action = effective(ok, a);
            rules::apply(&mut slots, &action, &self.gates).expect("an action inside the masks is legal");
            self.write(e, slots);
            d.surgeries.push(surgery(&action));
            d.actions.push(action);
            d.refused.push(!ok);
        }
        d
    }

    fn tick(&mut self) {
        for e in 0..self.views.len() {
            let mut slots = self.read(e);
            slots.iter_mut().for_each(|s| s.tick(&self.gates));
            self.write(e, slots);
        }
    }

    fn slots(&self, e: usize) -> &[Slot] {
        &self.views[e]
    }

    fn masks(&mut self, out: &mut [i64]) {
        let w = out.len() / self.views.len().max(1);
        for (e, slots) in self.views.iter().enumerate() {
            let table = rules::mask_table(slots, &self.gates, self.blueprints);
            out[e * w..(e + 1) * w].iter_mut().zip(table).for_each(|(m, t)| *m = t as i64);
        }
    }

    fn rewards(&mut self, inputs: &RewardInputs) -> Vec<f64> {
        (0..self.views.len()).map(|e| reward(inputs, e)).collect()
    }

    fn reset(&mut self, e: usize) {
        let fresh = vec![Slot::default(); self.views[e].len()];
        self.write(e, fresh);
    }
}

/// Every env at once: `[envs, FIELDS, slots]` f64 on the hosts' device.
pub struct Batched {
    state: Tensor,
    views: Vec<Vec<Slot>>,
    gates: Gates,
    blueprints: usize,
    /// `α`'s share of the way at `(curve, epochs, done)`, flattened.
    curves: Tensor,
    device: Device,
    clock: Arc<PartClock>,
}

fn f64s(v: &[f64], device: Device) -> Tensor {
    Tensor::from_slice(v).to(device)
}

impl Batched {
    fn new(envs: usize, slots: usize, blueprints: usize, gates: Gates, device: Device, clock: Arc<PartClock>) -> Self {
        let side = MAX_EPOCHS + 1;
        let mut curves = vec![0.0; CURVES.len() * side * side];
        for (c, curve) in CURVES.iter().enumerate() {
            for n in 1..side {
                for d in 0..side {
                    curves[(c * side + n) * side + d] = curve.at(d as f64 / n as f64);
                }
            }
        }
        let fresh = record(&vec![Slot::default(); slots]);
        let state = f64s(&fresh, device).view([1, FIELDS as i64, slots as i64]).repeat([envs as i64, 1, 1]);
        let curves = f64s(&curves, device);
        let mut b = Self { state, views: Vec::new(), gates, blueprints, curves, device, clock };
        b.read();
        b
    }

    fn field(&self, f: usize) -> Tensor {
        self.state.select(1, f as i64)
    }

    /// Every env's slots, read back in one copy.
    fn read(&mut self) {
        let (envs, slots) = (self.state.size()[0] as usize, self.state.size()[2] as usize);
        let values = Vec::<f64>::try_from(&self.state.flatten(0, -1)).unwrap_or_default();
        self.clock.count(LIFECYCLE_READS, 1);
        let per = FIELDS * slots;
        self.views = (0..envs).map(|e| slots_of(&values[e * per..(e + 1) * per], slots)).collect();
    }

    /// Which slots `op` may act on now, `[envs, slots]` (bool).
    fn allows(&self, op: Op) -> Tensor {
        let (st, age, g) = (self.field(STAGE), self.field(AGE), &self.gates);
        let is = |s: Stage| st.eq(code(s));
        match op {
            Op::Wait => st.ones_like().to_kind(Kind::Bool),
            Op::Germinate => is(Stage::Dormant),
            Op::Advance => is(Stage::Germinated)
                .logical_and(&age.ge(g.germinated as f64))
                .logical_or(&is(Stage::Training).logical_and(&age.ge(g.training as f64))),
            Op::SetAlpha => is(Stage::Holding),
            Op::Prune => is(Stage::Training).logical_or(&is(Stage::Blending)).logical_or(&is(Stage::Holding)),
            Op::Fossilize => is(Stage::Holding).logical_and(&age.ge(g.holding as f64)),
        }
    }

    /// Every env's mask table, `[envs, ops, Σ head sizes]` (i64 0/1).
    fn table(&self) -> Tensor {
        let envs = self.state.size()[0];
        let k = self.state.size()[2];
        let heads = rules::heads(k as usize, self.blueprints);
        let allows: Vec<Tensor> = OPS.iter().map(|&op| self.allows(op)).collect();
        let ops = Tensor::stack(&allows.iter().map(|a| a.any_dim(1, false)).collect::<Vec<_>>(), 1);
        let first = |n: usize| {
            let v: Vec<i64> = (0..n).map(|i| (i == 0) as i64).collect();
            Tensor::from_slice(&v).to(self.device).view([1, n as i64]).expand([envs, n as i64], false)
        };
        let rows: Vec<Tensor> = OPS
            .iter()
            .enumerate()
            .map(|(o, op)| {
                let parts: Vec<Tensor> = heads
                    .iter()
                    .enumerate()
                    .map(|(h, &(_, n))| match h {
                        0 => ops.to_kind(Kind::Int64),
                        1 if op.reads(1) => {
                            // A row for an op no slot allows is never used; it stays valid.
                            let none = allows[o].any_dim(1, true).logical_not();
                            allows[o].logical_or(&none.logical_and(&first(n).ne(0))).to_kind(Kind::Int64)
                        }
                        _ if op.reads(h) => Tensor::ones([envs, n as i64], (Kind::Int64, self.device)),
                        _ => first(n),
                    })
                    .collect();
                Tensor::cat(&parts, 1)
            })
            .collect();
        Tensor::stack(&rows, 1)
    }

    /// Sets field `f` to `value` where `cond` holds.
    fn set(&mut self, f: usize, cond: &Tensor, value: &Tensor) {
        let old = self.field(f);
        let new = value.expand_as(&old).where_self(cond, &old);
        self.state.select(1, f as i64).copy_(&new);
    }

    fn set_to(&mut self, f: usize, cond: &Tensor, value: f64) {
        let old = self.field(f);
        let new = Tensor::where_scalarself(cond, value, &old);
        self.state.select(1, f as i64).copy_(&new);
    }
}

impl Lifecycle for Batched {
    fn decide(&mut self, heads: &[i64]) -> Decisions {
        let envs = self.views.len() as i64;
        let k = self.state.size()[2];
        let sizes = rules::heads(k as usize, self.blueprints);
        let h = sizes.len() as i64;
        let a = Tensor::from_slice(heads).to(self.device).view([envs, h]);
        // Legal: each head's index in range and allowed by the op's row of the table.
        let table = self.table();
        let width = table.size()[2];
        let flat = table.view([envs, OPS.len() as i64 * width]);
        let op = a.select(1, 0).clamp(0, OPS.len() as i64 - 1);
        let mut ok = a.select(1, 0).ge(0).logical_and(&a.select(1, 0).lt(OPS.len() as i64));
        let mut start = 0i64;
        for (i, &(_, n)) in sizes.iter().enumerate() {
            let x = a.select(1, i as i64);
            let inside = x.ge(0).logical_and(&x.lt(n as i64));
            let at = &op * width + start + x.clamp(0, n as i64 - 1);
            let allowed = flat.gather(1, &at.unsqueeze(1), false).squeeze_dim(1).ne(0);
            ok = ok.logical_and(&inside.logical_and(&allowed));
            start += n as i64;
        }
        let wait = Tensor::zeros([envs, h], (Kind::Int64, self.device));
        wait.select(1, 6).copy_(&a.select(1, 6).clamp(0, TEMPOS.len() as i64 - 1));
        let eff = a.where_self(&ok.unsqueeze(1), &wait);

        // Transitions: the chosen slot of each env that did not wait.
        let col = |i: i64| eff.select(1, i).unsqueeze(1);
        let (op, slot) = (col(0), col(1));
        let sel = Tensor::arange(k, (Kind::Int64, self.device)).unsqueeze(0).eq_tensor(&slot).logical_and(&op.ne(0));
        let by = |o: Op| sel.logical_and(&op.eq(OPS.iter().position(|&x| x == o).unwrap_or(0) as i64));
        let st = self.field(STAGE);
        let advance = by(Op::Advance);
        let trains = advance.logical_and(&st.eq(code(Stage::Germinated)));
        let blends = advance.logical_and(&st.eq(code(Stage::Training))).logical_or(&by(Op::SetAlpha));
        let (germ, prune, fossil) = (by(Op::Germinate), by(Op::Prune), by(Op::Fossilize));
        let device = self.device;
        let pick =
            |table: &[f64], head: i64| f64s(table, device).index_select(0, &col(head).squeeze_dim(1)).unsqueeze(1);
        let epochs: Vec<f64> = ALPHA_EPOCHS.iter().map(|&e| e.max(1) as f64).collect();
        let alpha = self.field(ALPHA);
        self.set(FROM, &blends, &alpha);
        self.set(TO, &blends, &pick(&ALPHA_TARGETS, 4));
        self.set(CURVE, &blends, &col(3).to_kind(Kind::Double));
        self.set(EPOCHS, &blends, &pick(&epochs, 5));
        self.set_to(DONE, &blends, 0.0);
        self.set(BLUEPRINT, &germ, &col(2).to_kind(Kind::Double));
        self.set_to(BLUEPRINT, &prune, -1.0);
        self.set(LR, &germ, &pick(&SEED_LR, 7));
        self.set_to(LR, &prune, 1.0);
        self.set_to(ALPHA, &germ.logical_or(&prune), 0.0);
        self.set_to(AGE, &sel, 0.0);
        for (cond, stage) in [
            (&germ, Stage::Germinated),
            (&trains, Stage::Training),
            (&blends, Stage::Blending),
            (&prune, Stage::Cooldown),
            (&fossil, Stage::Fossilized),
        ] {
            self.set_to(STAGE, cond, code(stage));
        }

        let taken = Vec::<i64>::try_from(&eff.flatten(0, -1)).unwrap_or_default();
        let refused = Vec::<bool>::try_from(&ok.logical_not()).unwrap_or_default();
        self.clock.count(LIFECYCLE_READS, 2);
        self.read();
        let actions: Vec<Action> = taken.chunks(h as usize).map(Action::from_heads).collect();
        let surgeries = actions.iter().map(surgery).collect();
        Decisions { actions, refused, surgeries }
    }

    fn tick(&mut self) {
        let side = (MAX_EPOCHS + 1) as f64;
        let (st, age) = (self.field(STAGE), self.field(AGE) + 1.0);
        let blending = st.eq(code(Stage::Blending));
        let done = Tensor::where_self(&(self.field(DONE) + 1.0), &blending, &self.field(DONE));
        let at = ((self.field(CURVE) * side + self.field(EPOCHS)) * side + done.clamp(0.0, MAX_EPOCHS as f64))
            .to_kind(Kind::Int64);
        let share = self.curves.index_select(0, &at.flatten(0, -1)).view_as(&st);
        let (from, to) = (self.field(FROM), self.field(TO));
        let moved = &from + (&to - &from) * share;
        let finished = blending.logical_and(&done.ge_tensor(&self.field(EPOCHS)));
        let alpha = to.where_self(&finished, &moved).where_self(&blending, &self.field(ALPHA));
        let stage = Tensor::where_scalarself(&finished, code(Stage::Holding), &st);
        let age = Tensor::where_scalarself(&finished, 0.0, &age);
        let cooled = stage.eq(code(Stage::Cooldown)).logical_and(&age.ge(self.gates.cooldown as f64));
        let stage = Tensor::where_scalarself(&cooled, code(Stage::Dormant), &stage);
        let age = Tensor::where_scalarself(&cooled, 0.0, &age);
        let trains = stage.eq(code(Stage::Germinated)).logical_and(&age.ge(self.gates.germinated as f64));
        let trains = trains.logical_and(&Tensor::from(self.gates.auto_train).to(self.device));
        let stage = Tensor::where_scalarself(&trains, code(Stage::Training), &stage);
        let age = Tensor::where_scalarself(&trains, 0.0, &age);
        for (f, v) in [(STAGE, stage), (AGE, age), (ALPHA, alpha), (DONE, done)] {
            self.state.select(1, f as i64).copy_(&v);
        }
        self.read();
    }

    fn slots(&self, e: usize) -> &[Slot] {
        &self.views[e]
    }

    fn masks(&mut self, out: &mut [i64]) {
        let table = self.table();
        table.flatten(0, -1).copy_data(out, out.len().min(table.numel()));
        self.clock.count(LIFECYCLE_READS, 1);
    }

    fn rewards(&mut self, r: &RewardInputs) -> Vec<f64> {
        let (acc, last, added, base) = {
            let at = |v: &[f64]| f64s(v, self.device);
            (at(&r.accuracy), at(&r.last), at(&r.added), at(&r.base))
        };
        let share = added / base / f64s(&r.epochs, self.device);
        let rewards = (acc - last) - share * r.rent;
        self.clock.count(LIFECYCLE_READS, 1);
        Vec::<f64>::try_from(&rewards).unwrap_or_default()
    }

    fn reset(&mut self, e: usize) {
        let k = self.state.size()[2];
        let fresh = vec![Slot::default(); k as usize];
        self.state.get(e as i64).copy_(&f64s(&record(&fresh), self.device).view([FIELDS as i64, k]));
        self.views[e] = fresh;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::morpho::part_clock;
    use hotlab_env::rng::HostRng;

    /// Random heads, most of them legal, some not: both lifecycles agree on every slot,
    /// mask, action, refusal, surgery and reward, step after step, with resets between
    /// episodes; `loop` reads a value per field and slot, `batched` a few per pass. With
    /// the agent moving seeds into training, and with the lifecycle doing it at the gate.
    #[test]
    fn loop_and_batched_agree_bit_for_bit() {
        agree_bit_for_bit(Gates::default());
        agree_bit_for_bit(Gates { auto_train: true, ..Gates::default() });
    }

    fn agree_bit_for_bit(g: Gates) {
        let (envs, k, bps) = (5, 3, 5);
        let clocks = [Arc::new(part_clock()), Arc::new(part_clock())];
        let mut lives = [
            new(LifecycleMode::Loop, envs, k, bps, g, Device::Cpu, clocks[0].clone()),
            new(LifecycleMode::Batched, envs, k, bps, g, Device::Cpu, clocks[1].clone()),
        ];
        let width = OPS.len() * rules::heads(k, bps).iter().map(|h| h.1).sum::<usize>();
        let mut rng = HostRng::new(11);
        let mut seen = [0usize; OPS.len()];
        let mut refused = 0;
        let steps = 600;
        for step in 0..steps {
            let mut heads = Vec::new();
            for e in 0..envs {
                let slots = lives[0].slots(e);
                let mut a = Action::random_legal(slots, &g, bps, &mut rng).to_heads().to_vec();
                if rng.below(10) == 0 {
                    // Outside the masks: a wrong op for the slot, an index out of range, or a negative one.
                    let h = rng.below(8) as usize;
                    a[h] = [7, -1, 2][rng.below(3) as usize];
                }
                heads.extend(a);
            }
            let d: Vec<Decisions> = lives.iter_mut().map(|l| l.decide(&heads)).collect();
            assert_eq!(d[0].actions, d[1].actions, "step {step}");
            assert_eq!(d[0].refused, d[1].refused, "step {step}");
            assert_eq!(d[0].surgeries, d[1].surgeries, "step {step}");
            d[0].actions.iter().for_each(|a| seen[a.op] += 1);
            refused += d[0].refused.iter().filter(|&&r| r).count();
            lives.iter_mut().for_each(|l| l.tick());
            for e in 0..envs {
                assert_eq!(lives[0].slots(e), lives[1].slots(e), "step {step}, env {e}");
            }
            let mut masks = [vec![0i64; envs * width], vec![0i64; envs * width]];
            lives[0].masks(&mut masks[0]);
            lives[1].masks(&mut masks[1]);
            assert_eq!(masks[0], masks[1], "step {step}");
            let inputs = RewardInputs {
                accuracy: (0..envs).map(|_| rng.below(1000) as f64 / 997.0).collect(),
                last: (0..envs).map(|_| rng.below(1000) as f64 / 991.0).collect(),
                added: (0..envs).map(|_| rng.below(5000) as f64).collect(),
                base: vec![24_010.0; envs],
                rent: 0.02,
                epochs: (0..envs).map(|e| [12.0, 16.0][e % 2]).collect(),
            };
            let r: Vec<Vec<f64>> = lives.iter_mut().map(|l| l.rewards(&inputs)).collect();
            assert_eq!(r[0], r[1], "step {step}");
            if step % 12 == 11 {
                for e in (0..envs).step_by(2) {
                    lives.iter_mut().for_each(|l| l.reset(e));
                }
            }
        }
        assert!(seen.iter().all(|&n| n >= 5), "every op is taken: {seen:?}");
        assert!(refused > 50, "heads outside the masks are refused: {refused}");
        let reads = clocks.map(|c| c.total(LIFECYCLE_READS));
        assert_eq!(reads[0], steps * 2 * envs as u64 * (FIELDS * k) as u64, "loop reads every value");
        assert!(reads[1] * 20 < reads[0], "batched reads per pass, not per value: {reads:?}");
    }

    #[test]
    fn a_record_holds_a_slot_exactly() {
        let slots = vec![
            Slot::default(),
            Slot {
                stage: Stage::Blending,
                age: 2,
                blueprint: Some(3),
                alpha: 0.1 + 0.2,
                blend: Some(Blend { from: 0.3, to: 0.75, curve: Curve::Sigmoid, epochs: 6, done: 2 }),
                lr_scale: 2.0,
            },
            Slot { stage: Stage::Cooldown, ..Slot::default() },
        ];
        assert_eq!(slots_of(&record(&slots), 3), slots);
    }
}
