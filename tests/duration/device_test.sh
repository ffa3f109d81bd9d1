#!/bin/bash
# Duration triggers against real block devices, with iograph reading them through io_uring
# (O_DIRECT 4 KiB reads, one after the other):
#
#   1. Slow: a loop device throttled by the block cgroup (v1 blkio.throttle.read_iops_device,
#      v2 io.max where the v2 hierarchy has the io controller) to 4 reads a second. The slow
#      trigger `> 150ms` stays armed on the unthrottled device (reads of microseconds, and a
#      threshold above what a loaded machine's scheduling adds), and fires on the throttled
#      one, on an end record whose pair took ~250 ms; `status` names the pair.
#   2. Stuck: while iograph reads a device (paced by the cgroup), new I/O is held: with
#      `dmsetup suspend` of a device-mapper target over the loop device, or, on a kernel built
#      without device-mapper, with a read limit of 1 byte/s (blk-throttle holds the bios the
#      same way until the limit is lifted). The stuck trigger `open > 200ms` freezes the rings
#      while the read is still blocked and names its begin record. Then the device is resumed:
#      every read completes, none is lost, and the pairing counted no loss.
#
# Usage: device_test.sh BIN_DIR   (root; losetup; dmsetup where the kernel has device-mapper)
set -u
BIN=$1
NT=$BIN/nanotrace
IOGRAPH=$BIN/iograph
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (loop devices, the block cgroup)"
command -v losetup >/dev/null || skip "losetup is not installed"
[ -e /dev/loop-control ] || skip "no /dev/loop-control"

T=$(mktemp -d /tmp/nanotrace-duration.XXXXXX)
LOOP=""; DM=""; CG=""; CG_KIND=""; PIDS=""
cleanup() {
  for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  [ -n "$DM" ] && { dmsetup resume --noudevsync "$DM" 2>/dev/null;
                    dmsetup remove --noudevsync "$DM" 2>/dev/null; }
  [ -n "$CG" ] && rmdir "$CG" 2>/dev/null
  [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
  rm -f /dev/shm/nanotrace-"$TAG"-* 2>/dev/null
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
}
TAG=$$
trap cleanup EXIT

truncate -s 64M "$T/disk.img" || fail "cannot create the backing file"
LOOP=$(losetup -f --show "$T/disk.img") || skip "no free loop device"
# A block cgroup: v1 blkio, or v2 with the io controller.
if [ -d /sys/fs/cgroup/blkio ] && [ -e /sys/fs/cgroup/blkio/blkio.throttle.read_iops_device ]; then
  CG=/sys/fs/cgroup/blkio/nanotrace-duration-$TAG
  CG_KIND=v1
elif grep -qw io /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  echo "+io" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
  CG=/sys/fs/cgroup/nanotrace-duration-$TAG
  CG_KIND=v2
else
  skip "no block cgroup (v1 blkio or v2 io)"
fi
mkdir "$CG" || fail "cannot create $CG"

# limit DEVICE IOPS BPS: read limits of the test's cgroup on DEVICE (0: none).
limit() {
  local mm
  mm=$(lsblk -dno MAJ:MIN "$1" | tr -d ' ')
  if [ "$CG_KIND" = v1 ]; then
    echo "$mm $2" > "$CG/blkio.throttle.read_iops_device" || return 1
    echo "$mm $3" > "$CG/blkio.throttle.read_bps_device" || return 1
  else
    local iops=$2 bps=$3
    [ "$iops" = 0 ] && iops=max
    [ "$bps" = 0 ] && bps=max
    echo "$mm riops=$iops rbps=$bps" > "$CG/io.max" || return 1
  fi
}

# run_iograph DEVICE NODES TRIGGER OUT: iograph in the cgroup, its segment kept; its pid in PID.
run_iograph() {
  "$IOGRAPH" gen --shape rope --nodes "$2" --op read --block-size 4096 -o "$T/g$2.json" \
    2>/dev/null || fail "iograph gen"
  (echo $BASHPID > "$CG/cgroup.procs" &&
     exec env NANOTRACE_KEEP=1 NANOTRACE_TRIGGER="$3" "$IOGRAPH" run "$T/g$2.json" \
       --backend uring-ready --target "file:$1" > "$4" 2>&1) &
  PID=$!
}

# status PID: `nanotrace status` of the process's segment (live or kept).
status() { "$NT" status "/dev/shm/nanotrace-$1" 2>&1; }
# wait_status PID REGEX SECONDS: waits until status matches.
wait_status() {
  local deadline=$((SECONDS + $3))
  while [ $SECONDS -lt $deadline ]; do
    status "$1" | grep -Eq "$2" && return 0
    sleep 0.02
  done
  return 1
}
forget_segment() { [ "${VERBOSE:-0}" = 1 ] && status "$1" >&2; rm -f "/dev/shm/nanotrace-$1"; }

SLOW="iograph:node_submit..iograph:node_complete by node > 150ms"

# --- 1. Slow: unthrottled, nothing fires; throttled to 10 reads/s, the trigger fires.
limit "$LOOP" 0 0 || fail "cannot set the block cgroup's limits"
run_iograph "$LOOP" 50 "$SLOW" "$T/fast.out"
wait "$PID" || fail "iograph on the unthrottled device: $(cat "$T/fast.out")"
grep -q "ok 50, failed 0" "$T/fast.out" || fail "unthrottled run: $(tail -1 "$T/fast.out")"
S=$(status "$PID")
echo "$S" | grep -q "trigger: armed on $SLOW" || fail "unthrottled: the slow trigger fired: $S"
echo "$S" | grep -q "pairing: 50 pairs" || fail "unthrottled: not 50 pairs: $S"
forget_segment "$PID"

limit "$LOOP" 4 0 || fail "cannot throttle $LOOP"
run_iograph "$LOOP" 3 "$SLOW" "$T/slow.out"
wait "$PID" || fail "iograph on the throttled device: $(cat "$T/slow.out")"
S=$(status "$PID")
echo "$S" | grep -q "trigger: frozen on $SLOW" || fail "throttled: the slow trigger did not fire: $S"
echo "$S" | grep -q "matched iograph:node_complete record" || fail "no end record named: $S"
echo "$S" | grep -Eq "slow pair: began with record #[0-9]+ of thread [0-9]+ \(iograph:node_submit .*node=[0-9]+.*\), node=[0-9]+, took [0-9.]+ ms \(> 150.00 ms\)" ||
  fail "the pair is not named: $S"
forget_segment "$PID"
echo "slow: the throttled read fired the trigger, the unthrottled ones did not"

# --- 2. Stuck: hold the device's I/O while iograph reads it.
HOLD=""
if command -v dmsetup >/dev/null && dmsetup version >/dev/null 2>&1; then
  DM=nanotrace-duration-$TAG
  dmsetup create --noudevsync "$DM" --table "0 $((64 * 2048)) linear $LOOP 0" ||
    fail "dmsetup create"
  [ -b "/dev/mapper/$DM" ] || dmsetup mknodes "$DM" >/dev/null 2>&1
  DEV=/dev/mapper/$DM
  HOLD=dm
else
  DEV=$LOOP
  HOLD=throttle
fi
echo "stuck: holding I/O with $([ $HOLD = dm ] && echo "dmsetup suspend" ||
  echo "a 1 byte/s read limit (this kernel has no device-mapper)")"
