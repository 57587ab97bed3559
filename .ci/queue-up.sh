#!/usr/bin/env bash
# A NATS JetStream server for the farm's queue suites (and a shell trying a
# farm by hand): one nats-server on 127.0.0.1, JetStream on, its store on disk.
#
#   .ci/queue-up.sh DIR      start it in DIR (created; a server already running there is stopped first)
#   .ci/queue-down.sh DIR    stop it; DIR, its store included, is left as it is
#
# Installs nothing: needs Debian's nats-server, plus node. A start in a DIR
# that held a server before keeps that server's store (queued items and
# recorded results survive, which is what a restart test wants) and tries its
# port first, so clients reconnect to the same address. On success it writes
# DIR/queue.env (sourceable `export` lines: SLUICE_QUEUE for sluice, the same
# URL as SLUICE_TEST_QUEUE for the suites, SLUICE_TEST_QUEUE_DIR) and prints
# it on stdout; progress goes to stderr. On failure it prints the tail of the
# server's log and stops what it started; DIR is kept.
set -euo pipefail

UP_NAME=queue-up
UP_PACKAGES=nats-server
# shellcheck source=.ci/up-common.sh
. "$(dirname "$0")/up-common.sh"
up_start "$@"
up_need nats-server node setsid

# Run twice on one directory: the first server is stopped, not leaked, and its
# store is kept. A directory that is not ours and not empty is refused.
if [ -e "$D/.sluice-queue" ]; then
  "$here/queue-down.sh" "$D" >&2
elif [ -e "$D" ] && [ -n "$(ls -A "$D" 2>/dev/null)" ]; then
  say "refusing to use non-empty directory $D"
  exit 64
fi
mkdir -p "$D/store"
: >"$D/.sluice-queue"
rm -f "$D/queue.env"

fail() {
  local rc=$?
  trap - EXIT
  [ "$rc" -eq 0 ] && return
  say "failed after $(elapsed) s; last log lines:"
  [ -s "$D/nats.log" ] && tail -n 15 "$D/nats.log" >&2
  "$here/queue-down.sh" "$D" >&2 || true
  # A start that failed on its own (not a missing command, bad usage or a signal) is tried again
  # with a new port: under load the port picked a moment before may be taken by another server.
  local attempt=${SLUICE_QUEUE_UP_ATTEMPT:-1}
  case $rc in 3 | 64 | 129 | 130 | 143) attempt=3 ;; esac
  if [ "$attempt" -lt 3 ]; then
    say "trying again (attempt $((attempt + 1)) of 3)"
    rm -f "$D/port"
    SLUICE_QUEUE_UP_ATTEMPT=$((attempt + 1)) exec "$0" "$D"
  fi
  exit "$rc"
}
trap fail EXIT
# A signal must reach fail() as a failure: bash runs the EXIT trap with $? = 0 otherwise.
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP

# The previous server's port when there was one (a restart), else a free one chosen by the kernel.
PORT=$(cat "$D/port" 2>/dev/null || true)
if ! [[ $PORT =~ ^[0-9]+$ ]]; then
  PORT=$(node -e '
    const s = require("node:net").createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => console.log(port));
    });')
fi
[ -n "$PORT" ] || { say "could not pick a free port"; exit 1; }
echo "$PORT" >"$D/port"

cat >"$D/nats.conf" <<EOF
listen: 127.0.0.1:$PORT
server_name: sluice-queue-$PORT
log_file: "$D/nats.log"
jetstream {
  store_dir: "$D/store"
  max_memory_store: 64MB
  max_file_store: 1GB
}
EOF

# Its own session: the server outlives this script and is not in the process group of whoever ran
# it. setsid, not a group leader here, execs nats-server in place, so $! is the server's pid.
setsid nats-server -c "$D/nats.conf" </dev/null >>"$D/nats.log" 2>&1 &
pid=$!
echo "$pid" >"$D/nats.pid"
deadline=$((SECONDS + 30))
# Ready when it answers a client's connection with an INFO line that says JetStream is on (the
# server enables JetStream, recovering its store, before it accepts clients). The probe runs in a
# command substitution's subshell, so a refused connection fails only the probe.
info() { { exec 3<>"/dev/tcp/127.0.0.1/$PORT" && IFS= read -r -t 1 line <&3 && printf '%s' "$line"; } 2>/dev/null; }
until [[ $(info) == INFO*'"jetstream":true'* ]]; do
  kill -0 "$pid" 2>/dev/null || { say "nats-server exited"; exit 1; }
  [ $SECONDS -lt $deadline ] || { say "nats-server did not answer on 127.0.0.1:$PORT within 30 s"; exit 1; }
  sleep 0.05
done

URL="nats://127.0.0.1:$PORT/sluice"
{
  echo "export SLUICE_QUEUE=$URL"
  echo "export SLUICE_TEST_QUEUE=$URL"
  echo "export SLUICE_TEST_QUEUE_DIR=$D"
} >"$D/queue.env.tmp"
mv "$D/queue.env.tmp" "$D/queue.env"
trap - EXIT
say "NATS JetStream on 127.0.0.1:$PORT, pid $pid, in $(elapsed) s (store in $D/store)"
cat "$D/queue.env"
