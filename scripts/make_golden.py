#!/usr/bin/python3
"""Writes normlab's golden test cases under tests/golden/<case>/, from references normlab
did not write: PyTorch 1.13 (Debian's python3-torch), ONNX's own backend test-case
generators and reference implementations (Debian's python3-onnx 1.12), and float64 numpy
where no framework has the layer (RMSNorm) or the convention (Keras/Flax running statistics).

Run with Debian's interpreter, which has python3-torch, python3-numpy and python3-onnx
(another python3 may come first on PATH and lack them):

    /usr/bin/python3 scripts/make_golden.py

Each case folder holds what a user would have: input arrays (<data>.npy), parameter files
(<norm>.<weight|bias|running_mean|running_var>.npy), a normlab `config.json` (npy sources,
the `apply` analysis with `save`), and the expected arrays in the layout normlab writes,
`expected/<data>/<norm>/<what>.npy` (a sequential apply writes one folder per step's data).
`meta.json` says which reference produced the numbers. tests/test_golden.cpp runs every
case through the built binary and compares; the tests need only the committed files.

Statistics are stored in normlab's keep-dims statistics shape (results/README.md, "Saved arrays"):
PyTorch's (C) BatchNorm statistics become (1, C, 1, ...), GroupNorm's (N, G) become
(N, G, 1, ...) over the data with C split into (G, C/G). Expected arrays are in the case's
dtype (float32 or float64), as normlab saves them. The files are committed; rerun only to
change them (the output is deterministic: every random draw is seeded).
"""
import json
import os
import shutil
import sys

import numpy as np

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    sys.exit("make_golden.py needs Debian's python3-torch: run it with /usr/bin/python3")

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
GOLDEN = os.path.join(ROOT, "tests", "golden")
DTYPES = {"float32": (np.float32, torch.float32, "f32"), "float64": (np.float64, torch.float64, "f64")}
SAVE_ALL = ["output", "mean", "var", "rstd", "running_mean", "running_var"]
SAVE_STATS = ["output", "mean", "var", "rstd"]


