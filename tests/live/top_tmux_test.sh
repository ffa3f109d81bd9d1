#!/bin/bash
# `nanotrace top` in a real terminal: tmux runs it full screen beside waiter_program (a traced
# program with one operation that never ends), keys go in with send-keys and the screen comes
# back with capture-pane.
#   1. The waiter is listed with its key, thread and fields, and its age grows.
#   2. Operations that complete show a rate, and a latency line for their pair rule.
#   3. A ring that wraps between two frames shows as missed records.
#   4. Bad sources, rules and options are one-line errors.
#   5. p pauses the screen (it stops changing) and resumes it; s sorts events by name;
#      w lists the operations in flight alone; q quits and gives the terminal back.
#
# Usage: top_tmux_test.sh BIN_DIR
set -u
BIN=$1
NT=$BIN/nanotrace
fail() {
  echo "FAIL: $*"
  echo "--- screen:"
  screen
  exit 1
}
skip() { echo "SKIP: $*"; exit 77; }
command -v tmux >/dev/null || skip "tmux is not installed"

T=$(mktemp -d /tmp/nanotrace-top.XXXXXX)
SOCK=nttop$$
PROGRAM_PID=""
cleanup() {
  tmux -L "$SOCK" kill-server 2>/dev/null
  # stdin closed: the program exits and removes its segment (killed, it would leave it).
  exec 3>&- 2>/dev/null
  if [ -n "$PROGRAM_PID" ]; then
    for _ in $(seq 50); do kill -0 "$PROGRAM_PID" 2>/dev/null || break; sleep 0.1; done
    kill "$PROGRAM_PID" 2>/dev/null
  fi
  wait 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

screen() { tmux -L "$SOCK" capture-pane -p -t top 2>/dev/null; }
# wait_for REGEX [SECONDS]: until the screen shows a line matching REGEX.
wait_for() {
  local deadline=$((SECONDS + ${2:-10}))
  while [ $SECONDS -lt $deadline ]; do
    screen | grep -Eq -- "$1" && return 0
    sleep 0.1
  done
  fail "the screen never showed /$1/"
}
# until CONDITION... [-- MESSAGE]: until the command succeeds, for at most 10 s (a key's
# effect shows at the next redraw, late on a loaded machine).
until_true() {
  local deadline=$((SECONDS + 10))
  while [ $SECONDS -lt $deadline ]; do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}
# The age of the waiter with key 424242, in microseconds.
waiter_age_us() {
  screen | awk '/ 424242 / { v = $1; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
    m = (u == "s") ? 1e6 : (u == "ms") ? 1e3 : (u == "us") ? 1 : 1e-3; printf "%d\n", v * m; exit }'
}
send() { tmux -L "$SOCK" send-keys -t top "$@"; }

mkfifo "$T/in"
# 256 KiB rings: the 3000 operations (about 220 KB) fit whatever the load, the flood does not.
NANOTRACE_BUFFER=256K "$BIN/waiter_program" <"$T/in" >"$T/out" &
PROGRAM_PID=$!
exec 3>"$T/in"
for _ in $(seq 100); do grep -q ready "$T/out" && break; sleep 0.05; done
grep -q ready "$T/out" || fail "waiter_program did not start"
PID=$(awk '/^pid/ {print $2}' "$T/out")
ran() { [ "$(grep -c done "$T/out")" -ge "$1" ]; }

# Bad input: one line on stderr and a non-zero exit, before any screen.
one_line_error() {
  local out
  out=$("$@" 2>&1 >/dev/null </dev/null) && fail "accepted: $*"
  [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "not one line: $*: $out"
  printf '%s\n' "$out"
}
one_line_error "$NT" top --once 999999999 | grep -q 999999999 || fail "the bad pid is not named"
one_line_error "$NT" top --json >/dev/null
one_line_error "$NT" top "$PID" >/dev/null  # no terminal: says to use --once
one_line_error "$NT" top "$PID" --once --pair io:submit,io:nope,req | grep -q io:nope ||
  fail "the unknown event is not named"

tmux -L "$SOCK" new-session -d -s top -x 180 -y 48 \
  "$NT top $PID --interval 0.2; echo \"top exit \$?\"; sleep 60"

# 1. The waiter, its key, thread and fields; then its age grows.
wait_for ' 424242 +io:submit +req=424242 len=4096 path=/data/stuck'
screen | grep ' 424242 ' | grep -q 'stuck-worker' || fail "the waiter's thread is not shown"
age1=$(waiter_age_us)
sleep 0.6
age2=$(waiter_age_us)
[ -n "$age1" ] && [ -n "$age2" ] && [ "$age2" -gt "$age1" ] ||
  fail "the waiter's age did not grow ($age1 us, then $age2 us)"

# 2. Rates and latency: 3000 operations (about half a second) span several frames.
echo "ops 3000" >&3
wait_for '^io:submit +[1-9][0-9.]*k? +[0-9]+ +1$' 10
wait_for '^io:submit -> io:complete by req .*\| +3000 ' 10
for _ in $(seq 100); do ran 1 && break; sleep 0.05; done

# 3. Losses: 100000 records (1.6 MB) wrap the 256 KiB ring several times within one frame.
echo "flood 100000" >&3
wait_for "^ +$PID +waiter_program +[0-9]+ +[0-9.kMG]+ +0 +[1-9][0-9]* " 10

# 4. Keys. Paused: the screen stops changing (the waiter's age with it).
send p
wait_for '\[paused\]'
frozen=$(screen)
sleep 0.5
[ "$(screen)" = "$frozen" ] || fail "the screen changed while paused"
send p
paused() { screen | grep -q '\[paused\]'; }
until_true eval '! paused' || fail "p did not resume"
[ "$(waiter_age_us)" -gt "$age2" ] || fail "the age did not grow after resuming"
# Events, all idle now: the busiest since start first (noise:tick), then by name after s.
events() { screen | awk '/^EVENT/ {on = 1; next} on && NF >= 4 {print $1}' | tr '\n' ' '; }
case "$(events)" in
  "noise:tick io:"*) ;;
  *) fail "events not sorted by rate, then records: $(events)" ;;
esac
send s
until_true eval '[ "$(events)" = "io:complete io:submit noise:tick " ]' ||
  fail "events not sorted by name: $(events)"
send w
wait_for '^IN FLIGHT'
until_true eval '! screen | grep -q "^PAIR"' || fail "w still shows the pair rules"
send q
wait_for '^top exit 0$' 5
echo "top in tmux: waiter, age, rates, latency, misses and keys as expected"
exit 0
