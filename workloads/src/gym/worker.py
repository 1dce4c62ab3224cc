"""hotlab's Python side of the `gym` workload (run by the trainer as `python -c`).

Three modes, chosen by the JSON in argv[1]:

- `probe`: makes one env and prints its spaces as one JSON line (or, on failure, what
  failed and how to fix it), so the trainer knows the shapes before it starts anything.
- `ids`: Gymnasium's registered ids by family (classic_control, box2d, mujoco, ...), each
  family with the module it needs and, where that is missing, the command that adds it:
  what the lab's launch form offers.
- `serve`: one worker process of the run. It holds a slice of the envs and serves the
  trainer's commands through the shared-memory region the trainer created (an inherited
  memfd), laid out as the trainer's `exec::shm::Layout`: actions in, observations,
  rewards, terminations, truncations and the ended episodes out, with no pickling. Its
  envs are Gymnasium's, stepped one after another (`GymEnvs`), or with `"engine":
  "envpool"` one EnvPool batch stepped by EnvPool's C++ threads (`PoolEnvs`, the
  `envpool` workload): the trainer does not know which.

Box actions arrive as the policy sampled them (float32, flattened); the worker clips its
slice to the space's finite bounds in one numpy call and hands each env its row in the
space's shape and dtype, so the env never sees an action out of bounds while the trainer
keeps the unclipped sample for the loss.

Autoreset is same-step (Gymnasium's `AutoresetMode.SAME_STEP`): an env that ends is reset
in the step it ended, its last observation goes to `final_obs` and the observation
returned is the reset one. Env `g` (global index) is reset with seed `seed + g`.

Pictures: the worker holding env 0 may be given `frame` ({"path", "want", "every_s",
"max_side"}). After a step, when the trainer asks (the `want` file exists) and `every_s` has
passed since the last picture, it draws env 0 (`render()` in `rgb_array` mode), keeps one
pixel in k each way so no side is over `max_side`, writes the PNG as JSON to `path` (a
temporary file, then a rename), or why it could not draw, and removes `want`. Nothing is
drawn that no one asked for. The drawing's time is its own part (`render`), not the step's.

Waits: the trainer bumps `go`; each worker sets its own `done` word (plain aligned 4-byte
stores: atomic, and ordered after the arrays' writes on x86-64) and, with `--wait block`,
wakes the trainer through a futex on it.
"""

import base64
import ctypes
import inspect
import json
import math
import os
import platform
import struct
import sys
import time
import traceback
import zlib

CMD_STEP, CMD_RESET, CMD_EXIT = 0, 1, 2
FUTEX_WAIT, FUTEX_WAKE = 0, 1
# x86-64 only: its stores are seen in program order, which the done word relies on.
SYS_FUTEX = {"x86_64": 202}.get(platform.machine())


def fail(field, message):
    print(json.dumps({"ok": False, "field": field, "message": message}), flush=True)
    sys.exit(0)


def import_gymnasium(python):
    try:
        import gymnasium  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        fail("python", f"{python} has no gymnasium ({e}): install it with `{python} -m pip install gymnasium`")
    import gymnasium

    builtin_envs(gymnasium)
    return gymnasium


# hotlab's own envs, registered under `hotlab/` wherever this worker runs.
BUILTIN = "hotlab/"


def builtin_envs(gym):
    """Registers hotlab's own small envs (`hotlab/…`), which every Python with gymnasium has:

    - `hotlab/CueRecall-v0`: a memory task. A cue is shown once (one of two flags), then
      `delay` blank steps (4), then a choice (the third flag says when) that pays +1 if it
      matches the cue and -1 if not; every other step pays 0 and its action is ignored. A
      policy without memory sees the same blank observation at the choice whatever the cue
      was, so none does better than chance (0) in expectation; a recurrent one learns it
      (the `memory` preset).
    """
    import numpy as np

    if BUILTIN + "CueRecall-v0" in gym.registry:
        return

    class CueRecall(gym.Env):
        def __init__(self, delay=4):
            self.delay = int(delay)
            self.observation_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
            self.action_space = gym.spaces.Discrete(2)
            self.cue, self.t = 0, 0

        def _obs(self):
            o = np.zeros(3, np.float32)
            if self.t == 0:
                o[self.cue] = 1.0
            if self.t == self.delay + 1:
                o[2] = 1.0
            return o

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.cue, self.t = int(self.np_random.integers(2)), 0
            return self._obs(), {}

        def step(self, action):
            if self.t == self.delay + 1:
                reward = 1.0 if int(action) == self.cue else -1.0
                return self._obs(), reward, True, False, {}
            self.t += 1
            return self._obs(), 0.0, False, False, {}

    gym.register(BUILTIN + "CueRecall-v0", entry_point=lambda **kw: CueRecall(**kw))


