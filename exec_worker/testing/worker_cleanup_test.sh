#!/bin/sh
# A worker that never answers is stopped at ATTNCHECK_WORKER_TIMEOUT: attncheck must kill its whole
# process group (the worker and the child it started) and remove the worker's temporary folder; the fuzzer
# reports it as its own verdict (answers-in-time) and does not shrink it.
# Usage: worker_cleanup_test.sh ATTNCHECK STATE_DIR
set -u
attncheck=$1
state=$2
rm -rf "$state" && mkdir -p "$state"
here=$(cd "$(dirname "$0")" && pwd)
ATTNCHECK_WORKER_TIMEOUT=2 "$attncheck" fuzz --impl "exec:sh $here/stuck_worker.sh $state" --cases 1 \
  --shrink-seconds 1 --repro-dir "$state/repro" > "$state/stdout" 2> "$state/stderr"
status=$?
fail() { echo "FAIL: $*"; cat "$state/stdout" "$state/stderr"; exit 1; }
[ "$status" -eq 1 ] || fail "expected exit 1 (the worker failed), got $status"
grep -q "no answer within 2 s" "$state/stdout" "$state/stderr" || fail "no timeout message"
# Its own verdict (property answers-in-time), not a mismatch, and not shrunk (every candidate could time out).
grep -q "answers-in-time" "$state/stdout" || fail "the timeout is not reported as answers-in-time"
grep -q "shrunk in [1-9]" "$state/stdout" && fail "a timeout was shrunk"
# A process is gone when /proc has no entry for it, or only a zombie's (state Z) awaiting its reaper.
alive() { [ -r "/proc/$1/stat" ] && ! awk '{ exit ($3 == "Z") ? 0 : 1 }' "/proc/$1/stat"; }
for name in worker_pid child_pid; do
  [ -s "$state/$name" ] || fail "the worker did not record $name"
  pid=$(cat "$state/$name")
  if alive "$pid"; then kill -9 "$pid"; fail "$name $pid still running after attncheck exited"; fi
done
case_file=$(awk '{ print $2 }' "$state/run_line")
folder=$(dirname "$case_file")
case "$folder" in /tmp/attncheck-worker-*) ;; *) fail "unexpected case path '$case_file'" ;; esac
[ ! -e "$folder" ] || fail "the worker's folder $folder was left behind"
echo "PASS: worker and child killed, $folder removed"
