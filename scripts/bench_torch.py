#!/usr/bin/python3
"""PyTorch's CPU forward throughput for the same cases as `normlab bench`.

Run with Debian's interpreter, which has python3-torch (1.13) and python3-numpy:
    /usr/bin/python3 scripts/bench_torch.py [--norm layernorm,...] [--shape 32,64,512]...
                                            [--threads 1,2] [--repeat 20] [--min-time-ms 0] [--json]
                                            [--dtype float32|float64] [--channels-last]
Figures: median steady-state time of F.layer_norm / rms-norm composite / F.group_norm /
F.instance_norm / F.batch_norm(training=True) into a preallocated output where the op has
an out= form (otherwise torch allocates, as in real use), GB/s counting one read of the
input and one write of the output, and a plain copy (torch.Tensor.copy_) of the same bytes.
Each is timed --repeat times after one untimed call, and more until --min-time-ms of timed
calls have passed, as `normlab bench` does.
Weights are ones and biases zeros, as `normlab bench` uses. --channels-last stores 4-D
inputs in torch.channels_last memory format (N, H, W, C in memory; the shape stays
N, C, H, W), the layout `normlab bench --channel-axis -1` measures on shape N, H, W, C.
--serve keeps one process (torch imported once) for many runs: each line read from stdin is
a JSON list of these arguments; their rows follow as JSON lines, then {"done": true}.
bench_compare.py drives it to time PyTorch right next to normlab, case by case.
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

CASES = [
    ("layernorm", (32, 64, 512)), ("layernorm", (64, 128, 768)), ("layernorm", (8, 512, 4096)),
    ("layernorm", (4096, 16, 64)),
    ("rmsnorm", (32, 64, 512)), ("rmsnorm", (64, 128, 768)), ("rmsnorm", (8, 512, 4096)), ("rmsnorm", (4096, 16, 64)),
    ("groupnorm", (32, 64, 56, 56)), ("instancenorm", (32, 64, 56, 56)),
    ("batchnorm", (32, 64, 56, 56)), ("batchnorm", (32, 3, 64, 64)),
]


def op(norm, x):
    c = x.shape[1]
    d = x.shape[-1]
    ones = lambda n: torch.ones(n, dtype=x.dtype)  # parameters made once, outside the timed call
    zeros = lambda n: torch.zeros(n, dtype=x.dtype)
    if norm == "layernorm":
        w, b = ones(d), zeros(d)
        return lambda: F.layer_norm(x, (d,), w, b)
    if norm == "rmsnorm":  # torch 1.13 has no RMSNorm: the usual composite
        w = ones(d)
        eps = torch.finfo(x.dtype).eps
        return lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
    if norm == "groupnorm":
        w, b = ones(c), zeros(c)
        return lambda: F.group_norm(x, 32, w, b)
    if norm == "instancenorm":
        return lambda: F.instance_norm(x)
    if norm == "batchnorm":
        rm, rv, w, b = zeros(c), ones(c), ones(c), zeros(c)
        return lambda: F.batch_norm(x, rm, rv, w, b, training=True)
    raise ValueError(norm)


def median_ms(fn, repeat, min_ms=0.0):
    """Median time of fn() in ms: one untimed call, then `repeat` timed calls and more until
    `min_ms` of timed calls have passed (at most a million)."""
    fn()
    times, spent = [], 0.0
    while len(times) < repeat or (spent < min_ms and len(times) < 1000000):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
        spent += times[-1]
    return statistics.median(times)


def parser():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--min-time-ms", type=float, default=0.0,
                    help="keep timing until this many ms of timed calls have passed (default 0)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--norm", help="comma-separated norm types, as for normlab bench (default: all)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--channels-last", action="store_true",
                    help="4-D inputs in torch.channels_last memory format")
    ap.add_argument("--shape", action="append", help="input shape, e.g. 32,64,512 (repeatable; "
                    "default: the default benchmark suite of normlab bench)")
    ap.add_argument("--serve", action="store_true",
                    help="read one JSON list of these arguments per stdin line and run each; "
                    "{\"done\": true} after each run's rows")
    return ap


def run(a):
    """Times the cases that the parsed arguments `a` select, printing one row per case."""
    cases = CASES
    if a.norm or a.shape:
        norms = a.norm.split(",") if a.norm else sorted({n for n, _ in CASES})
        if a.shape:
            shapes = [tuple(int(d) for d in s.split(",")) for s in a.shape]
            cases = [(n, s) for n in norms for s in shapes]
        else:
            cases = [(n, s) for n, s in CASES if n in norms]
    torch.manual_seed(1)
    if not a.json:
        print(f"{'norm':13}{'shape':18}{'threads':8}{'median_ms':11}{'gb_per_s':10}{'copy_gb_per_s':14}of_copy")
    for th in [int(t) for t in a.threads.split(",")]:
        torch.set_num_threads(th)
        for norm, shape in cases:
            x = torch.rand(shape, dtype=getattr(torch, a.dtype)) * 4 - 2
            if a.channels_last and x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
            nbytes = x.numel() * x.element_size()
            t = median_ms(op(norm, x), a.repeat, a.min_time_ms)
            dst = torch.empty_like(x)
            tc = median_ms(lambda: dst.copy_(x), a.repeat, a.min_time_ms)
            gbs, cgbs = 2 * nbytes / (t * 1e6), 2 * nbytes / (tc * 1e6)
            row = {"norm": norm, "shape": list(shape), "dtype": a.dtype, "threads": th, "median_ms": t,
                   "channels_last": bool(a.channels_last and x.dim() == 4),
                   "gb_per_s": gbs, "copy_gb_per_s": cgbs, "fraction_of_copy": gbs / cgbs, "state": "steady",
                   "framework": "torch " + torch.__version__}
            if a.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"{norm:13}{str(list(shape)).replace(' ', ''):18}{th:<8}{t:<11.4g}{gbs:<10.4g}{cgbs:<14.4g}{gbs / cgbs:.4g}")


def main():
    ap = parser()
    a = ap.parse_args()
    if not a.serve:
        return run(a)
    for line in sys.stdin:
        if line.strip():
            run(ap.parse_args(json.loads(line)))
        print(json.dumps({"done": True}), flush=True)


if __name__ == "__main__":
    main()