def takes(f, name):
    """Whether the callable `f` takes the keyword `name`."""
    try:
        params = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind == p.VAR_KEYWORD for p in params)


def make(gym, target, kwargs, drawn=False, atari=False, stack=4):
    """`ID` (a registered id), or `module:callable` (a factory or an env class); `drawn`:
    in `rgb_array` render mode, unless the keywords choose a mode or the callable takes none;
    `atari`: wrapped in Atari's preprocessing (`preprocess`)."""
    if atari:
        # The preprocessing skips the frames itself: the env must not (ALE's v5 skip 4).
        skip = {"frameskip": 1} if target.startswith("ALE/") else {}
        return preprocess(gym, make(gym, target, dict(skip, **kwargs), drawn), target, stack)
    if drawn and "render_mode" not in kwargs:
        kwargs = dict(kwargs, render_mode="rgb_array")
    if ":" in target:
        module, _, name = target.partition(":")
        import importlib

        try:
            mod = importlib.import_module(module)
        except ImportError as e:
            fail("id", f"cannot import the module '{module}' of '{target}' ({e}); is it on PYTHONPATH?")
        factory = getattr(mod, name, None)
        if callable(factory):
            if "render_mode" in kwargs and not takes(factory, "render_mode"):
                kwargs = {k: v for k, v in kwargs.items() if k != "render_mode"}
            return factory(**kwargs)
        # A registered id that needs its module imported first (Gymnasium's `module:Id`).
    if target.startswith("ALE/"):
        register_atari(target)
    try:
        return gym.make(target, **kwargs)
    except gym.error.Error as e:
        import difflib

        near = difflib.get_close_matches(target, list(gym.registry.keys()), n=5, cutoff=0.5)
        hint = f"; registered ids near it: {', '.join(near)}" if near else ""
        fail("id", f"Gymnasium has no env '{target}' ({e}){hint}")


# Atari's envs: registered by importing ale-py (its wheel ships the ROMs).
ATARI_INSTALL = '-m pip install "gymnasium[atari]"'


def register_atari(target):
    """Registers the `ALE/` ids, or refuses `target` naming what to install."""
    try:
        import ale_py  # noqa: F401
    except ImportError as e:
        fail("id", f"'{target}' is an Atari env, and this Python has no ale-py ({e}): "
                   f"install it with `{sys.executable} {ATARI_INSTALL}` (its wheel includes the ROMs)")


# Where a wrapped env's step puts the reward before clipping: episode returns are the game's.
RAW_REWARD = "hotlab_raw_reward"


def preprocess(gym, env, target, stack=4):
    """Atari's standard preprocessing (CleanRL's `ppo_atari.py`, with Gymnasium's own
    wrappers where it has them): no-op starts (up to 30), 4 frames skipped with the last two
    max-pooled, 84×84 grayscale, episodic life (a lost life ends the learner's episode, not
    the game), FIRE after each reset (for games that wait for it), rewards clipped to their
    sign with the raw reward kept in the info, the last `stack` frames stacked (4, as
    ppo_atari.py; 1, as ppo_atari_lstm.py): `[stack, 84, 84]` uint8."""
    import numpy as np
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    if not hasattr(env.unwrapped, "ale"):
        fail("wrappers", f"'{target}' is not an Atari env (ALE/...), and atari is Atari's preprocessing; "
                   "allowed for it: none or auto")
    try:
        env = AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True)
    except Exception as e:
        fail("id", f"'{target}' cannot take Atari's preprocessing ({type(e).__name__}: {e}); "
                   "run it with --gym-wrappers none")

    class FireReset(gym.Wrapper):
        def reset(self, **kw):
            obs, info = self.env.reset(**kw)
            meanings = self.env.unwrapped.get_action_meanings()
            if len(meanings) > 1 and meanings[1] == "FIRE":
                obs, _, term, trunc, info = self.env.step(1)
                if term or trunc:
                    obs, info = self.env.reset(**kw)
            return obs, info

    class ClipReward(gym.Wrapper):
        def step(self, action):
            obs, reward, term, trunc, info = self.env.step(action)
            info[RAW_REWARD] = float(reward)
            return obs, float(np.sign(reward)), term, trunc, info

    return FrameStackObservation(ClipReward(FireReset(EpisodicLife(gym, env))), stack)


# Set in a step's info where the learner's episode ended on a lost life while the game goes on.
LIFE_LOST = "hotlab_life_lost"


