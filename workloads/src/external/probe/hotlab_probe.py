"""hotlab's probe: what a user's own training script spends its time on, measured in its
process without an edit of its code.

`hotlab profile -- python train.py ...` puts this folder first on PYTHONPATH; its
`sitecustomize` calls `arm()` before the script runs. The probe then patches, as each
library is imported, the calls an RL loop's time goes through:

- a vector env's step (Gymnasium's and gym's `VectorEnv` subclasses, a single `Env`,
  Stable-Baselines3's `VecEnv`, EnvPool), and the wait on worker processes inside it
  (`AsyncVectorEnv.step_wait`, `SubprocVecEnv.step_wait`): env steps, episodes, returns;
- `nn.Module.__call__` (the outermost call: a forward; without grad, the rollout's, with
  grad, the update's), `backward`, the optimizer's step and `clip_grad_norm_`;
- reads of tensor values by Python (`.item()`, `.tolist()`, `.numpy()`, `bool()`, `float()`,
  `int()`, and `.cpu()` of a device tensor: each one a device sync on a GPU) and explicit
  moves of host tensors to a device (`.to(device)`, `.cuda()`, `torch.tensor(..., device=)`),
  each with the file and line that made it;
- on one env step in HOTLAB_PROBE_SAMPLE (64), every torch op dispatched (a
  TorchFunctionMode), for the ops per env step;
- on CUDA, every sync the runtime sees besides those reads (`torch.cuda.set_sync_debug_mode`:
  a boolean mask's indexing, `nonzero`, a copy to the host): counted as reads, with their sites.

Time is exclusive: the innermost open span owns each instant; what no span holds is
`other` (the script's own Python, its losses, its logging), and the probe's own
bookkeeping is `probe`. Every window (about one rollout and its update) goes to hotlab as
one JSON line over the Unix socket HOTLAB_PROBE_SOCKET. A child process (an async env's
worker) is never measured: the socket's variable is removed once armed, and a forked child
disarms itself.
"""

import atexit
import importlib
import json
import os
import socket
import sys
import threading
import time

_perf = time.perf_counter
_ident = threading.get_ident

# A window closes at the first env step after an update once it is this old, and at any
# env step once it is MAX_WINDOW_S old (a long rollout still streams).
MIN_WINDOW_S = 0.05
MAX_WINDOW_S = 2.0
# Call sites kept per window, the busiest first.
MAX_SITES = 24

_armed = False
_main = None
_sock = None
_here = os.path.dirname(os.path.abspath(__file__))
_sample_every = 64
_not_hooked = {}  # measure -> why it could not be hooked in this library version
_hooked = set()  # what was hooked (for the report's "measured with")
_libs = {}  # library -> version

# Exclusive time: the open spans, innermost last; `_last` is when time was last charged.
_stack = []
_last = 0.0
_time = {}
_calls = {}
_probe_s = 0.0

# Guards: only the outermost env step and module call count, and a hook inside a hook
# passes through.
_env_depth = [0]
_mod_depth = [0]
_in_hook = [0]


def _on():
    return _armed and _ident() == _main


def _charge(now):
    global _last
    top = _stack[-1] if _stack else "other"
    _time[top] = _time.get(top, 0.0) + (now - _last)
    _last = now


def _enter(phase):
    _charge(_perf())
    _stack.append(phase)


def _leave(phase):
    _charge(_perf())
    # A span whose end was never seen (an optimizer step that raised) closes here too.
    while _stack and _stack[-1] != phase and phase in _stack:
        _stack.pop()
    if _stack:
        _stack.pop()
    _calls[phase] = _calls.get(phase, 0) + 1


def _probe_begin():
    now = _perf()
    _charge(now)
    return now


def _probe_end(t0):
    global _last, _probe_s
    now = _perf()
    _probe_s += now - t0
    _last = now


# A window's counts that go to hotlab as its facts (`ScriptProfile`'s fields of the same names).
FACT_COUNTS = (
    "vector_steps", "num_envs", "updates", "update_reads", "update_copies", "update_copy_bytes",
    "grad_reads", "optimizer_steps", "forward_rows", "forwards", "ops", "op_steps", "hook_calls",
)
# Its other counts: the run's counters, and the probe's own.
COUNTS = ("env_steps", "reads", "copies", "copy_bytes", "passes", "cuda_syncs")


class _Window:
    """What one window measured."""

    def __init__(self, now):
        self.start = now
        for name in FACT_COUNTS + COUNTS:
            setattr(self, name, 0)
        self.episodes = []
        self.reads_per_step = {}
        self.copies_per_step = {}
        self.sites = {}
        self.kinds = {}
        self.env_class = None


