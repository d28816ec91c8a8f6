#!/usr/bin/python3
"""Writes normlab's gradient golden cases under tests/golden/grad_<case>_<f32|f64>/: the
input, weight and bias gradients of every norm from PyTorch 1.13 autograd (Debian's
python3-torch). Run with Debian's interpreter (another python3 may come first on PATH and
lack torch):

    /usr/bin/python3 scripts/make_grad_golden.py [CASE...]

CASE names the cases to rewrite (layernorm, batchnorm, instancenorm, groupnorm, rmsnorm,
masked, param_axes, zero_var); without one, every grad_* folder is rewritten.

The layout is make_golden.py's (whose Case class this script reuses): inputs <data>.npy,
padding masks <data>.mask.npy, upstream gradients <data>.dy.npy, parameters
<norm>.<weight|bias|running_mean|running_var>.npy, a normlab config.json (an `apply` per
data and norm with `upstream: {"npy": "<data>.dy.npy"}` and `save: [grad_input,
grad_weight, grad_bias]`), and the expected arrays expected/<data>/<norm>/grad_*.npy:
grad_input in the data's shape, grad_weight and grad_bias in the parameters' shape, all in
the case's dtype. engine.json describes what normlab's engine sees for each pair (the view
shape, reduction and parameter axes, centring, eps and its placement, the variance
estimator, given statistics, the mask in the view's layout), so that the engine's backward
can be checked on its own, without the presets and the config.

References:
- LayerNorm, BatchNorm (training and eval), InstanceNorm, GroupNorm: torch.nn.functional's
  layer_norm, batch_norm, instance_norm and group_norm, differentiated by autograd
  (LayerNorm over non-trailing axes and channels-last layouts: the input permuted before
  and the output permuted back, inside the differentiated function).
- RMSNorm, the unbiased variance, eps added to the standard deviation, and padding masks
  (statistics over real positions, every position normalised with them) have no PyTorch
  1.13 layer: they are written out in torch operations (mean, sum, sqrt) and
  differentiated by autograd.
- Weight and bias on some of the normalized axes (param_axes): F.layer_norm without
  affine parameters, times w plus b reshaped to broadcast along the other normalized
  axes, differentiated by autograd; RMSNorm and the masked LayerNorm written out.
- float64 cases run autograd in float64. float32 cases hold float32 inputs, and their
  expected gradients are autograd in float64 on those float32 values, rounded once to
  float32: that is normlab's precision contract (double accumulation, one rounding).
  meta.json records how far PyTorch's own float32 autograd is from them.

The output is deterministic (seeded draws). The files are committed; rerun only to change
them.
"""
import json
import os
import shutil
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import GOLDEN, TORCH_REF, Case, DTYPES, write_npy  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    sys.exit("make_grad_golden.py needs Debian's python3-torch: run it with /usr/bin/python3")

SAVE_ALL = ["grad_input", "grad_weight", "grad_bias"]


class GradCase(Case):
    """A golden case whose analyses back-propagate a given upstream gradient."""

    def __init__(self, name, dtype, reference, description):
        if dtype == "float32":
            reference += ", in float64 on the float32 inputs, rounded once to float32"
        super().__init__(name, dtype, reference, description)
        self.engine = []          # one entry per (data, norm): what the engine sees
        self.torch_f32_err = 0.0  # max |PyTorch float32 autograd - expected| / max |expected|

    def add_grad_data(self, name, x, mask=None, **extra):
        """Adds data `name` (optionally with a padding mask) and a seeded upstream gradient
        of its shape; returns (x, dy) as stored."""
        if mask is not None:
            self.files[f"{name}.mask.npy"] = np.asarray(mask, np.float64).astype(np.uint8)
            extra["mask"] = f"{name}.mask.npy"
        x = self.add_data(name, x, **extra)
        rng = np.random.default_rng(zlib.crc32(f"{self.name}/{name}".encode()))
        dy = self.cast(rng.normal(0.0, 1.0, x.shape))
        self.files[f"{name}.dy.npy"] = dy
        return x, dy

    def grad_apply(self, data, norm, save):
        """One apply analysis: `norm` on `data`, back-propagating <data>.dy.npy."""
        self.analyses.append({"type": "apply", "data": [data], "norms": [norm],
                              "upstream": {"npy": f"{data}.dy.npy"}, "save": list(save)})

    def write(self):
        k = super().write()
        with open(os.path.join(GOLDEN, self.name, "engine.json"), "w") as f:
            f.write("[\n" + ",\n".join(json.dumps(e) for e in self.engine) + "\n]\n")
        meta_path = os.path.join(GOLDEN, self.name, "meta.json")
        with open(meta_path) as f:
            meta = json.load(f)
        if self.dtype == "float32":
            meta["torch_float32_autograd_max_rel_err"] = self.torch_f32_err
        with open(meta_path, "w") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")
        return k


