# hotlab's probe enters a user's Python here: `hotlab profile -- CMD` puts this folder first
# on PYTHONPATH, and Python imports `sitecustomize` at start-up, before the user's code.
# It arms the probe in the first process that sees HOTLAB_PROBE_SOCKET (children do not),
# then runs the sitecustomize this one shadows, if there is one (Debian's, a venv's).
try:
    import hotlab_probe

    hotlab_probe.arm()
except Exception as e:  # never break the user's program: say so and go on unmeasured
    import sys

    sys.stderr.write(f"hotlab probe: not armed ({type(e).__name__}: {e})\n")


def _next_sitecustomize():
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        path = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("_hotlab_shadowed_sitecustomize", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


try:
    _next_sitecustomize()
except Exception:
    pass
