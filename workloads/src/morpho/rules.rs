//! The morphogenetic workload's decisions: a slot's lifecycle, the
//! agent's eight action heads with their masks, and the Shapley contributions the reward
//! credits each live seed with. Plain state machines and arithmetic, so that the host side
//! (libtorch) and the agent share one definition and the rules are tested without either.
//!
//! A slot goes dormant → germinated → training (the seed learns while α = 0) → blending
//! (α moves to a target along a curve, at a speed) → holding → fossilized, or is pruned
//! from training, blending or holding into a cooldown, then dormant again. Each step is
//! gated by a minimum number of epochs in the stage; every illegal choice is masked.

use hotlab_env::rng::HostRng;
use hotlab_specs::morpho::HeadPin;
use hotlab_specs::morpho::HEADS;

/// A slot's stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Dormant,
    Germinated,
    Training,
    Blending,
    Holding,
    Fossilized,
    /// Pruned: dormant again after the cooldown.
    Cooldown,
}

/// Every stage, in the order an observation's one-hot lists them.
pub const STAGES: [Stage; 7] = [
    Stage::Dormant,
    Stage::Germinated,
    Stage::Training,
    Stage::Blending,
    Stage::Holding,
    Stage::Fossilized,
    Stage::Cooldown,
];

/// The op head's choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Wait,
    Germinate,
    Advance,
    SetAlpha,
    Prune,
    Fossilize,
}

pub const OPS: [Op; 6] = [Op::Wait, Op::Germinate, Op::Advance, Op::SetAlpha, Op::Prune, Op::Fossilize];

impl Op {
    /// Its name as the lab and the evaluation print it.
    pub fn name(self) -> &'static str {
        match self {
            Op::Wait => "wait",
            Op::Germinate => "germinate",
            Op::Advance => "advance",
            Op::SetAlpha => "set_alpha",
            Op::Prune => "prune",
            Op::Fossilize => "fossilize",
        }
    }
}

/// How α moves from where it is to its target while blending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Curve {
    Linear,
    Cosine,
    Sigmoid,
}

pub const CURVES: [Curve; 3] = [Curve::Linear, Curve::Cosine, Curve::Sigmoid];

impl Curve {
    /// The share of the way done at time `t` (0 to 1): 0 at 0, 1 at 1, rising.
    pub fn at(self, t: f64) -> f64 {
        let t = t.clamp(0.0, 1.0);
        match self {
            Curve::Linear => t,
            Curve::Cosine => 0.5 - 0.5 * (std::f64::consts::PI * t).cos(),
            Curve::Sigmoid => {
                let s = |u: f64| 1.0 / (1.0 + (-10.0 * (u - 0.5)).exp());
                (s(t) - s(0.0)) / (s(1.0) - s(0.0))
            }
        }
    }
}

/// The α-target head's choices.
pub const ALPHA_TARGETS: [f64; 4] = [0.25, 0.5, 0.75, 1.0];
/// The α-speed head's choices: epochs a blend takes.
pub const ALPHA_EPOCHS: [u32; 3] = [1, 3, 6];
/// The tempo head's choices: host minibatches in the next epoch.
pub const TEMPOS: [u32; 3] = [4, 8, 16];
/// The eighth head (this project's): the new seed's learning rate, × the host's.
pub const SEED_LR: [f64; 3] = [0.5, 1.0, 2.0];

/// The heads, in order, with their sizes for `slots` slots and `blueprints` blueprints.
pub fn heads(slots: usize, blueprints: usize) -> [(&'static str, usize); 8] {
    let sizes = [
        OPS.len(),
        slots,
        blueprints,
        CURVES.len(),
        ALPHA_TARGETS.len(),
        ALPHA_EPOCHS.len(),
        TEMPOS.len(),
        SEED_LR.len(),
    ];
    std::array::from_fn(|h| (HEADS[h], sizes[h]))
}

/// One decision: an index into each head.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Action {
    pub op: usize,
    pub slot: usize,
    pub blueprint: usize,
    pub curve: usize,
    pub alpha_target: usize,
    pub alpha_speed: usize,
    pub tempo: usize,
    pub seed_lr: usize,
}

