#!/usr/bin/python3
"""Writes the residual-stack goldens under tests/golden/stack/ from PyTorch 1.13 autograd
(Debian's python3-torch; run with Debian's interpreter, another python3 may lack it):

    /usr/bin/python3 scripts/make_stack_golden.py

1. Small stacks (L = 3, D = 8, H = 16) with given weights, one folder per case:
   every placement (pre, post, deepnorm, sandwich, none, norm_only) with both blocks
   (linear x @ W and ffn act(x @ W1) @ W2), plus cases for the other norm types.
   A case folder holds the inputs in float64 (x.npy, w.npy or w1.npy/w2.npy with the layer
   axis first, r.npy the projection, norm_weight.npy/norm_bias.npy) and, per dtype
   (expected/float64/, expected/float32/, computed from the inputs rounded to that dtype):
     xs.npy      (L+1, *x.shape)  x_0 ... x_L, each block's output before any final norm
     y.npy       the stack output (N_final(x_L) for pre, x_L otherwise)
     dxs.npy     (L+1, *x.shape)  d loss / d x_l with loss = sum(y * r) / rows
     dw.npy / dw1.npy / dw2.npy   d loss / d W per layer
     dgamma.npy, dbeta.npy        (L, D) per instance of N; dgamma2/dbeta2 for sandwich's N2;
                                  dgamma_final/dbeta_final for pre's final norm
   meta.json lists the cases and their parameters.
2. A chain of 20 BatchNorms (norm_only; eps 0, momentum 0.01, no affine) trained for 2048
   steps on one (64, 2) batch (folder bn_chain/): per-layer running_mean / running_var
   (20, 2) and eval_train_ratio (21,) = rms(x_l in eval mode) / rms(x_l in train mode), row 0
   the input (ratio 1).

Every draw is seeded, so reruns give the same files.
"""
import json
import math
import os
import shutil
import sys

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    sys.exit("make_stack_golden.py needs Debian's python3-torch: run it with /usr/bin/python3")

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "golden", "stack")
TORCH_DTYPES = {"float64": torch.float64, "float32": torch.float32}
L, D, H = 3, 8, 16


def write_npy(path, arr):
    """Writes `arr` as a version-1.0 little-endian C-order .npy file."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        np.lib.format.write_array(f, np.ascontiguousarray(arr), version=(1, 0))


def make_norm(spec, dtype):
    """A function x -> (y, weight, bias) for one norm instance with its own leaf parameters.

    x is (rows..., D) with the features last, as normlab's stacks see it. BatchNorm takes
    the feature axis as its channel axis (batch statistics, training mode); InstanceNorm and
    GroupNorm take it as the channel axis of (B, T, D) data, i.e. torch's (B, D, T)."""
    kind, eps = spec["type"], spec["eps"]
    w = torch.tensor(spec["weight"], dtype=dtype, requires_grad=True) if "weight" in spec else None
    b = torch.tensor(spec["bias"], dtype=dtype, requires_grad=True) if "bias" in spec else None

    def apply(x):
        if kind == "layernorm":
            return F.layer_norm(x, (D,), w, b, eps)
        if kind == "rmsnorm":  # no RMSNorm in torch 1.13: its defining formula, in x's dtype
            y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
            return y * w
        if kind == "batchnorm":
            flat = x.reshape(-1, D)
            return F.batch_norm(flat, None, None, w, b, True, 0.1, eps).reshape(x.shape)
        xt = x.transpose(1, 2)  # (B, D, T)
        if kind == "instancenorm":
            y = F.instance_norm(xt, None, None, w, b, True, 0.1, eps)
        else:
            y = F.group_norm(xt, spec["num_groups"], w, b, eps)
        return y.transpose(1, 2)

    return apply, w, b


def act(name, a):
    if name == "relu":
        return torch.relu(a)
    if name == "gelu":
        return F.gelu(a, approximate="tanh")
    return a


def run_case(case, inputs, dtype_name):
    dt = TORCH_DTYPES[dtype_name]
    x0 = torch.tensor(inputs["x"], dtype=dt, requires_grad=True)
    r = torch.tensor(inputs["r"], dtype=dt)
    placement, block = case["placement"], case["block"]
    weights = {k: torch.tensor(inputs[k], dtype=dt, requires_grad=True) for k in ("w", "w1", "w2") if k in inputs}
    alpha = (2.0 * L) ** 0.25 if placement == "deepnorm" else 1.0

    def branch(l, z):
        if block == "linear":
            return z @ weights["w"][l]
        if block == "ffn":
            return act(case["activation"], z @ weights["w1"][l]) @ weights["w2"][l]
        return z

    norms1 = [make_norm(case["norm"], dt) for _ in range(L)]
    norms2 = [make_norm(case["norm"], dt) for _ in range(L)] if placement == "sandwich" else []
    final = make_norm(case["norm"], dt) if placement == "pre" else None
    xs = [x0]
    x = x0
    for l in range(L):
        n1 = norms1[l][0]
        if placement == "pre":
            x = x + branch(l, n1(x))
        elif placement in ("post", "deepnorm"):
            x = n1(alpha * x + branch(l, x))
        elif placement == "sandwich":
            x = x + norms2[l][0](branch(l, n1(x)))
        elif placement == "none":
            x = x + branch(l, x)
        else:
            x = n1(x)
        x.retain_grad()
        xs.append(x)
    y = final[0](x) if final else x
    rows = int(np.prod(inputs["x"].shape[:-1]))
    loss = (y * r).sum() / rows
    loss.backward()

    out = {
        "xs": np.stack([t.detach().numpy() for t in xs]),
        "y": y.detach().numpy(),
        "dxs": np.stack([t.grad.numpy() for t in xs]),
    }
    for k, w in weights.items():
        out["d" + k] = w.grad.numpy()

    def grads(norms, suffix):
        if norms and norms[0][1] is not None:
            out["dgamma" + suffix] = np.stack([n[1].grad.numpy() for n in norms])
        if norms and norms[0][2] is not None:
            out["dbeta" + suffix] = np.stack([n[2].grad.numpy() for n in norms])

    grads(norms1 if placement != "none" else [], "")
    grads(norms2, "2")
    grads([final] if final else [], "_final")
    return out


