#!/bin/sh
# cake_pref_agree.sh - one definition of CAKE's preference serves the
# runtime and calibrate (docs/spec.md §18.2): model_eval's preference
# (measured on its calibration excerpts, every query head) and
# calibrate's on a model_trace trace of the same excerpts (its preference
# records) print the same numbers, to model_eval's 3 digits.
# usage: cake_pref_agree.sh MODEL_EVAL MODEL_TRACE PYRAMIDKV
set -eu
eval_bin=$1 trace_bin=$2 cli=$3
want=$("$eval_bin" --methods cake --budgets 4 --needles 1 --ctx 128 |
       sed -n 's/^CAKE layer preference .*prompts): //p')
"$trace_bin" --out tc_cakepref.trace --prompts 1 --ctx 128
got=$("$cli" calibrate tc_cakepref.trace --budget 32 --json --progress off |
      awk -F'[:,]' '/"cakePreference"/ { printf "%s%.3g", (n++ ? " " : ""), $2 }')
from=$("$cli" calibrate tc_cakepref.trace --budget 32 --json --progress off |
       grep -c '"cakePreferenceFrom":.*"preference"')
rm -f tc_cakepref.trace
if [ -z "$want" ] || [ "$want" != "$got" ] || [ "$from" -eq 0 ]; then
    echo "model_eval: '$want'; calibrate: '$got' ($from layers from preference records)"
    exit 1
fi
echo "CAKE preference $got"
