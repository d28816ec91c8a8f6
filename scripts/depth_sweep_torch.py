#!/usr/bin/python3
"""The PyTorch reference for configs/depth_sweep.json, averaged over seeds:

    /usr/bin/python3 scripts/depth_sweep_torch.py [SEEDS]     (default 64 seeds)

The set-up of the config: ffn blocks act(x @ W1) @ W2 with relu, D = 64, H = 256, N = 256
rows of standard normal data, LayerNorm over the features (eps 1e-5, weight 1, bias 0),
W1 and W2 drawn from xavier_normal (std sqrt(2 / (D + H))), for L in {6, 12, 24, 48}:
pre-LN x + F(N(x)) with a final norm, post-LN N(x + F(x)), and DeepNorm
N(alpha x + F(x)) with alpha = (2L)^(1/4) and the weights scaled by beta = (8L)^(-1/4)
(Wang et al. 2022). The loss is sum(y * r) / N with r standard normal. Each seed draws x,
r and every weight anew (torch's generator, float64, autograd).

Prints, per placement and L, the mean over seeds of the last layer's ||d loss / d W2||_F
(Xiong et al. 2020, Theorem 1, is a statement about this expectation at initialisation),
its standard deviation over seeds, the largest over the smallest of one seed's four values
across L (how far a single draw can stray), and the mean of rms(x_L) / rms(x_0).
tests/test_depth.cpp compares normlab's means over draws with the means printed here.
"""
import math
import statistics as st
import sys

try:
    import torch
except ImportError:  # pragma: no cover
    sys.exit("depth_sweep_torch.py needs Debian's python3-torch: run it with /usr/bin/python3")

N, D, H = 256, 64, 256
LAYERS = [6, 12, 24, 48]


def last_layer(L, placement, seed):
    """(||dW2 of block L||_F, rms(x_L) / rms(x_0)) for one seed's draws."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, D, generator=g, dtype=torch.float64)
    r = torch.randn(N, D, generator=g, dtype=torch.float64)
    deep = placement == "deepnorm"
    alpha = (2 * L) ** 0.25 if deep else 1.0
    beta = (8 * L) ** -0.25 if deep else 1.0
    std = math.sqrt(2 / (D + H)) * beta
    w1 = [(torch.randn(D, H, generator=g, dtype=torch.float64) * std).requires_grad_() for _ in range(L)]
    w2 = [(torch.randn(H, D, generator=g, dtype=torch.float64) * std).requires_grad_() for _ in range(L)]

    def norm(v):
        return torch.nn.functional.layer_norm(v, (D,), None, None, 1e-5)

    h = x
    for l in range(L):
        f = lambda v: torch.relu(v @ w1[l]) @ w2[l]  # noqa: E731
        h = h + f(norm(h)) if placement == "pre" else norm(alpha * h + f(h))
    growth = (h.pow(2).mean().sqrt() / x.pow(2).mean().sqrt()).item()
    y = norm(h) if placement == "pre" else h
    ((y * r).sum() / N).backward()
    return w2[-1].grad.norm().item(), growth


def main():
    seeds = range(int(sys.argv[1]) if len(sys.argv) > 1 else 64)
    torch.set_num_threads(1)
    print(f"mean over {len(seeds)} seeds of the last layer's ||dW2||_F (sd), rms(x_L)/rms(x_0)")
    for placement in ["pre", "post", "deepnorm"]:
        runs = {L: [last_layer(L, placement, s) for s in seeds] for L in LAYERS}
        grads = {L: [v[0] for v in runs[L]] for L in LAYERS}
        for L in LAYERS:
            print(f"{placement:8s} L={L:2d}  grad_w_norm {st.mean(grads[L]):.3f} (sd {st.stdev(grads[L]):.3f})"
                  f"  resid_growth {st.mean(v[1] for v in runs[L]):.2f}")
        spread = [max(grads[L][i] for L in LAYERS) / min(grads[L][i] for L in LAYERS) for i in range(len(seeds))]
        means = [st.mean(grads[L]) for L in LAYERS]
        print(f"{placement:8s} max/min over L of the means {max(means) / min(means):.3f}; of one seed's values:"
              f" median {st.median(spread):.2f}, largest {max(spread):.2f},"
              f" above 1.2 for {sum(q > 1.2 for q in spread)} of {len(seeds)} seeds")


if __name__ == "__main__":
    main()
