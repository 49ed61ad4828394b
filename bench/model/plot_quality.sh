#!/usr/bin/env bash
# plot_quality.sh - renders docs/quality.png, the figure of docs/quality.md,
# from the --tsv output of model_eval: needle accuracy under the query-aware
# and the query-agnostic protocol and the held-out NLL increase against the
# average budget (fraction of the context), one line per method, and the
# retained attention mass per layer at budget 1/8. A panel whose column the
# run did not measure (NaN) is left empty. Needs gnuplot (gnuplot-nox).
#
# usage: bench/model/plot_quality.sh RESULTS.tsv [output.png]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tsv="${1:?usage: plot_quality.sh RESULTS.tsv [output.png]}"
out="${2:-$here/../../docs/quality.png}"
command -v gnuplot >/dev/null || { echo "plot_quality.sh: gnuplot is missing (apt-get install gnuplot-nox)" >&2; exit 1; }
head -1 "$tsv" | grep -q needle_agnostic || { echo "plot_quality.sh: $tsv is not a model_eval --tsv file of this version" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# one file per method (rows in budget order), the full cache apart
awk -F'\t' -v dir="$tmp" '
  NR == 1 { next }
  $2 == 0 { print > (dir "/full.tsv"); next }
  { if (!($1 in id)) { id[$1] = ++n; print $1 > (dir "/names") }
    print > (dir "/m" id[$1] ".tsv") }' "$tsv"
n=$(wc -l < "$tmp/names")
aware="" agnostic="" nll="" mass=""
for i in $(seq 1 "$n"); do
  name=$(sed -n "${i}p" "$tmp/names")
  f="$tmp/m$i.tsv"
  aware="$aware '$f' using (1.0/\$2):6 with linespoints lw 2 title '$name',"
  agnostic="$agnostic '$f' using (1.0/\$2):7 with linespoints lw 2 title '$name',"
  nll="$nll '$f' using (1.0/\$2):9 with linespoints lw 2 title '$name',"
  awk -F'\t' '$2 == 8 { for (l = 10; l <= NF; l++) print l - 10, $l }' "$f" > "$tmp/mass$i.dat"
  mass="$mass '$tmp/mass$i.dat' using 1:2 with linespoints lw 2 title '$name',"
done
gnuplot <<GP
set datafile separator "\t"
set datafile missing "NaN"
set terminal pngcairo size 1100,1200 font ",11" noenhanced
set output "$out"
set multiplot layout 4,1 title "bench/model: libpyramidkv on a trained 8-layer byte transformer at equal memory"
set grid
set key outside right
set logscale x 2
set xrange [1.0/40:1.0/3.5]
set xtics ("1/32" 1.0/32, "1/16" 1.0/16, "1/8" 1.0/8, "1/4" 1.0/4)
set xlabel "average budget (fraction of the context)"
set ylabel "needles, query-aware (%)"
set yrange [0:105]
plot ${aware%,}
set ylabel "needles, query-agnostic (%)"
plot ${agnostic%,}
set ylabel "NLL - full cache (nats/byte)"
set autoscale y
plot ${nll%,}
unset logscale x
set xrange [-0.5:7.5]
set xtics 0,1,7
set xlabel "layer (budget 1/8)"
set ylabel "retained attention mass"
set yrange [0:1.05]
set datafile separator whitespace
plot ${mass%,}
unset multiplot
GP
echo "wrote $out"
