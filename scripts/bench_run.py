#!/usr/bin/env python3
"""Run-level speed: whole `normlab run` calls timed, with their peak resident memory.

    scripts/bench_run.py [--rounds 5] [--normlab build/normlab] [--threads N]

Cases (all from committed configs, changed with --set only):

  quickstart      configs/quickstart.json as it is
  sweep100        configs/sweep.json with a 10 x 10 grid of eps and data std: 100 points
                  on its (8, 16, 64) batch, rebuilt whenever std changes
  sweep100_25MiB  100 eps values on a (64, 128, 768) float32 batch (24 MiB), built once
  sweep_shapes6   6 shapes of that batch, (64, 128 - k, 768) for k = 0..5: every point
                  builds a new batch and needs outputs of a new size

Each case runs --rounds times, each in its own process writing to a fresh temporary
folder; the table gives the median wall time, the time per sweep point, and the largest
peak resident memory over the rounds (the kernel's high-water mark of that process, from
os.wait4). The memory budget for a sweep is 2.5x the batch + 50 MiB: a sweep recycles its
output buffers and batch instead of holding one per point. Only the standard library is
used here.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20


def grid(n, lo, hi):
    """n values from lo to hi, evenly spaced in log10."""
    step = (hi / lo) ** (1.0 / (n - 1))
    return [float("%.6g" % (lo * step ** i)) for i in range(n)]


SWEEP100 = json.dumps({"norms.ln.eps": grid(10, 1e-8, 1e-1), "data.tokens.std": grid(10, 1e-3, 1e2),
                       "seed_per_point": False})
# eps only: the batch is built once and every point normalises it again
EPS100 = json.dumps({"norms.ln.eps": grid(100, 1e-8, 1e-1), "seed_per_point": False})

# the batch's T shrinks by one a point: no point's outputs fit the next
SHAPES6 = json.dumps({"data.tokens.shape": [[64, 128 - k, 768] for k in range(6)], "seed_per_point": False})

# case -> (config, --set values, points, batch bytes or None when not a sweep)
CASES = {
    "quickstart": ("configs/quickstart.json", [], 1, None),
    "sweep100": ("configs/sweep.json", ["sweep=" + SWEEP100], 100, 8 * 16 * 64 * 4),
    "sweep100_25MiB": ("configs/sweep.json", ["sweep=" + EPS100, "data.tokens.shape=[64,128,768]",
                                            "norms.ln.normalized_shape=[768]"], 100,
                       64 * 128 * 768 * 4),
    "sweep_shapes6": ("configs/sweep.json", ["sweep=" + SHAPES6, "norms.ln.normalized_shape=[768]"], 6,
                      64 * 128 * 768 * 4),
}


def run_once(normlab, config, sets, threads):
    """(wall seconds, peak RSS bytes) of one `normlab run` into a fresh folder; exits on failure."""
    with tempfile.TemporaryDirectory(prefix="normlab-bench-run-") as out:
        cmd = [normlab, "run", os.path.join(ROOT, config), "--out", os.path.join(out, "r"), "--quiet"]
        for s in sets:
            cmd += ["--set", s]
        if threads:
            cmd += ["--threads", str(threads)]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            sys.exit("bench_run: %s exited with %d:\n%s" % (" ".join(cmd), code, err))
        return wall, usage.ru_maxrss * 1024  # ru_maxrss is in KiB on Linux


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--normlab", default=os.path.join(ROOT, "build", "normlab"))
    ap.add_argument("--threads", type=int, default=0, help="engine threads (default: normlab's, all cores)")
    ap.add_argument("--cases", default=",".join(CASES))
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error("--rounds must be >= 1")
    names = a.cases.split(",")
    for n in names:
        if n not in CASES:
            ap.error("unknown case %r (known: %s)" % (n, ", ".join(CASES)))
    print("| case | points | median s (%d rounds) | ms per point | peak RSS MiB | batch MiB | budget MiB | within |"
          % a.rounds)
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in names:
        config, sets, points, batch = CASES[n]
        walls, peaks = [], []
        for _ in range(a.rounds):
            w, p = run_once(a.normlab, config, sets, a.threads)
            walls.append(w)
            peaks.append(p)
        med, peak = statistics.median(walls), max(peaks)
        if batch is None:
            budget, batch_txt, within = "-", "-", "-"
        else:
            limit = 2.5 * batch + 50 * MIB
            budget, batch_txt = "%.1f" % (limit / MIB), "%.2f" % (batch / MIB)
            within = "yes" if peak <= limit else "NO"
        print("| %s | %d | %.3f | %.2f | %.1f | %s | %s | %s |"
              % (n, points, med, 1000 * med / points, peak / MIB, batch_txt, budget, within))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
