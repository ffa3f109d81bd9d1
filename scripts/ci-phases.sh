#!/usr/bin/env bash
# `make test`: runs the phases in order, each "NAME=COMMAND", stops at the first that fails,
# and prints every phase's wall time at the end (also when one failed), with the total.
#   scripts/ci-phases.sh "setup=make deps" "build=make build" ...
set -uo pipefail
names=() times=() status=0 failed=""
start_all=$(date +%s)
for phase in "$@"; do
  name=${phase%%=*} command=${phase#*=}
  echo "=== $name: $command"
  start=$(date +%s)
  bash -c "$command"
  code=$?
  names+=("$name") times+=($(($(date +%s) - start)))
  if [ $code -ne 0 ]; then
    status=$code failed=$name
    break
  fi
done
echo
echo "=== phase times (s), $(nproc) cores"
for i in "${!names[@]}"; do printf '%-14s %6d\n' "${names[$i]}" "${times[$i]}"; done
printf '%-14s %6d\n' total $(($(date +%s) - start_all))
if [ -n "$failed" ]; then
  echo "FAILED in phase $failed"
  exit $status
fi