/// The least epochs a slot spends in a stage before it may leave it, and the cooldown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gates {
    pub germinated: u32,
    pub training: u32,
    pub holding: u32,
    pub cooldown: u32,
    /// A germinated seed enters training by itself at its gate (`--training-entry gate`).
    pub auto_train: bool,
}

impl Default for Gates {
    fn default() -> Self {
        Self { germinated: 1, training: 2, holding: 1, cooldown: 2, auto_train: false }
    }
}

/// A blend in progress.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Blend {
    pub from: f64,
    pub to: f64,
    pub curve: Curve,
    pub epochs: u32,
    pub done: u32,
}

/// One slot of one host.
#[derive(Clone, Debug, PartialEq)]
pub struct Slot {
    pub stage: Stage,
    /// Epochs in this stage.
    pub age: u32,
    pub blueprint: Option<usize>,
    pub alpha: f64,
    pub blend: Option<Blend>,
    /// The seed's learning rate, × the host's.
    pub lr_scale: f64,
}

impl Default for Slot {
    fn default() -> Self {
        Self { stage: Stage::Dormant, age: 0, blueprint: None, alpha: 0.0, blend: None, lr_scale: 1.0 }
    }
}

/// What the host must do for an action.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Surgery {
    /// A new seed of this blueprint in the slot (α = 0), learning at `lr_scale`.
    Graft { slot: usize, blueprint: usize, lr_scale: f64 },
    /// The slot's seed goes (α = 0, its parameters no longer train).
    Remove { slot: usize },
}

/// An action the masks would not have allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Illegal(pub String);

impl Slot {
    /// Whether `op` may act on this slot now.
    pub fn allows(&self, op: Op, gates: &Gates) -> bool {
        match op {
            Op::Wait => true,
            Op::Germinate => self.stage == Stage::Dormant,
            Op::Advance => match self.stage {
                Stage::Germinated => self.age >= gates.germinated,
                Stage::Training => self.age >= gates.training,
                _ => false,
            },
            Op::SetAlpha => self.stage == Stage::Holding,
            Op::Prune => matches!(self.stage, Stage::Training | Stage::Blending | Stage::Holding),
            Op::Fossilize => self.stage == Stage::Holding && self.age >= gates.holding,
        }
    }

    fn enter(&mut self, stage: Stage) {
        self.stage = stage;
        self.age = 0;
    }

    fn blend_to(&mut self, to: f64, curve: Curve, epochs: u32) {
        self.blend = Some(Blend { from: self.alpha, to, curve, epochs: epochs.max(1), done: 0 });
        self.enter(Stage::Blending);
    }

    /// The end of a host epoch: ages the slot, moves a blend on (holding once it is done),
    /// ends a cooldown and, with `auto_train`, starts a germinated seed's training at its gate.
    pub fn tick(&mut self, gates: &Gates) {
        self.age += 1;
        if let Some(b) = &mut self.blend {
            b.done += 1;
            let t = b.done as f64 / b.epochs as f64;
            self.alpha = b.from + (b.to - b.from) * b.curve.at(t);
            if b.done >= b.epochs {
                self.alpha = b.to;
                self.blend = None;
                self.enter(Stage::Holding);
            }
        }
        if self.stage == Stage::Cooldown && self.age >= gates.cooldown {
            self.enter(Stage::Dormant);
        }
        if gates.auto_train && self.stage == Stage::Germinated && self.age >= gates.germinated {
            self.enter(Stage::Training);
        }
    }
}

/// The op head's mask: an op is allowed when some slot allows it.
pub fn op_mask(slots: &[Slot], gates: &Gates) -> [bool; OPS.len()] {
    OPS.map(|op| slots.iter().any(|s| s.allows(op, gates)))
}