_w = None
# Counts since the last env step: they belong to one rollout step, or to an update when
# the optimizer stepped (or a backward ran) in between.
_pending = [0, 0, 0]  # reads, copies, bytes
_updated = False
_seen_step = False
_returns = {}  # id(env) -> (returns, lengths) for the reward-summed fallback
_info_seen = [False]
_kind_cache = {}
_ops_mode = [None, False]  # the mode, whether it is on
_ops = [0]
_hook_cost = [0.0]
_pass_cost = [0.0]
_op_cost = [0.0]
_cuda_watch = [False]
_light = [False]
# Whether the script uses a device besides the host (CUDA initialized): until then a
# library's own reads and moves of tensors are host work, passed through at once.
_devices = [False]
_step_count = [0]


def _site(frame, kind, nbytes=0):
    """Charges one event to the nearest frame outside torch, numpy and the probe."""
    f = frame
    while f is not None:
        code = f.f_code
        name = code.co_filename
        lib = _lib_files.get(name)
        if lib is None:
            lib = _lib_files[name] = _is_library(name)
        if not lib:
            key = (kind, name, f.f_lineno, code.co_name)
            hit = _w.sites.get(key)
            if hit is None:
                _w.sites[key] = [1, nbytes]
            else:
                hit[0] += 1
                hit[1] += nbytes
            return
        f = f.f_back


_lib_files = {}
_lib_roots = [_here]


def _library_frame(frame):
    name = frame.f_code.co_filename
    lib = _lib_files.get(name)
    if lib is None:
        lib = _lib_files[name] = _is_library(name)
    return lib


def _is_library(name):
    if name.startswith("<"):
        return True
    return any(name.startswith(root) for root in _lib_roots)


# ---- env steps ------------------------------------------------------------------------


def _vector_kind(env):
    """How a (vector) env steps its envs: Python envs in this process, worker processes,
    a batch stepped natively, or one env; and the class that does it."""
    key = type(env)
    hit = _kind_cache.get(key)
    if hit is not None:
        return hit
    e = env
    found = None
    for _ in range(32):
        name = type(e).__name__
        if name in ("SyncVectorEnv", "DummyVecEnv"):
            found = ("python_in_process", name)
            break
        if name in ("AsyncVectorEnv", "SubprocVecEnv", "ShmemVecEnv"):
            found = ("worker_processes", name)
            break
        nxt = getattr(e, "venv", None)
        if nxt is None and not hasattr(e, "envs"):
            nxt = getattr(e, "env", None)
        if nxt is None or nxt is e:
            break
        e = nxt
    if found is None:
        n = _num_envs(env)
        found = ("batched" if n and n > 1 else "single", type(e).__name__)
    _kind_cache[key] = found
    return found


def _num_envs(env):
    n = getattr(env, "num_envs", None)
    if n is None:
        config = getattr(env, "config", None)
        if isinstance(config, dict):
            n = config.get("num_envs")
    try:
        return int(n) if n is not None else 1
    except (TypeError, ValueError):
        return 1


def _before_step():
    """An env step begins: the interval since the previous one is a rollout step's, or an
    update's; a window that is due closes before this step."""
    global _updated, _seen_step
    t0 = _probe_begin()
    reads, copies, nbytes = _pending
    if not _seen_step:
        _seen_step = True
        _close_window(t0, setup=True)
    elif _updated:
        _w.updates += 1
        _w.update_reads += reads
        _w.update_copies += copies
        _w.update_copy_bytes += nbytes
    else:
        _w.reads_per_step[reads] = _w.reads_per_step.get(reads, 0) + 1
        _w.copies_per_step[copies] = _w.copies_per_step.get(copies, 0) + 1
    _pending[0] = _pending[1] = _pending[2] = 0
    if _ops_mode[1]:
        _ops_mode[0].__exit__(None, None, None)
        _ops_mode[1] = False
        _w.ops += _ops[0]
        _w.op_steps += 1
    age = t0 - _w.start
    if (_updated and age >= MIN_WINDOW_S) or age >= MAX_WINDOW_S:
        _close_window(t0)
    _updated = False
    _probe_end(t0)


def _watch_cuda_syncs():
    """Once the script uses CUDA: every sync its runtime sees is a warning, counted here as a
    read (its site the nearest frame of the script's), never printed."""
    torch = sys.modules.get("torch")
    if _light[0] or torch is None or not torch.cuda.is_initialized():
        return
    _cuda_watch[0] = True
    _devices[0] = True
    import warnings

    _lib_roots.append(os.path.dirname(os.path.abspath(warnings.__file__)) + os.sep)
    marker = "called a synchronizing CUDA operation"
    warnings.filterwarnings("always", message=".*" + marker)
    shown = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if marker not in str(message):
            return shown(message, category, filename, lineno, file, line)
        if _in_hook[0] or not _on():
            return None  # a read the probe counts already, or not the script's thread
        t0 = _probe_begin()
        _w.reads += 1
        _w.cuda_syncs += 1
        _pending[0] += 1
        _site(sys._getframe(1), "host_read")
        _probe_end(t0)
        return None

    warnings.showwarning = showwarning
    try:
        torch.cuda.set_sync_debug_mode("warn")
        _hooked.add("torch.cuda.syncs")
    except Exception as e:
        _not_hooked["cuda_syncs"] = f"torch.cuda.set_sync_debug_mode failed ({e}): only the hooked reads are counted"


