# shellcheck shell=bash
# window.sh: the release window, sourced by launch.sh (this profile is production; CANDIDATE is the
# candidate's installed folder, as fleet_scripts/install.py makes it). The peer's window-sgl.sh as one
# command (peer-launcher-facts section 3):
#
#   launch.sh window CANDIDATE [--verdict-dir DIR]
#       disarm the watchdog; start the deadline and a `free -g` sampler on every node; stop production;
#       install and start the candidate (it serves on its test port, operations.window.port); run its gate
#       (gate.py); then, whatever happened (gate failure, deadline, Ctrl-C, kill, a dead ssh): save the
#       candidate's rank logs and stop it, restart production (launch.sh start: preflight, health, watchdog)
#       and write the verdict, DIR/PROFILE.verdict.json and .md (default ./verdicts), beside the profile
#       the operator commits.
#       The bench compares with the newest passing bench among DIR's verdicts.
#   launch.sh window CANDIDATE --dry-run [--verdict-dir DIR]
#       print every step of that window, the candidate's own start rank by rank, touching no node
#   launch.sh window --restore
#       finish a window whose process died (launch.sh status names it): the same restore and verdict.
#
# Exit status: 0 the gate passed; 1 a gate check failed; 2 aborted (the candidate did not come up, the
# deadline, a signal, a node unreachable); 3 production was NOT restored (the pointer stays; see status);
# 64 usage. A log per window (launch-window-*.log) and a pointer to the running one (window-current) sit in
# launch.sh's log folder.

if [ -z "${lib_here:-}" ]; then
    # shellcheck source=fleet-lib.sh
    source "$(dirname "${BASH_SOURCE[0]}")/fleet-lib.sh"
fi
window_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
window_dir=""      # this window's working folder: gate output, memory samples
window_candidate=""
window_verdicts=""
window_started=0
window_stage=none  # none, disarmed, stopped (production down), candidate (candidate started)
window_reason=""
window_step_pid=""
window_timer_pid=""
window_sampler_pid=""
gate_status=""

# window_say TEXT...: a window line, with the seconds since the window began.
window_say() {
    echo "window +$(($(date +%s) - window_started))s: $*"
}

# node_window_memory: "used available" GiB from free -g (GB10's host memory is its GPU's).
node_window_memory() {
    free -g | awk '$1 == "Mem:" { print $3, $7 }'
}
node_functions+=(node_window_memory)

# window_home: the folder of the run logs (as start_run_log picks it) and the window pointer.
window_home() {
    local dir=${SPARK_LAUNCH_LOG_DIR:-$log_dir}
    if ! mkdir -p "$dir" 2>/dev/null || [ ! -w "$dir" ]; then
        dir="${XDG_STATE_HOME:-$HOME/.local/state}/spark-compile/$profile"
        mkdir -p "$dir"
    fi
    printf '%s\n' "$dir"
}

window_pointer() {
    printf '%s/window-current\n' "$(window_home)"
}

# pointer_get KEY: the latest value of KEY in the window pointer (key=value lines, appended as it goes).
pointer_get() {
    sed -n "s/^$1=//p" "$(window_pointer)" 2>/dev/null | tail -n 1
}