/// The slot head's mask once the op is chosen (every slot for `wait`, which acts on none).
pub fn slot_mask(slots: &[Slot], op: Op, gates: &Gates) -> Vec<bool> {
    slots.iter().map(|s| s.allows(op, gates)).collect()
}

impl Op {
    /// Whether this op reads head `h` (in [`heads`]' order); the op head itself, and the
    /// tempo (every step trains the host), always.
    pub fn reads(self, h: usize) -> bool {
        match h {
            0 | 6 => true,
            1 => self != Op::Wait,
            2 | 7 => self == Op::Germinate,
            3..=5 => matches!(self, Op::Advance | Op::SetAlpha),
            _ => false,
        }
    }
}

/// Every head's mask, one row per op (`OPS.len()` rows of `Σ n_h` flags, [`heads`]'
/// order): row `o` is the mask once op `o` is chosen. Its op part is the op head's mask
/// (alike in every row); its slot part, the slots `o` may act on; a head `o` does not
/// read allows its first choice only, so that it adds nothing to the log-probability or
/// the entropy. The policy samples the op, then the other heads under the op's row.
pub fn mask_table(slots: &[Slot], gates: &Gates, blueprints: usize) -> Vec<bool> {
    let sizes = heads(slots.len(), blueprints);
    let ops = op_mask(slots, gates);
    let mut table = Vec::with_capacity(OPS.len() * sizes.iter().map(|h| h.1).sum::<usize>());
    for op in OPS {
        for (h, &(_, n)) in sizes.iter().enumerate() {
            match h {
                0 => table.extend(ops),
                1 if op.reads(1) => {
                    let allowed = slot_mask(slots, op, gates);
                    // A row for an op that is not allowed is never used; it stays valid.
                    let none = !allowed.iter().any(|&a| a);
                    table.extend(allowed.iter().enumerate().map(|(i, &a)| a || (none && i == 0)));
                }
                _ if op.reads(h) => table.extend(std::iter::repeat_n(true, n)),
                _ => table.extend((0..n).map(|i| i == 0)),
            }
        }
    }
    table
}

/// Head `h`'s one allowed choice under `pin` (in [`heads`]' order), `None` where it is free.
pub fn pinned(pin: HeadPin, h: usize) -> Option<usize> {
    match (pin, h) {
        (HeadPin::Free, _) => None,
        // The scripted grower's choices: a norm seed (blueprint 0) at the host's rate, a
        // linear blend to α = 1 in one epoch; the tempo at its longest.
        (HeadPin::Grower, 2 | 3 | 5) => Some(0),
        (HeadPin::Grower, 4) => Some(ALPHA_TARGETS.len() - 1),
        (HeadPin::Grower, 6) => Some(TEMPOS.len() - 1),
        (HeadPin::Grower, 7) => Some(1),
        (HeadPin::Grower, _) => None,
        (HeadPin::Tempo, 6) => Some(TEMPOS.len() - 1),
        (HeadPin::Tempo, _) => None,
    }
}

/// Narrows a [`mask_table`] (`on`/`off` flags) to the pinned choices: in each op's row, a
/// pinned head the op reads allows its pinned choice only (one it does not read keeps its
/// first). Pinned heads then add nothing to the log-probability or the entropy.
pub fn pin<T: Copy>(table: &mut [T], pin: HeadPin, slots: usize, blueprints: usize, on: T, off: T) {
    if pin == HeadPin::Free {
        return;
    }
    let sizes = heads(slots, blueprints);
    let width: usize = sizes.iter().map(|h| h.1).sum();
    for (row, op) in table.chunks_mut(width).zip(OPS) {
        let mut start = 0;
        for (h, &(_, n)) in sizes.iter().enumerate() {
            if let Some(choice) = pinned(pin, h).filter(|_| op.reads(h)) {
                for (i, flag) in row[start..start + n].iter_mut().enumerate() {
                    *flag = if i == choice { on } else { off };
                }
            }
            start += n;
        }
    }
}

