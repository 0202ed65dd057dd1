# Sourced by ci/setup, ci/demo and ci/test: run a long step as a named stage, so that a person waiting
# sees which stage is running and that it is alive, while the step's full output goes to a log kept for
# failures.
#
#   stage NAME LOG COMMAND...
#     prints "<script>: NAME ..." and then, every STAGE_HEARTBEAT_SECONDS (default 20) while COMMAND runs,
#     "<script>:   still NAME (Ns): <its last output line>" (for a build that line is ninja's
#     "[done/total] ..."); at the end "<script>: NAME done in Ns". COMMAND's stdout and stderr go to LOG.
#     On failure it prints the last 60 lines of LOG, says where the whole log is, and returns COMMAND's
#     status. Stage lines are printed whether or not the output is a terminal: they are the only lines.
#
# Why a heartbeat rather than the step's own output: apt-get, pip and ninja print hundreds of lines (and
# LibTorch's CMake config warns about things that do not matter here), which bury the one that fails.

stage_script=${stage_script:-$(basename "$0")}

stage() {
  local name=$1 log=$2
  shift 2
  local started=$SECONDS heartbeat=${STAGE_HEARTBEAT_SECONDS:-20}
  mkdir -p "$(dirname "$log")"
  echo "$stage_script: $name ..."
  "$@" >"$log" 2>&1 &
  local worker=$!
  # Poll once a second so that a short stage ends at once; speak every `heartbeat` seconds.
  local next=$((SECONDS + heartbeat))
  while kill -0 "$worker" 2>/dev/null; do
    sleep 1
    if ((SECONDS >= next)) && kill -0 "$worker" 2>/dev/null; then
      local last
      last=$(tail -n 1 "$log" 2>/dev/null | tr -d '\r' | cut -c1-110)
      echo "$stage_script:   still $name ($((SECONDS - started)) s)${last:+: $last}"
      next=$((SECONDS + heartbeat))
    fi
  done
  local status=0
  wait "$worker" || status=$?
  if ((status != 0)); then
    echo "$stage_script: $name FAILED after $((SECONDS - started)) s (exit $status); the last lines of $log:" >&2
    tail -n 60 "$log" >&2
    echo "$stage_script: the whole log: $log" >&2
    return "$status"
  fi
  echo "$stage_script: $name done in $((SECONDS - started)) s"
}