def _after_step(env, out):
    t0 = _probe_begin()
    if not _cuda_watch[0] and _step_count[0] == 1:
        _cuda_watch[0] = True  # looked at once, after the first step (the model is placed by then)
        try:
            _watch_cuda_syncs()
        except Exception as e:
            _not_hooked["cuda_syncs"] = f"watching CUDA's syncs failed ({type(e).__name__}: {e})"
    try:
        n = _num_envs(env)
        kind, cls = _vector_kind(env)
        _w.vector_steps += 1
        _w.env_steps += n
        _w.num_envs = n
        _w.env_class = cls
        _w.kinds[kind] = _w.kinds.get(kind, 0) + 1
        if kind != "single" and not _singles_off[0]:
            _singles_unwrapped(env)
        _episodes(env, out, n)
        _step_count[0] += 1
        if _ops_mode[0] is not None and (_step_count[0] - 1) % _sample_every == 0:
            _ops[0] = 0
            _ops_mode[0].__enter__()
            _ops_mode[1] = True
    except Exception:
        pass
    _probe_end(t0)


def _episodes(env, out, n):
    np = sys.modules.get("numpy")
    if np is None or not isinstance(out, tuple) or len(out) < 4:
        return
    if len(out) >= 5:
        rewards, dones, infos = out[1], np.logical_or(out[2], out[3]), out[4]
    else:
        rewards, dones, infos = out[1], out[2], out[3]
    found = _info_episodes(infos, n, dones)
    if found:
        _info_seen[0] = True
        _w.episodes.extend(found)
    if _info_seen[0]:
        return  # the infos carry the episodes: no need to sum rewards
    # Without episode statistics in the infos, the returns are the env's rewards summed.
    rewards = np.asarray(rewards, dtype=np.float64).reshape(-1)
    dones = np.asarray(dones, dtype=bool).reshape(-1)
    if rewards.shape[0] != n or dones.shape[0] != n:
        return
    acc = _returns.get(id(env))
    if acc is None or acc[0].shape[0] != n:
        acc = (np.zeros(n), np.zeros(n, dtype=np.int64))
        _returns[id(env)] = acc
    acc[0][:] += rewards
    acc[1][:] += 1
    if dones.any():
        for i in np.nonzero(dones)[0]:
            if not _info_seen[0]:
                _w.episodes.append((float(acc[0][i]), int(acc[1][i])))
            acc[0][i] = 0.0
            acc[1][i] = 0


def _masked(stats, mask):
    import numpy as np

    r = np.asarray(stats.get("r")).reshape(-1)
    length = np.asarray(stats.get("l")).reshape(-1)
    return [(float(r[i]), int(length[i])) for i in np.nonzero(np.asarray(mask).reshape(-1))[0]]


def _info_episodes(infos, n, dones=None):
    """Episodes that `RecordEpisodeStatistics`, SB3's `Monitor` or CleanRL's EnvPool wrapper
    reported in a step's infos."""
    import numpy as np

    found = []
    if isinstance(infos, dict) and "lives" in infos and "r" in infos and "l" in infos and dones is not None:
        # CleanRL's EnvPool wrapper: a game ends where an env is done with no life left; its
        # return is the game's score ("r"), not the clipped rewards of one life.
        done = np.asarray(dones).reshape(-1)
        lives = np.asarray(infos["lives"]).reshape(-1)
        r, length = np.asarray(infos["r"]).reshape(-1), np.asarray(infos["l"]).reshape(-1)
        if done.shape == lives.shape == r.shape:
            _info_seen[0] = True  # a life lost is no episode's end: the rewards are not summed
            return [(float(r[i]), int(length[i])) for i in np.nonzero(done & (lives == 0))[0]]
    if isinstance(infos, dict):
        ep = infos.get("episode")
        if isinstance(ep, dict):
            mask = infos.get("_episode")
            if mask is not None:
                found += _masked(ep, mask)
            elif n == 1 and "r" in ep:
                found.append((float(np.asarray(ep["r"]).reshape(-1)[0]), int(np.asarray(ep["l"]).reshape(-1)[0])))
        final = infos.get("final_info")
        if final is not None and not found:
            if isinstance(final, dict):
                ep = final.get("episode")
                if isinstance(ep, dict) and final.get("_episode") is not None:
                    found += _masked(ep, final["_episode"])
            else:
                for info in final:
                    if isinstance(info, dict) and isinstance(info.get("episode"), dict):
                        ep = info["episode"]
                        r = float(np.asarray(ep["r"]).reshape(-1)[0])
                        found.append((r, int(np.asarray(ep["l"]).reshape(-1)[0])))
    elif isinstance(infos, (list, tuple)):
        for info in infos:
            if isinstance(info, dict) and isinstance(info.get("episode"), dict):
                ep = info["episode"]
                found.append((float(np.asarray(ep["r"]).reshape(-1)[0]), int(np.asarray(ep["l"]).reshape(-1)[0])))
    return found