impl Action {
    /// An action from one index per head, in [`heads`]' order.
    pub fn from_heads(a: &[i64]) -> Self {
        let at = |h: usize| a.get(h).map_or(0, |&x| x.max(0) as usize);
        Self {
            op: at(0),
            slot: at(1),
            blueprint: at(2),
            curve: at(3),
            alpha_target: at(4),
            alpha_speed: at(5),
            tempo: at(6),
            seed_lr: at(7),
        }
    }

    /// One index per head, in [`heads`]' order.
    pub fn to_heads(self) -> [i64; 8] {
        [self.op, self.slot, self.blueprint, self.curve, self.alpha_target, self.alpha_speed, self.tempo, self.seed_lr]
            .map(|x| x as i64)
    }

    /// A uniformly random legal action: the op among the allowed ones, then each head
    /// among what the op's row of [`mask_table`] allows.
    pub fn random_legal(slots: &[Slot], gates: &Gates, blueprints: usize, rng: &mut HostRng) -> Self {
        let table = mask_table(slots, gates, blueprints);
        let sizes = heads(slots.len(), blueprints);
        let width: usize = sizes.iter().map(|h| h.1).sum();
        let mut pick = |allowed: &[bool]| {
            let choices: Vec<usize> = (0..allowed.len()).filter(|&i| allowed[i]).collect();
            choices[rng.below(choices.len() as u64) as usize]
        };
        let op = pick(&table[..OPS.len()]);
        let row = &table[op * width..(op + 1) * width];
        let mut out = [0i64; 8];
        let mut start = 0;
        for (h, &(_, n)) in sizes.iter().enumerate() {
            out[h] = if h == 0 { op } else { pick(&row[start..start + n]) } as i64;
            start += n;
        }
        Self::from_heads(&out)
    }
}

/// Carries out `action` on a host's slots; the surgery the host must do.
pub fn apply(slots: &mut [Slot], a: &Action, gates: &Gates) -> Result<Option<Surgery>, Illegal> {
    let op = *OPS.get(a.op).ok_or_else(|| Illegal(format!("op {} of {}", a.op, OPS.len())))?;
    if op == Op::Wait {
        return Ok(None);
    }
    let slot = slots.get_mut(a.slot).ok_or_else(|| Illegal(format!("slot {}", a.slot)))?;
    if !slot.allows(op, gates) {
        return Err(Illegal(format!("{op:?} on a slot that is {:?} for {} epochs", slot.stage, slot.age)));
    }
    let pick =
        |i: usize, n: usize, what: &str| (i < n).then_some(i).ok_or_else(|| Illegal(format!("{what} {i} of {n}")));
    Ok(match op {
        Op::Wait => None,
        Op::Germinate => {
            let lr_scale = SEED_LR[pick(a.seed_lr, SEED_LR.len(), "seed_lr")?];
            *slot = Slot { stage: Stage::Germinated, blueprint: Some(a.blueprint), lr_scale, ..Slot::default() };
            Some(Surgery::Graft { slot: a.slot, blueprint: a.blueprint, lr_scale })
        }
        Op::Advance if slot.stage == Stage::Germinated => {
            slot.enter(Stage::Training);
            None
        }
        Op::Advance | Op::SetAlpha => {
            let to = ALPHA_TARGETS[pick(a.alpha_target, ALPHA_TARGETS.len(), "alpha_target")?];
            let curve = CURVES[pick(a.curve, CURVES.len(), "curve")?];
            let epochs = ALPHA_EPOCHS[pick(a.alpha_speed, ALPHA_EPOCHS.len(), "alpha_speed")?];
            slot.blend_to(to, curve, epochs);
            None
        }
        Op::Prune => {
            *slot = Slot { stage: Stage::Cooldown, ..Slot::default() };
            Some(Surgery::Remove { slot: a.slot })
        }
        Op::Fossilize => {
            slot.enter(Stage::Fossilized);
            None
        }
    })
}

