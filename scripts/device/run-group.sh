#!/usr/bin/env bash
#===- run-group.sh - One device call: a group of the check, packed for return -===#
#
# Usage (the device tool's command, carry ["device-pack", "build/python", "build-device-python/python"],
# timeout_s 40 s above SECONDS):
#   bash scripts/device/run-group.sh kernels|models SECONDS [device-check.sh options]
#
# The device tool returns at most 8 files from $OUT, and a command it kills
# at its limit returns nothing it had not yet written there. A group of
# scripts/device-check.sh writes a dozen files (tables, results.json,
# calibration.*, kiln-run-logs.tar.gz), so this runs the group into a
# scratch directory under its own `timeout SECONDS`, then packs everything
# into $OUT/GROUP.tar.gz and copies the two summaries (table.txt,
# phases.txt) beside it. Unpack with `tar xzf GROUP.tar.gz -C DIR`.
#
#===------------------------------------------------------------------------===#
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
group=${1:?usage: run-group.sh kernels|models SECONDS [options]}
seconds=${2:?usage: run-group.sh kernels|models SECONDS [options]}
shift 2
final="${OUT:?run-group.sh: OUT is not set (run it through the device tool)}"
# The set travels packed (prepare.sh); unpack it on the first call.
# DEVICE_CHECK_DIR (as device-check.sh reads it) and DEVICE_PACK: another
# set and pack (the lit test's stubs); the pack holds device-check/.
dir="${DEVICE_CHECK_DIR:-$root/device-check}"
if [ ! -f "$dir/manifest.json" ]; then
  pack="${DEVICE_PACK:-$root/device-pack/device-check.txz}"
  if [ ! -f "$pack" ]; then
    echo "run-group.sh: neither $dir/manifest.json nor $pack: run scripts/device/prepare.sh and carry device-pack" >&2
    exit 1
  fi
  tar -C "$(dirname "$dir")" -xJf "$pack" || { echo "run-group.sh: cannot unpack $pack" >&2; exit 1; }
fi
scratch=$(mktemp -d /tmp/kiln-device-XXXXXX)
export OUT="$scratch" PYTHONUNBUFFERED=1
{
  echo "== $(date -u +%FT%TZ) group $group, $seconds s"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv 2>&1 || true
} > "$scratch/machine.txt"
rc=0
timeout --kill-after=10 "$seconds" bash "$root/scripts/device-check.sh" --group "$group" "$@" \
  > "$scratch/stdout.txt" 2>&1 || rc=$?
echo "device-check.sh --group $group: exit $rc" >> "$scratch/stdout.txt"
tar -czf "$final/$group.tar.gz" -C "$scratch" . 2>/dev/null
for f in table.txt phases.txt; do
  [ ! -f "$scratch/$f" ] || cp "$scratch/$f" "$final/$group-$f"
done
# The tail of the output comes back in the tool's reply.
tail -c 10000 "$scratch/stdout.txt"
exit "$rc"