def autograd(fn, x, dy, params, dtype):
    """Gradients of sum(fn(x, *params) * dy) with respect to x and the non-None params,
    as float64 numpy arrays; computed in torch `dtype`."""
    tx = torch.tensor(np.asarray(x, np.float64), dtype=dtype, requires_grad=True)
    tps = [None if p is None else torch.tensor(np.asarray(p, np.float64), dtype=dtype, requires_grad=True)
           for p in params]
    y = fn(tx, *tps)
    y.backward(torch.tensor(np.asarray(dy, np.float64), dtype=dtype))
    out = [tx.grad.to(torch.float64).numpy()]
    out += [None if p is None else p.grad.to(torch.float64).numpy() for p in tps]
    return out


def record(c, data, norm, fn, x, dy, w, b, engine):
    """Runs autograd for `norm` on `data`, records the expected gradients, the apply that
    saves them and the engine description."""
    grads = autograd(fn, x, dy, [w, b], torch.float64)
    if c.dtype == "float32":
        g32 = autograd(fn, x, dy, [w, b], torch.float32)
        for ref, got in zip(grads, g32):
            if ref is not None:
                c.torch_f32_err = max(c.torch_f32_err, float(np.max(np.abs(got - ref)) / np.max(np.abs(ref))))
    save = ["grad_input"]
    c.expect(data, norm, "grad_input", grads[0])
    if w is not None:
        save.append("grad_weight")
        c.expect(data, norm, "grad_weight", grads[1])
    if b is not None:
        save.append("grad_bias")
        c.expect(data, norm, "grad_bias", grads[2])
    c.grad_apply(data, norm, save)
    c.engine.append({"data": data, "norm": norm, **engine})


def engine_entry(view_shape, reduction_axes, param_axes, eps, center=True, weight=None, bias=None,
                 eps_placement="inside_sqrt", variance="biased", weight_offset=0.0, mask=None,
                 mask_view_shape=None, given_mean=None, given_var=None, zero_rstd_at_zero_var=False):
    """What the engine sees for one pair (engine.json): shapes and axes in the view's terms;
    weight/bias/mask as file names (weight and bias in the user's parameter shape, read
    row-major into the view's parameter shape); given statistics as flat lists in the
    view's keep-dims statistics shape."""
    return {"view_shape": list(view_shape), "reduction_axes": list(reduction_axes),
            "param_axes": list(param_axes), "center": center, "eps": eps, "eps_placement": eps_placement,
            "variance": variance, "weight_offset": weight_offset, "weight": weight, "bias": bias,
            "mask": mask, "mask_view_shape": None if mask_view_shape is None else list(mask_view_shape),
            "given_mean": given_mean, "given_var": given_var, "zero_rstd_at_zero_var": zero_rstd_at_zero_var}


def affine_params(c, rng, name, spec, shape, affine, bias=True, w_mean=1.0):
    """Random weight (around w_mean) and bias for `name` when `affine`, registered in its
    config entry; returns (w, b) as stored (b None without bias), or (None, None)."""
    if not affine:
        spec["affine"] = False
        return None, None
    w = c.cast(rng.normal(w_mean, 0.5, shape))
    spec["weight"] = c.param(name, "weight", w)
    b = None
    if bias:
        b = c.cast(rng.normal(0.0, 0.5, shape))
        spec["bias"] = c.param(name, "bias", b)
    return w, b


def files(name, w, b):
    """engine.json's weight and bias file names for norm `name`."""
    return {"weight": None if w is None else f"{name}.weight.npy", "bias": None if b is None else f"{name}.bias.npy"}


def moved_last(fn_last, axes, ndim):
    """fn applied with `axes` moved last (in order) and the result moved back: LayerNorm over
    non-trailing axes, as torch can only normalise trailing dims."""
    rest = [a for a in range(ndim) if a not in axes]
    perm = rest + list(axes)
    inv = list(np.argsort(perm))
    return lambda x, *p: fn_last(x.permute(*perm), *p).permute(*inv)