/// Each player's Shapley value of the game `value` over `players` (a coalition is a bit
/// mask): exact over every ordering's marginal contributions when `sampled` is None,
/// else the mean over that many random orderings (what a large `players` needs).
pub fn shapley(players: usize, value: &mut dyn FnMut(u32) -> f64, sampled: Option<(usize, &mut HostRng)>) -> Vec<f64> {
    assert!(players <= 16, "Shapley values over at most 16 players");
    let mut cache: std::collections::HashMap<u32, f64> = std::collections::HashMap::new();
    let mut v = |mask: u32| *cache.entry(mask).or_insert_with(|| value(mask));
    let mut totals = vec![0.0; players];
    let mut walk = |order: &[usize], totals: &mut Vec<f64>| {
        let mut mask = 0u32;
        for &p in order {
            let before = v(mask);
            mask |= 1 << p;
            totals[p] += v(mask) - before;
        }
    };
    let orders = match sampled {
        None => {
            let mut all = Vec::new();
            permutations(&mut (0..players).collect(), 0, &mut all);
            for order in &all {
                walk(order, &mut totals);
            }
            all.len()
        }
        Some((n, rng)) => {
            for _ in 0..n {
                let mut order: Vec<usize> = (0..players).collect();
                rng.shuffle(&mut order);
                walk(&order, &mut totals);
            }
            n
        }
    };
    totals.into_iter().map(|t| t / orders.max(1) as f64).collect()
}

