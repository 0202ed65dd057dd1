#!/bin/sh
# An exec: worker in sh whose child escapes its process group: `setsid` starts a sleeper in a new session
# (a new process group, so killing the worker's group misses it), and the worker declines every case.
# The test finds the sleeper by a marker in the environment it inherits, and knows it started by the pid it
# writes to $ATTNCHECK_TREE_PIDFILE (worker_e2e_test.py).
setsid sh -c 'if [ -n "$ATTNCHECK_TREE_PIDFILE" ]; then echo $$ > "$ATTNCHECK_TREE_PIDFILE"; fi; sleep 1000; echo unreachable' \
  < /dev/null > /dev/null 2>&1 &
echo "attncheck-worker 1 setsid"
while read -r line; do
  echo "unsupported this worker only starts a sleeper in a new session"
done