def _step_hook(fn):
    def step(self, *args, **kwargs):
        if _env_depth[0] or not _on():
            if _env_depth[0]:
                _w.passes += 1
            return fn(self, *args, **kwargs)
        _env_depth[0] = 1
        try:
            _before_step()
            _enter("env_step")
            try:
                out = fn(self, *args, **kwargs)
            finally:
                _leave("env_step")
        finally:
            _env_depth[0] = 0
        _after_step(self, out)
        return out

    step._hotlab = True
    step.__wrapped__ = fn
    step.__name__ = getattr(fn, "__name__", "step")
    step.__doc__ = getattr(fn, "__doc__", None)
    return step


def _wait_hook(fn):
    def step_wait(self, *args, **kwargs):
        if not _on():
            return fn(self, *args, **kwargs)
        _enter("env_wait")
        try:
            return fn(self, *args, **kwargs)
        finally:
            _leave("env_wait")

    step_wait._hotlab = True
    step_wait.__wrapped__ = fn
    return step_wait


def _wrap_method(cls, name, hook):
    fn = cls.__dict__.get(name)
    if fn is not None and callable(fn) and not getattr(fn, "_hotlab", False):
        setattr(cls, name, hook(fn))
        return True
    return False


# Single envs' classes whose `step` the probe wrapped (class, its own step), and the vector
# envs' bases: once a vector env steps, the single envs are its parts, and their wrappers
# (a pass-through at each of their wrappers' layers, every env, every step) come off.
_singles = []
_vector_bases = []
_singles_off = [False]


def _hook_family(base, label, single=False):
    """Every class of `base`'s family, now and later: its own `step` measured."""

    def wrap(cls):
        if single and _singles_off[0]:
            return
        fn = cls.__dict__.get("step")
        if _wrap_method(cls, "step", _step_hook) and single:
            _singles.append((cls, fn))

    stack, seen = [base], set()
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        wrap(cls)
        stack.extend(cls.__subclasses__())
    own = base.__dict__.get("__init_subclass__")

    def init_subclass(cls, **kwargs):
        if own is not None:
            own.__func__(cls, **kwargs)
        else:
            super(base, cls).__init_subclass__(**kwargs)
        wrap(cls)

    base.__init_subclass__ = classmethod(init_subclass)
    _hooked.add(label)


def _singles_unwrapped(outer):
    """A vector env stepped: its envs' own steps are its parts, no longer wrapped (the
    class that stepped as the batch, a wrapper of one, stays)."""
    _singles_off[0] = True
    keep = set(type(outer).__mro__)
    for cls, fn in _singles:
        if cls not in keep and not any(issubclass(cls, b) for b in _vector_bases):
            setattr(cls, "step", fn)
    _singles.clear()


def _patch_gym_core(module, label):
    _hook_family(module.Env, label + ".Env", single=True)


def _patch_vector_env(module, label):
    _vector_bases.append(module.VectorEnv)
    _hook_family(module.VectorEnv, label + ".VectorEnv")


def _patch_async(module, label):
    if _wrap_method(module.AsyncVectorEnv, "step_wait", _wait_hook):
        _hooked.add(label + ".AsyncVectorEnv.step_wait")


def _patch_sb3_base(module):
    _vector_bases.append(module.VecEnv)
    _wrap_method(module.VecEnv, "step", _step_hook)
    _hooked.add("stable_baselines3.VecEnv")


def _patch_sb3_subproc(module):
    if _wrap_method(module.SubprocVecEnv, "step_wait", _wait_hook):
        _hooked.add("stable_baselines3.SubprocVecEnv.step_wait")


def _patch_envpool(module):
    _vector_bases.append(module.EnvPoolMixin)
    _wrap_method(module.EnvPoolMixin, "step", _step_hook)
    _hooked.add("envpool.step")
    _not_hooked["envpool_async"] = "EnvPool's send/recv (async) API is not measured, only its step"


