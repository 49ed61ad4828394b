#!/usr/bin/env bash
# plot_quality.sh - renders docs/quality.png, the figure of docs/quality.md,
# from the --tsv output of model_eval: needle accuracy under the query-aware
# and the query-agnostic protocol and the held-out NLL increase against the
# average budget (fraction of the context), one line per method, and the
# retained attention mass per layer at budget 1/8. A panel whose column the
# run did not measure (NaN) is left empty. Needs gnuplot (gnuplot-nox).
#
# Columns are found by their header names (docs/quality.md, "The TSV").
#
# usage: bench/model/plot_quality.sh RESULTS.tsv [output.png]
#        bench/model/plot_quality.sh --columns RESULTS.tsv
#   --columns prints the column numbers it would plot (method den
#   needle_aware needle_agnostic dnll mass0, then the layer count) and stops.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
columns=0
if [ "${1:-}" = "--columns" ]; then columns=1; shift; fi
tsv="${1:?usage: plot_quality.sh RESULTS.tsv [output.png]}"
out="${2:-$here/../../docs/quality.png}"
[ -r "$tsv" ] || { echo "plot_quality.sh: cannot read $tsv" >&2; exit 1; }

# the number of the column named $1 in the header, or a message and exit 1
col() {
  local n
  n=$(head -1 "$tsv" | tr -d '\r' | awk -F'\t' -v want="$1" '
        { for (i = 1; i <= NF; i++) if ($i == want) { print i; exit } }')
  [ -n "$n" ] || { echo "plot_quality.sh: $tsv has no column '$1' (not a model_eval --tsv file)" >&2; exit 1; }
  echo "$n"
}
c_method=$(col method)
c_den=$(col den)
c_aware=$(col needle_aware)
c_agnostic=$(col needle_agnostic)
c_dnll=$(col dnll)
c_mass=$(col mass0)
layers=$(head -1 "$tsv" | tr -d '\r' | tr '\t' '\n' | grep -c '^mass[0-9][0-9]*$')
if [ "$columns" = 1 ]; then
  echo "$c_method $c_den $c_aware $c_agnostic $c_dnll $c_mass $layers"
  exit 0
fi
command -v gnuplot >/dev/null || { echo "plot_quality.sh: gnuplot is missing (apt-get install gnuplot-nox)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# one file per method (rows in budget order), the full cache apart
awk -F'\t' -v dir="$tmp" -v cm="$c_method" -v cd="$c_den" '
  NR == 1 { next }
  $cd == 0 { print > (dir "/full.tsv"); next }
  { if (!($cm in id)) { id[$cm] = ++n; print $cm > (dir "/names") }
    print > (dir "/m" id[$cm] ".tsv") }' "$tsv"
n=$(wc -l < "$tmp/names")
aware="" agnostic="" nll="" mass=""
for i in $(seq 1 "$n"); do
  name=$(sed -n "${i}p" "$tmp/names")
  f="$tmp/m$i.tsv"
  aware="$aware '$f' using (1.0/\$$c_den):$c_aware with linespoints lw 2 title '$name',"
  agnostic="$agnostic '$f' using (1.0/\$$c_den):$c_agnostic with linespoints lw 2 title '$name',"
  nll="$nll '$f' using (1.0/\$$c_den):$c_dnll with linespoints lw 2 title '$name',"
  awk -F'\t' -v cd="$c_den" -v c0="$c_mass" -v nl="$layers" \
    '$cd == 8 { for (l = 0; l < nl; l++) print l, $(c0 + l) }' "$f" > "$tmp/mass$i.dat"
  mass="$mass '$tmp/mass$i.dat' using 1:2 with linespoints lw 2 title '$name',"
done
gnuplot <<GP
set datafile separator "\t"
set datafile missing "NaN"
set terminal pngcairo size 1100,1200 font ",11" noenhanced
set output "$out"
set multiplot layout 4,1 title "bench/model: libpyramidkv on a trained $layers-layer byte transformer at equal memory"
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
set xrange [-0.5:$layers - 0.5]
set xtics 0,1,$((layers - 1))
set xlabel "layer (budget 1/8)"
set ylabel "retained attention mass"
set yrange [0:1.05]
set datafile separator whitespace
plot ${mass%,}
unset multiplot
GP
echo "wrote $out"
