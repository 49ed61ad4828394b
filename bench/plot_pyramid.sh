#!/usr/bin/env bash
# plot_pyramid.sh - renders bench/pyramid_funnel.png, the figure of
# docs/performance.md: per-layer share (the pyramid) and per-layer retained
# attention mass, uniform (ratio 1) against ratio 4, on the funnel profile
# (32 layers, budget 512). It runs `pyramidkv bench --json`, turns the
# perLayer arrays into columns with awk and draws them with gnuplot
# (Debian package gnuplot-nox).
#
# usage: bench/plot_pyramid.sh [path/to/pyramidkv] [output.png]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cli="${1:-$here/../build/bench/pyramidkv}"
out="${2:-$here/pyramid_funnel.png}"
command -v gnuplot >/dev/null || { echo "plot_pyramid.sh: gnuplot is missing (apt-get install gnuplot-nox)" >&2; exit 1; }
[ -x "$cli" ] || { echo "plot_pyramid.sh: no pyramidkv at $cli (build the bench preset or pass its path)" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$cli" bench --trace funnel --layers 32 --budget 512 --ratio 1,4 --json > "$tmp/run.json"

# cJSON prints one key per line; the results come in ratio order (1, then 4)
# and each has 32 perLayer objects in layer order.
awk '
  /"ratio":/            { gsub(/[^0-9]/, "", $2); ratio = $2 }
  /"layer":/            { gsub(/[^0-9]/, "", $2); layer = $2 }
  /"share":/            { gsub(/[^0-9]/, "", $2); share[ratio, layer] = $2 }
  /"retainedAttentionMass":/ && layer != "" {
                          v = $2; gsub(/[,]/, "", v); mass[ratio, layer] = v }
  /"entropy":/          { v = $2; gsub(/[,]/, "", v); ent[layer] = v; n = layer + 1 }
  END {
    print "# layer share_r1 share_r4 mass_r1 mass_r4 entropy"
    for (l = 0; l < n; ++l)
      print l, share[1, l], share[4, l], mass[1, l], mass[4, l], ent[l]
  }' "$tmp/run.json" > "$tmp/layers.dat"

gnuplot -e "datafile='$tmp/layers.dat'; outfile='$out'" "$here/plot_pyramid.gp"
echo "wrote $out"