# ---- torch ------------------------------------------------------------------------------


def _count_read(tensor, frame):
    _w.reads += 1
    _pending[0] += 1
    kind = "host_read"
    if _updated and getattr(tensor, "_hotlab_norm", False):
        _w.grad_reads += 1
        kind = "grad_read"
    _site(frame, kind)


def _read_hook(fn, numpy_like):
    def read(self, *args, **kwargs):
        if _in_hook[0] or not _on():
            return fn(self, *args, **kwargs)
        if numpy_like and getattr(self, "_hotlab_read", False):
            return fn(self, *args, **kwargs)  # its .cpu() was the read
        frame = sys._getframe(1)
        if _library_frame(frame) and not _devices[0] or self.device.type == "cpu" and _library_frame(frame):
            _w.passes += 1
            return fn(self, *args, **kwargs)  # a library's own read of host data (Adam's step count)
        _in_hook[0] = 1
        _w.hook_calls += 1
        _enter("host_read")
        try:
            return fn(self, *args, **kwargs)
        finally:
            _leave("host_read")
            t0 = _probe_begin()
            _count_read(self, frame)
            _in_hook[0] = 0
            _probe_end(t0)

    read._hotlab = True
    read.__wrapped__ = fn
    read.__name__ = getattr(fn, "__name__", "read")
    return read


def _device_type(x):
    import torch

    if isinstance(x, torch.device):
        return x.type
    if isinstance(x, str):
        return x.split(":", 1)[0]
    if isinstance(x, torch.Tensor):
        return x.device.type
    if isinstance(x, int) and not isinstance(x, bool):
        return "cuda"
    return None


def _nbytes(t):
    try:
        return t.element_size() * t.nelement()
    except Exception:
        return 0


def _crossing(self, target, orig, args, kwargs, frame):
    """A tensor moved between the host and a device: a copy to the device (a host tensor
    sent to a device, the CPU itself included: the script's explicit move, a transfer on a
    GPU) or a read (a device tensor to the host)."""
    if self.device.type == "cpu":
        if target == "cpu" and _library_frame(frame):
            return orig(self, *args, **kwargs)  # a library's own move within the host
        phase = "obs_transfer"
    elif target == "cpu":
        phase = "host_read"
    else:
        return orig(self, *args, **kwargs)
    _in_hook[0] = 1
    _w.hook_calls += 1
    _enter(phase)
    try:
        out = orig(self, *args, **kwargs)
    finally:
        _leave(phase)
        t0 = _probe_begin()
        if phase == "obs_transfer":
            nbytes = _nbytes(self)
            _w.copies += 1
            _w.copy_bytes += nbytes
            _pending[1] += 1
            _pending[2] += nbytes
            _site(frame, "update_copy" if _updated else "h2d_copy", nbytes)
        else:
            _count_read(self, frame)
        _in_hook[0] = 0
        _probe_end(t0)
    if phase == "host_read":
        try:
            out._hotlab_read = True
        except Exception:
            pass
    return out


def _to_hook(fn):
    def to(self, *args, **kwargs):
        if _in_hook[0] or not _on():
            return fn(self, *args, **kwargs)
        frame = sys._getframe(1)
        if not _devices[0] and _library_frame(frame):
            _w.passes += 1
            return fn(self, *args, **kwargs)  # a library's own move, on a machine of host tensors only
        target = _device_type(kwargs["device"]) if kwargs.get("device") is not None else None
        if target is None and args:
            target = _device_type(args[0])
        if target is None:
            return fn(self, *args, **kwargs)
        return _crossing(self, target, fn, args, kwargs, frame)

    to._hotlab = True
    to.__wrapped__ = fn
    return to


def _cuda_hook(fn):
    def cuda(self, *args, **kwargs):
        if _in_hook[0] or not _on():
            return fn(self, *args, **kwargs)
        return _crossing(self, "cuda", fn, args, kwargs, sys._getframe(1))

    cuda._hotlab = True
    return cuda


def _cpu_hook(fn):
    def cpu(self, *args, **kwargs):
        if _in_hook[0] or not _on() or self.device.type == "cpu":
            return fn(self, *args, **kwargs)
        return _crossing(self, "cpu", fn, args, kwargs, sys._getframe(1))

    cpu._hotlab = True
    return cpu


def _factory_hook(fn):
    """`torch.tensor(data, device=...)`: host data made into a tensor on a device."""

    def factory(*args, **kwargs):
        device = kwargs.get("device")
        if device is None or _in_hook[0] or not _on():
            return fn(*args, **kwargs)
        _in_hook[0] = 1
        _w.hook_calls += 1
        _enter("obs_transfer")
        try:
            out = fn(*args, **kwargs)
        finally:
            _leave("obs_transfer")
            _in_hook[0] = 0
        t0 = _probe_begin()
        nbytes = _nbytes(out)
        _w.copies += 1
        _w.copy_bytes += nbytes
        _pending[1] += 1
        _pending[2] += nbytes
        _site(sys._getframe(1), "update_copy" if _updated else "h2d_copy", nbytes)
        _probe_end(t0)
        return out

    factory._hotlab = True
    factory.__wrapped__ = fn
    return factory


