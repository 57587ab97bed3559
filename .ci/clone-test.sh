#!/usr/bin/env bash
# Runs `npm test` on a fresh clone of this checkout's HEAD in a private (0700)
# directory, as root or as another user (default nobody, with a HOME of its
# own): the suite must pass wherever a person clones, whoever they are.
#   .ci/clone-test.sh            # as the current user
#   .ci/clone-test.sh nobody     # as nobody (run as root)
# Exit status is npm test's; the clone is removed afterwards.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
user=${1:-}
dir=$(mktemp -d "${TMPDIR:-/tmp}/sluice-clone.XXXXXX")
chmod 700 "$dir"
trap 'rm -rf "$dir"' EXIT
git clone -q "$src" "$dir/p"
mkdir -p "$dir/home"
if [ -n "$user" ] && [ "$user" != "$(id -un)" ]; then
  chown -R "$user:$(id -gn "$user")" "$dir"
  runuser -u "$user" -- env -i PATH="$PATH" HOME="$dir/home" LANG="${LANG:-C.UTF-8}" \
    bash -c 'cd "$1" && npm ci --no-audit --no-fund && npm test' _ "$dir/p"
else
  (cd "$dir/p" && npm ci --no-audit --no-fund && npm test)
fi
