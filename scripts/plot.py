#!/usr/bin/env python3
"""Turn normlab CSVs into PNG figures with gnuplot (Debian package gnuplot-nox).

    scripts/plot.py epsilon RESULT_DIR OUT.png [DATA/NORM ...]  # epsilon.csv: |std(output) - 1| vs input scale
    scripts/plot.py padding RESULT_DIR OUT.png   # padding.csv: contamination and re-padding output change, per norm
    scripts/plot.py stats   RESULT_DIR OUT.png   # stats_shapes.csv: number of statistics per norm and data

Standard library only (csv, subprocess): the CSV contract is read by column name, so the
script keeps working when columns are added. Installs nothing; without gnuplot it says so.
"""
import csv
import shutil
import subprocess
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path


def rows(result_dir, name):
    path = Path(result_dir) / name
    if not path.exists():
        sys.exit(f"plot.py: {path} not found (run the config that writes it first)")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(text):
    return float(text)  # normlab writes nan/inf/-inf, which float() reads


def gnuplot(script, out):
    if not shutil.which("gnuplot"):
        sys.exit("plot.py: gnuplot not found; install it with: apt-get install -y gnuplot-nox")
    header = f"set terminal pngcairo size 900,560 font ',10'\nset output '{out}'\nset key outside right noenhanced\nset grid\nset termoption noenhanced\n"
    subprocess.run(["gnuplot"], input=header + script, text=True, check=True)
    print(out)


def series_plot(groups, xlabel, ylabel, title, out, logx=True, logy=True):
    """groups: OrderedDict title -> list of (x, y); one line per group."""
    with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as dat:
        for title_i, pts in groups.items():
            dat.write(f'"{title_i}"\n')
            for x, y in sorted(pts):
                dat.write(f"{x!r} {y!r}\n")
            dat.write("\n\n")
    script = (f"set xlabel '{xlabel}'\nset ylabel '{ylabel}'\nset title '{title}' noenhanced\n"
              + ("set logscale x\n" if logx else "") + ("set logscale y\n" if logy else "")
              + f"plot for [i=0:{len(groups) - 1}] '{dat.name}' index i using 1:2 with linespoints "
                "title columnheader(1) noenhanced\n")
    gnuplot(script, out)


def plot_epsilon(result_dir, out, only=()):
    groups = OrderedDict()
    for r in rows(result_dir, "epsilon.csv"):
        if r.get("dtype", "float32") != "float32":
            continue
        if only and f"{r['data']}/{r['norm']}" not in only:
            continue
        y = num(r["std_err_max"])
        if not y > 0:  # log axis: an exact 0 cannot be drawn
            y = 1e-17
        key = f"{r['data']}/{r['norm']} eps={r['eps']}"
        groups.setdefault(key, []).append((num(r["scale"]), y))
    series_plot(groups, "input scale (x multiplied by)", "max over groups of |std(output) - 1|",
                "epsilon takes over as the input variance falls toward eps", out)


def histogram_plot(bars, settings, title, series, out):
    """bars: list of (label, value, ...); series: (gnuplot `using` column expression, title)
    per value, drawn as clustered bars, one cluster per label."""
    with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as dat:
        for label, *values in bars:
            dat.write(f'"{label}" ' + " ".join(repr(v) for v in values) + "\n")
    plots = [f"'{dat.name}' using {series[0][0]}:xtic(1) title '{series[0][1]}'"]
    plots += [f"'' using {col} title '{t}'" for col, t in series[1:]]
    script = ("set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8\n"
              "set xtics rotate by -35 noenhanced\n" + settings + f"set title '{title}'\n"
              "plot " + ", ".join(plots) + "\n")
    gnuplot(script, out)


def plot_padding(result_dir, out):
    bars = [(f"{r['data']}/{r['norm']}", num(r["mean_contamination_max"]), num(r["repad_max_abs_diff"]))
            for r in rows(result_dir, "padding.csv")]
    # Log axis: exact zeros (padding-free) are drawn at the floor 1e-8.
    histogram_plot(bars, "set key inside top left box opaque\n"
                         "set ylabel 'absolute difference (log; floor 1e-8 = exactly 0)'\n"
                         "set format y '%g'\nset logscale y\nset yrange [1e-8:100]\n",
                   "padding: contaminated statistics, and real outputs that change when re-padded",
                   [("($2+1e-8)", "max |mean with padding - mean without|"),
                    ("($3+1e-8)", "max |output change at real positions| after re-padding")], out)


def plot_stats(result_dir, out):
    bars = [(f"{r['data']}/{r['norm']}", int(r["num_stats"]), int(r["elems_per_stat"]))
            for r in rows(result_dir, "stats_shapes.csv")]
    histogram_plot(bars, "set key inside top right box opaque\nset logscale y\nset ylabel 'count (log)'\n",
                   "how many statistics each norm computes, and over how many elements",
                   [("2", "num_stats"), ("3", "elems_per_stat")], out)


def main():
    kinds = {"epsilon": plot_epsilon, "padding": plot_padding, "stats": plot_stats}
    if len(sys.argv) < 4 or sys.argv[1] not in kinds or (len(sys.argv) > 4 and sys.argv[1] != "epsilon"):
        sys.exit(__doc__)
    if sys.argv[1] == "epsilon":
        plot_epsilon(sys.argv[2], sys.argv[3], tuple(sys.argv[4:]))
    else:
        kinds[sys.argv[1]](sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main()