def written_norm(axes, eps, center=True, unbiased=False, add_to_std=False, offset=0.0, mask=None,
                 param_axes=None, view=None):
    """A normalization written out in torch operations: x viewed as `view` (default: its
    own shape), statistics over `axes` (of real positions when `mask`, a 0/1 tensor
    broadcasting to the view, is given), every position normalised with them, then
    (offset + w) and b spanning `param_axes` (default: `axes`), read row-major."""
    param_axes = axes if param_axes is None else param_axes

    def fn(x0, w=None, b=None):
        x = x0 if view is None else x0.reshape(view)
        m = torch.ones_like(x) if mask is None else torch.broadcast_to(mask.to(x.dtype), x.shape)
        n = m.sum(dim=axes, keepdim=True)
        mu = (x * m).sum(dim=axes, keepdim=True) / n if center else torch.zeros_like(n)
        var = (((x - mu) * m) ** 2).sum(dim=axes, keepdim=True) / n
        if unbiased:
            var = var * n / (n - 1)
        rstd = 1.0 / (torch.sqrt(var) + eps) if add_to_std else 1.0 / torch.sqrt(var + eps)
        y = (x - mu) * rstd
        pshape = [x.shape[a] if a in param_axes else 1 for a in range(x.dim())]
        if w is not None:
            y = y * (offset + w.reshape(pshape))
        if b is not None:
            y = y + b.reshape(pshape)
        return y.reshape(x0.shape)
    return fn


# ---------------------------------------------------------------- LayerNorm

def layernorm_case(dtype):
    """LayerNorm over 1 and 2 trailing dims and over non-trailing axes; with and without
    affine; the unbiased-variance and eps-added-to-std variants written out in torch."""
    c = GradCase(f"grad_layernorm_{DTYPES[dtype][2]}", dtype,
                 TORCH_REF + ": autograd of F.layer_norm; the variants written out in torch ops",
                 "LayerNorm gradients on (2,3,4,5): normalized_shape [5] and [4,5], axes [1] and [1,3], "
                 "with and without affine; eps 1e-5, 1e-3, 1e-1; unbiased variance and eps added to the std")
    rng = np.random.default_rng(1301)
    x, dy = c.add_grad_data("x", rng.normal(0.5, 2.0, (2, 3, 4, 5)))
    plan = [  # name, normalized_shape or None, axes, affine, eps, variance, eps_placement
        ("ln1", [5], [3], False, 1e-5, "biased", "inside_sqrt"),
        ("ln1_aff", [5], [3], True, 1e-3, "biased", "inside_sqrt"),
        ("ln2", [4, 5], [2, 3], False, 1e-1, "biased", "inside_sqrt"),
        ("ln2_aff", [4, 5], [2, 3], True, 1e-5, "biased", "inside_sqrt"),
        ("ln_mid_aff", None, [1], True, 1e-4, "biased", "inside_sqrt"),
        ("ln_13", None, [1, 3], False, 1e-2, "biased", "inside_sqrt"),
        ("ln_unbiased_aff", [5], [3], True, 1e-3, "unbiased", "inside_sqrt"),
        ("ln_add_std", [4, 5], [2, 3], False, 1e-2, "biased", "add_to_std"),
        ("ln_both_aff", [5], [3], True, 1e-1, "unbiased", "add_to_std"),
    ]
    for name, ns, axes, affine, eps, variance, placement in plan:
        spec = {"type": "layernorm", "eps": eps}
        if ns is not None:
            spec["normalized_shape"] = ns
        else:
            spec["axes"] = axes
        if variance != "biased":
            spec["variance"] = variance
        if placement != "inside_sqrt":
            spec["eps_placement"] = placement
        pshape = [x.shape[a] for a in axes]
        w, b = affine_params(c, rng, name, spec, pshape, affine)
        c.add_norm(name, spec)
        if variance == "biased" and placement == "inside_sqrt":
            last = lambda t, w_=None, b_=None, ps=pshape, e=eps: F.layer_norm(t, ps, w_, b_, e)
            fn = last if axes == list(range(4 - len(axes), 4)) else moved_last(last, axes, 4)
        else:
            fn = written_norm(axes, eps, unbiased=variance == "unbiased", add_to_std=placement == "add_to_std")
        record(c, "x", name, fn, x, dy, w, b,
               engine_entry(x.shape, axes, axes, eps, eps_placement=placement, variance=variance, **files(name, w, b)))
    return c


# ---------------------------------------------------------------- BatchNorm

