#!/usr/bin/env bash
# The GPU suite's command line, checked on any machine: help, the check list, and
# clear refusals of bad arguments (exit 2), without building anything.
set -u
run=$(dirname "$0")/run.sh
fail() { echo "FAIL: $*"; exit 1; }
"$run" --help | grep -q "PASS|FAIL|SKIP" || fail "--help does not describe the output"
[ "$("$run" --list | tr '\n' ' ')" = "build dropin gpu interpose kernel-hang nccl-hang nccl-sigstop pytorch " ] ||
  fail "--list: $("$run" --list | tr '\n' ' ')"
err=$("$run" --no-such-flag 2>&1); [ $? -eq 2 ] || fail "an unknown flag is not exit 2"
echo "$err" | grep -q "unknown argument '--no-such-flag'" || fail "unknown flag message: $err"
err=$("$run" --only build,teleport 2>&1); [ $? -eq 2 ] || fail "an unknown check is not exit 2"
echo "$err" | grep -q "unknown check 'teleport'" || fail "unknown check message: $err"
"$run" --build-dir 2>/dev/null; [ $? -eq 2 ] || fail "--build-dir without a value is not exit 2"
"$run" --simgpu-build 2>/dev/null; [ $? -eq 2 ] || fail "--simgpu-build without a value is not exit 2"
"$run" --help | grep -q -- "--simgpu-build" || fail "--help does not name --simgpu-build"
echo "OK"
