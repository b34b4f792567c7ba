#!/usr/bin/python3
"""Writes the gnuplot input for ps_worker --metrics_out curves.

Usage: plot_metrics.py METRICS.jsonl OUT.png

Reads the JSON lines of --metrics_out (worker/train/metrics_out.h) and
writes, next to OUT.png, OUT.train.dat, OUT.eval.dat and OUT.gp: a gnuplot
script that draws four panels against training examples -- "train loss",
"eval AUC" (with "train AUC (recent)"), "eval NE" (with the base rate at 1)
and "samples/s" (one series per worker) -- into OUT.png.
scripts/plot_metrics.sh runs it, then gnuplot. Prints the .gp path.
Exit status: 0 written, 1 no usable line in the file, 2 bad usage.
"""
import json
import math
import os
import sys


def fail(code, message):
    print("plot_metrics: " + message, file=sys.stderr)
    sys.exit(code)


def number(v):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "NaN"
    return repr(float(v))


def gp_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main(argv):
    if len(argv) != 3:
        fail(2, "usage: plot_metrics.py METRICS.jsonl OUT.png")
    src, png = argv[1], argv[2]
    try:
        lines = open(src, encoding="utf-8").read().splitlines()
    except OSError as e:
        fail(1, "cannot read %s: %s" % (src, e.strerror))
    train, evals, bad = [], [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            bad += 1  # a line cut short by a killed worker
            continue
        if rec.get("kind") == "train":
            train.append(rec)
        elif rec.get("kind") == "eval":
            evals.append(rec)
    if not train and not evals:
        fail(1, "no train or eval lines in %s" % src)
    if bad:
        print("plot_metrics: skipped %d malformed line(s) of %s" % (bad, src),
              file=sys.stderr)

    stem = png[:-4] if png.endswith(".png") else png
    train_dat, eval_dat, gp = stem + ".train.dat", stem + ".eval.dat", stem + ".gp"
    workers = sorted({r.get("worker", 0) for r in train})
    # Worker by worker (a gnuplot data block each, separated by two blank
    # lines: index i is workers[i]), in file order.
    with open(train_dat, "w") as out:
        out.write("# worker examples train_loss train_auc samples_per_sec time_s\n")
        for i, w in enumerate(workers):
            if i:
                out.write("\n\n")
            for r in train:
                if r.get("worker", 0) == w:
                    out.write(" ".join([str(w), number(r.get("examples")),
                                        number(r.get("train_loss")),
                                        number(r.get("train_auc")),
                                        number(r.get("samples_per_sec")),
                                        number(r.get("time_s"))]) + "\n")
    with open(eval_dat, "w") as out:
        out.write("# examples eval_auc eval_logloss eval_ne time_s\n")
        for r in evals:
            out.write(" ".join([number(r.get("examples")),
                                number(r.get("eval_auc")),
                                number(r.get("eval_logloss")),
                                number(r.get("eval_ne")),
                                number(r.get("time_s"))]) + "\n")

    first = 0  # the train block of the lowest worker: the curve drawn
    final = [r for r in evals if r.get("final")]
    last = final[-1] if final else (evals[-1] if evals else None)
    title = "ps_worker training curves (%s)" % os.path.basename(src)
    if last is not None and last.get("eval_auc") is not None:
        title += ": eval AUC %.4f" % last["eval_auc"]
        if last.get("eval_ne") is not None:
            title += ", NE %.4f" % last["eval_ne"]
    td, ed = gp_string(train_dat), gp_string(eval_dat)
    nothing = "NaN notitle"  # a panel without points still draws
    g = [
        "# gnuplot input written by scripts/plot_metrics.py from " + src,
        "set terminal pngcairo noenhanced size 1200,800 font 'sans,10'",
        "set output " + gp_string(png),
        "set datafile missing 'NaN'",
        "set multiplot layout 2,2 title " + gp_string(title),
        "set grid",
        "set key bottom right",
        "set xlabel 'training examples (per worker)'",
        "set format x '%.1s%c'",
        "",
        "set title 'train loss'",
        "set ylabel 'mean logloss since the last point'",
    ]
    g.append(("plot %s index %d using 2:3 with lines lw 2 title 'train loss'"
              % (td, first)) if train else "set yrange [0:1]\nplot " + nothing)
    g += ["set yrange [*:*]", "", "set title 'eval AUC'", "set ylabel 'AUC'"]
    series = []
    if evals:
        series.append("%s using 1:2 with linespoints lw 2 pt 7 title 'eval AUC'" % ed)
    if train:
        series.append("%s index %d using 2:4 with lines dt 2 title 'train AUC (recent)'"
                      % (td, first))
    g.append("plot " + ", ".join(series))
    g += ["", "set title 'eval NE'", "set key top right",
          "set ylabel 'normalized entropy (< 1: beats the base rate)'"]
    if evals:
        g.append("plot %s using 1:4 with linespoints lw 2 pt 7 title 'eval NE', "
                 "1 with lines dt 3 lc rgb 'gray' title 'base rate (NE 1)'" % ed)
    else:
        g.append("set yrange [0:2]\nplot 1 with lines dt 3 lc rgb 'gray' "
                 "title 'base rate (NE 1)'\nset yrange [*:*]")
    g += ["", "set title 'samples/s'",
          "set ylabel 'examples per second (mean since the start)'",
          "set key bottom right"]
    if train:
        g.append("plot " + ", ".join(
            "%s index %d using 2:5 with lines lw 2 title 'samples/s (worker %s)'"
            % (td, i, w) for i, w in enumerate(workers)))
    else:
        g.append("set yrange [0:1]\nplot " + nothing)
    g += ["", "unset multiplot", ""]
    with open(gp, "w") as out:
        out.write("\n".join(g))
    print(gp)


if __name__ == "__main__":
    main(sys.argv)