def _span_hook(fn, phase, marks_update=False, norm=False):
    def span(*args, **kwargs):
        global _updated
        if _in_hook[0] or not _on():
            return fn(*args, **kwargs)
        _w.hook_calls += 1
        if marks_update:
            _updated = True
        _enter(phase)
        try:
            out = fn(*args, **kwargs)
        finally:
            _leave(phase)
        if norm and _updated:
            try:
                out._hotlab_norm = True
            except Exception:
                pass
        return out

    span._hotlab = True
    span.__wrapped__ = fn
    span.__name__ = getattr(fn, "__name__", phase)
    return span


def _norm_hook(fn):
    """A norm computed during an update (a gradient's, for logging): its read is telemetry."""

    def norm(*args, **kwargs):
        out = fn(*args, **kwargs)
        if _updated and _armed:
            try:
                out._hotlab_norm = True
            except Exception:
                pass
        return out

    norm._hotlab = True
    norm.__wrapped__ = fn
    return norm


def _patch_torch(torch):
    global _ops_mode
    _libs["torch"] = getattr(torch, "__version__", "?")
    _lib_roots.append(os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)
    try:
        import numpy

        _libs["numpy"] = numpy.__version__
        _lib_roots.append(os.path.dirname(os.path.abspath(numpy.__file__)) + os.sep)
    except Exception:
        pass
    T = torch.Tensor
    for name in ("item", "tolist", "__bool__", "__float__", "__int__"):
        if hasattr(T, name):
            setattr(T, name, _read_hook(getattr(T, name), False))
    T.numpy = _read_hook(T.numpy, True)
    if hasattr(T, "__array__"):
        T.__array__ = _read_hook(T.__array__, True)
    T.to = _to_hook(T.to)
    T.cuda = _cuda_hook(T.cuda)
    T.cpu = _cpu_hook(T.cpu)
    torch.tensor = _factory_hook(torch.tensor)
    torch.as_tensor = _factory_hook(torch.as_tensor)
    _hooked.update(["torch.reads", "torch.copies"])

    module = torch.nn.Module
    orig_call = module.__call__

    def call(self, *args, **kwargs):
        if _mod_depth[0] or not _on():
            if _mod_depth[0]:
                _w.passes += 1
            return orig_call(self, *args, **kwargs)
        grad = torch.is_grad_enabled()
        phase = "update_forward" if grad else "policy_forward"
        _mod_depth[0] = 1
        _w.hook_calls += 1
        _enter(phase)
        try:
            return orig_call(self, *args, **kwargs)
        finally:
            _leave(phase)
            _mod_depth[0] = 0
            if not grad and args:
                a = args[0]
                if isinstance(a, torch.Tensor) and a.dim() > 0:
                    _w.forward_rows += int(a.shape[0])
                    _w.forwards += 1

    module.__call__ = call
    _hooked.add("torch.nn.Module")

    backward = _span_hook(torch.autograd.backward, "backward", marks_update=True)
    torch.autograd.backward = backward
    T.backward = _span_hook(T.backward, "backward", marks_update=True)
    _hooked.add("torch.backward")

    utils = torch.nn.utils
    clip = getattr(utils, "clip_grad_norm_", None)
    if clip is not None:
        hooked = _span_hook(clip, "optimizer", norm=True)
        utils.clip_grad_norm_ = hooked
        if hasattr(utils, "clip_grad"):
            utils.clip_grad.clip_grad_norm_ = hooked
    for owner, name in ((torch, "norm"), (T, "norm"), (torch.linalg, "vector_norm"), (torch.linalg, "norm")):
        if hasattr(owner, name):
            setattr(owner, name, _norm_hook(getattr(owner, name)))
    if hasattr(utils, "get_total_norm"):
        utils.get_total_norm = _norm_hook(utils.get_total_norm)

    try:
        opt = importlib.import_module("torch.optim.optimizer")
    except Exception:
        opt = None
    pre = getattr(opt, "register_optimizer_step_pre_hook", None)
    post = getattr(opt, "register_optimizer_step_post_hook", None)
    if pre is not None and post is not None:

        def before(optimizer, args, kwargs):
            global _updated
            if _on():
                _updated = True
                _w.hook_calls += 1
                _enter("optimizer")

        def after(optimizer, args, kwargs):
            if _on():
                _leave("optimizer")
                _w.optimizer_steps += 1

        pre(before)
        post(after)
        _hooked.add("torch.optim")
    else:
        _not_hooked["optimizer"] = (
            f"torch {_libs['torch']} has no global optimizer step hooks (torch >= 2.0 has): "
            "optimizer steps are in `other`"
        )

    try:
        overrides = importlib.import_module("torch.overrides")
    except Exception:
        overrides = None
    mode_base = getattr(overrides, "TorchFunctionMode", None)
    if mode_base is not None:

        class Ops(mode_base):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                _ops[0] += 1
                return func(*args, **(kwargs or {}))

        _ops_mode[0] = Ops()
        _hooked.add("torch.ops")
    else:
        _not_hooked["ops"] = f"torch {_libs['torch']} has no TorchFunctionMode: ops per step not counted"
    try:
        _calibrate_torch(torch)
    except Exception as e:
        _not_hooked["probe_cost"] = f"calibrating the hooks' cost failed ({type(e).__name__}: {e}): the cost is a floor"