fn permutations(items: &mut Vec<usize>, k: usize, out: &mut Vec<Vec<usize>>) {
    if k == items.len() {
        out.push(items.clone());
        return;
    }
    for i in k..items.len() {
        items.swap(k, i);
        permutations(items, k + 1, out);
        items.swap(k, i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn act(op: Op, slot: usize) -> Action {
        Action {
            op: OPS.iter().position(|&o| o == op).unwrap(),
            slot,
            alpha_target: 3,
            alpha_speed: 1,
            ..Action::default()
        }
    }

    #[test]
    fn a_seed_lives_from_germination_to_fossil_through_every_gate() {
        let g = Gates::default();
        let mut slots = vec![Slot::default(); 3];
        assert_eq!(op_mask(&slots, &g), [true, true, false, false, false, false]);
        let graft = apply(&mut slots, &Action { blueprint: 2, seed_lr: 2, ..act(Op::Germinate, 1) }, &g).unwrap();
        assert_eq!(graft, Some(Surgery::Graft { slot: 1, blueprint: 2, lr_scale: 2.0 }));
        assert_eq!(slot_mask(&slots, Op::Germinate, &g), [true, false, true], "one seed a slot");
        assert!(apply(&mut slots, &act(Op::Advance, 1), &g).is_err(), "not before its gate");
        slots.iter_mut().for_each(|s| s.tick(&g));
        apply(&mut slots, &act(Op::Advance, 1), &g).unwrap();
        assert_eq!((slots[1].stage, slots[1].alpha), (Stage::Training, 0.0), "it learns at α = 0");
        for _ in 0..2 {
            slots.iter_mut().for_each(|s| s.tick(&g));
        }
        apply(&mut slots, &act(Op::Advance, 1), &g).unwrap();
        assert_eq!(slots[1].stage, Stage::Blending);
        let mut alphas = Vec::new();
        for _ in 0..3 {
            slots[1].tick(&g);
            alphas.push(slots[1].alpha);
        }
        assert!(alphas.windows(2).all(|w| w[0] < w[1]) && alphas[2] == 1.0, "α rises to its target: {alphas:?}");
        assert_eq!(slots[1].stage, Stage::Holding);
        assert!(!slots[1].allows(Op::Fossilize, &g), "held one epoch first");
        slots[1].tick(&g);
        apply(&mut slots, &act(Op::Fossilize, 1), &g).unwrap();
        assert_eq!(slots[1].stage, Stage::Fossilized);
        assert_eq!(slot_mask(&slots, Op::Prune, &g), [false, false, false], "a fossil stays");
    }

    /// `--training-entry gate`: a germinated seed starts training by itself once its gate
    /// has passed, so the advance op never applies to it; the agent's advance starts blends.
    #[test]
    fn at_the_gate_a_germinated_seed_starts_training_by_itself() {
        let g = Gates { auto_train: true, ..Gates::default() };
        let mut slots = vec![Slot::default(); 3];
        apply(&mut slots, &act(Op::Germinate, 0), &g).unwrap();
        slots.iter_mut().for_each(|s| s.tick(&g));
        assert_eq!((slots[0].stage, slots[0].age), (Stage::Training, 0), "at the gate (1 epoch)");
        assert!(!slots[0].allows(Op::Advance, &g), "not before the training gate");
        for _ in 0..g.training {
            slots.iter_mut().for_each(|s| s.tick(&g));
        }
        apply(&mut slots, &act(Op::Advance, 0), &g).unwrap();
        assert_eq!(slots[0].stage, Stage::Blending);
        let manual = Gates::default();
        let mut slots = vec![Slot::default(); 3];
        apply(&mut slots, &act(Op::Germinate, 0), &manual).unwrap();
        (0..4).for_each(|_| slots.iter_mut().for_each(|s| s.tick(&manual)));
        assert_eq!(slots[0].stage, Stage::Germinated, "without it, the seed waits for the agent");
    }

    #[test]
    fn a_pruned_slot_cools_down_before_it_is_dormant_again() {
        let g = Gates::default();
        let mut slots = vec![Slot::default()];
        apply(&mut slots, &act(Op::Germinate, 0), &g).unwrap();
        slots[0].tick(&g);
        apply(&mut slots, &act(Op::Advance, 0), &g).unwrap();
        assert_eq!(apply(&mut slots, &act(Op::Prune, 0), &g).unwrap(), Some(Surgery::Remove { slot: 0 }));
        assert!(!slots[0].allows(Op::Germinate, &g));
        slots[0].tick(&g);
        assert_eq!(slots[0].stage, Stage::Cooldown);
        slots[0].tick(&g);
        assert_eq!(slots[0].stage, Stage::Dormant);
        assert!(apply(&mut slots, &Action { op: 9, ..Action::default() }, &g).is_err());
        assert!(apply(&mut slots, &act(Op::Wait, 7), &g).unwrap().is_none(), "wait acts on no slot");
    }

    /// Every action drawn under the mask table is legal, whatever the slots' stages; the
    /// heads an op does not read are pinned to their first choice.
    #[test]
    fn actions_drawn_under_the_mask_table_are_always_legal() {
        let g = Gates::default();
        let mut rng = HostRng::new(3);
        let mut slots = vec![Slot::default(); 3];
        let mut seen = [0usize; OPS.len()];
        for _ in 0..2000 {
            let a = Action::random_legal(&slots, &g, 5, &mut rng);
            seen[a.op] += 1;
            let op = OPS[a.op];
            if !op.reads(2) {
                assert_eq!((a.blueprint, a.seed_lr), (0, 0), "{a:?}");
            }
            if op == Op::Wait {
                assert_eq!(a.slot, 0);
            }
            apply(&mut slots, &a, &g).unwrap_or_else(|e| panic!("{a:?} drawn under the masks is illegal: {}", e.0));
            slots.iter_mut().for_each(|s| s.tick(&g));
        }
        assert!(seen.iter().all(|&n| n > 0), "every op happens: {seen:?}");
        assert_eq!(mask_table(&slots, &g, 5).len(), 6 * 30);
        let back = Action::from_heads(&Action { op: 1, slot: 2, seed_lr: 1, ..Action::default() }.to_heads());
        assert_eq!((back.op, back.slot, back.seed_lr), (1, 2, 1));
    }

    /// `--pin-heads grower` and `tempo`: in every op's row, each pinned head the op reads
    /// allows its one choice only; the other heads' parts, and heads the op does not read,
    /// are as before; `free` changes nothing. `tempo` pins the tempo alone.
    #[test]
    fn pinned_heads_allow_the_growers_choice_only() {
        let g = Gates::default();
        let mut rng = HostRng::new(8);
        let mut slots = vec![Slot::default(); 3];
        let sizes = heads(3, 5);
        let width: usize = sizes.iter().map(|h| h.1).sum();
        for _ in 0..300 {
            let free = mask_table(&slots, &g, 5);
            let mut same = free.clone();
            pin(&mut same, HeadPin::Free, 3, 5, true, false);
            assert_eq!(same, free);
            for which in [HeadPin::Grower, HeadPin::Tempo] {
                let mut pinned = free.clone();
                pin(&mut pinned, which, 3, 5, true, false);
                for (o, op) in OPS.iter().enumerate() {
                    let mut start = o * width;
                    for (h, &(_, n)) in sizes.iter().enumerate() {
                        let (a, b) = (&free[start..start + n], &pinned[start..start + n]);
                        match super::pinned(which, h).filter(|_| op.reads(h)) {
                            Some(c) => {
                                assert!(b.iter().enumerate().all(|(i, &x)| x == (i == c)), "{which:?} {op:?} head {h}")
                            }
                            None => assert_eq!(a, b, "{which:?} {op:?} head {h}"),
                        }
                        start += n;
                    }
                }
            }
            assert_eq!(
                (0..8).filter_map(|h| super::pinned(HeadPin::Tempo, h).map(|c| (h, c))).collect::<Vec<_>>(),
                [(6, TEMPOS.len() - 1)],
                "tempo pins the tempo head alone, at its longest"
            );
            let a = Action::random_legal(&slots, &g, 5, &mut rng);
            apply(&mut slots, &a, &g).unwrap();
            slots.iter_mut().for_each(|s| s.tick(&g));
        }
    }

    #[test]
    fn curves_run_from_zero_to_one_and_rise() {
        for c in CURVES {
            assert!((c.at(0.0)).abs() < 1e-12 && (c.at(1.0) - 1.0).abs() < 1e-12, "{c:?}");
            let xs: Vec<f64> = (0..=10).map(|i| c.at(i as f64 / 10.0)).collect();
            assert!(xs.windows(2).all(|w| w[0] < w[1]), "{c:?}");
        }
        assert_eq!(heads(3, 5).map(|h| h.1), [6, 3, 5, 3, 4, 3, 3, 3]);
    }

    #[test]
    fn shapley_values_share_the_whole_fairly_and_sampling_approaches_them() {
        // Additive players get exactly their own worth; the values sum to the whole.
        let worth = [0.1, 0.02, -0.03];
        let mut additive = |m: u32| (0..3).filter(|p| m & (1 << p) != 0).map(|p| worth[p]).sum::<f64>();
        let exact = shapley(3, &mut additive, None);
        for (s, w) in exact.iter().zip(worth) {
            assert!((s - w).abs() < 1e-12);
        }
        // Two players worth something only together split it; the third is a dummy.
        let mut pair = |m: u32| if m & 0b011 == 0b011 { 0.08 } else { 0.0 };
        let exact = shapley(3, &mut pair, None);
        assert!((exact[0] - 0.04).abs() < 1e-12 && (exact[1] - 0.04).abs() < 1e-12 && exact[2].abs() < 1e-12);
        let mut rng = HostRng::new(9);
        let mut calls = 0;
        let mut counted = |m: u32| {
            calls += 1;
            pair(m)
        };
        let sampled = shapley(3, &mut counted, Some((400, &mut rng)));
        assert!((sampled[0] - 0.04).abs() < 0.005 && sampled[2].abs() < 1e-12, "{sampled:?}");
        assert!(calls <= 8, "each coalition's value is asked for once: {calls}");
    }
}