def batchnorm_case(dtype):
    """BatchNorm in training (batch statistics) and in eval (given running statistics), on
    (N,C), (N,C,L) and channels-last (B,T,D); with and without affine."""
    c = GradCase(f"grad_batchnorm_{DTYPES[dtype][2]}", dtype,
                 TORCH_REF + ": autograd of F.batch_norm (training=True and False)",
                 "BatchNorm gradients on (8,3), (4,3,5) and channels-last (2,5,3): training with and "
                 "without affine, eps 1e-5 and 1e-3; eval with given running statistics, with and "
                 "without affine")
    rng = np.random.default_rng(1302)
    datas = {"nc": c.add_grad_data("nc", rng.normal(0.3, 1.5, (8, 3))),
             "ncl": c.add_grad_data("ncl", rng.normal(-0.7, 0.8, (4, 3, 5))),
             "btd": c.add_grad_data("btd", rng.normal(1.0, 1.2, (2, 5, 3)), channel_axis=-1)}
    plan = [  # name, data, training, affine, eps
        ("train", "nc", True, False, 1e-5), ("train_aff", "nc", True, True, 1e-3),
        ("train", "ncl", True, False, 1e-5), ("train_aff", "ncl", True, True, 1e-3),
        ("eval", "ncl", False, False, 1e-5), ("eval_aff", "ncl", False, True, 1e-2),
        ("train_aff", "btd", True, True, 1e-3), ("eval_aff", "btd", False, True, 1e-2),
    ]
    params = {}
    for name, dn, training, affine, eps in plan:
        x, dy = datas[dn]
        last = dn == "btd"
        ca = x.ndim - 1 if last else 1
        C = x.shape[ca]
        if name not in params:  # one norm entry per name, shared by the data it runs on
            spec = {"type": "batchnorm", "eps": eps}
            if not training:
                spec["training"] = False
            w, b = affine_params(c, rng, name, spec, [C], affine)
            rm = rv = None
            if not training:
                rm, rv = c.cast(rng.normal(0.0, 1.0, C)), c.cast(rng.uniform(0.3, 2.0, C))
                spec["running_mean"] = c.param(name, "running_mean", rm)
                spec["running_var"] = c.param(name, "running_var", rv)
            c.add_norm(name, spec)
            params[name] = (w, b, rm, rv)
        w, b, rm, rv = params[name]

        def fn(t, w_=None, b_=None, training=training, eps=eps, rm=rm, rv=rv, C=C, last=last):
            tm = None if rm is None else torch.tensor(np.asarray(rm, np.float64), dtype=t.dtype)
            tv = None if rv is None else torch.tensor(np.asarray(rv, np.float64), dtype=t.dtype)
            if last:
                t = t.movedim(-1, 1)
            y = F.batch_norm(t, tm, tv, w_, b_, training=training, momentum=0.0, eps=eps)
            return y.movedim(1, -1) if last else y

        red = [a for a in range(x.ndim) if a != ca]
        given = {}
        if not training:
            given = {"given_mean": [float(v) for v in np.asarray(rm, np.float64)],
                     "given_var": [float(v) for v in np.asarray(rv, np.float64)]}
        record(c, dn, name, fn, x, dy, w, b,
               engine_entry(x.shape, red, [ca], eps, **files(name, w, b), **given))
    return c


# ---------------------------------------------------------------- InstanceNorm

def instancenorm_case(dtype):
    """InstanceNorm on (N,C,L) and (N,C,H,W), with and without affine."""
    c = GradCase(f"grad_instancenorm_{DTYPES[dtype][2]}", dtype,
                 TORCH_REF + ": autograd of F.instance_norm",
                 "InstanceNorm gradients on (2,3,6) and (2,3,4,5): default (no affine, eps 1e-5) and "
                 "affine with eps 1e-3")
    rng = np.random.default_rng(1303)
    datas = {"x3": c.add_grad_data("x3", rng.normal(0.4, 1.2, (2, 3, 6))),
             "x4": c.add_grad_data("x4", rng.normal(-0.5, 2.0, (2, 3, 4, 5)))}
    c.add_norm("plain", {"type": "instancenorm"})
    w, b = c.cast(rng.normal(1.0, 0.5, 3)), c.cast(rng.normal(0.0, 0.5, 3))
    c.add_norm("aff", {"type": "instancenorm", "affine": True, "eps": 1e-3,
                       "weight": c.param("aff", "weight", w), "bias": c.param("aff", "bias", b)})
    for dn, (x, dy) in datas.items():
        red = list(range(2, x.ndim))
        for name, ww, bb, eps in [("plain", None, None, 1e-5), ("aff", w, b, 1e-3)]:
            fn = lambda t, w_=None, b_=None, e=eps: F.instance_norm(t, weight=w_, bias=b_, eps=e)
            record(c, dn, name, fn, x, dy, ww, bb, engine_entry(x.shape, red, [1], eps, **files(name, ww, bb)))
    return c


# ---------------------------------------------------------------- GroupNorm