# ---- imports ----------------------------------------------------------------------------


def _version(top):
    try:
        return getattr(sys.modules[top], "__version__", "?")
    except Exception:
        return "?"


def _torch(m):
    if _light[0]:
        _libs["torch"] = getattr(m, "__version__", "?")
        _not_hooked["torch"] = "a light probe (--probe-mode light): env steps and episodes only, no torch call measured"
        return
    _patch_torch(m)


_WATCH = {
    "torch": _torch,
    "gymnasium.core": lambda m: (_libs.setdefault("gymnasium", _version("gymnasium")), _patch_gym_core(m, "gymnasium")),
    "gymnasium.vector.vector_env": lambda m: _patch_vector_env(m, "gymnasium"),
    "gymnasium.vector.async_vector_env": lambda m: _patch_async(m, "gymnasium"),
    "gym.core": lambda m: (_libs.setdefault("gym", _version("gym")), _patch_gym_core(m, "gym")),
    "gym.vector.vector_env": lambda m: _patch_vector_env(m, "gym"),
    "gym.vector.async_vector_env": lambda m: _patch_async(m, "gym"),
    "stable_baselines3.common.vec_env.base_vec_env": lambda m: _patch_sb3_base(m),
    "stable_baselines3.common.vec_env.subproc_vec_env": lambda m: _patch_sb3_subproc(m),
    "envpool.python.envpool": lambda m: _patch_envpool(m),
}
_patched = set()


