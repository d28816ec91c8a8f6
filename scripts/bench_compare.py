#!/usr/bin/env python3
"""normlab and PyTorch side by side on the default benchmark suite, as a Markdown table.

    scripts/bench_compare.py [--rounds 3] [--repeat 20] [--threads 1,2] [--normlab build/normlab]

Runs `normlab bench --json` and `/usr/bin/python3 scripts/bench_torch.py --json` in turn,
`--rounds` times each (alternating, so both see the same state of a shared machine), and
reports per case the median over rounds of each tool's median steady-state time. Columns:
PyTorch/normlab time ratio against the target (2x, 4x for BatchNorm) and normlab's GB/s as
a fraction of the plain copy measured in the same normlab run (target 0.5). Only the
standard library is used here; PyTorch runs in Debian's /usr/bin/python3.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def key(row):
    return row["norm"], tuple(row["shape"]), row["threads"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--normlab", default=os.path.join(ROOT, "build", "normlab"))
    a = ap.parse_args()
    ours, theirs = {}, {}
    for r in range(a.rounds):
        print(f"round {r + 1}/{a.rounds}", file=sys.stderr)
        for row in run_json([a.normlab, "bench", "--threads", a.threads, "--repeat", str(a.repeat), "--json"]):
            ours.setdefault(key(row), []).append(row)
        for row in run_json(["/usr/bin/python3", os.path.join(ROOT, "scripts", "bench_torch.py"),
                             "--threads", a.threads, "--repeat", str(a.repeat), "--json"]):
            theirs.setdefault(key(row), []).append(row)

    print("| norm | shape | threads | normlab ms | PyTorch ms | PyTorch / normlab (target) "
          "| normlab GB/s | of copy (target 0.5) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    met = total = 0
    for k in sorted(ours, key=lambda k: (k[0] != "layernorm", k[0], k[1], k[2])):
        if k not in theirs:
            continue
        ms = statistics.median(r["median_ms"] for r in ours[k])
        tms = statistics.median(r["median_ms"] for r in theirs[k])
        gbs = statistics.median(r["gb_per_s"] for r in ours[k])
        frac = statistics.median(r["fraction_of_copy"] for r in ours[k])
        target = 4.0 if k[0] == "batchnorm" else 2.0
        ok = tms / ms >= target and frac >= 0.5
        met += ok
        total += 1
        shape = "[" + ",".join(map(str, k[1])) + "]"
        print(f"| {k[0]} | {shape} | {k[2]} | {ms:.3g} | {tms:.3g} | {tms / ms:.2f} ({target:g}x) "
              f"| {gbs:.3g} | {frac:.2f} |")
    print(f"\n{met} of {total} cases meet both targets ({a.rounds} rounds, {a.repeat} repetitions each).")


if __name__ == "__main__":
    main()