# pointer_pid KEY: KEY's value when it is a process id a window may signal (never 0 or 1: kill -- -1 would
# signal every process); nothing otherwise (a planted or forged pointer line).
pointer_pid() {
    local pid
    pid=$(pointer_get "$1")
    if bounded "$pid" 4194304 && ((10#$pid > 1)); then printf '%s\n' "$((10#$pid))"; fi
}

# cand_json FILE KEY...: a value of one of the candidate's JSON files (fleet/fleet.json, plan.json).
cand_json() {
    python3 -c 'import json, sys
value = json.load(open(sys.argv[1]))
for key in sys.argv[2:]:
    value = value[key]
print(value)' "$window_candidate/$1" "${@:2}"
}

# window_shared: one line per thing the candidate shares with production (its name, unit, folders, watchdog
# units, lock and state): installing it would overwrite production's, the restore would start the candidate
# again, and the candidate's watchdog would act on production's lock.
window_shared() {
    local key ours theirs
    for key in profile unit install_dir fleet_install_dir watchdog_service watchdog_timer watchdog_lock \
        watchdog_state; do
        ours=${!key}
        # shellcheck disable=SC1091  # the candidate's own fleet.env, read in a subshell
        theirs=$(source "$window_candidate/fleet/fleet.env" && printf '%s' "${!key}")
        [ -z "$ours" ] || [ "$ours" != "$theirs" ] || printf '  %s %s\n' "$key" "$ours"
    done
    if [ "$window_candidate" = "$(cd "$window_here/.." && pwd)" ]; then
        printf '  folder %s (production runs from it)\n' "$window_candidate"
    fi
}

# window_refuse_shared: refuse (64) a candidate that shares anything with production, saying how to rename it.
window_refuse_shared() {
    local shared
    shared=$(window_shared)
    [ -n "$shared" ] || return 0
    echo "window: refusing candidate $window_candidate: it shares with production ($profile):" >&2
    printf '%s\n' "$shared" >&2
    echo "  compile the candidate under its own name (add 'name: $profile-window' to its profile, beside its" \
        "engine.port), install it into a folder of its own (python3 fleet_scripts/install.py" \
        "$profile-window DEST) and run launch.sh window DEST" >&2
    return 64
}

# window_step COMMAND...: run a step in its own process group, so a signal or the deadline can end it.
window_step() {
    local status=0
    setsid "$@" &
    window_step_pid=$!
    printf 'step=%s\n' "$window_step_pid" >>"$(window_pointer)"
    wait "$window_step_pid" || status=$?
    window_step_pid=""
    return "$status"
}

# window_sampler FILE INTERVAL PID: every INTERVAL s, "epoch rank used available" of every node, while the
# window's process PID lives.
window_sampler() {
    local file=$1 interval=$2 pid=$3 rank out now
    while kill -0 "$pid" 2>/dev/null; do
        now=$(date +%s)
        for rank in "${ranks[@]}"; do
            { out=$(remote "$rank" node_window_memory 2>/dev/null) || out="unreachable"
              printf '%s %s %s\n' "$now" "$rank" "$out" >>"$file"; } &
        done
        wait
        sleep "$interval"
    done
}

window_signal() {
    trap '' INT TERM HUP USR1
    case $1 in
        deadline) window_reason="the deadline of $(cand_json fleet/fleet.json window deadline_seconds) s ran out" ;;
        *) window_reason="the window was interrupted (SIG$1)" ;;
    esac
    window_say "$window_reason: restoring production"
    exit 2
}

# window_dry_run PORT DEADLINE INTERVAL VERDICTS: the whole window, step by step, touching no node.
window_dry_run() {
    local port=$1 deadline=$2 interval=$3 verdicts=$4 name baseline=""
    name=$(cand_json plan.json profile)
    if [ -d "$verdicts" ]; then
        baseline=$(python3 "$window_here/verdict.py" baseline "$verdicts")
    fi
    echo "window dry run: production $profile ($release) -> candidate $name ($(cand_json plan.json release))" \
        "on port $port; no node is contacted"
    echo "  1. disarm the watchdog on $(label 0)"
    echo "  2. deadline $deadline s (then: restore production); free -g on every node every $interval s"
    echo "  3. stop production, the head first: ranks ${stop_order[*]} ($unit)"
    echo "  4. install the candidate: $window_candidate/fleet/launch.sh install"
    echo "  5. start the candidate without a watchdog (SPARK_WINDOW=1): $window_candidate/fleet/launch.sh start," \
        "which runs:"
    SPARK_WINDOW=1 bash "$window_candidate/fleet/launch.sh" --dry-run | sed 's/^/       /'
    echo "  6. the gate: $window_candidate/fleet/gate.py${baseline:+ $baseline}" \
        "(bench baseline: ${baseline:-none yet in $verdicts})"
    echo "  7. on every exit (pass, fail, deadline, signal): save the candidate's rank logs, stop it, restart" \
        "production (launch.sh start: preflight, /health, smoke checks, watchdog), write the verdict" \
        "$verdicts/$name.verdict.json and .md"
}

