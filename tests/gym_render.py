"""What Gymnasium draws of one env, the reference for tests/gym.rs's pictures.

argv[1]: a JSON file {"id", "seed", "actions": [env 0's action per step], "pictures":
[{"at_step", "png", "width", "height"}]}. Makes the env in `rgb_array` mode, resets it
with `seed`, steps it, and at each picture's step compares the picture's pixels (its PNG
decoded here: unfiltered 8-bit RGB rows, as hotlab writes them) with the env's own
`render()`, every k-th pixel (an env that ends is reset in the same step, as hotlab's
workers do). Prints one JSON line: {"same": [bool per picture], "why": [...]}.
"""
import base64
import json
import struct
import sys
import zlib

import gymnasium as gym
import numpy as np


def decode(text):
    data = base64.b64decode(text)
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, idat, size = 8, b"", None
    while at < len(data):
        (n,) = struct.unpack(">I", data[at:at + 4])
        tag, body, crc = data[at + 4:at + 8], data[at + 8:at + 8 + n], data[at + 8 + n:at + 12 + n]
        assert struct.unpack(">I", crc)[0] == zlib.crc32(tag + body) & 0xFFFFFFFF, f"bad CRC in {tag}"
        if tag == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            assert (depth, colour) == (8, 2), "not 8-bit RGB"
            size = (h, w)
        elif tag == b"IDAT":
            idat += body
        at += 12 + n
    h, w = size
    rows = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + 3 * w)
    assert (rows[:, 0] == 0).all(), "filtered rows"
    return rows[:, 1:].reshape(h, w, 3)


with open(sys.argv[1]) as f:
    case = json.load(f)
env = gym.make(case["id"], render_mode="rgb_array")
env.reset(seed=case["seed"])
wanted = {p["at_step"]: p for p in case["pictures"]}
same, why = {}, {}
for t, action in enumerate(case["actions"], start=1):
    _, _, term, trunc, _ = env.step(action)
    if term or trunc:  # same-step autoreset, as hotlab's workers do it
        env.reset()
    if t in wanted:
        p = wanted[t]
        full = env.render()
        k = -(-max(full.shape[:2]) // max(p["width"], p["height"]))
        want = np.ascontiguousarray(full[::k, ::k, :3])
        got = decode(p["png"])
        same[t] = got.shape == want.shape and bool((got == want).all())
        why[t] = f"step {t}: got {got.shape}, Gymnasium's {want.shape} one pixel in {k} each way"
print(json.dumps({"same": [same.get(p["at_step"], False) for p in case["pictures"]],
                  "why": [why.get(p["at_step"], "not reached") for p in case["pictures"]]}))
