#!/usr/bin/env bash
# Runs `npm test` on a fresh clone of this checkout's HEAD in a private (0700)
# directory, as root or as another user (default nobody, with a HOME of its
# own): the suite must pass wherever a person clones, whoever they are.
#   .ci/clone-test.sh            # as the current user
#   .ci/clone-test.sh nobody     # as nobody (run as root)
#   .ci/clone-test.sh nobody test/sandbox   # build, then only these vitest files or folders
# With files, `npm run build && npx vitest run FILES` replaces `npm test`.
# SLUICE_CLONE_NODE_MODULES=DIR links the packages of DIR (readable by that
# user) into the clone's node_modules instead of running `npm ci`.
# Exit status is npm test's (or vitest's); the clone is removed afterwards.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
user=${1:-}
shift || true
files=("$@")
dir=$(mktemp -d "${TMPDIR:-/tmp}/sluice-clone.XXXXXX")
chmod 700 "$dir"
trap 'rm -rf "$dir"' EXIT
git clone -q "$src" "$dir/p"
mkdir -p "$dir/home"
modules=${SLUICE_CLONE_NODE_MODULES:-}
if [ -n "$modules" ]; then
  # Entry by entry, in a directory of the clone's own: vite writes its temp files into node_modules.
  mkdir "$dir/p/node_modules"
  for entry in "$(cd "$modules" && pwd)"/* "$(cd "$modules" && pwd)"/.[!.]*; do
    case "${entry##*/}" in .vite | .vite-temp | .cache | '.[!.]*') ;; *) ln -s "$entry" "$dir/p/node_modules/" ;; esac
  done
  install='true'
else
  install='npm ci --no-audit --no-fund'
fi
if [ ${#files[@]} -gt 0 ]; then
  run='npm run build && npx vitest run "$@"'
else
  run='npm test'
fi
script="cd \"\$0\" && $install && $run"
if [ -n "$user" ] && [ "$user" != "$(id -un)" ]; then
  chown -R "$user:$(id -gn "$user")" "$dir"
  runuser -u "$user" -- env -i PATH="$PATH" HOME="$dir/home" LANG="${LANG:-C.UTF-8}" \
    bash -c "$script" "$dir/p" "${files[@]}"
else
  (bash -c "$script" "$dir/p" "${files[@]}")
fi
