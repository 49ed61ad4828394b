#!/bin/sh
# model_eval's --task flag, its usage errors and those of prompt files with
# several questions: each bad invocation exits 2
# with exactly one line on stderr and nothing on stdout; --help lists every
# task of eval_tasks.c.
# usage: task_usage.sh MODEL_EVAL EXAMPLE_PROMPTS
ev="$1"
prompts="$2"
fail() { echo "task_usage: $*" >&2; exit 1; }

usage_error() { # args...: exit 2, one stderr line, empty stdout
  tmp=$(mktemp) || fail "mktemp"
  out=$("$ev" "$@" 2>"$tmp") && fail "$* exited 0"
  rc=$?
  err=$(cat "$tmp")
  rm -f "$tmp"
  [ "$rc" -eq 2 ] || fail "$*: exit $rc, want 2"
  [ -z "$out" ] || fail "$*: printed on stdout: $out"
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "$*: stderr is not one line: $err"
  printf '%s\n' "$err" | grep -qF -- "$want" || fail "$*: stderr '$err' lacks '$want'"
}

want="unknown task 'nosuch' (tasks: needle multikey multivalue vartrack multiq)"
usage_error --task nosuch
want="unknown task '' "
usage_error --task ""
want="needs a value"
usage_error --task
want="exclude each other"
usage_error --task multikey --prompts "$prompts"
want="task multiq needs --ctx of at least"
usage_error --task multiq --ctx 128
want="--protocol aware does not apply"
usage_error --task multiq --protocol aware --needles 1

# prompt files: a question without its answer, five questions
bad=$(mktemp) || fail "mktemp"
want="want tab-separated fields context, question, answer"
printf 'context\tq\ta\tq2\n' >"$bad"
usage_error --prompts "$bad"
printf 'c\tq\ta\tq\ta\tq\ta\tq\ta\tq\ta\n' >"$bad"
usage_error --prompts "$bad"
rm -f "$bad"

help=$("$ev" --help) || fail "--help failed"
for t in needle multikey multivalue vartrack multiq; do
  printf '%s\n' "$help" | grep -qE "^ +(--task NAME +)?$t " ||
    fail "--help does not list the task $t"
done
echo "task_usage: ok"