def write_npy(path, arr):
    """Writes `arr` as a version-1.0 little-endian C-order .npy file."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        np.lib.format.write_array(f, np.ascontiguousarray(arr), version=(1, 0))


class Case:
    """One golden case: a normlab config with its input, parameter and expected arrays."""

    def __init__(self, name, dtype, reference, description):
        """`dtype` is "float32" or "float64"; `reference` names what computed the numbers."""
        self.name, self.dtype = name, dtype
        self.np_dtype = DTYPES[dtype][0]
        self.reference, self.description = reference, description
        self.files = {}       # relative path -> array
        self.data = {}        # data name -> config entry
        self.norms = {}       # norm name -> config entry
        self.analyses = []
        self.expected = {}    # (data, norm, what) -> array

    def cast(self, a):
        """`a` rounded to the case's dtype (the array normlab holds or saves)."""
        return np.asarray(a, dtype=np.float64).astype(self.np_dtype)

    def add_data(self, name, x, **extra):
        """Adds an npy data entry holding `x` in the case's dtype; returns the stored array."""
        x = self.cast(x)
        self.files[f"{name}.npy"] = x
        self.data[name] = {"source": "npy", "path": f"{name}.npy", **extra}
        return x

    def param(self, norm, what, a):
        """Stores a parameter array for `norm` and returns its config value {"npy": file}."""
        a = self.cast(a)
        fname = f"{norm}.{what}.npy"
        self.files[fname] = a
        return {"npy": fname}

    def add_norm(self, name, spec):
        """Adds a norm entry (a dict in normlab's config format)."""
        self.norms[name] = spec

    def apply(self, data, norms, save, sequential=False):
        """Adds an apply analysis over the listed data and norms, saving `save`."""
        a = {"type": "apply", "data": list(data), "norms": list(norms), "save": list(save)}
        if sequential:
            a["sequential"] = True
        self.analyses.append(a)

    def expect(self, data, norm, what, a):
        """Records the expected array `what` of `norm` on `data` (rounded to the dtype)."""
        self.expected[(data, norm, what)] = self.cast(a)

    def write(self):
        """Writes the case folder from scratch and returns the number of expected arrays."""
        d = os.path.join(GOLDEN, self.name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for rel, a in self.files.items():
            write_npy(os.path.join(d, rel), a)
        saves = {(dn, nn_, w) for an in self.analyses for dn in an["data"] for nn_ in an["norms"] for w in an["save"]}
        missing = saves - set(self.expected)
        extra = set(self.expected) - saves
        assert not missing and not extra, (self.name, missing, extra)
        for (dn, nn_, w), a in sorted(self.expected.items()):
            write_npy(os.path.join(d, "expected", dn, nn_, f"{w}.npy"), a)
        cfg = {"name": self.name, "seed": 0, "dtype": self.dtype, "data": self.data,
               "norms": self.norms, "analyses": self.analyses}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
            f.write("\n")
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump({"reference": self.reference, "description": self.description}, f, indent=1)
            f.write("\n")
        return len(self.expected)


def t(a, case):
    """A torch tensor of `a` in the case's dtype."""
    return torch.from_numpy(np.ascontiguousarray(case.cast(a)))


def n(tensor):
    """A torch tensor as a float64 numpy array."""
    return tensor.detach().to(torch.float64).numpy()


def keep(stats, shape, axes):
    """Per-statistic values laid out in the keep-dims shape of `shape` reduced over `axes`."""
    ks = [1 if i in axes else s for i, s in enumerate(shape)]
    return np.asarray(stats).reshape(ks)


def biased_var(x, axes):
    """float64 biased variance of `x` over `axes`, keep-dims."""
    return np.var(np.asarray(x, np.float64), axis=tuple(axes), keepdims=True)


TORCH_REF = "PyTorch " + torch.__version__ + " (Debian python3-torch), CPU"
NUMPY_REF = "float64 numpy (numpy " + np.__version__ + "), written in scripts/make_golden.py"


# ---------------------------------------------------------------- PyTorch: LayerNorm

def layernorm_cases(dtype):
    """LayerNorm over 1, 2 and 3 trailing dims, with and without affine, several eps."""
    c = Case(f"torch_layernorm_{DTYPES[dtype][2]}", dtype, TORCH_REF + ": torch.native_layer_norm",
             "LayerNorm over 1, 2, 3 trailing dims of (2,3,4,5) and over 1 dim of (3,7); "
             "with and without random affine parameters; eps 1e-1 .. 1e-6 and the default")
    rng = np.random.default_rng(101)
    x = c.add_data("x", rng.normal(0.5, 2.0, (2, 3, 4, 5)))
    x2 = c.add_data("x2", rng.normal(-1.0, 0.5, (3, 7)))
    variants = [  # name, normalized_shape, affine, eps (None: default 1e-5), data
        ("ln1", [5], False, 1e-5, "x"), ("ln1_aff", [5], True, 1e-3, "x"),
        ("ln2", [4, 5], False, 1e-1, "x"), ("ln2_aff", [4, 5], True, None, "x"),
        ("ln3", [3, 4, 5], False, 1e-6, "x"), ("ln3_aff", [3, 4, 5], True, 0.5, "x"),
        ("ln_row", [7], True, 1e-5, "x2"),
    ]
    for name, ns, affine, eps, dn in variants:
        xs = x if dn == "x" else x2
        spec = {"type": "layernorm", "normalized_shape": ns}
        w = b = None
        if affine:
            w = rng.normal(1.0, 0.5, ns)
            b = rng.normal(0.0, 0.5, ns)
            spec["weight"] = c.param(name, "weight", w)
            spec["bias"] = c.param(name, "bias", b)
        else:
            spec["affine"] = False
        if eps is not None:
            spec["eps"] = eps
        c.add_norm(name, spec)
        e = 1e-5 if eps is None else eps
        tw = t(w, c) if affine else None
        tb = t(b, c) if affine else None
        y, mean, rstd = torch.native_layer_norm(t(xs, c), ns, tw, tb, e)
        m = nn.LayerNorm(ns, eps=e, elementwise_affine=affine, dtype=DTYPES[dtype][1])
        if affine:
            with torch.no_grad():
                m.weight.copy_(tw)
                m.bias.copy_(tb)
        assert torch.equal(m(t(xs, c)), y)
        axes = list(range(xs.ndim - len(ns), xs.ndim))
        c.expect(dn, name, "output", n(y))
        c.expect(dn, name, "mean", n(mean))
        c.expect(dn, name, "rstd", n(rstd))
        c.expect(dn, name, "var", biased_var(xs, axes))
        c.apply([dn], [name], SAVE_STATS)
    return [c]


# ---------------------------------------------------------------- PyTorch: BatchNorm

def batchnorm_cases(dtype):
    """BatchNorm1d (N,C), (N,C,L) and BatchNorm2d: two training steps (momentum 0.1, None,
    0.3), eval with given running statistics, and track_running_stats false."""
    cases = []
    shapes = [("bn1d_nc", (8, 3), nn.BatchNorm1d), ("bn1d_ncl", (4, 3, 5), nn.BatchNorm1d),
              ("bn2d", (2, 3, 4, 5), nn.BatchNorm2d)]
    for k, (tag, shape, cls) in enumerate(shapes):
        c = Case(f"torch_{tag}_{DTYPES[dtype][2]}", dtype,
                 TORCH_REF + ": nn." + cls.__name__ + " and torch.native_batch_norm",
                 f"BatchNorm on {shape}: two sequential training steps with momentum 0.1 "
                 "(random affine and initial running statistics), None (cumulative average) and "
                 "0.3 with eps 1e-3; eval with given running statistics; track_running_stats false")
        rng = np.random.default_rng(200 + k)
        C = shape[1]
        red = [i for i in range(len(shape)) if i != 1]
        steps = [c.add_data("s1", rng.normal(0.3, 1.5, shape)), c.add_data("s2", rng.normal(-0.7, 0.8, shape))]
        tdt = DTYPES[dtype][1]
        train = [  # name, momentum (absent: 0.1 default; None: cumulative), eps, affine, random running init
            ("m01", "default", None, True, True), ("mnone", None, None, False, False),
            ("m03", 0.3, 1e-3, "default", False),
        ]
        for name, mom, eps, affine, init in train:
            spec = {"type": "batchnorm"}
            torch_mom = 0.1 if mom == "default" else mom
            if mom != "default":
                spec["momentum"] = mom
            e = 1e-5 if eps is None else eps
            if eps is not None:
                spec["eps"] = eps
            m = cls(C, eps=e, momentum=torch_mom, affine=affine is not False, dtype=tdt)
            if affine is True:
                w, b = rng.normal(1.0, 0.5, C), rng.normal(0.0, 0.5, C)
                spec["weight"], spec["bias"] = c.param(name, "weight", w), c.param(name, "bias", b)
                with torch.no_grad():
                    m.weight.copy_(t(w, c))
                    m.bias.copy_(t(b, c))
            elif affine is False:
                spec["affine"] = False
            if init:
                rm0, rv0 = rng.normal(0.0, 1.0, C), rng.uniform(0.5, 2.0, C)
                spec["running_mean"] = c.param(name, "running_mean", rm0)
                spec["running_var"] = c.param(name, "running_var", rv0)
                with torch.no_grad():
                    m.running_mean.copy_(t(rm0, c))
                    m.running_var.copy_(t(rv0, c))
            c.add_norm(name, spec)
            m.train()
            for dn, xs in zip(["s1", "s2"], steps):
                y = m(t(xs, c))
                _, sm, sinv = torch.native_batch_norm(t(xs, c), None, None, None, None, True, 0.0, e)
                c.expect(dn, name, "output", n(y))
                c.expect(dn, name, "mean", keep(n(sm), shape, red))
                c.expect(dn, name, "rstd", keep(n(sinv), shape, red))
                c.expect(dn, name, "var", biased_var(xs, red))
                c.expect(dn, name, "running_mean", n(m.running_mean))
                c.expect(dn, name, "running_var", n(m.running_var))
        c.apply(["s1", "s2"], [n_[0] for n_ in train], SAVE_ALL, sequential=True)

        # Eval with given running statistics (untouched by the step).
        for name, eps, affine in [("ev", None, True), ("ev_eps", 1e-2, False)]:
            rm, rv = rng.normal(0.0, 1.0, C), rng.uniform(0.2, 3.0, C)
            e = 1e-5 if eps is None else eps
            spec = {"type": "batchnorm", "training": False,
                    "running_mean": c.param(name, "running_mean", rm),
                    "running_var": c.param(name, "running_var", rv)}
            if eps is not None:
                spec["eps"] = eps
            m = cls(C, eps=e, affine=affine, dtype=tdt)
            with torch.no_grad():
                m.running_mean.copy_(t(rm, c))
                m.running_var.copy_(t(rv, c))
                if affine:
                    w, b = rng.normal(1.0, 0.5, C), rng.normal(0.0, 0.5, C)
                    spec["weight"], spec["bias"] = c.param(name, "weight", w), c.param(name, "bias", b)
                    m.weight.copy_(t(w, c))
                    m.bias.copy_(t(b, c))
                else:
                    spec["affine"] = False
            c.add_norm(name, spec)
            m.eval()
            xs = steps[0]
            y = m(t(xs, c))
            rm_c, rv_c = n(m.running_mean), n(m.running_var)
            bshape = [1] * len(shape)
            bshape[1] = C
            c.expect("s1", name, "output", n(y))
            c.expect("s1", name, "mean", rm_c.reshape(bshape))
            c.expect("s1", name, "var", rv_c.reshape(bshape))
            c.expect("s1", name, "rstd", (1.0 / np.sqrt(rv_c + e)).reshape(bshape))
            c.expect("s1", name, "running_mean", rm_c)
            c.expect("s1", name, "running_var", rv_c)
        c.apply(["s1"], ["ev", "ev_eps"], SAVE_ALL)

        # track_running_stats false: batch statistics in eval mode too.
        m = cls(C, track_running_stats=False, dtype=tdt).eval()
        c.add_norm("notrack", {"type": "batchnorm", "training": False, "track_running_stats": False})
        xs = steps[1]
        y = m(t(xs, c))
        _, sm, sinv = torch.native_batch_norm(t(xs, c), None, None, None, None, True, 0.0, 1e-5)
        c.expect("s2", "notrack", "output", n(y))
        c.expect("s2", "notrack", "mean", keep(n(sm), shape, red))
        c.expect("s2", "notrack", "rstd", keep(n(sinv), shape, red))
        c.expect("s2", "notrack", "var", biased_var(xs, red))
        c.apply(["s2"], ["notrack"], SAVE_STATS)
        cases.append(c)
    return cases


# ---------------------------------------------------------------- PyTorch: InstanceNorm

def instance_stats(xs, c, eps):
    """Per-(sample, channel) mean and invstd from native_batch_norm on the (1, N*C, ...) view,
    which is how PyTorch computes instance_norm."""
    N, C = xs.shape[:2]
    v = t(xs, c).reshape(1, N * C, *xs.shape[2:])
    _, sm, sinv = torch.native_batch_norm(v, None, None, None, None, True, 0.0, eps)
    ks = [N, C] + [1] * (xs.ndim - 2)
    return n(sm).reshape(ks), n(sinv).reshape(ks)


def instancenorm_cases(dtype):
    """InstanceNorm1d/2d: plain, affine with eps 1e-3, track_running_stats with momentum 0.1
    and 0.3 over two training steps, then eval with the tracked statistics."""
    cases = []
    for k, (tag, shape, cls) in enumerate([("in1d", (2, 3, 6), nn.InstanceNorm1d),
                                           ("in2d", (2, 3, 4, 5), nn.InstanceNorm2d)]):
        c = Case(f"torch_{tag}_{DTYPES[dtype][2]}", dtype,
                 TORCH_REF + ": nn." + cls.__name__ + " and torch.native_batch_norm on the (1, N*C, ...) view",
                 f"InstanceNorm on {shape}: default, affine with eps 1e-3, track_running_stats "
                 "(momentum 0.1 and 0.3) over two training steps, then eval with the statistics "
                 "tracked by the momentum-0.1 layer")
        rng = np.random.default_rng(300 + k)
        C = shape[1]
        tdt = DTYPES[dtype][1]
        red = list(range(2, len(shape)))
        s1 = c.add_data("s1", rng.normal(0.4, 1.2, shape))
        s2 = c.add_data("s2", rng.normal(-0.5, 2.0, shape))
        s3 = c.add_data("s3", rng.normal(1.0, 0.7, shape))

        # Plain and affine (no running statistics).
        for name, affine, eps in [("plain", False, None), ("aff", True, 1e-3)]:
            e = 1e-5 if eps is None else eps
            spec = {"type": "instancenorm"}
            m = cls(C, eps=e, affine=affine, dtype=tdt)
            if affine:
                w, b = rng.normal(1.0, 0.5, C), rng.normal(0.0, 0.5, C)
                spec.update(affine=True, weight=c.param(name, "weight", w), bias=c.param(name, "bias", b), eps=eps)
                with torch.no_grad():
                    m.weight.copy_(t(w, c))
                    m.bias.copy_(t(b, c))
            c.add_norm(name, spec)
            y = m(t(s1, c))
            mean, inv = instance_stats(s1, c, e)
            c.expect("s1", name, "output", n(y))
            c.expect("s1", name, "mean", mean)
            c.expect("s1", name, "rstd", inv)
            c.expect("s1", name, "var", biased_var(s1, red))
        c.apply(["s1"], ["plain", "aff"], SAVE_STATS)

        # Tracking: two training steps.
        tracked = None
        # (PyTorch 1.13's instance_norm takes no momentum None.)
        for name, mom in [("track", 0.1), ("track_m03", 0.3)]:
            spec = {"type": "instancenorm", "track_running_stats": True, "momentum": mom}
            c.add_norm(name, spec)
            m = cls(C, momentum=mom, track_running_stats=True, dtype=tdt).train()
            for dn, xs in [("s1", s1), ("s2", s2)]:
                y = m(t(xs, c))
                mean, inv = instance_stats(xs, c, 1e-5)
                c.expect(dn, name, "output", n(y))
                c.expect(dn, name, "mean", mean)
                c.expect(dn, name, "rstd", inv)
                c.expect(dn, name, "var", biased_var(xs, red))
                c.expect(dn, name, "running_mean", n(m.running_mean))
                c.expect(dn, name, "running_var", n(m.running_var))
            if name == "track":
                tracked = (n(m.running_mean), n(m.running_var))
        c.apply(["s1", "s2"], ["track", "track_m03"], SAVE_ALL, sequential=True)

        # Eval with the statistics the momentum-0.1 layer tracked, with affine parameters.
        rm, rv = tracked
        w, b = rng.normal(1.0, 0.5, C), rng.normal(0.0, 0.5, C)
        c.add_norm("eval", {"type": "instancenorm", "track_running_stats": True, "training": False,
                            "affine": True, "weight": c.param("eval", "weight", w),
                            "bias": c.param("eval", "bias", b),
                            "running_mean": c.param("eval", "running_mean", rm),
                            "running_var": c.param("eval", "running_var", rv)})
        m = cls(C, affine=True, track_running_stats=True, dtype=tdt)
        with torch.no_grad():
            m.weight.copy_(t(w, c))
            m.bias.copy_(t(b, c))
            m.running_mean.copy_(t(rm, c))
            m.running_var.copy_(t(rv, c))
        m.eval()
        y = m(t(s3, c))
        rm_c, rv_c = n(m.running_mean), n(m.running_var)
        ks = [shape[0], C] + [1] * (len(shape) - 2)
        c.expect("s3", "eval", "output", n(y))
        c.expect("s3", "eval", "mean", np.broadcast_to(rm_c.reshape([1, C] + [1] * (len(shape) - 2)), ks))
        c.expect("s3", "eval", "var", np.broadcast_to(rv_c.reshape([1, C] + [1] * (len(shape) - 2)), ks))
        c.expect("s3", "eval", "rstd", np.broadcast_to((1 / np.sqrt(rv_c + 1e-5)).reshape([1, C] + [1] * (len(shape) - 2)), ks))
        c.expect("s3", "eval", "running_mean", rm_c)
        c.expect("s3", "eval", "running_var", rv_c)
        c.apply(["s3"], ["eval"], SAVE_ALL)
        cases.append(c)
    return cases


# ---------------------------------------------------------------- PyTorch: GroupNorm

def groupnorm_cases(dtype):
    """GroupNorm on (N,C), (N,C,L), (N,C,H,W) with C=6 and 1, 2, 3, 6 groups."""
    c = Case(f"torch_groupnorm_{DTYPES[dtype][2]}", dtype, TORCH_REF + ": torch.native_group_norm",
             "GroupNorm with C=6 on (3,6), (2,6,5) and (2,6,3,4); num_groups 1, 2, 3, 6 "
             "(6 only where a group has more than one value); with and without affine; eps 1e-5, 1e-3")
    rng = np.random.default_rng(400)
    datas = {"x2d": c.add_data("x2d", rng.normal(0.2, 1.0, (3, 6))),
             "x3d": c.add_data("x3d", rng.normal(-0.3, 1.7, (2, 6, 5))),
             "x4d": c.add_data("x4d", rng.normal(1.0, 0.6, (2, 6, 3, 4)))}
    plan = [  # name, groups, affine ("npy", "default", False), eps, data
        ("g1", 1, False, None, ["x2d", "x3d", "x4d"]), ("g2", 2, "npy", 1e-3, ["x2d", "x3d", "x4d"]),
        ("g3", 3, "default", None, ["x2d", "x3d", "x4d"]), ("g6", 6, "npy", None, ["x3d", "x4d"]),
    ]
    for name, G, affine, eps, dns in plan:
        e = 1e-5 if eps is None else eps
        spec = {"type": "groupnorm", "num_groups": G}
        w = np.ones(6)
        b = np.zeros(6)
        if affine == "npy":
            w, b = rng.normal(1.0, 0.5, 6), rng.normal(0.0, 0.5, 6)
            spec["weight"], spec["bias"] = c.param(name, "weight", w), c.param(name, "bias", b)
        elif affine is False:
            spec["affine"] = False
        if eps is not None:
            spec["eps"] = eps
        c.add_norm(name, spec)
        for dn in dns:
            xs = datas[dn]
            N, C = xs.shape[:2]
            HxW = int(np.prod(xs.shape[2:]))
            tw = t(w, c) if affine is not False else None
            tb = t(b, c) if affine is not False else None
            y, mean, rstd = torch.native_group_norm(t(xs, c), tw, tb, N, C, HxW, G, e)
            m = nn.GroupNorm(G, C, eps=e, affine=affine is not False, dtype=DTYPES[dtype][1])
            if affine is not False:
                with torch.no_grad():
                    m.weight.copy_(tw)
                    m.bias.copy_(tb)
            assert torch.allclose(m(t(xs, c)), y, rtol=0, atol=1e-6)
            ks = [N, G] + [1] * (xs.ndim - 1)   # view (N, G, C/G, ...) reduced over all but N, G
            grouped = np.asarray(xs, np.float64).reshape(N, G, -1)
            c.expect(dn, name, "output", n(y))
            c.expect(dn, name, "mean", n(mean).reshape(ks))
            c.expect(dn, name, "rstd", n(rstd).reshape(ks))
            c.expect(dn, name, "var", grouped.var(axis=2).reshape(ks))
        c.apply(dns, [name], SAVE_STATS)
    return [c]


# ---------------------------------------------------------------- PyTorch: other axes

def channels_last_cases(dtype):
    """Channel axis -1 (B,T,D and N,H,W,C layouts) and LayerNorm over non-trailing axes:
    PyTorch applied to the input permuted to channels-first, the result permuted back."""
    c = Case(f"torch_axes_{DTYPES[dtype][2]}", dtype,
             TORCH_REF + ": nn modules and native ops on the permuted input",
             "channel_axis -1: BatchNorm (training, momentum 0.1, then eval) on (2,5,3), "
             "InstanceNorm on (2,5,3), GroupNorm 3 groups on (2,4,5,6); LayerNorm over axes "
             "[1] and [1, 3] (non-trailing) of (2,3,4,5)")
    rng = np.random.default_rng(700)
    tdt = DTYPES[dtype][1]
    seq = c.add_data("seq", rng.normal(0.5, 1.5, (2, 5, 3)), channel_axis=-1)
    img = c.add_data("img", rng.normal(-0.2, 0.9, (2, 4, 5, 6)), channel_axis=-1)
    x = c.add_data("x", rng.normal(0.1, 1.1, (2, 3, 4, 5)))
    to_cf = lambda a: np.moveaxis(a, -1, 1)      # channels last -> channels first
    to_cl = lambda a: np.moveaxis(a, 1, -1)

    # BatchNorm, channel axis -1: training step then eval with the updated statistics.
    w, b = rng.normal(1.0, 0.5, 3), rng.normal(0.0, 0.5, 3)
    c.add_norm("bn", {"type": "batchnorm", "weight": c.param("bn", "weight", w), "bias": c.param("bn", "bias", b)})
    m = nn.BatchNorm1d(3, dtype=tdt)
    with torch.no_grad():
        m.weight.copy_(t(w, c))
        m.bias.copy_(t(b, c))
    xs = t(to_cf(seq).copy(), c)
    y = m(xs)
    _, sm, sinv = torch.native_batch_norm(xs, None, None, None, None, True, 0.0, 1e-5)
    c.expect("seq", "bn", "output", to_cl(n(y)))
    c.expect("seq", "bn", "mean", n(sm).reshape(1, 1, 3))
    c.expect("seq", "bn", "rstd", n(sinv).reshape(1, 1, 3))
    c.expect("seq", "bn", "running_mean", n(m.running_mean))
    c.expect("seq", "bn", "running_var", n(m.running_var))
    c.apply(["seq"], ["bn"], ["output", "mean", "rstd", "running_mean", "running_var"])
    rm, rv = n(m.running_mean), n(m.running_var)
    c.add_norm("bn_eval", {"type": "batchnorm", "training": False, "affine": False,
                           "running_mean": c.param("bn_eval", "running_mean", rm),
                           "running_var": c.param("bn_eval", "running_var", rv)})
    m2 = nn.BatchNorm1d(3, affine=False, dtype=tdt)
    with torch.no_grad():
        m2.running_mean.copy_(t(rm, c))
        m2.running_var.copy_(t(rv, c))
    c.expect("seq", "bn_eval", "output", to_cl(n(m2.eval()(xs))))
    c.apply(["seq"], ["bn_eval"], ["output"])

    # InstanceNorm, channel axis -1.
    c.add_norm("in", {"type": "instancenorm"})
    y = nn.InstanceNorm1d(3, dtype=tdt)(xs)
    mean, inv = instance_stats(to_cf(seq), c, 1e-5)
    c.expect("seq", "in", "output", to_cl(n(y)))
    c.expect("seq", "in", "mean", mean.reshape(2, 1, 3))
    c.expect("seq", "in", "rstd", inv.reshape(2, 1, 3))
    c.apply(["seq"], ["in"], ["output", "mean", "rstd"])

    # GroupNorm, channel axis -1: normlab's view splits C=6 into (3, 2) at the last axis, so
    # the statistics shape is (N, 1, 1, G, 1).
    w, b = rng.normal(1.0, 0.5, 6), rng.normal(0.0, 0.5, 6)
    c.add_norm("gn", {"type": "groupnorm", "num_groups": 3, "eps": 1e-3,
                      "weight": c.param("gn", "weight", w), "bias": c.param("gn", "bias", b)})
    cf = t(to_cf(img).copy(), c)
    y, mean, rstd = torch.native_group_norm(cf, t(w, c), t(b, c), 2, 6, 20, 3, 1e-3)
    c.expect("img", "gn", "output", to_cl(n(y)))
    c.expect("img", "gn", "mean", n(mean).reshape(2, 1, 1, 3, 1))
    c.expect("img", "gn", "rstd", n(rstd).reshape(2, 1, 1, 3, 1))
    c.apply(["img"], ["gn"], ["output", "mean", "rstd"])

    # LayerNorm over non-trailing axes: torch's LayerNorm over the same axes moved last.
    for name, axes in [("ln_mid", [1]), ("ln_13", [1, 3])]:
        shape = [x.shape[a] for a in axes]
        w, b = rng.normal(1.0, 0.5, shape), rng.normal(0.0, 0.5, shape)
        c.add_norm(name, {"type": "layernorm", "axes": axes, "eps": 1e-4,
                          "weight": c.param(name, "weight", w), "bias": c.param(name, "bias", b)})
        rest = [a for a in range(4) if a not in axes]
        perm = rest + axes
        xp = t(np.transpose(x, perm).copy(), c)
        y, mean, rstd = torch.native_layer_norm(xp, shape, t(w, c), t(b, c), 1e-4)
        inv = np.argsort(perm)
        ks = [1 if a in axes else x.shape[a] for a in range(4)]
        c.expect("x", name, "output", np.transpose(n(y), inv))
        c.expect("x", name, "mean", n(mean).reshape(ks))
        c.expect("x", name, "rstd", n(rstd).reshape(ks))
    c.apply(["x"], ["ln_mid", "ln_13"], ["output", "mean", "rstd"])
    return [c]


# ---------------------------------------------------------------- numpy: RMSNorm

def rms_ref(x, axes, eps, w=None, offset=0.0):
    """float64 RMSNorm: y = x / sqrt(mean(x^2) + eps) * (offset + w); returns y, ms, rstd."""
    x = np.asarray(x, np.float64)
    ms = np.mean(x * x, axis=tuple(axes), keepdims=True)
    rstd = 1.0 / np.sqrt(ms + eps)
    y = x * rstd
    if w is not None:
        shape = [x.shape[a] if a in axes else 1 for a in range(x.ndim)]
        y = y * (offset + np.asarray(w, np.float64).reshape(shape))
    return y, ms, rstd


def rmsnorm_cases(dtype):
    """RMSNorm (PyTorch 1.13 has none) against float64 numpy."""
    c = Case(f"numpy_rmsnorm_{DTYPES[dtype][2]}", dtype, NUMPY_REF,
             "RMSNorm on (2,3,8) over [8], [3,8] and axes [1]; with weight, without affine, the "
             "default eps (machine epsilon of the dtype, PyTorch >= 2.4) and weight_offset 1 (Gemma)")
    rng = np.random.default_rng(500)
    x = c.add_data("x", rng.normal(0.3, 1.3, (2, 3, 8)))
    plan = [  # name, key, value, eps, weighted, offset
        ("rms1", "normalized_shape", [8], 1e-6, True, 0.0),
        ("rms1_default_eps", "normalized_shape", [8], None, False, 0.0),
        ("rms2", "normalized_shape", [3, 8], 1e-5, True, 0.0),
        ("rms_mid", "axes", [1], 1e-6, True, 0.0),
        ("rms_gemma", "normalized_shape", [8], 1e-6, True, 1.0),
    ]
    for name, key, val, eps, weighted, offset in plan:
        axes = list(range(3 - len(val), 3)) if key == "normalized_shape" else [a % 3 for a in val]
        spec = {"type": "rmsnorm", key: val}
        e = np.finfo(c.np_dtype).eps if eps is None else eps
        if eps is not None:
            spec["eps"] = eps
        w = None
        if weighted:
            w = c.cast(rng.normal(0.0 if offset else 1.0, 0.5, [x.shape[a] for a in axes]))
            spec["weight"] = c.param(name, "weight", w)
        else:
            spec["affine"] = False
        if offset:
            spec["weight_offset"] = offset
        c.add_norm(name, spec)
        y, ms, rstd = rms_ref(x, axes, e, w, offset)
        c.expect("x", name, "output", y)
        c.expect("x", name, "var", ms)
        c.expect("x", name, "rstd", rstd)
    c.apply(["x"], [p[0] for p in plan], ["output", "var", "rstd"])
    return [c]


# ---------------------------------------------------------------- numpy: float32's range

def float_range_cases():
    """float32 data at the edges of float32's range, where the float path's float constants
    (normalize.hpp) would overflow or lose their digits, against float64 numpy. PyTorch 1.13
    gives NaN on these rows, so it is no reference here."""
    c = Case("numpy_float_range_f32", "float32", NUMPY_REF,
             "eps 0 on subnormal rows (1e-39 .. 4e-39), on rows near FLT_MAX (3.4e38) and on a "
             "row of spread 1e-20 under a weight of 1e20, each beside an ordinary row; "
             "LayerNorm, RMSNorm and BatchNorm (a subnormal channel)")
    rng = np.random.default_rng(900)
    ordinary = [1.0, 2.0, 3.0, 5.0]
    sub = c.add_data("sub", [[1e-39, 2e-39, 3e-39, 4e-39], ordinary])
    huge = c.add_data("huge", [[3.4e38, 3.4e38, 3.4e38, -3.4e38], ordinary])
    tiny = c.add_data("tiny", np.stack([rng.normal(0.0, 1e-20, 8), rng.normal(0.0, 1.0, 8)]))
    sub_nc = c.add_data("sub_nc", np.stack([rng.uniform(1e-39, 4e-39, (4, 3)), rng.normal(0.0, 1.0, (4, 3))], axis=1))

    def standardize(x, axes, eps, w=None):
        x = np.asarray(x, np.float64)
        mean = x.mean(axis=tuple(axes), keepdims=True)
        y = (x - mean) / np.sqrt(x.var(axis=tuple(axes), keepdims=True) + eps)
        return y if w is None else y * w

    c.add_norm("ln", {"type": "layernorm", "normalized_shape": [4], "eps": 0, "affine": False})
    c.add_norm("rms", {"type": "rmsnorm", "normalized_shape": [4], "eps": 0})
    for dn, x in (("sub", sub), ("huge", huge)):
        c.expect(dn, "ln", "output", standardize(x, [1], 0.0))
        c.expect(dn, "rms", "output", rms_ref(x, [1], 0.0)[0])
    c.apply(["sub", "huge"], ["ln", "rms"], ["output"])
    w = c.cast(1e20 * rng.uniform(0.5, 1.5, 8))
    c.add_norm("ln_w", {"type": "layernorm", "normalized_shape": [8], "eps": 0,
                        "weight": c.param("ln_w", "weight", w)})
    c.expect("tiny", "ln_w", "output", standardize(tiny, [1], 0.0, np.asarray(w, np.float64)))
    c.apply(["tiny"], ["ln_w"], ["output"])
    c.add_norm("bn", {"type": "batchnorm", "eps": 0})
    c.expect("sub_nc", "bn", "output", standardize(sub_nc, [0, 2], 0.0))
    c.apply(["sub_nc"], ["bn"], ["output"])
    return [c]


# ---------------------------------------------------------------- numpy: conventions

def bn_ref(x, eps, w=None, b=None):
    """float64 BatchNorm training forward over all axes but 1; returns y, mean, var (biased)."""
    x = np.asarray(x, np.float64)
    red = tuple(i for i in range(x.ndim) if i != 1)
    mean = x.mean(axis=red, keepdims=True)
    var = x.var(axis=red, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    bs = [1] * x.ndim
    bs[1] = x.shape[1]
    if w is not None:
        y = y * np.asarray(w, np.float64).reshape(bs) + np.asarray(b, np.float64).reshape(bs)
    return y, mean, var


def convention_cases(dtype):
    """Keras/ONNX/Flax conventions (DESIGN.md table) against float64 numpy written from each
    framework's documented update rule, through the CLI."""
    cases = []
    tag = DTYPES[dtype][2]
    # BatchNorm running statistics: momentum meaning, running_var estimator, default eps.
    c = Case(f"conv_batchnorm_{tag}", dtype, NUMPY_REF + " from each framework's documented rule",
             "BatchNorm (2,3,2,2), two training steps under the keras (eps 1e-3, old-value "
             "momentum 0.99, biased running_var), onnx (1e-5, 0.9, biased), flax (1e-5, 0.99, "
             "biased) and torch (1e-5, new-batch momentum 0.1, unbiased) conventions with no eps or "
             "momentum given; keras with explicit momentum 0.9 and eps 1e-4 (explicit fields win); "
             "eval under keras/onnx/flax defaults. Small spread so eps and the estimator matter")
    rng = np.random.default_rng(600)
    shape = (2, 3, 2, 2)
    C = 3
    steps = [c.add_data("s1", rng.normal(0.5, 0.05, shape)), c.add_data("s2", rng.normal(0.4, 0.04, shape))]
    # name, convention, explicit (eps, momentum), reference (eps, new-batch weight, unbiased running_var)
    plan = [("keras", "keras", None, (1e-3, 0.01, False)), ("onnx", "onnx", None, (1e-5, 0.1, False)),
            ("flax", "flax", None, (1e-5, 0.01, False)), ("torch", "torch", None, (1e-5, 0.1, True)),
            ("keras_explicit", "keras", (1e-4, 0.9), (1e-4, 0.1, False))]
    for name, conv, explicit, (eps, m_new, unbiased) in plan:
        rm, rv = rng.normal(0.5, 0.1, C), rng.uniform(0.001, 0.004, C)
        w, b = rng.normal(1.0, 0.3, C), rng.normal(0.0, 0.3, C)
        spec = {"type": "batchnorm", "convention": conv,
                "weight": c.param(name, "weight", w), "bias": c.param(name, "bias", b),
                "running_mean": c.param(name, "running_mean", rm),
                "running_var": c.param(name, "running_var", rv)}
        if explicit:
            spec["eps"], spec["momentum"] = explicit
        c.add_norm(name, spec)
        rm, rv = c.cast(rm).astype(np.float64), c.cast(rv).astype(np.float64)
        w, b = c.cast(w), c.cast(b)
        for dn, xs in zip(["s1", "s2"], steps):
            y, mean, var = bn_ref(xs, eps, w, b)
            cnt = xs.size // C
            bv = var.reshape(C) * (cnt / (cnt - 1) if unbiased else 1.0)
            rm = (1 - m_new) * rm + m_new * mean.reshape(C)
            rv = (1 - m_new) * rv + m_new * bv
            c.expect(dn, name, "output", y)
            c.expect(dn, name, "mean", mean)
            c.expect(dn, name, "var", var)
            c.expect(dn, name, "rstd", 1 / np.sqrt(var + eps))
            c.expect(dn, name, "running_mean", rm)
            c.expect(dn, name, "running_var", rv)
            # The rule must matter: the other estimator moves running_var well beyond the
            # float32 tolerance, so a wrong running-var rule fails the test.
            other = var.reshape(C) * (1.0 if unbiased else cnt / (cnt - 1))
            assert np.all(np.abs(m_new * (other - bv)) > 1e-4 * np.abs(rv)), name
    c.apply(["s1", "s2"], [p[0] for p in plan], SAVE_ALL, sequential=True)
    for name, conv, eps in [("keras_eval", "keras", 1e-3), ("onnx_eval", "onnx", 1e-5), ("flax_eval", "flax", 1e-5)]:
        rm, rv = rng.normal(0.5, 0.1, C), rng.uniform(0.001, 0.004, C)
        c.add_norm(name, {"type": "batchnorm", "convention": conv, "training": False, "affine": False,
                          "running_mean": c.param(name, "running_mean", rm),
                          "running_var": c.param(name, "running_var", rv)})
        rm, rv = c.cast(rm).astype(np.float64), c.cast(rv).astype(np.float64)
        bs = [1, C, 1, 1]
        x64 = np.asarray(steps[0], np.float64)
        c.expect("s1", name, "output", (x64 - rm.reshape(bs)) / np.sqrt(rv.reshape(bs) + eps))
        c.expect("s1", name, "rstd", (1 / np.sqrt(rv + eps)).reshape(bs))
    c.apply(["s1"], ["keras_eval", "onnx_eval", "flax_eval"], ["output", "rstd"])
    cases.append(c)

    # Default eps per norm type and convention, on data with a small spread so eps shows.
    c = Case(f"conv_eps_{tag}", dtype, NUMPY_REF + " with each convention's documented default eps",
             "Default eps per norm type and convention (README table) on (2,6,8) with std 0.01: "
             "layernorm, rmsnorm, instancenorm, groupnorm under keras, flax, onnx, torch; no eps given")
    rng = np.random.default_rng(601)
    x = c.add_data("x", rng.normal(0.02, 0.01, (2, 6, 8)))
    x64 = np.asarray(x, np.float64)
    meps = float(np.finfo(c.np_dtype).eps)
    table = {  # convention -> eps for layernorm, rmsnorm, instancenorm/groupnorm
        "torch": (1e-5, meps, 1e-5), "onnx": (1e-5, 1e-5, 1e-5),
        "keras": (1e-3, 1e-6, 1e-3), "flax": (1e-6, 1e-6, 1e-6)}
    names = []
    for conv, (e_ln, e_rms, e_in) in table.items():
        for typ, e in [("layernorm", e_ln), ("rmsnorm", e_rms), ("instancenorm", e_in), ("groupnorm", e_in)]:
            name = f"{typ}_{conv}"
            spec = {"type": typ, "convention": conv}
            if typ in ("layernorm", "rmsnorm"):
                spec["axes"] = [-1]
                axes = [2]
                xv, ks = x64, None
            elif typ == "instancenorm":
                axes = [2]
                xv, ks = x64, None
            else:
                spec["num_groups"] = 3
                xv = x64.reshape(2, 3, 2, 8)
                axes = [2, 3]
                ks = (2, 3, 1, 1)
            if typ != "instancenorm":
                spec["affine"] = False
            c.add_norm(name, spec)
            names.append(name)

            def out_for(eps_):
                if typ == "rmsnorm":
                    return rms_ref(xv, axes, eps_)[0], rms_ref(xv, axes, eps_)[2]
                mean = xv.mean(axis=tuple(axes), keepdims=True)
                var = xv.var(axis=tuple(axes), keepdims=True)
                r = 1 / np.sqrt(var + eps_)
                return ((xv - mean) * r).reshape(x64.shape), r
            y, r = out_for(e)
            # Every other eps in the table must give a visibly different output, so that a
            # wrong default fails the test (tolerance 1e-5 relative in float32).
            for other in {1e-3, 1e-5, 1e-6, meps} - {e}:
                yo = out_for(other)[0]
                assert np.max(np.abs(yo - y) / (np.abs(y) + 1e-3)) > 1e-4, (name, other)
            c.expect("x", name, "output", y)
            c.expect("x", name, "rstd", r if ks is None else r.reshape(ks))
    c.apply(["x"], names, ["output", "rstd"])
    cases.append(c)
    return cases


# ---------------------------------------------------------------- ONNX backend test cases

def onnx_cases():
    """ONNX's own node test cases for LayerNormalization, BatchNormalization,
    InstanceNormalization and MeanVarianceNormalization, produced by the case generators
    Debian's python3-onnx ships (onnx/backend/test/case/node/*.py, with their reference
    implementations), with a seeded numpy RNG. Debian does not ship the generated .pb data
    (onnx/backend/test/data/node), so the generators are run instead; attributes are read
    from each NodeProto."""
    try:
        import onnx
        from onnx import helper
        from onnx.backend.test.case.node import batchnorm, instancenorm, layernormalization
        from onnx.backend.test.case.node import meanvariancenormalization
    except ImportError:
        print("python3-onnx not installed: no onnx_* cases (apt-get install python3-onnx)")
        return []
    captured = []

    def capture(node, inputs, outputs, name, **kwargs):
        captured.append((node, [np.array(a) for a in inputs], [np.array(a) for a in outputs], name))

    mods = [layernormalization, batchnorm, instancenorm, meanvariancenormalization]
    for mod in mods:
        mod.expect = capture
    np.random.seed(7)
    layernormalization.LayerNormalization.export()
    layernormalization.LayerNormalization.export_default_axis()
    layernormalization.LayerNormalization.export2d()
    layernormalization.LayerNormalization.export3d_epsilon()
    batchnorm.BatchNormalization.export()
    batchnorm.BatchNormalization.export_train()
    instancenorm.InstanceNormalization.export()
    meanvariancenormalization.MeanVarianceNormalization.export()

    cases = []
    for node, ins, outs, name in captured:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        for a in ins + outs:
            assert a.dtype in (np.float32, np.float64), (name, a.dtype)
        c = Case("onnx_" + name[len("test_"):], "float32",
                 f"ONNX {onnx.__version__} (Debian python3-onnx): backend test case generator "
                 f"onnx/backend/test/case/node and its reference implementation, np.random.seed(7)",
                 f"ONNX node test {name}: {node.op_type} with attributes {json.dumps(attrs, default=float)}")
        x = c.add_data("x", ins[0])
        eps = float(attrs.get("epsilon", 1e-5))
        if node.op_type == "LayerNormalization":
            axis = int(attrs.get("axis", -1)) % x.ndim
            spec = {"type": "layernorm", "normalized_shape": list(x.shape[axis:]), "eps": eps,
                    "weight": c.param("ln", "weight", ins[1]), "bias": c.param("ln", "bias", ins[2])}
            c.add_norm("ln", spec)
            for what, a in zip(["output", "mean", "rstd"], outs):
                c.expect("x", "ln", what, a)
            c.apply(["x"], ["ln"], ["output", "mean", "rstd"])
        elif node.op_type == "BatchNormalization":
            training = bool(attrs.get("training_mode", 0))
            spec = {"type": "batchnorm", "convention": "onnx", "training": training, "eps": eps,
                    "weight": c.param("bn", "weight", ins[1]), "bias": c.param("bn", "bias", ins[2]),
                    "running_mean": c.param("bn", "running_mean", ins[3]),
                    "running_var": c.param("bn", "running_var", ins[4])}
            if "momentum" in attrs:
                spec["momentum"] = float(attrs["momentum"])
            c.add_norm("bn", spec)
            whats = ["output", "running_mean", "running_var"][:len(outs)]
            for what, a in zip(whats, outs):
                c.expect("x", "bn", what, a)
            c.apply(["x"], ["bn"], whats)
        elif node.op_type == "InstanceNormalization":
            spec = {"type": "instancenorm", "affine": True, "eps": eps,
                    "weight": c.param("in", "weight", ins[1]), "bias": c.param("in", "bias", ins[2])}
            c.add_norm("in", spec)
            c.expect("x", "in", "output", outs[0])
            c.apply(["x"], ["in"], ["output"])
        elif node.op_type == "MeanVarianceNormalization":
            # (X - mean) / (std + 1e-9) over axes (default [0, 2, 3]): a LayerNorm over those
            # axes without affine parameters, with eps added to the (biased) std.
            axes = [int(a) for a in attrs.get("axes", [0, 2, 3])]
            c.add_norm("mvn", {"type": "layernorm", "axes": axes, "affine": False, "eps": 1e-9,
                               "eps_placement": "add_to_std"})
            c.expect("x", "mvn", "output", outs[0])
            c.apply(["x"], ["mvn"], ["output"])
        else:
            raise AssertionError(node.op_type)
        cases.append(c)
    return cases


PER_DTYPE = {"layernorm": layernorm_cases, "batchnorm": batchnorm_cases, "instancenorm": instancenorm_cases,
             "groupnorm": groupnorm_cases, "channels_last": channels_last_cases, "rmsnorm": rmsnorm_cases,
             "conventions": convention_cases}
SINGLE = {"onnx": onnx_cases, "float_range": float_range_cases}


def main():
    """Regenerates every case folder under tests/golden/ and prints a summary; with family
    names as arguments (`make_golden.py float_range`; the keys of PER_DTYPE and SINGLE),
    writes those families' cases alone and leaves the other folders as they are."""
    torch.set_num_threads(1)
    os.makedirs(GOLDEN, exist_ok=True)
    only = sys.argv[1:]
    unknown = set(only) - set(PER_DTYPE) - set(SINGLE)
    if unknown:
        sys.exit("make_golden.py: no family " + ", ".join(sorted(unknown)) + " (families: " +
                 ", ".join(list(PER_DTYPE) + list(SINGLE)) + ")")
    if not only:
        for d in os.listdir(GOLDEN):  # grad_* cases are make_grad_golden.py's
            if os.path.isfile(os.path.join(GOLDEN, d, "config.json")) and not d.startswith("grad_"):
                shutil.rmtree(os.path.join(GOLDEN, d))
    cases = []
    for dtype in DTYPES:
        cases += [c for name, f in PER_DTYPE.items() if not only or name in only for c in f(dtype)]
    cases += [c for name, f in SINGLE.items() if not only or name in only for c in f()]
    total = 0
    for c in cases:
        k = c.write()
        total += k
        print(f"{c.name:48s} {len(c.norms):2d} norms {k:3d} expected arrays")
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(GOLDEN) for f in fs)
    print(f"{len(cases)} cases, {total} expected arrays, {size / 1024:.0f} KiB in {GOLDEN}")


if __name__ == "__main__":
    main()
