#!/bin/sh
# plot_columns.sh - bench/model/plot_quality.sh finds the TSV's columns by
# header name: on a header in the current order, on one with the columns
# shuffled (and an extra column), --columns prints the numbers of method,
# den, needle_aware, needle_agnostic, dnll, mass0 and the layer count; a
# file without one of them exits 1 with a message naming it.
# usage: plot_columns.sh PLOT_QUALITY_SH WORK_DIR
set -u
plot="$1"
dir="$2"
mkdir -p "$dir"
fails=0
expect() { # file, expected --columns output
  got=$(bash "$plot" --columns "$1" 2>&1)
  if [ "$got" != "$2" ]; then
    echo "FAIL: $1: got '$got', expected '$2'"
    fails=$((fails + 1))
  fi
}
tab=$(printf '\t')
row() { printf '%s\n' "$*" | tr ' ' "$tab"; }
row method key task den budget positions kv_bytes needle_aware diff_aware \
    se_aware needle_agnostic diff_agnostic se_agnostic nll dnll \
    dnll_uniform se_dnll_uniform mass0 mass1 mass2 > "$dir/current.tsv"
expect "$dir/current.tsv" "1 4 8 11 15 18 3"
row extra mass0 mass1 dnll den needle_agnostic nll needle_aware method \
    > "$dir/shuffled.tsv"
expect "$dir/shuffled.tsv" "9 5 8 6 4 2 2"
row method den needle_aware nll dnll mass0 > "$dir/no_agnostic.tsv"
got=$(bash "$plot" --columns "$dir/no_agnostic.tsv" 2>&1)
rc=$?
if [ $rc -ne 1 ] || ! echo "$got" | grep -q "no column 'needle_agnostic'"; then
  echo "FAIL: a file without needle_agnostic: exit $rc, '$got'"
  fails=$((fails + 1))
fi
[ $fails -eq 0 ] && echo ok
exit $fails
