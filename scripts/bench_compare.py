#!/usr/bin/env python3
"""normlab and PyTorch side by side on the default benchmark suite, as a Markdown table.

    scripts/bench_compare.py [--rounds 5] [--repeat 20] [--min-time-ms 200] [--threads 1,2]
                             [--normlab build/normlab]
                             [--suites float32,channels_last,float64] [--compute float|double]

Times each case (one norm on one shape, at each thread count) with `normlab bench --json`
and with `/usr/bin/python3 scripts/bench_torch.py` (one process kept for the whole run,
`--serve`) right after one another, case by case, `--rounds` times (in each round the other
tool goes first), so that both tools of a case see the same state of a shared machine, whose
memory bandwidth moves between runs seconds apart. It reports per case the median over
rounds of each tool's median steady-state time, and the ratio of the two tools' times as
the median over rounds of each round's own ratio, with its lowest and highest: a ratio
formed within a round, the two tools timed seconds apart, moves less with the machine than
one formed from medians taken minutes apart. Each tool
times a case at least --repeat times and until --min-time-ms of timed calls have passed, so
a 0.2 ms call is timed about a thousand times, not twenty. Suites:

  float32        the default suite: LayerNorm/RMSNorm on (B, T, D), the others on (N, C, H, W)
  channels_last  BatchNorm/InstanceNorm/GroupNorm on (32, 56, 56, 64) with the channel axis
                 last, against PyTorch's torch.channels_last memory format (same bytes in memory)
  float64        one 25 MiB float32 shape per norm, in float64

Columns: PyTorch/normlab time ratio (the median of the rounds' ratios, their range in
brackets) against the targets (at least 1 everywhere; 2x for BatchNorm, 1.5x for the others); normlab's GB/s as a fraction of the plain copy measured in
the same normlab run (target 0.6 for the batches of 24 MiB and more; smaller ones are not held
to it); and each phase of normlab's forward timed on its own in that run (the batch moments, then
the normalize pass), in ns per element with its own fraction of the copy bandwidth. The table
starts with the CPU model. Only the standard library is used here; PyTorch runs in Debian's
/usr/bin/python3.
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# suite -> (normlab bench arguments, bench_torch.py arguments); None: the default suite.
SUITES = {
    "float32": [([], [])],
    "channels_last": [(["--norm", "batchnorm,instancenorm,groupnorm", "--shape", "32,56,56,64", "--channel-axis", "-1"],
                       ["--norm", "batchnorm,instancenorm,groupnorm", "--shape", "32,64,56,56", "--channels-last"])],
    "float64": [(["--norm", "layernorm,rmsnorm", "--shape", "64,128,768", "--dtype", "float64"],
                 ["--norm", "layernorm,rmsnorm", "--shape", "64,128,768", "--dtype", "float64"]),
                (["--norm", "groupnorm,instancenorm,batchnorm", "--shape", "32,64,56,56", "--dtype", "float64"],
                 ["--norm", "groupnorm,instancenorm,batchnorm", "--shape", "32,64,56,56", "--dtype", "float64"])],
}
# The bandwidth target holds for the 25 MiB and larger shapes of the suites (the 24 MiB
# (64,128,768), the 24.5 MiB (32,64,56,56), the 64 MiB (8,512,4096)); the 16 MiB rows of 64
# and the small shapes are shown against it but not held to it.
COPY_TARGET, COPY_TARGET_BYTES = 0.6, 24 << 20


def cpu_model():
    """The CPU's model name, core count and cache sizes, as lscpu or /proc/cpuinfo give them."""
    name, caches = platform.processor() or "unknown CPU", []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            if k.strip() in ("L2 cache", "L3 cache"):
                caches.append(f"{k.strip()} {v.strip()}")
    except (OSError, subprocess.CalledProcessError):
        pass
    return f"{name}, {os.cpu_count()} cores" + (", " + ", ".join(caches) if caches else "")


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