limit "$DEV" 50 0 || fail "cannot pace $DEV"
STUCK="iograph:node_submit..iograph:node_complete by node open > 200ms"
run_iograph "$DEV" 40 "$STUCK" "$T/stuck.out"
PIDS="$PID"
wait_status "$PID" "pairing: ([5-9]|[1-9][0-9]+) pairs" 20 || fail "iograph did not start: $(status "$PID")"
if [ $HOLD = dm ]; then
  dmsetup suspend --noudevsync "$DM" || fail "dmsetup suspend"
else
  limit "$DEV" 50 1 || fail "cannot hold $DEV"
fi
wait_status "$PID" "trigger: frozen" 20 || fail "the stuck trigger did not fire: $(status "$PID")"
S=$(status "$PID")
kill -0 "$PID" 2>/dev/null || fail "iograph ended before the device resumed"
grep -q "# elapsed" "$T/stuck.out" && fail "iograph finished while held: $(cat "$T/stuck.out")"
echo "$S" | grep -Eq "stuck: record #[0-9]+ of thread [0-9]+ \(iograph:node_submit .*node=([0-9]+).*\), node=[0-9]+, open [0-9.]+ ms when it fired \(> 200.00 ms\)" ||
  fail "the open read is not named: $S"
NODE=$(echo "$S" | sed -nE 's/.*stuck: record .*, node=([0-9]+), open.*/\1/p')
# The named read is the one in flight: its completion is not in the frozen rings.
"$NT" dump "/dev/shm/nanotrace-$PID" > "$T/stuck.dump" 2>&1 || fail "dump: $(tail -3 "$T/stuck.dump")"
grep -q "iograph:node_submit .*node=$NODE " "$T/stuck.dump" || fail "no begin record of node $NODE"
grep -q "iograph:node_complete .*node=$NODE " "$T/stuck.dump" &&
  fail "node $NODE completed before the freeze"
# Resume: every read completes, none lost.
if [ $HOLD = dm ]; then
  dmsetup resume --noudevsync "$DM" || fail "dmsetup resume"
else
  limit "$DEV" 0 0 || fail "cannot lift the hold"
fi
wait "$PID" || fail "iograph after the resume: $(cat "$T/stuck.out")"
PIDS=""
grep -q "ok 40, failed 0, skipped 0" "$T/stuck.out" || fail "reads lost: $(tail -1 "$T/stuck.out")"
S=$(status "$PID")
echo "$S" | grep -q "0 ends without a begin, 0 begins replaced by one of the same key, 0 evicted" ||
  fail "the pairing lost records: $S"
echo "$S" | grep -q ", 0 records the pairing could not place in time" || fail "unseen records: $S"
forget_segment "$PID"
echo "stuck: the held read was named while blocked; all 40 reads completed after the resume"
echo "PASS"
