#!/bin/sh
# check_abi.sh - compares the ABI of the shared library just built with the
# committed baseline of its SONAME, using abidiff (Debian: abigail-tools).
#
# Usage: check_abi.sh LIBRARY HEADERS_DIR BASELINE_DIR
#   LIBRARY       the built libpyramidkv (a .a is skipped: no ABI to compare)
#   HEADERS_DIR   include/pyramidkv: only types of the public headers count
#   BASELINE_DIR  tests/abi, holding <SONAME>.abi (abidw output)
#
# Passes when the library adds functions or variables and changes nothing
# that a program built against the baseline's headers uses. Fails on a
# removed or changed function or variable (a moved field, a changed
# signature, a changed public type), on abidiff's "incompatible" bit, and
# when there is no baseline for the library's SONAME. So an intentional
# break must bump SOVERSION (the SONAME) and commit the baseline of the new
# SONAME in the same change; docs/abi.md, "How it is checked", says how.
# Exit status: 0 pass, 1 fail, 77 skipped (with the reason printed).
set -u

lib=${1:?library}
headers=${2:?headers dir}
dir=${3:?baseline dir}

skip() { echo "skipped: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

case "$lib" in
  *.a) skip "$lib is a static library: no shared-library ABI to compare" \
            "(the dev preset builds the shared one)" ;;
esac
[ -f "$lib" ] || fail "no library at $lib"
command -v abidiff >/dev/null 2>&1 ||
  skip "abidiff not found (install the Debian package abigail-tools)"
command -v readelf >/dev/null 2>&1 || skip "readelf not found (binutils)"
readelf -S "$lib" | grep -q '\.debug_info' ||
  skip "$lib has no debug information: abidiff could only compare" \
       "symbols (configure with -g; the dev preset does)"

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[ -n "$soname" ] || fail "$lib has no SONAME"
baseline="$dir/$soname.abi"
if [ ! -f "$baseline" ]; then
  fail "the library's SONAME is $soname, but there is no baseline" \
       "$baseline. A SOVERSION bump must commit the baseline of the new" \
       "SONAME (abidw of the release that introduces it) in the same change."
fi
grep -q "soname='$soname'" "$baseline" ||
  fail "$baseline was not made from a library with SONAME $soname"

# Fields appended to the structs that grow by the struct_size rule are
# additions (growable_structs.abignore names them).
report=$(abidiff --suppressions "$dir/growable_structs.abignore" \
  --headers-dir2 "$headers" "$baseline" "$lib")
rc=$?
echo "abidiff $baseline $lib: exit status $rc"
[ -n "$report" ] && echo "$report"

# abidiff's exit status is a bit set: 1 error, 2 usage error, 4 the ABI
# changed, 8 the change is incompatible.
[ $((rc & 3)) -eq 0 ] || fail "abidiff could not compare (exit status $rc)"
[ $((rc & 8)) -eq 0 ] ||
  fail "incompatible ABI change against $baseline (see the report above)"

# Bit 4 alone also covers changed existing interfaces (a reordered struct
# is "changed", not "incompatible", to abidiff): only additions may pass.
bad=$(echo "$report" | awk '
  /changes summary:/ {
    for (i = 1; i <= NF; ++i) {
      w = $(i + 1); sub(/,$/, "", w)
      if ((w == "Removed" || w == "Changed") && $i + 0 > 0) print
    }
  }')
[ -z "$bad" ] ||
  fail "existing interfaces removed or changed against $baseline:" \
       "$bad (only additions keep the ABI of $soname)"
echo "ABI of $soname: compatible with $baseline (additions only)"
exit 0
