#!/usr/bin/env bash
# launch.sh: start, stop and inspect the fleet described by fleet.env (beside this file) over ssh.
# A static file of spark-compile: the profile's values are all in fleet.env.
#
#   launch.sh --help           this text
#   launch.sh --dry-run        print what start does, rank by rank, without contacting any node (also:
#                              launch.sh start --dry-run); writes nothing
#   launch.sh preflight        check every node: ssh, image, its overlay's SPARK_* names, Engram rows,
#                              RoCE GID, free GPU
#   launch.sh start [--no-wait] [--health-timeout S]
#                              preflight everywhere; then stop the previous stack (operations.previous_stack)
#                              and wait for free GPUs; then the ranks, workers first and the head last,
#                              each until its unit is active; then wait for /health, run the smoke checks
#                              and, only when they pass, enable the watchdog (--no-wait: neither).
#                              Any preflight problem: nothing is stopped or started.
#   launch.sh arm              the smoke checks, then, when every one passes, enable the watchdog
#                              (start --rearm, as a window's restore runs it, re-enables it without them)
#   launch.sh stop             disarm the watchdog, then stop the ranks (the head first)
#   launch.sh restart          stop, then start
#   launch.sh rollback         disarm the watchdog, stop this release's ranks, restore the previous stack
#   launch.sh status           each rank's unit, the head's /health, the watchdog
#   launch.sh install          copy each rank's folder to its node, the unit to the unit folder, and this
#                              folder plus the watchdog units to the head
#   launch.sh postmortem [DIR] save every rank's journal, containers, GPU state and dmesg under DIR, and
#                              its audit capture (rankN-NODE.audit: spark-compile audit --inspect DIR reads it)
#   launch.sh audit [--format text|json] [--save DIR]
#                              does the fleet run exactly the plan? Every node's container (image, argv, env,
#                              mounts, devices, caps, ulimits, restart policy), unit state, installed unit and
#                              env files, and the watchdog, compared with audit.json key by key: one line per
#                              difference with its profile key, or "fleet matches PROFILE RELEASE". --save
#                              keeps the captures in DIR. Exit 0 match, 1 drift, 2 a node unreachable or
#                              not running (named), 64 usage.
#   launch.sh window CANDIDATE [--verdict-dir DIR] [--dry-run] | window --restore
#                              the release window: production down, the candidate's gate on its test port,
#                              production restored on every exit path, a verdict written (see window.sh)
#
# preflight, start, stop, restart, rollback and arm each write their own log, launch-COMMAND-DATE-PID.log, in
# the profile's log folder when this machine can write it (else in ~/.local/state/spark-compile/PROFILE);
# SPARK_LAUNCH_LOG_DIR overrides it.
#
# Exit status (start): 0 done; 1 preflight or launch failed; 2 started but
# /health never answered in time; 3 the head exited while booting; 4 the watchdog was disarmed while it
# was relaunching (an operator's stop wins); 5 healthy, but the smoke checks failed (or the watchdog could
# not be enabled): the watchdog is not enabled; 64 usage.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=fleet-lib.sh
source "$here/fleet-lib.sh"

# Set by the watchdog to the lock's generation: its own stop and start leave the lock alone, and a start
# gives up as soon as the lock no longer holds that generation.
relaunch_generation=${SPARK_WATCHDOG_RELAUNCH:-}
postmortem_lines=$((log_keep * 4))

# help: this file's header.
help() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
}

