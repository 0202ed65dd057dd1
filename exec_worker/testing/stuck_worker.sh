#!/bin/sh
# A worker that greets, then on its first case starts a child and never answers: what
# fuzz.worker_timeout_cleans_up gives attncheck to stop. $1: a folder where it notes the "run" line it
# received and the process ids of itself and its child, for the test to check afterwards.
state=$1
echo "attncheck-worker 1"
read -r line
echo "$line" > "$state/run_line"
sleep 600 &
echo $! > "$state/child_pid"
echo $$ > "$state/worker_pid"
wait
