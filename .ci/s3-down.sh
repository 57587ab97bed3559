#!/usr/bin/env bash
# Stops the cluster .ci/s3-up.sh started in DIR and removes DIR.
#
#   .ci/s3-down.sh DIR
#
# Daemons are found by their pid files and killed only if their command line
# names DIR's ceph.conf (a stale pid file never kills a stranger). A missing
# DIR is not an error, so the script can run from a trap, twice.
set -uo pipefail

[ $# -eq 1 ] && [ -n "$1" ] || { echo "usage: $0 DIR" >&2; exit 64; }
D=$(realpath -m "$1")
[ -e "$D" ] || exit 0
if [ ! -e "$D/.sluice-s3" ]; then
  echo "s3-down: $D was not made by s3-up.sh; left alone" >&2
  exit 64
fi

ours() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null | grep -qF -- "$D/ceph.conf"; }
pids=()
for f in "$D"/run/*.pid; do
  [ -f "$f" ] || continue
  p=$(cat "$f")
  [[ $p =~ ^[0-9]+$ ]] && ours "$p" && pids+=("$p")
done
# SIGKILL, not SIGTERM: the data is thrown away with DIR, and an OSD asked to
# stop takes ~2 s to shut down (measured), a killed one ~0.05 s.
[ ${#pids[@]} -gt 0 ] && kill -KILL "${pids[@]}" 2>/dev/null
for _ in $(seq 1 50); do
  alive=0
  for p in "${pids[@]}"; do [ -e "/proc/$p" ] && ours "$p" && alive=1; done
  [ $alive = 0 ] && break
  sleep 0.1
done
[ $alive = 0 ] || { echo "s3-down: daemons ${pids[*]} still alive" >&2; exit 1; }
rm -rf "$D"
echo "s3-down: stopped ${#pids[@]} daemons, removed $D" >&2
