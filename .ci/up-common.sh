# What the start scripts share (.ci/s3-up.sh, .ci/queue-up.sh); sourced, not run.
# The script sets UP_NAME (its name in messages) and UP_PACKAGES (the Debian
# packages that give its commands) first, and calls: up_start "$@"; up_need CMD...
# up_start checks the usage and sets here (the .ci directory), D (DIR made
# absolute) and T0 (the start time, for elapsed).

up_start() {
  [ $# -eq 1 ] && [ -n "$1" ] || { echo "usage: $0 DIR" >&2; exit 64; }
  here=$(cd "$(dirname "$0")" && pwd)
  D=$(realpath -m "$1")
  T0=$EPOCHREALTIME
}
say() { printf '%s: %s\n' "$UP_NAME" "$*" >&2; }
elapsed() { awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# Exit 3, naming the commands that are missing and the packages that give them.
up_need() {
  local missing=() c
  for c in "$@"; do
    command -v "$c" >/dev/null || missing+=("$c")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    say "missing ${missing[*]} (Debian packages $UP_PACKAGES)"
    exit 3
  fi
}