def EpisodicLife(gym, env):
    """CleanRL's `EpisodicLifeEnv`: a lost life ends the learner's episode (`terminated`,
    with `LIFE_LOST` in the info) while the game goes on: the reset that follows is one
    no-op step, not a new game, and only a game over (or the time limit) ends the episode
    whose score is reported."""

    class Wrapped(gym.Wrapper):
        def __init__(self, env):
            super().__init__(env)
            self.lives, self.real_done = 0, True

        def step(self, action):
            obs, reward, term, trunc, info = self.env.step(action)
            self.real_done = term or trunc
            lives = self.env.unwrapped.ale.lives()
            if 0 < lives < self.lives:
                term = True
                if not self.real_done:
                    info[LIFE_LOST] = True
            self.lives = lives
            return obs, reward, term, trunc, info

        def reset(self, **kw):
            if self.real_done:
                obs, info = self.env.reset(**kw)
            else:
                obs, _, term, trunc, info = self.env.step(0)
                if term or trunc:
                    obs, info = self.env.reset(**kw)
            self.real_done = False
            self.lives = self.env.unwrapped.ale.lives()
            return obs, info

    return Wrapped(env)


# Most leaves an observation may have (a Dict's or Tuple's, nested ones counted): the
# trainer's region has one array per leaf.
MAX_LEAVES = 16
LEAVES_ALLOWED = "Box, Discrete, MultiDiscrete and MultiBinary, in a Dict or Tuple (nested too)"


class Leaves:
    """An observation's leaves, in its space's order (a Dict's keys as the space lists them,
    a Tuple's positions): each one array of the trainer's region. A Box of uint8 or bool
    with 2 or 3 dimensions is an image (bytes, in its own shape); any other Box and a
    MultiBinary are flattened to float32; a Discrete or MultiDiscrete is its indices (int64,
    from 0: the space's `start` taken off), with its choices per index. A plain Box is the
    one leaf `obs`; anything else is refused naming the leaf."""

    def __init__(self, gym, space):
        import numpy as np

        self.structured = not isinstance(space, gym.spaces.Box)
        # (key, path into the observation, kind, shape, classes, start)
        self.leaves = []
        self.walk(gym, space, (), "obs" if not self.structured else "")
        if not self.leaves:
            fail("space", f"observation space {space} has no leaves: a Dict or Tuple needs at least one of {LEAVES_ALLOWED}")
        if len(self.leaves) > MAX_LEAVES:
            keys = ", ".join(leaf[0] for leaf in self.leaves)
            fail("space", f"observation space has {len(self.leaves)} leaves ({keys}); at most {MAX_LEAVES} are allowed")
        self.dtypes = [{"u8": np.uint8, "bool": np.uint8, "f32": np.float32, "i64": np.int64}[leaf[2]] for leaf in self.leaves]
        self.widths = [int(math.prod(leaf[3])) for leaf in self.leaves]

    def walk(self, gym, space, path, key):
        import numpy as np

        spaces = gym.spaces
        name = key or "obs"
        if isinstance(space, spaces.Dict):
            for k, sub in space.spaces.items():
                self.walk(gym, sub, path + (k,), f"{key}.{k}" if key else str(k))
        elif isinstance(space, spaces.Tuple):
            for i, sub in enumerate(space.spaces):
                self.walk(gym, sub, path + (i,), f"{key}.{i}" if key else str(i))
        elif isinstance(space, spaces.Box):
            shape = [int(n) for n in space.shape]
            kind = {np.dtype(np.uint8): "u8", np.dtype(np.bool_): "bool"}.get(np.dtype(space.dtype), "f32")
            if kind != "f32" and (len(shape) in (2, 3) or not self.structured):
                self.leaves.append((name, path, kind, shape, [], None))
            else:
                self.leaves.append((name, path, "f32", [int(math.prod(shape)) if shape else 1], [], None))
        elif isinstance(space, spaces.MultiBinary):
            n = int(np.prod(space.shape)) if space.shape else 1
            self.leaves.append((name, path, "f32", [n], [], None))
        elif isinstance(space, spaces.Discrete):
            self.leaves.append((name, path, "i64", [1], [int(space.n)], np.asarray([int(space.start)], dtype=np.int64)))
        elif isinstance(space, spaces.MultiDiscrete):
            nvec = np.asarray(space.nvec).reshape(-1)
            start = np.asarray(getattr(space, "start", np.zeros_like(nvec)), dtype=np.int64).reshape(-1)
            self.leaves.append((name, path, "i64", [len(nvec)], [int(n) for n in nvec], start))
        else:
            fail("space", f"observation leaf '{name}' is a {type(space).__name__} ({space}), which no encoder reads; "
                          f"allowed leaves: {LEAVES_ALLOWED}")

    def describe(self):
        return [{"key": k, "kind": kind, "shape": shape, "classes": classes} for k, _, kind, shape, classes, _ in self.leaves]

    def leaf(self, o, k):
        """Leaf `k` of the observation `o` (or of a batch of them, leaf by leaf)."""
        for step in self.leaves[k][1]:
            o = o[step]
        return o

    def rows(self, k, values, n):
        """Leaf `k` of `n` observations (`values`: a list of them, or their batch) as the
        region's `[n, width]` rows."""
        import numpy as np

        start = self.leaves[k][5]
        a = np.asarray(values, dtype=self.dtypes[k]).reshape(n, self.widths[k])
        return a - start if start is not None else a


