#!/bin/bash
# A ctest selection, ROUNDS times, while the load changes between rounds the way a shared CI
# machine's does: a CPU hog on every core in about half the rounds (chosen at random, the seed
# printed), none in the others. Tests and hogs at the same nice level (NICE, default 10), so
# the hog competes with the tests and both leave the machine's other work first.
#
#   scripts/load-rounds.sh BUILD_DIR ROUNDS REGEX [SEED]
#   EXCLUDE=REGEX leaves the matching tests out (ctest -E), e.g. EXCLUDE=fuzz_
#
# Prints a line per round (its load, its failures) and a summary; exits 1 if any round
# failed. ctest's own output of a failing round is kept in BUILD_DIR/load-rounds/round-N.log.
set -u
BUILD=$(realpath "$1")
ROUNDS=$2
REGEX=$3
SEED=${4:-$RANDOM}
NICE=${NICE:-10}
RANDOM=$SEED
LOGS=$BUILD/load-rounds
mkdir -p "$LOGS"
HOGS=()
stop_hogs() {
  [ ${#HOGS[@]} = 0 ] || kill "${HOGS[@]}" 2>/dev/null
  wait "${HOGS[@]}" 2>/dev/null
  HOGS=()
}
trap stop_hogs EXIT
trap 'exit 143' TERM INT

echo "seed $SEED, $ROUNDS rounds of: $REGEX"
failed_rounds=0
declare -A failures
for r in $(seq "$ROUNDS"); do
  load=quiet
  if [ $((RANDOM % 2)) = 1 ]; then
    load="hog x$(nproc)"
    for _ in $(seq "$(nproc)"); do
      nice -n "$NICE" bash -c 'while :; do :; done' &
      HOGS+=($!)
    done
  fi
  start=$(date +%s)
  (cd "$BUILD" && nice -n "$NICE" ctest -R "$REGEX" ${EXCLUDE:+-E "$EXCLUDE"} -j"$(nproc)" --output-on-failure \
    >"$LOGS/round-$r.log" 2>&1)
  status=$?
  stop_hogs
  failed=$(grep -E '^\s+[0-9]+ - ' "$LOGS/round-$r.log" | sed -E 's/^\s+[0-9]+ - //' | tr '\n' ' ')
  echo "round $r ($load, $(($(date +%s) - start)) s): ${failed:-all passed}"
  if [ "$status" != 0 ]; then
    failed_rounds=$((failed_rounds + 1))
    for t in $failed; do
      [[ $t == \(* ]] && continue
      failures[$t]=$((${failures[$t]:-0} + 1))
    done
  else
    rm -f "$LOGS/round-$r.log"
  fi
done
echo "$failed_rounds of $ROUNDS rounds failed"
for t in "${!failures[@]}"; do echo "  $t: ${failures[$t]}"; done
[ "$failed_rounds" = 0 ]