cmd_window() {
    local verdicts=verdicts port api_port deadline interval dry=0
    case ${1:-} in
        --restore) window_resume; return ;;
        "") usage "window needs the candidate's installed folder (or --restore)" ;;
        -*) usage "window: $(shown "$1") before the candidate's folder (launch.sh window CANDIDATE [--verdict-dir DIR] [--dry-run])" ;;
    esac
    window_candidate=$(cd "$1" && pwd) || return 64
    shift
    while (($#)); do
        case $1 in
            --verdict-dir) [ -n "${2:-}" ] || usage "window: --verdict-dir needs a folder"; verdicts=$2; shift ;;
            --dry-run) dry=1 ;;
            *) usage "window: unknown option $(shown "$1")" ;;
        esac
        shift
    done
    if [ ! -x "$window_candidate/fleet/launch.sh" ] || [ ! -r "$window_candidate/fleet/gate.py" ]; then
        echo "window: $window_candidate is not an installed profile folder (no fleet/launch.sh, fleet/gate.py):" \
            "install the candidate first (python3 fleet_scripts/install.py CANDIDATE DEST)" >&2
        return 64
    fi
    window_refuse_shared || return
    port=$(cand_json fleet/fleet.json window port) api_port=$(cand_json fleet/fleet.json port)
    if [ "$port" != "$api_port" ]; then
        echo "window: the candidate serves on port $api_port, its window's test port is $port: compile the" \
            "candidate for the window with engine.port: $port" >&2
        return 64
    fi
    if ((dry)); then
        window_dry_run "$port" "$(cand_json fleet/fleet.json window deadline_seconds)" \
            "$(cand_json fleet/fleet.json window memory_interval_seconds)" "$verdicts"
        return 0
    fi
    if [ -e "$(window_pointer)" ]; then
        window_note
        echo "window: refusing to start another window" >&2
        return 64
    fi
    # The pointer is key=value lines: a newline in one of its paths would forge a line (step=1: kill -- -1).
    local value
    for value in "$window_candidate" "$verdicts" "$(window_home)"; do
        one_line "$value" || { echo "window: refusing $(shown "$value"): a path with a control character" >&2; return 64; }
    done
    mkdir -p "$verdicts"
    window_verdicts=$(cd "$verdicts" && pwd)
    deadline=$(cand_json fleet/fleet.json window deadline_seconds)
    interval=$(cand_json fleet/fleet.json window memory_interval_seconds)
    # The run log's tee and the nodes' ssh must outlive a Ctrl-C: they start with INT ignored.
    trap '' INT HUP
    start_run_log window
    window_dir=$(mktemp -d "$(window_home)/window-XXXXXX")
    window_started=$(date +%s)
    printf 'pid=%s\nstarted=%s\ncandidate=%s\nverdicts=%s\nlog=%s\ndir=%s\n' "$$" "$window_started" \
        "$window_candidate" "$window_verdicts" "${run_log_file:-}" "$window_dir" >"$(window_pointer)"
    trap window_exit EXIT
    trap 'window_signal INT' INT
    trap 'window_signal TERM' TERM
    trap 'window_signal HUP' HUP
    trap 'window_signal deadline' USR1
    # shellcheck disable=SC2016  # $1 and $2 expand in that bash
    setsid bash -c 'sleep "$1" && kill -USR1 "$2"' window-deadline "$deadline" "$$" &
    window_timer_pid=$!
    window_sampler "$window_dir/memory" "$interval" "$$" &
    window_sampler_pid=$!
    printf 'timer=%s\n' "$window_timer_pid" >>"$(window_pointer)"
    echo "window: candidate $(cand_json plan.json profile) ($(cand_json plan.json release)) on port $port; deadline $deadline s;" \
        "free -g every $interval s; verdict in $window_verdicts"
    window_run
}

# window_run: the window's steps; any failure ends the window (the EXIT trap restores production).
window_run() {
    local baseline=() status
    disarm_watchdog || { window_reason="the head was unreachable to disarm the watchdog"; exit 2; }
    window_stage=disarmed
    window_say "stopping production ($profile)"
    stop_ranks "${stop_order[@]}" || { window_reason="production did not stop on every node"; exit 2; }
    window_stage=stopped
    window_say "installing and starting the candidate"
    window_step bash "$window_candidate/fleet/launch.sh" install \
        || { window_reason="the candidate could not be installed"; exit 2; }
    window_stage=candidate
    status=0
    window_step env SPARK_WINDOW=1 bash "$window_candidate/fleet/launch.sh" start || status=$?
    if ((status)); then
        window_reason="the candidate did not come up (its launch.sh start exited $status)"
        exit 2
    fi
    # One option per line, each a --name=value word: a verdict file's text never becomes a word of its own.
    mapfile -t baseline < <(python3 "$window_here/verdict.py" baseline "$window_verdicts")
    window_say "gate${baseline[0]:+ (bench baseline: ${baseline[*]})}"
    status=0
    # shellcheck disable=SC2016  # $1.. expand in that bash
    window_step bash -c 'set -o pipefail; python3 "$1" "${@:3}" 2>&1 | tee "$2"' window-gate \
        "$window_candidate/fleet/gate.py" "$window_dir/gate" ${baseline[@]+"${baseline[@]}"} || status=$?
    gate_status=$status
    if ((gate_status)); then
        window_reason="$gate_status gate check(s) failed"
        exit 1
    fi
    window_reason="every gate check passed"
    exit 0
}

