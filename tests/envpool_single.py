"""EnvPool's own envs, one pool of one env each, at EnvPool's own next-step autoreset: the
reference for the `envpool` workload's batch in tests/gym.rs.

argv[1]: a JSON file {"id", "envs", "seed", "kwargs", "actions": [[a per env] per step]};
argv[2]: where to write one JSON line per step (and one for the reset first), as
tests/gym_vector.py writes them: each env's observation as its bytes' CRC-32, rewards,
terminations, truncations, the final observations of the envs whose learner's episode
ended, and `scores`, the game's score (EnvPool's unclipped `info["reward"]` summed) of each
env whose game ended (EnvPool's `info["terminated"]`, or the time limit).

Env i of the batch is EnvPool's env seeded `seed + i`: here it is a pool of its own made
with that seed. Where it ends, EnvPool resets it at its next call and ignores that call's
action: the reference makes that call at once (the action a zero), so its stream holds no
step the learner did not take, as the batch's same-step region does.
"""
import json
import sys
import warnings
import zlib

warnings.filterwarnings("ignore")
import envpool  # noqa: E402
import numpy as np  # noqa: E402

with open(sys.argv[1]) as f:
    case = json.load(f)

pools = [envpool.make_gymnasium(case["id"], num_envs=1, seed=case["seed"] + i, **case.get("kwargs", {}))
         for i in range(case["envs"])]


def crc(a):
    return zlib.crc32(np.ascontiguousarray(a).tobytes())


def floats(values):
    return [float(np.float32(v)) for v in values]


scores = [0.0] * len(pools)
with open(sys.argv[2], "w") as out:
    out.write(json.dumps({"obs": [crc(p.reset()[0][0]) for p in pools]}) + "\n")
    for actions in case["actions"]:
        row = {"obs": [], "reward": [], "terminated": [], "truncated": [], "final_obs": {}, "scores": {}}
        for i, pool in enumerate(pools):
            o, r, te, tr, info = pool.step(np.asarray([actions[i]], dtype=np.int32))
            scores[i] += float(info["reward"][0]) if "reward" in info else float(r[0])
            if te[0] or tr[0]:
                row["final_obs"][str(i)] = crc(o[0])
                if tr[0] or ("terminated" in info and info["terminated"][0]) or "terminated" not in info:
                    row["scores"][str(i)] = scores[i]
                    scores[i] = 0.0
                o = pool.step(np.zeros(1, dtype=np.int32))[0]
            row["obs"].append(crc(o[0]))
            row["reward"] += floats(r)
            row["terminated"].append(bool(te[0]))
            row["truncated"].append(bool(tr[0]))
        out.write(json.dumps(row) + "\n")