# usage [WHAT]: a usage error (64) on stderr, naming what was refused; the whole header without one.
usage() {
    if (($#)); then
        echo "launch.sh: $* (launch.sh --help lists every command and its options)" >&2
    else
        help >&2
    fi
    exit 64
}

# start_options ARGS...: start's options into the caller's wait, smoke and timeout; a usage error names any
# other word. Run before the run log starts, so a refused option writes nothing.
start_options() {
    while (($#)); do
        case $1 in
            --no-wait) wait=0 ;;
            --rearm) smoke=0 ;;
            --health-timeout)
                bounded "${2:-}" "$max_seconds" ||
                    usage "--health-timeout needs seconds (a whole number, at most $max_seconds)"
                timeout=$((10#$2))
                shift
                ;;
            *) usage "start: unknown option $(shown "$1")" ;;
        esac
        shift
    done
}

# start_run_log COMMAND: from here on, everything printed also goes to this run's own log.
run_log_pid=""
run_log_file=""
start_run_log() {
    local dir=${SPARK_LAUNCH_LOG_DIR:-$log_dir} file
    if ! mkdir -p "$dir" 2>/dev/null || [ ! -w "$dir" ]; then
        dir="${XDG_STATE_HOME:-$HOME/.local/state}/spark-compile/$profile"
        mkdir -p "$dir"
    fi
    file="$dir/launch-$1-$(date +%Y%m%d-%H%M%S)-$$.log"
    run_log_file=$file
    exec 3>&1 4>&2
    exec > >(tee -a "$file") 2>&1
    run_log_pid=$!
    trap end_run_log EXIT
    echo "launch.sh $1 ($profile${release:+ $release}); log: $file"
}

# end_run_log: let tee write the last lines before the script's status is seen.
end_run_log() {
    exec 1>&3 2>&4
    wait "$run_log_pid" 2>/dev/null || true
}

# A watchdog relaunch goes on only while its lock still holds its generation.
still_wanted() {
    local current
    [ -z "$relaunch_generation" ] && return 0
    current=$(remote 0 node_lock get "$watchdog_lock" "$watchdog_state") || current=""
    [ "$current" = "$relaunch_generation" ]
}

# has_previous: 0 when the profile names a previous stack.
has_previous() {
    [ -n "$prev_unit" ] || ((${#prev_stop[@]}))
}

# run_on_all COMMAND ARGS...: COMMAND ARGS RANK for every rank at once; per-rank lines in rank order
# ("!" lines become ABORT lines); 0 when every rank passed.
run_on_all() {
    local tmp rank status failed=0 line
    local -a pids=()
    tmp=$(mktemp -d)
    for rank in "${ranks[@]}"; do
        "$@" "$rank" >"$tmp/$rank" 2>&1 &
        pids[rank]=$!
    done
    for rank in "${ranks[@]}"; do
        status=0
        wait "${pids[$rank]}" || status=$?
        if ((status == 255)); then
            echo "ABORT: rank $rank: cannot ssh to ${rank_ssh[$rank]}: $(tail -n 1 "$tmp/$rank")"
            failed=1
            continue
        fi
        while IFS= read -r line; do
            if [[ $line == '!'* ]]; then
                echo "ABORT: rank $rank: ${line#!}"
            else
                echo "$(label "$rank"): $line"
            fi
        done <"$tmp/$rank"
        ((status == 0)) || failed=1
    done
    rm -rf "$tmp"
    return "$failed"
}

# stop_previous: the cutover; 1 if the previous stack did not stop.
stop_previous() {
    local rank status=0
    if [ -n "$prev_unit" ]; then
        for rank in "${stop_order[@]}"; do
            echo "$(label "$rank"): cutover: systemctl stop $prev_unit"
            remote "$rank" node_unit stop "$prev_unit" || status=1
        done
    else
        echo "cutover: $(printf '%q ' "${prev_stop[@]}")"
        "${prev_stop[@]}" || status=1
    fi
    ((status == 0)) || echo "ABORT: the previous stack did not stop (launch.sh rollback restores it)"
    return "$status"
}

# restore_previous: bring the previous stack back; 1 if it did not come back.
restore_previous() {
    local rank state status=0
    if [ -n "$prev_unit" ]; then
        for rank in "${start_order[@]}"; do
            echo "$(label "$rank"): rollback: systemctl start $prev_unit"
            state=$(remote "$rank" node_unit start "$prev_unit") || state="not started"
            echo "$(label "$rank"): $prev_unit $state"
            [ "$state" = active ] || status=1
        done
    else
        echo "rollback: $(printf '%q ' "${prev_relaunch[@]}")"
        "${prev_relaunch[@]}" || status=1
    fi
    return "$status"
}

# preflight_rank MODE GPU RANK: node_preflight of one rank.
preflight_rank() {
    local mode=$1 gpu=$2 rank=$3
    remote "$rank" node_preflight "$rank" "$image" "$install_dir" "$unit" "$unit_dir" \
        "${rank_rows_kind[$rank]}" "${rank_rows_path[$rank]}" "${rank_rows_expect[$rank]}" \
        "${rank_flags[$rank]}" "$mode" "$image_check" "$gpu" "${rank_config[$rank]}" "$engram_tables" \
        "${rank_models[$rank]}"
}

# gpu_rank RANK: wait for the rank's GPU to be free.
gpu_rank() {
    remote "$1" node_gpu_free "$install_dir"
}

# run_preflight MODE: every node at once; 0 when every node passed. At start with a previous stack, the
# free-GPU wait comes after the cutover.
run_preflight() {
    local gpu=now
    if [ "$1" = start ] && has_previous; then gpu=later; fi
    run_on_all preflight_rank "$1" "$gpu"
}

# stop_ranks RANK...: stop the unit on each, in the order given; 1 if any stop failed.
stop_ranks() {
    local rank status=0
    for rank in "$@"; do
        echo "$(label "$rank"): systemctl stop $unit"
        if ! remote "$rank" node_unit stop "$unit"; then
            echo "WARNING: rank $rank: stopping $unit failed"
            status=1
        fi
    done
    return "$status"
}

# start_rank RANK: systemctl start, then wait until the unit is active (at most unit_active_timeout s).
start_rank() {
    local rank=$1 state start=$SECONDS
    state=$(remote "$rank" node_unit start "$unit") || return 1
    while [ "$state" != active ] && ((SECONDS - start < unit_active_timeout)); do
        [ "$state" = failed ] && break
        sleep 1
        state=$(remote "$rank" node_unit state "$unit") || state="unreachable"
    done
    [ "$state" = active ] && return 0
    echo "ABORT: rank $rank: $unit is ${state:-unknown}, not active, after systemctl start"
    return 1
}

cmd_preflight() {
    if run_preflight check; then
        echo "preflight OK on all $world nodes"
    else
        echo "preflight FAILED"
        return 1
    fi
}

cmd_start() {
    local wait=1 smoke=1 timeout=$health_timeout rank status
    local -a started=()
    start_options "$@"
    if ! still_wanted; then
        echo "ABORT: the watchdog was disarmed (launch.sh stop) during its relaunch: not starting"
        return 4
    fi
    echo "preflight on all $world nodes"
    if ! run_preflight start; then
        echo "ABORT preflight (nothing was stopped or started)"
        return 1
    fi
    if has_previous; then
        stop_previous || return 1
        echo "waiting for free GPUs on all $world nodes"
        if ! run_on_all gpu_rank; then
            echo "ABORT: a GPU is still held after the cutover (launch.sh rollback restores the previous stack)"
            return 1
        fi
    fi
    for rank in "${start_order[@]}"; do
        if ! still_wanted; then
            echo "ABORT: the watchdog was disarmed during its relaunch: stopping ranks ${started[*]:-none}"
            stop_ranks "${started[@]}" || true
            return 4
        fi
        echo "$(label "$rank"): systemctl start $unit (${rank_roles[$rank]})"
        if ! start_rank "$rank"; then
            echo "ABORT: rank $rank launch FAILED: stopping it and the ranks already started (${started[*]:-none})"
            stop_ranks "$rank" "${started[@]}" || true
            return 1
        fi
        started=("$rank" "${started[@]}")
        echo "$(label "$rank"): $unit active"
    done
    echo "all $world ranks started (order ${start_order[*]})"
    if ((wait)); then
        status=0
        wait_health "$timeout" || status=$?
        if ((status == 3)); then
            echo "ABORT: the head exited while booting (launch.sh postmortem; launch.sh rollback)"
            return 3
        elif ((status)); then
            echo "ABORT: the head never became healthy; the ranks are left running for inspection" \
                "(launch.sh status, launch.sh postmortem)"
            return 2
        fi
    fi
    # A release window's candidate (SPARK_WINDOW=1) runs without a watchdog: the window restores production.
    # A watchdog relaunch keeps the lock it holds.
    if [ -z "$relaunch_generation" ] && ((watchdog_enabled)) && [ "${SPARK_WINDOW:-0}" != 1 ]; then
        if ((!wait)); then
            echo "watchdog NOT enabled (--no-wait): run launch.sh arm once the head is healthy"
            return 0
        fi
        if ((smoke)); then
            cmd_arm || return 5
        else  # the window puts back what ran before it, its watchdog included
            arm_watchdog || return 5
            echo "watchdog enabled again on $(label 0): it arms after its first fully passing check"
        fi
    fi
}

# cmd_arm: the smoke checks (answers checked, as the deployment's runbook does before arming), then, only
# when every one passed, the watchdog. Arming a fleet that answers wrongly would keep relaunching it.
cmd_arm() {
    if ((!watchdog_enabled)); then
        echo "this profile has no watchdog (operations.watchdog): nothing to arm"
        return 0
    fi
    echo "smoke checks before enabling the watchdog (smoke.py):"
    if ! python3 "$here/smoke.py"; then
        echo "ABORT: the smoke checks FAILED: the watchdog is NOT enabled (launch.sh arm once they pass)"
        return 5
    fi
    if arm_watchdog; then
        echo "smoke checks passed: watchdog enabled on $(label 0): it arms after its first fully passing check"
    else
        echo "WARNING: could not enable the watchdog on $(label 0)"
        return 5
    fi
}

# disarm_watchdog: remove the watchdog's lock so it does not relaunch what is being stopped.
disarm_watchdog() {
    local was
    [ -z "$relaunch_generation" ] && ((watchdog_enabled)) || return 0
    if was=$(remote 0 node_lock clear "$watchdog_lock" "$watchdog_state"); then
        if [ -n "$was" ]; then
            echo "watchdog on $(label 0) was $was: disarmed, so it will not relaunch what you stop" \
                "(launch.sh start enables it again)"
        fi
    else
        echo "WARNING: could not reach $(label 0) to disarm the watchdog"
        return 1
    fi
}

cmd_rollback() {
    local status=0
    if ! has_previous; then
        echo "rollback: the profile names no previous stack (operations.previous_stack)" >&2
        return 64
    fi
    disarm_watchdog || status=1
    stop_ranks "${stop_order[@]}" || status=1
    echo "waiting for free GPUs on all $world nodes"
    run_on_all gpu_rank || echo "WARNING: a GPU is still held; restoring anyway"
    if restore_previous; then
        echo "rollback done: the previous stack is back"
    else
        echo "rollback FAILED: the previous stack did not come back everywhere"
        status=1
    fi
    return "$status"
}

cmd_stop() {
    local status=0
    disarm_watchdog || status=1
    stop_ranks "${stop_order[@]}" || status=1
    ((status == 0)) && echo "all $world ranks stopped (order ${stop_order[*]})"
    return "$status"
}

cmd_status() {
    local rank state code lock
    for rank in "${ranks[@]}"; do
        state=$(remote "$rank" node_unit state "$unit" 2>&1) || state="unreachable: $state"
        echo "$(label "$rank") ${rank_roles[$rank]}: $unit $state"
    done
    code=$(health_code 10)
    echo "head API $api/health$(api_here || echo ' (on the head)'): ${code/#000/no answer}"
    if ((watchdog_enabled)); then
        lock=$(remote 0 node_lock show "$watchdog_lock" "$watchdog_state" 2>&1) || lock="unknown: $lock"
        echo "watchdog ($watchdog_timer on $(label 0)): $lock"
    fi
}

cmd_install() {
    local rank src
    for rank in "${ranks[@]}"; do
        src="$here/../${rank_dirs[$rank]}"
        if [ ! -d "$src" ]; then
            echo "ABORT: rank $rank: $src is missing: run launch.sh in a folder fleet_scripts/install.py made" >&2
            return 1
        fi
        echo "$(label "$rank"): ${rank_dirs[$rank]}/ -> $install_dir, $unit -> $unit_dir"
        tar -C "$src" -cf - . | remote_stdin "$rank" node_install "$install_dir" "$unit_dir" "$unit"
    done
    echo "$(label 0): fleet/ -> $fleet_install_dir"
    if ((watchdog_enabled)); then
        tar -C "$here" -cf - . | remote_stdin 0 node_install "$fleet_install_dir" "$unit_dir" \
            "$watchdog_service" "$watchdog_timer"
        remote 0 node_enable "$watchdog_timer"
        echo "$(label 0): $watchdog_timer enabled (the watchdog acts only after launch.sh start)"
    else
        tar -C "$here" -cf - . | remote_stdin 0 node_install "$fleet_install_dir" "$unit_dir"
    fi
}

# audit_value NAME VALUE: a capture section written here (the rank and node a capture belongs to).
audit_value() {
    local LC_ALL=C
    printf '%s 0 %s\n%s\n' "$1" "${#2}" "$2"
}

# audit_rank RANK DIR: the rank's capture, DIR/rankN-NODE.audit; a node ssh cannot reach (255), or whose
# capture failed, gets an "unreachable" section with that status and the last words on stderr.
audit_rank() {
    local rank=$1 file="$2/rank$1-${rank_nodes[$1]}.audit" err out status=0
    local -a watchdog=()
    if ((rank == 0 && watchdog_enabled)); then watchdog=("$watchdog_timer" "$watchdog_lock"); fi
    err=$(mktemp) out=$(mktemp)
    remote "$rank" node_audit "$container" "$image" "$unit" "$unit_dir" "$install_dir" "$audit_secret_names" \
        "$audit_secret_values" "${watchdog[@]}" >"$out" 2>"$err" || status=$?
    if ((status)); then node_audit_section unreachable "$status" "$err" >"$out"; fi
    { printf 'spark-audit 1\n'; audit_value rank "$rank"; audit_value node "${rank_nodes[$rank]}"; cat "$out"; } |
        replace_file "$file" || true
    rm -f "$err" "$out"
}

# audit_capture DIR: every rank's capture, all at once.
audit_capture() {
    local rank pid
    local -a pids=()
    for rank in "${ranks[@]}"; do
        audit_rank "$rank" "$1" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || true; done
}

cmd_audit() {
    local fmt=text save="" dir status=0
    while (($#)); do
        (($# >= 2)) || usage
        case $1 in
            --format) fmt=$2 ;;
            --save) save=$2; [ -n "$save" ] || usage ;;
            *) usage "audit: unknown option $(shown "$1")" ;;
        esac
        shift 2
    done
    [[ $fmt == text || $fmt == json ]] || usage "audit: --format is text or json, not $(shown "$fmt")"
    if [ -n "$save" ]; then
        mkdir -p "$save"
        dir=$save
    else
        dir=$(mktemp -d)
    fi
    audit_capture "$dir"
    python3 "$here/audit.py" --plan "$here/audit.json" --format "$fmt" "$dir" || status=$?
    [ -n "$save" ] || rm -rf "$dir"
    return "$status"
}

cmd_postmortem() {
    local dir=${1:-$postmortem_dir/$(date +%Y%m%d-%H%M%S)} rank
    local -a pids=()
    mkdir -p "$dir"
    for rank in "${ranks[@]}"; do
        { remote "$rank" node_postmortem "$unit" "${rank_container[$rank]}" "$postmortem_lines" 2>&1 |
            replace_file "$dir/rank$rank-${rank_nodes[$rank]}.log"; } &
        pids+=($!)
    done
    wait "${pids[@]}" || true
    audit_capture "$dir"
    echo "postmortem of all $world ranks: $dir"
}

# Every command line is checked before anything runs or any log is written.
case ${1:-} in
    -h | --help | help) help; exit 0 ;;
    start)
        if [ "${2:-}" = --dry-run ] && (($# == 2)); then set -- --dry-run; else (start_options "${@:2}"); fi
        ;;
    restart) (start_options "${@:2}") ;;
    --dry-run | dry-run | preflight | stop | rollback | arm | status | install)
        (($# == 1)) || usage "$1 takes no option or argument, not $(shown "$2")"
        ;;
    postmortem) (($# <= 2)) && [[ ${2:-} != -* ]] || usage "postmortem takes at most a folder, not $(shown "${*:2}")" ;;
    window | audit) ;;  # their own parsers run before they touch anything
    "") usage ;;
    *) usage "unknown command $(shown "$1")" ;;
esac
case ${1:-} in
    preflight | start | stop | restart | rollback | arm) start_run_log "$1" ;;
esac
case ${1:-} in
    --dry-run | dry-run)
        # shellcheck source=dry-run.sh
        source "$here/dry-run.sh"
        dry_run
        ;;
    preflight) cmd_preflight ;;
    start) shift; cmd_start "$@" ;;
    stop) cmd_stop ;;
    restart) shift; cmd_stop || true; cmd_start "$@" ;;
    rollback) cmd_rollback ;;
    arm) cmd_arm ;;
    status)
        cmd_status
        # shellcheck source=window.sh
        source "$here/window.sh"
        window_note
        ;;
    window)
        shift
        # shellcheck source=window.sh
        source "$here/window.sh"
        cmd_window "$@"
        ;;
    install) cmd_install ;;
    postmortem) shift; cmd_postmortem "$@" ;;
    audit) shift; cmd_audit "$@" ;;
esac