def groupnorm_case(dtype):
    """GroupNorm with C=6 and 1, 2, 3, 6 groups on (N,C,L) and (N,C,H,W), with and without
    affine; 3 groups with channels last."""
    c = GradCase(f"grad_groupnorm_{DTYPES[dtype][2]}", dtype,
                 TORCH_REF + ": autograd of F.group_norm",
                 "GroupNorm gradients, C=6: num_groups 1, 2, 3, 6 on (2,6,5) and (2,6,3,4), with and "
                 "without affine, eps 1e-5 and 1e-3; num_groups 3 on channels-last (2,4,5,6)")
    rng = np.random.default_rng(1304)
    datas = {"x3": c.add_grad_data("x3", rng.normal(-0.3, 1.7, (2, 6, 5))),
             "x4": c.add_grad_data("x4", rng.normal(1.0, 0.6, (2, 6, 3, 4))),
             "img": c.add_grad_data("img", rng.normal(-0.2, 0.9, (2, 4, 5, 6)), channel_axis=-1)}
    plan = [("g1", 1, False, 1e-5, ["x3", "x4"]), ("g2_aff", 2, True, 1e-3, ["x3", "x4"]),
            ("g3", 3, False, 1e-5, ["x3", "x4"]), ("g6_aff", 6, True, 1e-5, ["x3", "x4"]),
            ("g3_last_aff", 3, True, 1e-3, ["img"])]
    for name, G, affine, eps, dns in plan:
        spec = {"type": "groupnorm", "num_groups": G, "eps": eps}
        w, b = affine_params(c, rng, name, spec, [6], affine)
        c.add_norm(name, spec)
        for dn in dns:
            x, dy = datas[dn]
            last = dn == "img"
            ca = x.ndim - 1 if last else 1

            def fn(t, w_=None, b_=None, G=G, eps=eps, last=last):
                if last:
                    t = t.movedim(-1, 1)
                y = F.group_norm(t, G, w_, b_, eps)
                return y.movedim(1, -1) if last else y

            view = list(x.shape[:ca]) + [G, 6 // G] + list(x.shape[ca + 1:])
            red = [a for a in range(len(view)) if a not in (0, ca)]
            record(c, dn, name, fn, x, dy, w, b, engine_entry(view, red, [ca, ca + 1], eps, **files(name, w, b)))
    return c


# ---------------------------------------------------------------- RMSNorm

def rmsnorm_case(dtype):
    """RMSNorm (no PyTorch 1.13 layer) written out in torch ops."""
    c = GradCase(f"grad_rmsnorm_{DTYPES[dtype][2]}", dtype,
                 TORCH_REF + ": autograd of RMSNorm written out in torch ops (x / sqrt(mean(x^2) + eps) * w)",
                 "RMSNorm gradients on (2,3,8): normalized_shape [8] and [3,8], axes [1], with weight, "
                 "without affine, weight_offset 1 (Gemma), eps added to the root mean square")
    rng = np.random.default_rng(1305)
    x, dy = c.add_grad_data("x", rng.normal(0.3, 1.3, (2, 3, 8)))
    plan = [  # name, key, value, axes, weighted, eps, offset, eps_placement
        ("rms1_w", "normalized_shape", [8], [2], True, 1e-6, 0.0, "inside_sqrt"),
        ("rms1", "normalized_shape", [8], [2], False, 1e-2, 0.0, "inside_sqrt"),
        ("rms2_w", "normalized_shape", [3, 8], [1, 2], True, 1e-5, 0.0, "inside_sqrt"),
        ("rms_mid_w", "axes", [1], [1], True, 1e-3, 0.0, "inside_sqrt"),
        ("rms_gemma", "normalized_shape", [8], [2], True, 1e-6, 1.0, "inside_sqrt"),
        ("rms_add_std", "normalized_shape", [8], [2], False, 1e-2, 0.0, "add_to_std"),
    ]
    for name, key, val, axes, weighted, eps, offset, placement in plan:
        spec = {"type": "rmsnorm", key: val, "eps": eps}
        if offset:
            spec["weight_offset"] = offset
        if placement != "inside_sqrt":
            spec["eps_placement"] = placement
        w, _ = affine_params(c, rng, name, spec, [x.shape[a] for a in axes], weighted, bias=False,
                             w_mean=0.0 if offset else 1.0)
        c.add_norm(name, spec)
        fn = written_norm(axes, eps, center=False, add_to_std=placement == "add_to_std", offset=offset)
        record(c, "x", name, fn, x, dy, w, None,
               engine_entry(x.shape, axes, axes, eps, center=False, eps_placement=placement, weight_offset=offset,
                            **files(name, w, None)))
    return c


# ---------------------------------------------------------------- padding masks

def masked_case(dtype):
    """Statistics over real positions only (norm "mask": true), written out in torch with
    masked means: BatchNorm and LayerNorm over (T, D) on channels-last (B,T,D) token data,
    InstanceNorm and GroupNorm on (N,C,L) signals; RMSNorm over (T, D); with and without
    affine."""
    c = GradCase(f"grad_masked_{DTYPES[dtype][2]}", dtype,
                 TORCH_REF + ": autograd of the norms written out in torch ops with masked means",
                 "Padding-masked gradients: tokens (3,5,4) channels last with lengths 5, 3, 2 and signals "
                 "(3,4,5) with lengths 5, 4, 2; BatchNorm, LayerNorm over [5,4], RMSNorm over [5,4] on "
                 "the tokens; InstanceNorm and GroupNorm (2 groups) on the signals; with and without affine")
    rng = np.random.default_rng(1306)

    def lengths_mask(length, lens):
        return (np.arange(length)[None, :] < np.asarray(lens)[:, None]).astype(np.uint8)

    tok_mask = lengths_mask(5, [5, 3, 2])
    sig_mask = lengths_mask(5, [5, 4, 2])
    tok, tok_dy = c.add_grad_data("tok", rng.normal(0.5, 1.5, (3, 5, 4)), mask=tok_mask, channel_axis=-1)
    sig, sig_dy = c.add_grad_data("sig", rng.normal(-0.4, 1.1, (3, 4, 5)), mask=sig_mask)
    # name, type, data, extra config, parameter shape, view, reduction axes, parameter axes
    # (both of the view), centring, affine, eps
    plan = [
        ("bn", "batchnorm", "tok", {}, [4], (3, 5, 4), [0, 1], [2], True, False, 1e-5),
        ("bn_aff", "batchnorm", "tok", {}, [4], (3, 5, 4), [0, 1], [2], True, True, 1e-3),
        ("ln", "layernorm", "tok", {"normalized_shape": [5, 4]}, [5, 4], (3, 5, 4), [1, 2], [1, 2], True, False, 1e-5),
        ("ln_aff", "layernorm", "tok", {"normalized_shape": [5, 4]}, [5, 4], (3, 5, 4), [1, 2], [1, 2], True, True, 1e-3),
        ("rms_w", "rmsnorm", "tok", {"normalized_shape": [5, 4]}, [5, 4], (3, 5, 4), [1, 2], [1, 2], False, True, 1e-4),
        ("in", "instancenorm", "sig", {}, [4], (3, 4, 5), [2], [1], True, False, 1e-5),
        ("in_aff", "instancenorm", "sig", {"affine": True}, [4], (3, 4, 5), [2], [1], True, True, 1e-3),
        ("gn", "groupnorm", "sig", {"num_groups": 2}, [4], (3, 2, 2, 5), [2, 3], [1, 2], True, False, 1e-5),
        ("gn_aff", "groupnorm", "sig", {"num_groups": 2}, [4], (3, 2, 2, 5), [2, 3], [1, 2], True, True, 1e-3),
    ]
    for name, typ, dn, extra, pshape, view, axes, paxes, center, affine, eps in plan:
        x, dy = (tok, tok_dy) if dn == "tok" else (sig, sig_dy)
        spec = {"type": typ, **extra, "mask": True, "eps": eps}
        w, b = affine_params(c, rng, name, spec, pshape, affine, bias=typ != "rmsnorm")
        c.add_norm(name, spec)
        # The mask in the view's layout: 1 at the channel axis (and at GroupNorm's C/G axis).
        mview = (3, 5, 1) if dn == "tok" else ((3, 1, 1, 5) if typ == "groupnorm" else (3, 1, 5))
        m = torch.tensor(tok_mask if dn == "tok" else sig_mask).reshape(mview)
        fn = written_norm(axes, eps, center=center, mask=m, param_axes=paxes, view=view)
        record(c, dn, name, fn, x, dy, w, b,
               engine_entry(view, axes, paxes, eps, center=center, mask=f"{dn}.mask.npy", mask_view_shape=mview,
                            **files(name, w, b)))
    return c


# ---------------------------------------------------------------- parameters on some normalized axes

def with_affine(norm_fn, param_axes, ndim):
    """norm_fn(x) (no affine step) times w plus b, both spanning `param_axes` of x and
    broadcast along its other axes: Flax's LayerNorm/RMSNorm with feature_axes, an ONNX
    LayerNormalization whose Scale and B have fewer dims than the normalized shape."""
    def fn(x, w=None, b=None):
        pshape = [x.shape[a] if a in param_axes else 1 for a in range(ndim)]
        y = norm_fn(x)
        if w is not None:
            y = y * w.reshape(pshape)
        if b is not None:
            y = y + b.reshape(pshape)
        return y
    return fn


def param_axes_case(dtype):
    """LayerNorm and RMSNorm whose weight and bias span some of the normalized axes
    (normlab's param_axes): F.layer_norm without affine parameters, then * w + b of shape
    (C) on channels-last images (Flax's feature_axes=-1) and of shape (D) on (B,T,D) over
    (T, D) (ONNX LayerNormalization axis=1 with a (D) Scale); parameters on (H, W); RMSNorm
    written out in torch ops, with and without Gemma's 1 + w; a padding mask. The expected
    outputs are checked too."""
    c = GradCase(f"grad_param_axes_{DTYPES[dtype][2]}", dtype,
                 TORCH_REF + ": autograd of F.layer_norm(x, normalized, None, None, eps) * w + b (w, b on the "
                             "param axes, broadcast along the other normalized axes); RMSNorm and the masked "
                             "LayerNorm written out in torch ops",
                 "Parameters on some normalized axes: NHWC (2,3,4,5) over H,W,C with w, b (C) and (H,W); "
                 "(3,4,6) over T,D with (D); RMSNorm over H,W,C with w (C), plain and 1 + w; masked tokens "
                 "(3,5,4) over T,D with (D)")
    rng = np.random.default_rng(1308)
    img, img_dy = c.add_grad_data("img", rng.normal(0.7, 1.6, (2, 3, 4, 5)), channel_axis=-1)
    seq, seq_dy = c.add_grad_data("seq", rng.normal(-1.5, 0.8, (3, 4, 6)), channel_axis=-1)
    tok_mask = (np.arange(5)[None, :] < np.asarray([5, 3, 2])[:, None]).astype(np.uint8)
    tok, tok_dy = c.add_grad_data("tok", rng.normal(0.5, 1.5, (3, 5, 4)), mask=tok_mask, channel_axis=-1)
    datas = {"img": (img, img_dy), "seq": (seq, seq_dy), "tok": (tok, tok_dy)}
    m = torch.tensor(tok_mask).reshape(3, 5, 1)
    # name, data, config keys, reduction axes, parameter axes (canonical), centring, eps, weight offset, mask
    plan = [
        ("ln_flax_c", "img", {"axes": [1, 2, 3], "param_axes": [-1]}, [1, 2, 3], [3], True, 1e-6, 0.0, False),
        ("ln_onnx_d", "seq", {"normalized_shape": [4, 6], "param_axes": [2]}, [1, 2], [2], True, 1e-5, 0.0, False),
        ("ln_hw", "img", {"axes": [-3, -2, -1], "param_axes": [-2, 1]}, [1, 2, 3], [1, 2], True, 1e-3, 0.0, False),
        ("rms_flax_c", "img", {"axes": [1, 2, 3], "param_axes": [-1]}, [1, 2, 3], [3], False, 1e-6, 0.0, False),
        ("rms_gemma_c", "img", {"axes": [1, 2, 3], "param_axes": [3], "weight_offset": 1.0}, [1, 2, 3], [3], False,
         1e-6, 1.0, False),
        ("ln_masked_d", "tok", {"normalized_shape": [5, 4], "param_axes": [-1], "mask": True}, [1, 2], [2], True,
         1e-3, 0.0, True),
    ]
    for name, dn, keys, axes, paxes, center, eps, offset, masked in plan:
        x, dy = datas[dn]
        typ = "layernorm" if center else "rmsnorm"
        spec = {"type": typ, **keys, "eps": eps}
        w, b = affine_params(c, rng, name, spec, [x.shape[a] for a in paxes], True, bias=center,
                             w_mean=0.0 if offset else 1.0)
        c.add_norm(name, spec)
        if masked:
            fn = written_norm(axes, eps, mask=m, param_axes=paxes)
        elif center:
            fn = with_affine(lambda t, ns=[x.shape[a] for a in axes], e=eps: F.layer_norm(t, ns, None, None, e),
                             paxes, x.ndim)
        else:
            fn = written_norm(axes, eps, center=False, offset=offset, param_axes=paxes)
        record(c, dn, name, fn, x, dy, w, b,
               engine_entry(x.shape, axes, paxes, eps, center=center, weight_offset=offset,
                            mask=f"{dn}.mask.npy" if masked else None, mask_view_shape=(3, 5, 1) if masked else None,
                            **files(name, w, b)))
        t64 = lambda a: None if a is None else torch.tensor(np.asarray(a, np.float64))
        y = fn(t64(x), t64(w), t64(b)).numpy()
        c.expect(dn, name, "output", y)
        c.analyses[-1]["save"].append("output")
    return c


# ---------------------------------------------------------------- eps 0 on a constant group

def zero_var_case(dtype):
    """BatchNorm (training) and InstanceNorm with eps 0 where a channel or an instance is
    constant: PyTorch's CPU batch_norm, which instance_norm calls, takes rstd = 0 where the
    variance and eps are both 0 (InvStd in aten/src/ATen/native/Normalization.cpp), so the
    output there is the bias and the gradients through it are 0, where 1/sqrt(0) would give
    NaN. The output is expected too."""
    c = GradCase(f"grad_zero_var_{DTYPES[dtype][2]}", dtype,
                 TORCH_REF + ": F.batch_norm (training=True) and F.instance_norm with eps=0, and their autograd",
                 "eps 0 on a constant group: BatchNorm on (4,3,2,2) whose channel 1 is 7.0 everywhere, "
                 "InstanceNorm on (2,3,5) whose instance (0,2) is -2.5; both affine")
    rng = np.random.default_rng(1307)
    xb = rng.normal(0.5, 1.3, (4, 3, 2, 2))
    xb[:, 1] = 7.0
    xi = rng.normal(-0.3, 0.9, (2, 3, 5))
    xi[0, 2] = -2.5
    datas = {"img": c.add_grad_data("img", xb), "seq": c.add_grad_data("seq", xi)}
    for name, typ, dn in [("bn", "batchnorm", "img"), ("inorm", "instancenorm", "seq")]:
        x, dy = datas[dn]
        spec = {"type": typ, "eps": 0.0, "affine": True}
        w, b = affine_params(c, rng, name, spec, [3], True)
        c.add_norm(name, spec)
        if typ == "batchnorm":
            fn = lambda t, w_=None, b_=None: F.batch_norm(t, None, None, w_, b_, training=True, eps=0.0)
            red = [0, 2, 3]
        else:
            fn = lambda t, w_=None, b_=None: F.instance_norm(t, weight=w_, bias=b_, eps=0.0)
            red = [2]
        y = fn(torch.tensor(np.asarray(x, np.float64)), torch.tensor(np.asarray(w, np.float64)),
               torch.tensor(np.asarray(b, np.float64))).numpy()
        assert np.all(np.isfinite(y)), "PyTorch gave a non-finite output"
        record(c, dn, name, fn, x, dy, w, b,
               engine_entry(x.shape, red, [1], 0.0, zero_rstd_at_zero_var=True, **files(name, w, b)))
        c.expect(dn, name, "output", y)
        c.analyses[-1]["save"].append("output")
    return c


CASES = {"layernorm": layernorm_case, "batchnorm": batchnorm_case, "instancenorm": instancenorm_case,
         "groupnorm": groupnorm_case, "rmsnorm": rmsnorm_case, "masked": masked_case,
         "param_axes": param_axes_case, "zero_var": zero_var_case}


def main(names):
    """Regenerates the grad_<name>_* case folders under tests/golden/ for each of `names`
    (keys of CASES; all of them when empty: every grad_* folder is rewritten) and prints a
    summary."""
    unknown = [n for n in names if n not in CASES]
    if unknown:
        sys.exit(f"unknown case {unknown[0]!r}; the cases are: {', '.join(CASES)}")
    torch.set_num_threads(1)
    chosen = names or list(CASES)
    for d in os.listdir(GOLDEN):
        if d.startswith("grad_") and (not names or any(d.startswith(f"grad_{n}_f") for n in names)):
            shutil.rmtree(os.path.join(GOLDEN, d))
    cases = []
    for dtype in DTYPES:
        cases += [CASES[n](dtype) for n in chosen]
    total = 0
    for c in cases:
        k = c.write()
        total += k
        extra = f"  torch float32 autograd off by {c.torch_f32_err:.2e} of max" if c.dtype == "float32" else ""
        print(f"{c.name:28s} {len(c.engine):2d} pairs {k:3d} expected arrays{extra}")
    size = sum(os.path.getsize(os.path.join(r, f)) for d in os.listdir(GOLDEN) if d.startswith("grad_")
               for r, _, fs in os.walk(os.path.join(GOLDEN, d)) for f in fs)
    print(f"{len(cases)} cases, {total} expected arrays, {size / 1024:.0f} KiB")


if __name__ == "__main__":
    main(sys.argv[1:])
