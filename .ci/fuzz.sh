#!/usr/bin/env bash
# Runs every go test -fuzz target of the module for a bounded time
# (FUZZTIME, default 10s each). Targets are found by their declaration, so
# a new FuzzXxx is picked up without editing this script. A failure leaves
# the crasher in the package's testdata/fuzz/FuzzXxx/, where plain go test
# replays it from then on: commit it as a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-10s}"
mapfile -t targets < <(grep -rl --include='*_test.go' --exclude-dir=node_modules -E '^func Fuzz[A-Za-z0-9_]+\(' . |
  while read -r f; do
    dir=$(dirname "$f")
    grep -oE '^func Fuzz[A-Za-z0-9_]+' "$f" | sed "s|^func |$dir |"
  done | sort -u)
# count prints how many files dir holds (0 when it does not exist).
count() { if [ -d "$1" ]; then find "$1" -type f | wc -l; else echo 0; fi; }
echo "fuzzing ${#targets[@]} targets for $fuzztime each"
# fuzz runs target name of package dir into log. Go's fuzz coordinator
# sometimes reports "context deadline exceeded" when a busy worker is
# slow to stop at the end of -fuzztime. That is no finding (no crasher is
# written): the target runs again, up to three times in all.
fuzz() {
  local dir=$1 name=$2 log=$3 before attempt
  before=$(count "$dir/testdata/fuzz/$name")
  for attempt in 1 2 3; do
    if go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$dir" >"$log" 2>&1; then
      return 0
    fi
    if ! grep -q '^    context deadline exceeded$' "$log" || [ "$(count "$dir/testdata/fuzz/$name")" != "$before" ]; then
      return 1
    fi
    echo "($name: the fuzz engine timed out stopping its workers, no crasher; run $attempt of 3)"
  done
  return 1
}
for t in "${targets[@]}"; do
  dir=${t% *}
  name=${t#* }
  echo "--- $name ($dir)"
  log=$(mktemp)
  if ! fuzz "$dir" "$name" "$log"; then
    cat "$log"
    rm -f "$log"
    echo "fuzz target $name in $dir failed; the crasher is in $dir/testdata/fuzz/$name/"
    exit 1
  fi
  tail -n 2 "$log"
  rm -f "$log"
done
