#!/usr/bin/env bash
# Draws the training curves of ps_worker --metrics_out into a PNG.
# Usage:
#   scripts/plot_metrics.sh METRICS.jsonl [OUT.png]
# OUT.png defaults to METRICS.png (METRICS.jsonl without its suffix). The
# gnuplot input lands next to it (OUT.gp, OUT.train.dat, OUT.eval.dat:
# scripts/plot_metrics.py writes them); gnuplot (Debian's gnuplot-nox,
# scripts/setup.sh installs it) draws four panels: train loss, eval AUC,
# eval NE and samples/s against training examples. Prints the PNG's path.
# Exit status: 0 drawn, 1 failed (no usable line, gnuplot missing or
# failing), 2 bad usage.
set -euo pipefail
source "$(dirname "$0")/help_lib.sh"  # script_help
here=$(cd "$(dirname "$0")" && pwd)
case "${1:-}" in
  -h|--help|"") script_help; [ -n "${1:-}" ] && exit 0; exit 2 ;;
esac
[ $# -le 2 ] || { echo "plot_metrics: too many arguments (see --help)" >&2; exit 2; }
src=$1
out=${2:-${src%.*}.png}
command -v gnuplot >/dev/null ||
  { echo "plot_metrics: gnuplot is not installed (scripts/setup.sh installs gnuplot-nox)" >&2; exit 1; }
gp=$(/usr/bin/python3 "$here/plot_metrics.py" "$src" "$out")
gnuplot "$gp" || { echo "plot_metrics: gnuplot failed on $gp" >&2; exit 1; }
[ -s "$out" ] || { echo "plot_metrics: gnuplot wrote no $out" >&2; exit 1; }
echo "$out"