def describe(gym, env, pooled=None):
    """The env's spaces as hotlab takes them, or a refusal naming the space; `pooled`: the
    id of an EnvPool batch (its spec and limits are EnvPool's config, it draws nothing)."""
    spaces = gym.spaces
    obs, act = env.observation_space, env.action_space
    leaves = Leaves(gym, obs)
    continuous, low, high = 0, [], []
    if isinstance(act, spaces.Discrete):
        heads, starts = [int(act.n)], [int(act.start)]
    elif isinstance(act, spaces.MultiDiscrete):
        if act.nvec.ndim != 1:
            fail("space", f"action space {act} is not supported: a MultiDiscrete must be one-dimensional")
        heads, starts = [int(n) for n in act.nvec], [int(s) for s in getattr(act, "start", [0] * len(act.nvec))]
    elif isinstance(act, spaces.Box):
        import numpy as np

        if not np.issubdtype(act.dtype, np.floating):
            fail("space", f"action space {act} is not supported: a Box action must have a float dtype (float32 or float64), not {act.dtype}; integer actions are Discrete or MultiDiscrete")
        heads, starts = [], []
        continuous = int(math.prod(act.shape)) if act.shape else 1
        # JSON has no infinity: an unbounded side is null (nothing to clip there).
        low = [float(v) if np.isfinite(v) else None for v in np.asarray(act.low, dtype=np.float64).reshape(-1)]
        high = [float(v) if np.isfinite(v) else None for v in np.asarray(act.high, dtype=np.float64).reshape(-1)]
    else:
        fail("space", f"action space {act} is not supported: only Discrete, MultiDiscrete (categorical heads) and Box (a Gaussian head)")
    # A plain Box: pixels and flags stay bytes (the trainer reads them as features once per
    # batch), every other dtype crosses as float32. A Dict or Tuple: its leaves.
    first = leaves.leaves[0]
    dim = sum(leaves.widths)
    kind = first[2] if not leaves.structured else "f32"
    shape = list(obs.shape) if not leaves.structured else [dim]
    if pooled is not None:
        modes, limit, name = [], env.config.get("max_episode_steps"), pooled
    else:
        modes = list(env.metadata.get("render_modes", []))
        limit = env.spec.max_episode_steps if env.spec is not None else None
        name = str(env.spec.id if env.spec else env)
    return {"ok": True, "obs_dim": dim, "obs_shape": shape, "obs_kind": kind, "heads": heads, "starts": starts,
            "leaves": leaves.describe() if leaves.structured else [],
            "continuous": continuous, "action_low": low, "action_high": high,
            "render_modes": modes, "max_episode_steps": limit, "name": name}


def probe(a):
    gym = import_gymnasium(a["python"])
    if a.get("engine") == "envpool":
        pool = make_pool(a, 1, 0)
        answer = describe(gym, pool, pooled=a["id"])
        pool.close()
        print(json.dumps(answer), flush=True)
        return
    try:
        env = make(gym, a["id"], a.get("kwargs") or {}, atari=a.get("atari", False), stack=a.get("stack") or 4)
        answer = describe(gym, env)
        env.close()
    except Exception as e:
        fail("id", f"making '{a['id']}' raised {type(e).__name__}: {e}\n{traceback.format_exc()}")
    print(json.dumps(answer), flush=True)


# The module a family of Gymnasium's own envs imports to step, and the extra that installs it.
NEEDS = {"mujoco": ("mujoco", "mujoco"), "box2d": ("Box2D", "box2d"), "phys2d": ("jax", "jax"), "tabular": ("jax", "jax")}


def pool_ids(a):
    """EnvPool's ids by the module that makes them (atari, mujoco.gym, classic_control, ...)."""
    try:
        import envpool
        import envpool.registration as registration
    except ImportError as e:
        fail("python", f"{a['python']} has no envpool ({e}): install it with `{a['python']} {ENVPOOL_INSTALL}`, "
                       "or run `cargo xtask lab --envpool`")
    families = {}
    for env_id, (module, _, _) in registration.registry.specs.items():
        families.setdefault(module.removeprefix("envpool."), []).append(env_id)
    out = [{"family": f, "ids": found, "missing": None, "install": None} for f, found in sorted(families.items())]
    print(json.dumps({"ok": True, "library": "EnvPool", "version": envpool.__version__, "families": out}), flush=True)


