#!/usr/bin/env bash
# Stops the nats-server .ci/queue-up.sh started in DIR. DIR stays as it is,
# its store included: a later queue-up.sh on DIR starts the same queue again
# (a restart); the caller removes DIR when it is done with it.
#
#   .ci/queue-down.sh DIR
#
# The server is found by its pid file and signalled only if its command line
# names DIR's nats.conf (a stale pid file never kills a stranger): SIGTERM,
# which lets it close its store, then SIGKILL if it is still there after 10 s.
# A missing DIR or a stopped server is not an error, so the script can run
# from a trap, twice.
set -uo pipefail

[ $# -eq 1 ] && [ -n "$1" ] || { echo "usage: $0 DIR" >&2; exit 64; }
D=$(realpath -m "$1")
[ -e "$D" ] || exit 0
if [ ! -e "$D/.sluice-queue" ]; then
  echo "queue-down: $D was not made by queue-up.sh; left alone" >&2
  exit 64
fi

ours() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null | grep -qF -- "$D/nats.conf"; }
alive() { [ -e "/proc/$1" ] && ours "$1"; }
p=$(cat "$D/nats.pid" 2>/dev/null || true)
if ! [[ $p =~ ^[0-9]+$ ]] || ! alive "$p"; then
  rm -f "$D/nats.pid"
  exit 0
fi
kill -TERM "$p" 2>/dev/null
for _ in $(seq 1 100); do
  alive "$p" || break
  sleep 0.1
done
how=SIGTERM
if alive "$p"; then
  how=SIGKILL
  kill -KILL "$p" 2>/dev/null
  for _ in $(seq 1 50); do
    alive "$p" || break
    sleep 0.1
  done
fi
alive "$p" && { echo "queue-down: nats-server $p still alive" >&2; exit 1; }
rm -f "$D/nats.pid"
echo "queue-down: stopped nats-server $p ($how), kept $D" >&2