class _Loader:
    """The real loader of a watched module, then its patch."""

    def __init__(self, name, loader):
        self.name = name
        self.loader = loader

    def create_module(self, spec):
        create = getattr(self.loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        self.loader.exec_module(module)
        if self.name in _patched:
            return
        _patched.add(self.name)
        try:
            _WATCH[self.name](module)
        except Exception as e:
            _not_hooked[self.name] = f"patching {self.name} failed: {type(e).__name__}: {e}"

    def __getattr__(self, name):
        return getattr(self.loader, name)


class _Finder:
    def find_spec(self, name, path=None, target=None):
        if name not in _WATCH or name in _patched:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            try:
                spec = find(name, path, target)
            except Exception:
                spec = None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(name, spec.loader)
                return spec
        return None


# ---- windows ----------------------------------------------------------------------------


def _not_measured():
    out = dict(_not_hooked)
    if "torch" not in _libs and "torch" not in out:
        out["torch"] = "torch was not imported: no forwards, backward, optimizer steps, reads or copies to measure"
    if not _seen_step:
        out["env_steps"] = (
            "no env step was seen: the probe measures Gymnasium's and gym's envs and vector envs, "
            "Stable-Baselines3's VecEnv and EnvPool"
        )
    return out


def _close_window(now, final=False, setup=False):
    global _w, _time, _calls, _probe_s
    _charge(now)
    w = _w
    sites = sorted(w.sites.items(), key=lambda kv: -kv[1][0])[:MAX_SITES]
    # What the window measured of the loop: `ScriptProfile`'s fields, as hotlab reads them.
    facts = {name: getattr(w, name) for name in FACT_COUNTS}
    facts.update(
        env_class=w.env_class,
        kinds=w.kinds,
        reads_per_step=sorted(w.reads_per_step.items()),
        copies_per_step=sorted(w.copies_per_step.items()),
        op_sample_every=_sample_every,
        sites=[
            {"kind": k[0], "file": k[1], "line": k[2], "function": k[3], "count": v[0], "bytes": v[1]}
            for k, v in sites
        ],
        libs=_libs,
        not_measured=_not_measured(),
    )
    msg = {
        "t": "window",
        "final": final,
        "setup": setup,
        "wall_s": now - w.start,
        "phases": {p: [s, _calls.get(p, 0)] for p, s in _time.items()},
        "probe_s": _probe_s,
        "hook_cost_s": w.hook_calls * _hook_cost[0] + w.passes * _pass_cost[0],
        "op_cost_s": w.ops * _op_cost[0],
        "env_steps": w.env_steps,
        "episodes": w.episodes,
        "reads": w.reads,
        "copies": w.copies,
        "copy_bytes": w.copy_bytes,
        "cuda_syncs": w.cuda_syncs,
        "hooked": sorted(_hooked),
        "facts": facts,
    }
    _send(msg)
    _w = _Window(_perf())
    _time = {}
    _calls = {}
    _probe_s = 0.0


def _send(msg):
    global _armed
    if _sock is None:
        return
    try:
        _sock.sendall((json.dumps(msg) + "\n").encode())
    except OSError:
        _armed = False  # hotlab is gone: the script runs on unmeasured


def _calibrate():
    """The cost of one hook (a wrapper, its guard and its clock reads), measured."""

    def plain(x):
        return x

    hooked = _span_hook(plain, "calibration")
    n = 4000
    saved = (list(_stack), dict(_time), dict(_calls))
    t0 = _perf()
    for i in range(n):
        plain(i)
    t1 = _perf()
    for i in range(n):
        hooked(i)
    t2 = _perf()
    _stack[:] = saved[0]
    _time.clear()
    _time.update(saved[1])
    _calls.clear()
    _calls.update(saved[2])
    _hook_cost[0] = max(0.0, ((t2 - t1) - (t1 - t0)) / n)
    _w.hook_calls = 0


def _calibrate_torch(torch):
    """What the probe's hooks cost on this machine, measured on real tensor calls (before the
    first env step, in the set-up's time): a read counted from the script's own frame, a
    call passed through (a library's own, a nested module), an op under the op counter."""
    n = 2000
    ns = {}
    # A frame of no library, as the script's calls are.
    exec(compile("def loop(f, t, n):\n    for _ in range(n):\n        f(t)\n", "/hotlab-calibration.py", "exec"), ns)
    loop, t = ns["loop"], torch.zeros(1)
    hooked, plain = torch.Tensor.item, getattr(torch.Tensor.item, "__wrapped__", torch.Tensor.item)
    saved = (list(_stack), dict(_time), dict(_calls), dict(_w.sites), _w.reads, _pending[0], _w.hook_calls)

    def timed(f):
        t0 = _perf()
        loop(f, t, n)
        return (_perf() - t0) / n

    base = timed(plain)
    _hook_cost[0] = max(_hook_cost[0], timed(hooked) - base)
    _in_hook[0] = 1
    _pass_cost[0] = max(0.0, timed(hooked) - base)
    _in_hook[0] = 0
    if _ops_mode[0] is not None:
        _ops_mode[0].__enter__()
        try:
            with_mode = timed(plain)
        finally:
            _ops_mode[0].__exit__(None, None, None)
        _op_cost[0] = max(0.0, with_mode - base)
    _stack[:] = saved[0]
    for d, old in ((_time, saved[1]), (_calls, saved[2]), (_w.sites, saved[3])):
        d.clear()
        d.update(old)
    _w.reads, _pending[0], _w.hook_calls = saved[4], saved[5], saved[6]
    _w.passes = 0
    _ops[0] = 0


def _at_exit():
    global _armed
    if not _armed or _ident() != _main:
        return
    if _ops_mode[1]:
        try:
            _ops_mode[0].__exit__(None, None, None)
        except Exception:
            pass
        _ops_mode[1] = False
    _close_window(_perf(), final=True)
    _send({"t": "end"})
    _armed = False


def _disarm_child():
    global _armed, _sock
    _armed = False
    _sock = None


def arm():
    """Arms the probe in this process if hotlab asked for it (HOTLAB_PROBE_SOCKET)."""
    global _armed, _main, _sock, _w, _last, _sample_every
    path = os.environ.pop("HOTLAB_PROBE_SOCKET", None)
    if not path:
        return
    try:
        _sample_every = max(1, int(os.environ.get("HOTLAB_PROBE_SAMPLE", "64")))
    except ValueError:
        _sample_every = 64
    _light[0] = os.environ.get("HOTLAB_PROBE_LIGHT") == "1"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    _sock = sock
    _main = _ident()
    _w = _Window(_perf())
    _armed = True
    _calibrate()
    _last = _perf()
    _w.start = _last
    sys.meta_path.insert(0, _Finder())
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_disarm_child)
    atexit.register(_at_exit)
    _send(
        {
            "t": "hello",
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "executable": sys.executable,
            "argv": sys.argv,
            "hook_cost_s": _hook_cost[0],
        }
    )