class TorchServer:
    """bench_torch.py --serve in Debian's /usr/bin/python3: torch is imported once, and each
    run() sends it one list of bench_torch.py arguments and returns its JSON rows."""

    def __init__(self):
        probe = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True, text=True)
        if probe.returncode != 0:
            sys.exit("bench_compare.py: Debian's /usr/bin/python3 cannot import torch (install it with "
                     "`apt-get install -y python3-torch`): " + (probe.stderr.strip().splitlines() or ["?"])[-1])
        self.p = subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "scripts", "bench_torch.py"), "--serve"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, args):
        try:
            self.p.stdin.write(json.dumps(args) + "\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            pass  # the server has stopped: its stdout is at its end, and the exit below says so
        rows = []
        for line in self.p.stdout:
            row = json.loads(line)
            if row.get("done"):
                return rows
            rows.append(row)
        sys.exit(f"bench_compare.py: bench_torch.py --serve stopped (exit {self.p.wait()}) on {args}")

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def with_norm(args, norm):
    """args with its --norm value replaced by one norm."""
    i = args.index("--norm")
    return args[:i + 1] + [norm] + args[i + 2:]


def cases(suites, normlab):
    """(suite, normlab arguments, bench_torch.py arguments) for each norm and shape: the
    default suite as `normlab bench` lists it (a quick run of one repetition), the others
    split by norm."""
    out = []
    for suite in suites:
        for nl_args, torch_args in SUITES[suite]:
            if not nl_args:
                for row in run_json([normlab, "bench", "--threads", "1", "--repeat", "1", "--json"]):
                    spec = ["--norm", row["norm"], "--shape", ",".join(map(str, row["shape"]))]
                    out.append((suite, spec, spec))
                continue
            for norm in nl_args[nl_args.index("--norm") + 1].split(","):
                out.append((suite, with_norm(nl_args, norm), with_norm(torch_args, norm)))
    return out


def key(suite, row):
    """(suite, norm, shape as N, C, ... , threads): channels-last normlab rows are given as
    N, H, W, C and are keyed by the N, C, H, W shape PyTorch reports."""
    shape = list(row["shape"])
    if row.get("channel_axis") == len(shape) - 1 and len(shape) == 4 and suite == "channels_last":
        shape = [shape[0], shape[-1]] + shape[1:-1]
    return suite, row["norm"], tuple(shape), row["threads"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--min-time-ms", type=int, default=200)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--normlab", default=os.path.join(ROOT, "build", "normlab"))
    ap.add_argument("--suites", default="float32,channels_last,float64")
    ap.add_argument("--compute", choices=["float", "double"],
                    help="float32 data's arithmetic (default: normlab's default for this CPU)")
    a = ap.parse_args()
    suites = a.suites.split(",")
    for s in suites:
        if s not in SUITES:
            sys.exit(f"bench_compare.py: unknown suite {s!r} (expected {', '.join(SUITES)})")
    common = ["--threads", a.threads, "--repeat", str(a.repeat), "--min-time-ms", str(a.min_time_ms), "--json"]
    ours, theirs, ran = {}, {}, set()
    todo, torch_server = cases(suites, a.normlab), TorchServer()
    for r in range(a.rounds):
        print(f"round {r + 1}/{a.rounds}: {len(todo)} cases", file=sys.stderr)
        for suite, nl_args, torch_args in todo:
            def normlab():
                compute = ["--compute", a.compute] if a.compute else []
                for row in run_json([a.normlab, "bench"] + compute + nl_args + common):
                    ours.setdefault(key(suite, row), []).append(row)
                    if row["dtype"] == "float32":
                        ran.add(row["compute"])

            def pytorch():
                for row in torch_server.run(torch_args + common):
                    theirs.setdefault(key(suite, row), []).append(row)

            for f in (normlab, pytorch) if r % 2 == 0 else (pytorch, normlab):
                f()
    torch_server.close()

    print(f"CPU: {cpu_model()}; normlab compute {'/'.join(sorted(ran)) or a.compute}; medians over {a.rounds} rounds of at least "
          f"{a.repeat} repetitions and {a.min_time_ms} ms of timed calls each.\n")
    print("| suite | norm | shape | threads | normlab ms | PyTorch ms | PyTorch / normlab [range] (target) "
          "| of copy (target) | moments ns/el (of copy) | normalize ns/el (of copy) | met |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    # Ratios and fractions are shown rounded down, so a row shown at its target meets it.
    down = lambda v: f"{math.floor(v * 100) / 100:.2f}"
    met = total = 0
    misses = []
    order = {s: i for i, s in enumerate(SUITES)}
    for k in sorted(ours, key=lambda k: (order[k[0]], k[1] != "layernorm", k[1], k[2], k[3])):
        if k not in theirs:
            continue
        med = lambda rows, f: statistics.median(row[f] for row in rows)
        ms, tms = med(ours[k], "median_ms"), med(theirs[k], "median_ms")
        # Row i of each tool comes from round i, in which the two ran one after the other.
        ratios = [t["median_ms"] / o["median_ms"] for o, t in zip(ours[k], theirs[k])]
        ratio = statistics.median(ratios)
        frac = med(ours[k], "fraction_of_copy")
        bytes_ = math.prod(k[2]) * (8 if ours[k][0]["dtype"] == "float64" else 4)
        target = 2.0 if k[1] == "batchnorm" else 1.5
        copy_held = bytes_ >= COPY_TARGET_BYTES
        ok_speed, ok_copy = ratio >= target, not copy_held or frac >= COPY_TARGET
        met += ok_speed and ok_copy
        total += 1
        if not ok_speed or not ok_copy:
            misses.append((k, ratio < 1.0))
        shape = "[" + ",".join(map(str, k[2])) + "]"
        phase = lambda p: f"{med(ours[k], p + '_ns_per_elem'):.3g} ({med(ours[k], p + '_of_copy'):.2f})"
        print(f"| {k[0]} | {k[1]} | {shape} | {k[3]} | {ms:.3g} | {tms:.3g} "
              f"| {down(ratio)} [{down(min(ratios))}-{down(max(ratios))}] ({target:g}x) "
              f"| {down(frac)} ({f'{COPY_TARGET:g}' if copy_held else '-'}) | {phase('moments')} | {phase('normalize')} "
              f"| {'yes' if ok_speed and ok_copy else 'no'} |")
    slower = sum(1 for _, s in misses if s)
    print(f"\n{met} of {total} rows meet their targets; PyTorch is faster on {slower} "
          f"({a.rounds} rounds, at least {a.repeat} repetitions and {a.min_time_ms} ms each).")


if __name__ == "__main__":
    main()
