#!/usr/bin/env bash
# `make test`: runs the phases in order, each "NAME=COMMAND", stops at the first that fails,
# and prints every phase's wall time at the end (also when one failed), with the total. The
# CPU time (user + system, of every process the phase ran) beside it tells a phase that was
# slow from one that waited for a machine shared with others.
#   scripts/ci-phases.sh "setup=make deps" "build=make build" ...
set -uo pipefail

# CPU seconds used so far by this shell's finished children: bash's `times` (second line),
# which must run in this shell, not in a subshell, whose children are others.
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
children_cpu() {
  times >"$times_file"
  cpu=$(awk 'function sec(t) { split(t, p, "m"); sub("s", "", p[2]); return p[1] * 60 + p[2] }
             NR == 2 { printf "%d", sec($1) + sec($2) }' "$times_file")
}

names=() walls=() cpus=() status=0 failed=""
start_all=$(date +%s)
for phase in "$@"; do
  name=${phase%%=*} command=${phase#*=}
  echo "=== $name: $command"
  start=$(date +%s)
  children_cpu
  cpu_start=$cpu
  bash -c "$command"
  code=$?
  children_cpu
  names+=("$name") walls+=($(($(date +%s) - start))) cpus+=($((cpu - cpu_start)))
  if [ $code -ne 0 ]; then
    status=$code failed=$name
    break
  fi
done
echo
echo "=== phase times on $(nproc) cores (load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%-14s %8s %8s\n' phase wall_s cpu_s
for i in "${!names[@]}"; do printf '%-14s %8d %8d\n' "${names[$i]}" "${walls[$i]}" "${cpus[$i]}"; done
printf '%-14s %8d\n' total $(($(date +%s) - start_all))
if [ -n "$failed" ]; then
  echo "FAILED in phase $failed"
  exit $status
fi