def ids(a):
    import importlib

    if a.get("engine") == "envpool":
        return pool_ids(a)
    gym = import_gymnasium(a["python"])
    try:
        import ale_py  # noqa: F401  (registers the ALE/ ids)

        atari_missing = None
    except ImportError as e:
        atari_missing = f"ale_py ({type(e).__name__}: {e})"
    families = {}
    for env_id, spec in gym.registry.items():
        if env_id.startswith(BUILTIN):
            families.setdefault("hotlab", []).append(env_id)
            continue
        # A callable entry point is a placeholder that raises (mujoco-py's v2/v3, shimmy's).
        if not isinstance(spec.entry_point, str):
            continue
        module = spec.entry_point.split(":")[0]
        parts = module.split(".")
        family = parts[2] if module.startswith("gymnasium.envs.") and len(parts) > 2 else parts[0]
        families.setdefault(family, []).append(env_id)
    out = []
    for family, found in sorted(families.items()):
        module, extra = NEEDS.get(family, (None, None))
        missing = install = None
        if module is not None:
            try:
                importlib.import_module(module)
            except Exception as e:  # an ImportError, or a library the wheel cannot load
                missing = f"{module} ({type(e).__name__}: {e})"
                install = f'{a["python"]} -m pip install "gymnasium[{extra}]"'
        out.append({"family": family, "ids": found, "missing": missing, "install": install})
    if atari_missing:
        out.append({"family": "ale_py", "ids": [], "missing": atari_missing, "install": f'{a["python"]} {ATARI_INSTALL}'})
    print(json.dumps({"ok": True, "library": "Gymnasium", "version": gym.__version__, "families": out}), flush=True)


def png(rgb):
    """An 8-bit RGB PNG of the `[height, width, 3]` array `rgb`: unfiltered rows, deflated."""
    import numpy as np

    h, w, _ = rgb.shape
    rows = np.concatenate([np.zeros((h, 1), dtype=np.uint8), rgb.reshape(h, w * 3)], axis=1)

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + chunk(b"IEND", b"")


