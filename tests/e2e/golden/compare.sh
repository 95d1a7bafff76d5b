#!/usr/bin/env bash
# compare.sh OLD_FORENSICS NEW_FORENSICS JOBS_DIR: `forensics report` (json, text, html) and
# `forensics analyze` (json, text, against a baseline) of two builds over the job dirs that
# make_jobs.py left in JOBS_DIR (and any copied fixture job dirs in JOBS_DIR/fixtures/),
# byte-compared; and, where a job left node summaries (nodes/*.json), the new build's report
# from them against its report with --flat. Prints a DIFF line per differing output; exit 1 on any.
set -u
[ $# -eq 3 ] || { sed -n '2,6p' "$0"; exit 2; }
old=$1; new=$2; jobs=$3; out=$(mktemp -d); bad=0
run() {  # name, args...
  local name=$1; shift
  "$old" "$@" > "$out/$name.old" 2>/dev/null; echo "rc=$?" >> "$out/$name.old"
  "$new" "$@" > "$out/$name.new" 2>/dev/null; echo "rc=$?" >> "$out/$name.new"
  if ! cmp -s "$out/$name.old" "$out/$name.new"; then echo "DIFF $name ($out/$name.old vs .new)"; bad=1; fi
}
# The new build's report from the node summaries against its report from the rank files alone.
flat() {  # name, args...
  local name=$1; shift
  "$new" "$@" > "$out/$name.old" 2>/dev/null; echo "rc=$?" >> "$out/$name.old"
  "$new" "$@" --flat > "$out/$name.new" 2>/dev/null; echo "rc=$?" >> "$out/$name.new"
  if ! cmp -s "$out/$name.old" "$out/$name.new"; then echo "DIFF $name ($out/$name.old vs .new)"; bad=1; fi
}
for d in "$jobs"/*/e2e-report "$jobs"/fixtures/*; do
  s=$(basename "$(dirname "$d")")-$(basename "$d")
  for f in json text html; do run "report-$s-$f" report "$d" --format $f --wait 0 --no-save; done
  if ls "$d"/nodes/*.json >/dev/null 2>&1; then
    for f in json text html; do flat "flat-$s-$f" report "$d" --format $f --wait 0 --no-save; done
  fi
  run "analyze-$s" analyze "$d" --format json
done
A=$jobs/analyze
for j in $A/*; do
  s=$(basename "$j")
  run "analyze-$s-json" analyze "$j" --format json
  run "analyze-$s-text" analyze "$j"
  run "analyze-$s-base" analyze "$j" --format json --baseline $A/healthy
done
echo "compared $(ls $out | grep -c old) outputs; bad=$bad"
exit $bad
