#!/usr/bin/env bash
# A throwaway S3 service for the test suites: a single-host Ceph cluster
# (1 mon, 1 OSD on memstore, so data lives in RAM) with a RADOS Gateway on
# 127.0.0.1, a test user and an empty bucket.
#
#   .ci/s3-up.sh DIR      start it in DIR (created; a previous cluster there is stopped first)
#   .ci/s3-down.sh DIR    stop it and remove DIR
#
# Installs nothing: needs Debian's ceph-mon ceph-osd radosgw ceph-common, plus
# curl and node. On success it writes DIR/s3.env (sourceable `export` lines:
# SLUICE_TEST_S3_ENDPOINT, SLUICE_TEST_S3_BUCKET and the AWS_* variables) and
# prints it on stdout; progress goes to stderr. On failure it prints the tail
# of the daemons' logs, stops what it started and removes DIR.
set -euo pipefail

UP_NAME=s3-up
UP_PACKAGES="ceph-mon ceph-osd radosgw ceph-common curl"
# shellcheck source=.ci/up-common.sh
. "$(dirname "$0")/up-common.sh"
up_start "$@"
up_need ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool ceph-authtool curl node
# Daemons' admin sockets live under DIR, and a unix socket path has 108 bytes.
if [ ${#D} -gt 80 ]; then say "directory path too long for admin sockets (${#D} > 80): $D"; exit 64; fi

# Run twice on one directory: the first cluster is stopped, not leaked. A
# directory that is not ours and not empty is refused rather than wiped.
if [ -e "$D/.sluice-s3" ]; then
  "$here/s3-down.sh" "$D" >&2
elif [ -e "$D" ] && [ -n "$(ls -A "$D" 2>/dev/null)" ]; then
  say "refusing to use non-empty directory $D"
  exit 64
fi
mkdir -p "$D"/{mon/ceph-a,osd,rgw,log,run}
: >"$D/.sluice-s3"

fail() {
  local rc=$?
  trap - EXIT
  [ "$rc" -eq 0 ] && return
  say "failed after $(elapsed) s; last log lines:"
  for f in "$D"/log/*.log; do
    [ -s "$f" ] || continue
    echo "--- $(basename "$f")" >&2
    tail -n 15 "$f" >&2
  done
  "$here/s3-down.sh" "$D" >&2 || true
  # A start that failed on its own (not a missing command, bad usage or a signal) is tried again
  # from scratch, with new ports: under load a daemon may lose a port picked a moment before to
  # another cluster starting beside it, or give up waiting for the OSD.
  local attempt=${SLUICE_S3_UP_ATTEMPT:-1}
  case $rc in 3 | 64 | 129 | 130 | 143) attempt=3 ;; esac
  if [ "$attempt" -lt 3 ]; then
    say "trying again (attempt $((attempt + 1)) of 3)"
    SLUICE_S3_UP_ATTEMPT=$((attempt + 1)) exec "$0" "$D"
  fi
  exit "$rc"
}
trap fail EXIT
# A signal must reach fail() as a failure: bash runs the EXIT trap with $? = 0 otherwise.
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP

# Free ports chosen by the kernel (several clusters can run side by side).
read -r MON_PORT RGW_PORT < <(node -e '
  const net = require("node:net");
  const ports = [];
  const next = () => {
    if (ports.length === 2) return console.log(ports.join(" "));
    const s = net.createServer().listen(0, "127.0.0.1", () => { ports.push(s.address().port); s.close(next); });
  };
  next();')
[ -n "${RGW_PORT:-}" ] || { say "could not pick free ports"; exit 1; }

FSID=$(cat /proc/sys/kernel/random/uuid)
CONF="$D/ceph.conf"
cat >"$CONF" <<EOF
[global]
fsid = $FSID
mon host = v2:127.0.0.1:$MON_PORT
public network = 127.0.0.0/8
ms bind ipv6 = false
ms bind msgr1 = false
# Without cephx, radosgw hangs at start-up unless the mon client accepts crc.
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc secure
run dir = $D/run
log file = $D/log/\$name.log
pid file = $D/run/\$name.pid
keyring = $D/keyring
admin socket =
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 1
osd pool default pgp num = 1
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
# The default 1 s makes each of radosgw's ~8 pool creations wait a second.
paxos propose interval = 0.05
paxos min wait = 0.01
[mon]
mon data = $D/mon/\$cluster-\$id
admin socket = $D/run/\$name.asok
[osd]
osd data = $D/osd/\$cluster-\$id
osd objectstore = memstore
memstore device bytes = 4294967296
osd max object size = 134217728
admin socket = $D/run/\$name.asok
[client.rgw.a]
# tcp_nodelay: without it a small GET waits ~45 ms for Nagle.
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT tcp_nodelay=1
rgw data = $D/rgw
rgw thread pool size = 64
rgw init timeout = 60
# Deleted objects' data is reclaimed by RGW's GC, after 2 hours by default: in a 4 GiB memstore
# the S3 benchmarks (256 MiB and 1 GiB objects, deleted after each target) would fill the OSD.
rgw gc obj min wait = 0
rgw gc processor period = 5
admin socket = $D/run/\$name.asok
EOF
C=(-c "$CONF")

ceph-authtool "${C[@]}" --create-keyring "$D/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
monmaptool "${C[@]}" --create --fsid "$FSID" --addv a "[v2:127.0.0.1:$MON_PORT]" "$D/monmap" >/dev/null 2>&1
ceph-mon "${C[@]}" --mkfs -i a --monmap "$D/monmap" --keyring "$D/keyring" 2>>"$D/log/mkfs.log"
ceph-mon "${C[@]}" -i a 2>>"$D/log/stderr.log"
OSD_UUID=$(cat /proc/sys/kernel/random/uuid)
OSD_ID=$(timeout 30 ceph "${C[@]}" --connect-timeout 20 osd new "$OSD_UUID")
mkdir -p "$D/osd/ceph-$OSD_ID"
ceph-osd "${C[@]}" -i "$OSD_ID" --mkfs --osd-uuid "$OSD_UUID" 2>>"$D/log/mkfs.log"
ceph-osd "${C[@]}" -i "$OSD_ID" 2>>"$D/log/stderr.log"
# radosgw waits for the OSD by itself, so it starts at once; only its HTTP
# answer is polled (a `ceph` command costs ~0.3 s of Python start-up).
radosgw "${C[@]}" -n client.rgw.a 2>>"$D/log/stderr.log"
ENDPOINT="http://127.0.0.1:$RGW_PORT"
deadline=$((SECONDS + 60))
until curl -s -o /dev/null --max-time 1 "$ENDPOINT/"; do
  for p in "$D"/run/*.pid; do
    kill -0 "$(cat "$p")" 2>/dev/null || { say "$(basename "$p" .pid) exited"; exit 1; }
  done
  [ $SECONDS -lt $deadline ] || { say "radosgw did not answer on $ENDPOINT within 60 s"; exit 1; }
  sleep 0.1
done

# Keys are random per cluster, so a test that works can only have read them
# from the environment.
ACCESS_KEY="SLUICE$(od -An -N10 -tx1 /dev/urandom | tr -d ' \n' | tr a-f A-F)"
SECRET_KEY=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
radosgw-admin "${C[@]}" user create --uid=sluice-test --display-name=sluice-test \
  --access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" >/dev/null 2>>"$D/log/admin.log"
BUCKET=sluice-test
REGION=us-east-1
curl -sSf --aws-sigv4 "aws:amz:$REGION:s3" --user "$ACCESS_KEY:$SECRET_KEY" \
  -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X PUT -o /dev/null "$ENDPOINT/$BUCKET"

{
  echo "export SLUICE_TEST_S3_ENDPOINT=$ENDPOINT"
  echo "export SLUICE_TEST_S3_BUCKET=$BUCKET"
  echo "export AWS_ENDPOINT_URL_S3=$ENDPOINT"
  echo "export AWS_ACCESS_KEY_ID=$ACCESS_KEY"
  echo "export AWS_SECRET_ACCESS_KEY=$SECRET_KEY"
  echo "export AWS_REGION=$REGION"
  # No instance-metadata lookups (169.254.169.254) if a client misses the keys.
  echo "export AWS_EC2_METADATA_DISABLED=true"
} >"$D/s3.env.tmp"
mv "$D/s3.env.tmp" "$D/s3.env"
trap - EXIT
say "S3 on $ENDPOINT, bucket $BUCKET, in $(elapsed) s (cluster in $D)"
cat "$D/s3.env"