def stack_cases():
    rng = np.random.RandomState(20240518)
    cases = []

    def add(name, placement, block, norm, shape, activation="gelu"):
        cases.append({"name": name, "placement": placement, "block": block, "activation": activation,
                      "norm": norm, "shape": list(shape), "layers": L, "features": D, "hidden": H})

    def ln():
        return {"type": "layernorm", "eps": 1e-5,
                "weight": (1 + 0.3 * rng.randn(D)).tolist(), "bias": (0.2 * rng.randn(D)).tolist()}

    for placement in ("pre", "post", "deepnorm", "sandwich", "none"):
        for block in ("linear", "ffn"):
            shape = (4, 5, D) if placement in ("pre", "sandwich") else (6, D)
            add(f"{placement}_{block}", placement, block, ln(), shape)
    add("norm_only", "norm_only", "identity", ln(), (6, D))
    add("pre_identity", "pre", "identity", ln(), (6, D))
    add("post_ffn_relu", "post", "ffn", ln(), (6, D), activation="relu")
    add("post_linear_batchnorm", "post", "linear",
        {"type": "batchnorm", "eps": 1e-5, "weight": (1 + 0.3 * rng.randn(D)).tolist(),
         "bias": (0.2 * rng.randn(D)).tolist()}, (10, D))
    add("pre_ffn_rmsnorm", "pre", "ffn",
        {"type": "rmsnorm", "eps": 1e-6, "weight": (1 + 0.3 * rng.randn(D)).tolist()}, (4, 5, D))
    add("sandwich_linear_groupnorm", "sandwich", "linear",
        {"type": "groupnorm", "num_groups": 2, "eps": 1e-5, "weight": (1 + 0.3 * rng.randn(D)).tolist(),
         "bias": (0.2 * rng.randn(D)).tolist()}, (3, 5, D))
    add("pre_linear_instancenorm", "pre", "linear",
        {"type": "instancenorm", "eps": 1e-5}, (3, 5, D))

    for c in cases:
        shape = tuple(c["shape"])
        inputs = {"x": 1.5 * rng.randn(*shape) + 0.3, "r": rng.randn(*shape)}
        if c["block"] == "linear":
            inputs["w"] = rng.randn(L, D, D) * math.sqrt(1.0 / D)
        elif c["block"] == "ffn":
            inputs["w1"] = rng.randn(L, D, H) * math.sqrt(2.0 / (D + H))
            inputs["w2"] = rng.randn(L, H, D) * math.sqrt(2.0 / (D + H))
        c["inputs"] = inputs
    return cases


def bn_chain(dtype_name, layers=20, steps=2048):
    dt = TORCH_DTYPES[dtype_name]
    rng = np.random.RandomState(7)
    x = rng.randn(64, 2) * np.array([3.0, 0.5]) + np.array([1.0, -2.0])
    bns = [torch.nn.BatchNorm1d(2, eps=0.0, momentum=0.01, affine=False).to(dt) for _ in range(layers)]
    xt = torch.tensor(x, dtype=dt)

    def chain(training):
        outs = [xt]
        h = xt
        for bn in bns:
            bn.train(training)
            h = bn(h)
            outs.append(h)
        return outs

    with torch.no_grad():
        for _ in range(steps):
            train = chain(True)
        # The train-mode outputs of one more step would update the statistics again; the
        # ratio compares the last training step's outputs with eval mode after it.
        evals = chain(False)
    rms = lambda t: float(torch.sqrt((t.double() ** 2).mean()))
    ratio = np.array([rms(e) / rms(t) for e, t in zip(evals, train)])
    return x, {
        "running_mean": np.stack([bn.running_mean.double().numpy() for bn in bns]),
        "running_var": np.stack([bn.running_var.double().numpy() for bn in bns]),
        "eval_train_ratio": ratio,
    }


def main():
    torch.manual_seed(0)
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    meta = {"reference": f"PyTorch {torch.__version__} autograd", "loss": "sum(y * r) / rows", "cases": []}
    for c in stack_cases():
        folder = os.path.join(OUT, c["name"])
        for k, v in c["inputs"].items():
            write_npy(os.path.join(folder, k + ".npy"), v)
        for dtype_name in TORCH_DTYPES:
            for k, v in run_case(c, c["inputs"], dtype_name).items():
                write_npy(os.path.join(folder, "expected", dtype_name, k + ".npy"), v)
        entry = {k: v for k, v in c.items() if k != "inputs"}
        meta["cases"].append(entry)
    chain_meta = {"layers": 20, "steps": 2048, "eps": 0.0, "momentum": 0.01, "shape": [64, 2]}
    for dtype_name in TORCH_DTYPES:
        x, res = bn_chain(dtype_name)
        write_npy(os.path.join(OUT, "bn_chain", "x.npy"), x)
        for k, v in res.items():
            write_npy(os.path.join(OUT, "bn_chain", "expected", dtype_name, k + ".npy"), v)
    meta["bn_chain"] = chain_meta
    with open(os.path.join(OUT, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"wrote {len(meta['cases'])} stack cases and the BatchNorm chain under {OUT}")


if __name__ == "__main__":
    main()