# window_exit: the EXIT trap. Whatever ended the window: candidate down, production up, verdict written.
window_exit() {
    local status=$? restored=1
    trap '' INT TERM HUP USR1
    if [ -n "$window_timer_pid" ]; then kill -- "-$window_timer_pid" 2>/dev/null || true; fi
    if [ -n "$window_sampler_pid" ]; then kill "$window_sampler_pid" 2>/dev/null || true; fi
    if [ -n "$window_step_pid" ] && kill -TERM -- "-$window_step_pid" 2>/dev/null; then sleep 1; fi
    [ -n "$window_reason" ] || window_reason="the window ended unexpectedly (exit $status)"
    window_restore || restored=0
    status=$(window_verdict "$restored")
    end_run_log
    exit "$status"
}

# window_restore: candidate down, production back (or only the watchdog re-armed if it never stopped).
window_restore() {
    local status=0
    window_say "restoring production ($window_reason)"
    if [ "$window_stage" = candidate ] || [ "$window_stage" = unknown ]; then
        # The candidate's rank logs, kept with the window's gate output and memory samples (as the peer's).
        bash "$window_candidate/fleet/launch.sh" postmortem "$window_dir/candidate" \
            || echo "WARNING: the candidate's rank logs were not all saved"
        SPARK_WINDOW=1 bash "$window_candidate/fleet/launch.sh" stop || echo "WARNING: the candidate did not stop"
    fi
    if [ "$window_stage" = stopped ] || [ "$window_stage" = candidate ] || [ "$window_stage" = unknown ]; then
        cmd_start --rearm || status=$?
        # 5: production is up and healthy, only its smoke checks failed: restored, the watchdog left off.
        if ((status == 5)); then
            echo "WARNING: production is back, but its smoke checks failed: the watchdog is not enabled" \
                "(launch.sh arm once they pass)"
        elif ((status)); then
            echo "window: production was NOT restored: fix the cause, then run launch.sh window --restore"
            return 1
        fi
    elif [ "$window_stage" = disarmed ] && ((watchdog_enabled)); then
        arm_watchdog || return 1
        echo "watchdog enabled again on $(label 0)"
    fi
    rm -f "$(window_pointer)"
    window_say "production restored"
}

# window_verdict RESTORED: write the verdict (its lines go to stderr); print the window's exit status.
window_verdict() {
    local restored=$1 result=ABORTED code=2
    if [ -n "$gate_status" ]; then
        result=FAIL code=1
        ((gate_status == 0)) && result=PASS code=0
    fi
    python3 "$window_here/verdict.py" write --dir "$window_verdicts" --candidate "$window_candidate" \
        --gate "$window_dir/gate" --memory "$window_dir/memory" --nodes "${rank_nodes[*]}" \
        --started "$window_started" --stopped "$(date +%s)" --result "$result" --reason "$window_reason" \
        --restored "$restored" --log "${run_log_file:-}" --files "$window_dir" >&2 || echo "WARNING: the verdict could not be written" >&2
    ((restored)) || code=3
    echo "$code"
}

# window_resume: finish a window whose process died: restore and write its verdict (as aborted).
window_resume() {
    local pid
    if [ ! -e "$(window_pointer)" ]; then
        echo "window: no window to restore ($(window_pointer) is absent)"
        return 0
    fi
    pid=$(pointer_pid pid)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        echo "window: the window (pid $pid) is still running: stop it with kill $pid (it restores production)" >&2
        return 64
    fi
    window_candidate=$(pointer_get candidate) window_verdicts=$(pointer_get verdicts)
    window_started=$(pointer_get started) window_dir=$(pointer_get dir)
    trap '' INT HUP
    start_run_log window-restore
    # What the dead window left running: its deadline timer and its last step (each its own process group).
    window_timer_pid=$(pointer_pid timer) window_step_pid=$(pointer_pid step)
    window_stage=unknown
    window_reason="the window process (pid $pid) died before restoring production; restored by launch.sh window --restore"
    trap window_exit EXIT
    exit 2
}

# window_note: for launch.sh status, what a window pointer says (nothing without one).
window_note() {
    local pid
    [ -e "$(window_pointer)" ] || return 0
    pid=$(pointer_get pid)
    if kill -0 "$pid" 2>/dev/null; then
        echo "release window RUNNING: pid $pid since $(date -d "@$(pointer_get started)" '+%F %T'), candidate" \
            "$(pointer_get candidate), log $(pointer_get log)"
    else
        echo "release window HALF-FINISHED: its process (pid $pid, log $(pointer_get log)) is gone and production" \
            "may still be down: run launch.sh window --restore"
    fi
}