def draw(env, max_side):
    """Env `env`'s picture as `GymImage`'s fields (without the step and the time), or why not."""
    import numpy as np

    try:
        img = env.render()
    except Exception as e:  # a missing pygame, say: the run goes on without pictures
        return {"error": f"render() raised {type(e).__name__}: {e}"}
    if img is None:
        mode = getattr(env, "render_mode", None)
        return {"error": f"render() returned nothing (render_mode {mode!r}; pictures need 'rgb_array')"}
    img = np.asarray(img)
    if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] not in (3, 4) or 0 in img.shape:
        return {"error": f"render() returned {img.dtype} {list(img.shape)}, not uint8 [height, width, 3]"}
    k = -(-max(img.shape[0], img.shape[1]) // max_side)
    small = np.ascontiguousarray(img[::k, ::k, :3])
    return {"png": base64.b64encode(png(small)).decode(), "width": small.shape[1], "height": small.shape[0]}


class Pictures:
    """Env 0's pictures for the trainer (see the module's doc)."""

    def __init__(self, frame):
        self.path, self.want = frame["path"], frame["want"]
        self.every_s, self.max_side = frame["every_s"], frame["max_side"]
        self.last = -math.inf
        self.failed = False

    def maybe(self, env, steps, now):
        """Draws `env` if the trainer asks and `every_s` passed; the seconds it took."""
        if self.failed or now - self.last < self.every_s or not os.path.exists(self.want):
            return 0.0
        start = time.perf_counter()
        picture = draw(env, self.max_side)
        # One error is enough: the env will not draw itself next time either.
        self.failed = "error" in picture
        picture["at_step"] = steps
        picture["render_ms"] = 1e3 * (time.perf_counter() - start)
        try:
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(picture, f)
            os.replace(tmp, self.path)
            os.remove(self.want)
        except OSError:
            # The trainer's folder is gone: it is ending, and wants no more pictures.
            self.failed = True
        self.last = time.perf_counter()
        return self.last - start


class Futex:
    def __init__(self, mm):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long
        self.mm = mm

    def word(self, offset):
        return ctypes.c_uint32.from_buffer(self.mm, offset)

    # `syscall` is variadic: every argument goes as its C type, or ctypes would pass the
    # word's address as a 32-bit int.
    def wait(self, word, expected, seconds):
        ts = (ctypes.c_long * 2)(int(seconds), int((seconds % 1) * 1e9))
        self.libc.syscall(ctypes.c_long(SYS_FUTEX), ctypes.c_void_p(ctypes.addressof(word)), ctypes.c_int(FUTEX_WAIT),
                          ctypes.c_uint32(expected), ctypes.byref(ts), ctypes.c_void_p(0), ctypes.c_int(0))

    def wake(self, word):
        self.libc.syscall(ctypes.c_long(SYS_FUTEX), ctypes.c_void_p(ctypes.addressof(word)), ctypes.c_int(FUTEX_WAKE),
                          ctypes.c_int(0x7FFFFFFF), ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_int(0))


class Slice:
    """This worker's rows of the region's arrays (see the module's doc)."""

    def __init__(self, mm, L, first, count, envs):
        import numpy as np

        def array(dtype, offset, n, width=None):
            a = np.frombuffer(mm, dtype=dtype, count=n if width is None else n * width, offset=offset)
            return (a.reshape(n, width) if width is not None else a)[first:first + count]

        heads, dims = L["heads"], L["continuous"]
        self.actions = array(np.int64, L["actions"], envs, heads)
        self.real = array(np.float32, L["real_actions"], envs, dims)
        # One array per leaf ([`Leaves`]): an image (uint8) or a grid of flags (bool, as 0
        # and 1) crosses as bytes, in the env's own layout; indices as int64; anything
        # else as float32.
        kinds = {"u8": np.uint8, "f32": np.float32, "i64": np.int64}
        self.obs = [array(kinds[f["kind"]], f["obs"], envs, f["width"]) for f in L["fields"]]
        self.final_obs = [array(kinds[f["kind"]], f["final_obs"], envs, f["width"]) for f in L["fields"]]
        self.reward = array(np.float32, L["reward"], envs)
        self.terminated = array(np.uint8, L["terminated"], envs)
        self.truncated = array(np.uint8, L["truncated"], envs)
        self.episode_return = array(np.float64, L["episode_return"], envs)
        self.episode_length = array(np.uint32, L["episode_length"], envs)
        self.ended = array(np.uint8, L["ended"], envs)


class Actions:
    """The actions of this worker's envs as their space takes them: the categorical heads'
    indices shifted by their starts, or the Gaussian's sample clipped to the finite bounds
    in the space's shape and dtype."""

    def __init__(self, space, starts, dims):
        import numpy as np

        self.dims, self.starts = dims, np.asarray(starts, dtype=np.int64)
        if dims:
            # Infinite bounds clip nothing; the env gets its space's shape and dtype.
            self.low = np.asarray(space.low, dtype=np.float32).reshape(-1)
            self.high = np.asarray(space.high, dtype=np.float32).reshape(-1)
            self.shape, self.dtype = tuple(space.shape), space.dtype

    def batch(self, region, count):
        """One array for the whole slice."""
        import numpy as np

        if self.dims:
            return np.clip(region.real, self.low, self.high).astype(self.dtype).reshape((count,) + self.shape)
        if len(self.starts) == 1:
            return region.actions[:, 0] + self.starts[0]
        return region.actions + self.starts

    def zeros(self, n):
        """An action for `n` envs that the env takes (what an autoreset ignores)."""
        import numpy as np

        if self.dims:
            return np.zeros((n,) + self.shape, dtype=self.dtype)
        if len(self.starts) == 1:
            return np.full(n, self.starts[0], dtype=np.int32)
        return np.tile(self.starts.astype(np.int32), (n, 1))


class GymEnvs:
    """Gymnasium envs stepped one after another in this process."""

    def __init__(self, gym, a, region, count, pictures):
        self.region, self.count, self.pictures = region, count, pictures
        self.atari = a.get("atari", False)
        kwargs = a.get("kwargs") or {}
        self.local = [make(gym, a["id"], kwargs, drawn=pictures is not None and i == 0, atari=self.atari,
                           stack=a.get("stack") or 4)
                      for i in range(count)]
        self.acts = Actions(self.local[0].action_space, a["starts"], a["layout"]["continuous"]) if self.local else None
        self.leaves = Leaves(gym, self.local[0].observation_space) if self.local else None
        self.at = None
        self.seed = a["seed"] + a["first"]
        self.outs, self.rewards = [None] * count, [0.0] * count
        self.terms, self.truncs, self.ends = [False] * count, [False] * count, [False] * count
        self.ep_return, self.ep_length = [0.0] * count, [0] * count

    def reset(self):
        import numpy as np

        r = self.region
        for i, env in enumerate(self.local):
            self.at = i
            o, _ = env.reset(seed=self.seed + i)
            for k, dst in enumerate(r.obs):
                dst[i] = self.leaves.rows(k, self.leaves.leaf(o, k), 1)[0]
            self.ep_return[i], self.ep_length[i] = 0.0, 0

    def step(self):
        import numpy as np

        r = self.region
        # Python values per env, one numpy write per array: a numpy write per env and
        # field costs more than the env's own step.
        batch = self.acts.batch(r, self.count)
        acts = list(batch) if self.acts.dims or batch.ndim > 1 else batch.tolist()
        for i, env in enumerate(self.local):
            self.at = i
            o, rew, term, trunc, info = env.step(acts[i])
            # The game's score where the reward the policy sees is clipped.
            self.ep_return[i] += info.get(RAW_REWARD, rew) if self.atari else float(rew)
            self.ep_length[i] += 1
            # A lost life ends the learner's episode, not the game's (episodic life).
            end = (term or trunc) and not info.get(LIFE_LOST, False)
            if term or trunc:
                for k, dst in enumerate(r.final_obs):
                    dst[i] = self.leaves.rows(k, self.leaves.leaf(o, k), 1)[0]
                if end:
                    r.episode_return[i], r.episode_length[i] = self.ep_return[i], self.ep_length[i]
                    self.ep_return[i], self.ep_length[i] = 0.0, 0
                o, _ = env.reset()
            self.outs[i], self.rewards[i], self.terms[i], self.truncs[i], self.ends[i] = o, rew, term, trunc, end
        for k, dst in enumerate(r.obs):
            dst[:] = self.leaves.rows(k, [self.leaves.leaf(o, k) for o in self.outs], self.count)
        r.reward[:] = self.rewards
        r.terminated[:] = self.terms
        r.truncated[:] = self.truncs
        r.ended[:] = self.ends

    def draw(self, steps, now):
        return self.pictures.maybe(self.local[0], steps, now) if self.pictures is not None else 0.0


ENVPOOL_INSTALL = "-m pip install envpool"


def import_envpool(python, target):
    try:
        import envpool
        import envpool.registration  # noqa: F401  (which module each id comes from)
    except ImportError as e:
        fail("python", f"'{target}' is an EnvPool env, and {python} has no envpool ({e}): install it with "
                       f"`{python} {ENVPOOL_INSTALL}`, or run `cargo xtask lab --envpool` (EnvPool in .venv-envpool)")
    known = envpool.list_all_envs()
    if target not in known:
        import difflib

        near = difflib.get_close_matches(target, known, n=5, cutoff=0.5)
        hint = f"; its ids near it: {', '.join(near)}" if near else ""
        fail("id", f"EnvPool {envpool.__version__} has no env '{target}' (it has {len(known)} C++ envs){hint}")
    return envpool


def make_pool(a, count, seed):
    """EnvPool's batch of `count` envs of `a["id"]`, env i seeded `seed + i`, its own
    threads stepping them (`threads` 0: EnvPool's default, one per core)."""
    envpool = import_envpool(a["python"], a["id"])
    kwargs = dict(a.get("kwargs") or {})
    if envpool.registration.registry.specs[a["id"]][0] == "envpool.atari":
        # CleanRL's ppo_atari_envpool.py: a lost life ends the learner's episode, rewards
        # clipped to their sign (the episode's score stays the game's), unless asked otherwise.
        kwargs = dict({"episodic_life": True, "reward_clip": True}, **kwargs)
    try:
        return envpool.make_gymnasium(a["id"], num_envs=max(count, 1), seed=seed,
                                      num_threads=a.get("threads", 0), **kwargs)
    except Exception as e:
        fail("kwargs", f"EnvPool could not make '{a['id']}' with {kwargs} ({type(e).__name__}: {e})")


class PoolEnvs:
    """EnvPool's batch, stepped by its own C++ threads: one call a step for the slice.

    EnvPool resets an env at the call after the one it ended in (Gymnasium's next-step
    autoreset, the action ignored). The trainer's region is same-step, so the envs that
    ended are stepped again at once, alone (EnvPool takes a subset of its envs): that call
    is their reset (a new game, or under episodic life the next life), its observation the
    one the trainer gets, its reward none of the learner's. A game over is EnvPool's
    `info["terminated"]` (a lost life is `terminated` too under `episodic_life`); episode
    returns are the game's score (`info["reward"]`, before `reward_clip`)."""

    def __init__(self, a, region, count):
        import numpy as np

        self.region, self.count = region, count
        self.pool = make_pool(a, count, a["seed"] + a["first"])
        self.acts = Actions(self.pool.action_space, a["starts"], a["layout"]["continuous"])
        self.leaves = Leaves(import_gymnasium(a["python"]), self.pool.observation_space)
        self.ep_return = np.zeros(count, dtype=np.float64)
        self.ep_length = np.zeros(count, dtype=np.uint32)

    def reset(self):
        import numpy as np

        o, _ = self.pool.reset()
        self.write(self.region.obs, o)
        self.ep_return[:], self.ep_length[:] = 0.0, 0

    def step(self):
        import numpy as np

        r = self.region
        o, rew, term, trunc, info = self.pool.step(self.acts.batch(r, self.count))
        self.ep_return += info["reward"] if "reward" in info else rew
        self.ep_length += 1
        done = np.logical_or(term, trunc)
        game_over = np.asarray(info["terminated"], dtype=bool) if "terminated" in info else np.asarray(term, dtype=bool)
        end = np.logical_and(done, np.logical_or(game_over, trunc))
        for k, dst in enumerate(r.final_obs):
            dst[done] = self.leaves.rows(k, self.leaves.leaf(o, k), self.count)[done]
        r.episode_return[end], r.episode_length[end] = self.ep_return[end], self.ep_length[end]
        self.ep_return[end], self.ep_length[end] = 0.0, 0
        self.write(r.obs, o)
        ended = np.flatnonzero(done)
        if len(ended):
            reset = self.pool.step(self.acts.zeros(len(ended)), env_id=ended.astype(np.int32))[0]
            for k, dst in enumerate(r.obs):
                dst[ended] = self.leaves.rows(k, self.leaves.leaf(reset, k), len(ended))
        r.reward[:] = rew
        r.terminated[:] = term
        r.truncated[:] = trunc
        r.ended[:] = end

    def write(self, dst, o):
        """The batch's observations `o` into the region's leaf arrays `dst`."""
        for k, rows in enumerate(dst):
            rows[:] = self.leaves.rows(k, self.leaves.leaf(o, k), self.count)

    def draw(self, steps, now):
        return 0.0


def serve(a):
    import mmap

    import numpy as np

    L = a["layout"]
    first, count, w = a["first"], a["count"], a["worker"]
    mm = mmap.mmap(a["fd"], L["size"])
    region = Slice(mm, L, first, count, a["envs"])
    if a.get("engine") == "envpool":
        envs = PoolEnvs(a, region, count)
    else:
        pictures = Pictures(a["frame"]) if a.get("frame") and count else None
        envs = GymEnvs(import_gymnasium(a["python"]), a, region, count, pictures)
    f = Futex(mm)
    go, command, done = f.word(0), f.word(L["command"]), f.word(L["done"])
    # This worker's own part clock: seconds inside the envs' step and reset calls.
    parts = np.frombuffer(mm, dtype=np.float64, count=2, offset=L["parts"] + w * L["parts_bytes"])
    block = a["wait"] == "block"
    parent = a["parent"]
    seen = done.value
    in_env, drawing, steps = 0.0, 0.0, 0
    # With a core to spare, a blocking worker polls for a moment before it sleeps: a
    # futex wake-up costs tens of microseconds on a virtual machine, more than the wait.
    spin_s = 2e-4 if a["workers"] < (os.cpu_count() or 1) else 2e-5
    while True:
        polls, since = 0, time.perf_counter()
        while go.value == seen:
            polls += 1
            if block and (polls & 63) == 0 and time.perf_counter() - since > spin_s:
                f.wait(go, seen, 0.5)
            if polls % 4096 == 0 and os.getppid() != parent:
                return
        now = go.value
        cmd = command.value
        if cmd == CMD_EXIT:
            return
        try:
            t0 = time.perf_counter()
            if cmd == CMD_RESET:
                envs.reset()
            elif count:
                envs.step()
                steps += 1
            t1 = time.perf_counter()
            in_env += t1 - t0
            parts[0] = in_env
            if cmd == CMD_STEP:
                drawing += envs.draw(steps, t1)
                parts[1] = drawing
        except Exception:
            what = "reset" if cmd == CMD_RESET else "step"
            at = getattr(envs, "at", None)
            who = f"env {first + at}" if at is not None else f"EnvPool's envs {first}..{first + count}"
            sys.stderr.write(f"{who} raised in {what}:\n{traceback.format_exc()}")
            sys.stderr.flush()
            os._exit(3)
        done.value = now
        if block:
            f.wake(done)
        seen = now


def main():
    a = json.loads(sys.argv[1])
    # MuJoCo draws through GLFW by default, which needs a display: without one, Mesa's
    # offscreen GL where it is installed (Debian's libosmesa6), unless the user chose a
    # backend. (Without either, its envs still step; env 0's picture says why it has none.)
    if not os.environ.get("DISPLAY") and "MUJOCO_GL" not in os.environ:
        import ctypes.util

        if ctypes.util.find_library("OSMesa"):
            os.environ["MUJOCO_GL"] = "osmesa"
    if SYS_FUTEX is None:
        fail("python", f"the gym workload's workers run on x86_64 Linux, not {platform.machine()}")
    if a["mode"] == "probe":
        probe(a)
    elif a["mode"] == "ids":
        ids(a)
    else:
        serve(a)


if __name__ == "__main__":
    main()
