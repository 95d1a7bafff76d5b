#!/usr/bin/env bash
# Builds one libFuzzer target per dump reader with clang (ASan + UBSan) in its own build
# dir, seeds each from real and synthetic dumps, and runs every target for SECONDS.
#   tests/fuzz/run.sh [SECONDS per target, default 60] [TARGET...]
# Environment: FUZZ_BUILD_DIR (default build-fuzz), FUZZ_JOBS (parallel workers per target, 1),
# FUZZ_BUILD_ONLY=1 (build the targets, run nothing),
# FUZZ_SEED_DIRS (extra job dirs whose dumps join the corpus). Not run by CI: a fuzzer is open-ended.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
seconds=${1:-60}
shift || true
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
all_targets=(forensics_dump fast_dump_reader watchdog_snapshot fast_snapshot_reader trigger attempt rank_state metrics_line timeline rank_set node_summary)
[ $# -gt 0 ] && targets=("$@") || targets=("${all_targets[@]}")

cxx=${CXX_FUZZ:-clang++}
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
       -fno-sanitize-recover=undefined -I"$root/common/include" -I"$root/stackmerge/include"
       -I"$root/dumpio/include" -I"$here" -DFMT_HEADER_ONLY)
mkdir -p "$build/obj" "$build/bin"
build=$(cd "$build" && pwd)  # the fuzzers run from inside it

# The readers under test, compiled once with the sanitizers; an object is rebuilt when its
# source or a header of its part changed (common/ sources see only common/ headers).
common_sources=(forensics_dump dump_json watchdog_snapshot metrics_window timeline_window log_histogram nccl_bandwidth rank_state node_summary
                attempt job_layout atomic_file dump_mode scoped_fd)
stackmerge_sources=(rank_set stack_table frame_label label_interner)
dumpio_sources=(forensics_dump_fast_reader watchdog_snapshot_fast_reader node_summary_fast_reader)
objects=()
stale=()
for name in "${common_sources[@]}" "${stackmerge_sources[@]}" "${dumpio_sources[@]}"; do
  if [ -e "$root/common/$name.cc" ]; then src="$root/common/$name.cc"; headers=("$root/common/include")
  elif [ -e "$root/stackmerge/$name.cc" ]; then src="$root/stackmerge/$name.cc"; headers=("$root/common/include" "$root/stackmerge/include")
  else src="$root/dumpio/$name.cc"; headers=("$root/common/include" "$root/stackmerge/include" "$root/dumpio"); fi
  obj="$build/obj/$name.o"
  objects+=("$obj")
  if [ ! -e "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find "${headers[@]}" -newer "$obj" -name '*.h' -print -quit)" ]; then
    stale+=("$src")
  fi
done
printf '%s\n' "${stale[@]}" | { grep . || true; } | xargs -r -P 2 -I{} sh -c \
  'src={}; "$0" "$@" -c "$src" -o "'"$build"'/obj/$(basename "${src%.cc}").o"' "$cxx" "${flags[@]}"

# Each target links the objects above; stale ones are rebuilt two at a time.
for t in "${targets[@]}"; do
  bin="$build/bin/fuzz_$t"
  if [ ! -e "$bin" ] || [ "$here/fuzz_$t.cc" -nt "$bin" ] || [ "$here/fuzz_roundtrip.h" -nt "$bin" ] ||
     [ -n "$(find "$build/obj" -newer "$bin" -print -quit)" ]; then
    echo "$t"
  fi
done | xargs -r -P 2 -I{} "$cxx" "${flags[@]}" -fsanitize=fuzzer "$here/fuzz_{}.cc" "${objects[@]}" -lsimdjson -o "$build/bin/fuzz_{}"

[ -n "${FUZZ_BUILD_ONLY:-}" ] && exit 0

# Corpus: checked-in seeds (real dumps from simgpu runs), a small synthetic job, and any job
# dirs named in FUZZ_SEED_DIRS. The corpus dir keeps what the fuzzer found between runs.
synth="$build/synthetic-job"
if [ ! -d "$synth/ranks" ]; then
  # With node summaries when a build's forensics is at hand (FUZZ_FORENSICS, default build/).
  forensics=${FUZZ_FORENSICS:-$root/build/forensics/forensics}
  summaries=(); [ -x "$forensics" ] && summaries=(--forensics "$forensics")
  python3 "$root/bench/gen_dump_set.py" "$synth" --ranks 4 --fault dead-rank=2 --pad-frames 0 --channels 2 \
    --jobs 1 "${summaries[@]}" >/dev/null
fi
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  mkdir -p "$corpus"
  cp -n "$here/seeds/$t"/* "$corpus/" 2>/dev/null || true
  for dir in "$synth" ${FUZZ_SEED_DIRS:-}; do
    case $t in
      forensics_dump | fast_dump_reader) cp -n "$dir"/ranks/*.forensics.json "$corpus/" 2>/dev/null || true ;;
      watchdog_snapshot | fast_snapshot_reader) cp -n "$dir"/ranks/*.watchdog.json "$corpus/" 2>/dev/null || true ;;
      trigger) [ -e "$dir/TRIGGER.json" ] && cp -n "$dir/TRIGGER.json" "$corpus/trigger-$(basename "$dir").json" || true ;;
      attempt) [ -e "$dir/ATTEMPT.json" ] && cp -n "$dir/ATTEMPT.json" "$corpus/attempt-$(basename "$dir").json" || true ;;
      rank_state) cp -n "$dir"/ranks/*.state.json "$corpus/" 2>/dev/null || true ;;
      node_summary) cp -n "$dir"/nodes/*.json "$corpus/" 2>/dev/null || true ;;
      metrics_line) for m in "$dir"/metrics/*.jsonl; do [ -e "$m" ] && split -l 1 -a 3 "$m" "$corpus/$(basename "$m" .jsonl)-"; done ;;
      timeline) for m in "$dir"/timeline/*.json; do [ -e "$m" ] && cp -n "$m" "$corpus/timeline-$(basename "$dir")-$(basename "$m")"; done ;;
      *) ;;
    esac
  done
done

status=0
for t in "${targets[@]}"; do
  echo "== fuzz_$t for ${seconds}s"
  mkdir -p "$build/artifacts/$t"
  log="$build/fuzz_$t.log"
  # Parallel jobs write their own fuzz-N.log files, so they run from the build dir.
  parallel=()
  [ "${FUZZ_JOBS:-1}" -gt 1 ] && parallel=(-jobs="$FUZZ_JOBS" -workers="$FUZZ_JOBS")
  if [ ! -x "$build/bin/fuzz_$t" ]; then
    echo "   NOT BUILT: $build/bin/fuzz_$t"
    status=1
    continue
  fi
  if ! (cd "$build" && "$build/bin/fuzz_$t" "$build/corpus/$t" -max_total_time="$seconds" -max_len=65536 \
       -timeout=10 -rss_limit_mb=2048 "${parallel[@]}" -artifact_prefix="$build/artifacts/$t/" \
       -print_final_stats=1) >"$log" 2>&1; then
    echo "   CRASH: see $log and $build/artifacts/$t/"
    status=1
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+.*DONE" "$log" | sed 's/^/   /' || true
done
exit $status
