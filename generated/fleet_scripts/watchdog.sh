#!/usr/bin/env bash
# watchdog.sh: the head's watchdog of the fleet in fleet.env: probes the API, relaunches the whole fleet.
# A static file of spark-compile: intervals, thresholds and paths come from fleet.env (see README.md).
#
#   watchdog.sh check   one check (the watchdog timer runs it every interval; state in the state file)
#   watchdog.sh loop    a check every interval, in the foreground, for use without the timer
#
# A check: /health must answer 200 and a 3-token chat ("Reply with the word OK.", thinking off) must come
# back with "choices" within the probe timeout. A chat timeout while /health answers is "busy": only a busy
# spell longer than the busy grace counts as a failure. The watchdog acts only while its lock exists
# (launch.sh start writes it, launch.sh stop and rollback remove it), and arms only after the first fully
# passing check, so a boot is never torn down. A head whose unit has exited is relaunched at the next
# check; otherwise after fail_threshold consecutive failures. A relaunch: a postmortem of every rank, then
# launch.sh stop and launch.sh start (exit 1 launch failed, 2 not healthy in time, 3 the head exited).
# After relaunch_limit relaunches it logs GIVING UP and waits for an operator; a healthy spell of
# reset_after seconds since the last relaunch forgets the relaunches. With operations.watchdog.audit, a
# relaunch that came back healthy is followed by launch.sh audit: each difference from the plan is logged
# as an audit FINDING (the fleet is left running). Log: the watchdog log (and stdout).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=fleet-lib.sh
source "$here/fleet-lib.sh"
# The watchdog runs on the head: a loopback API is called directly, and so do the launches it runs.
export SPARK_ON_HEAD=1
interval=$watchdog_interval

log() {
    local line
    line="$(date '+%F %T') watchdog[$$]: $*"
    printf '%s\n' "$line"
    printf '%s\n' "$line" >>"$watchdog_log"
}

trim_log() {
    local lines
    [ -f "$watchdog_log" ] || return 0
    lines=$(wc -l <"$watchdog_log")
    if ((lines > log_trim_at)); then
        tail -n "$log_keep" "$watchdog_log" >"$watchdog_log.tmp"
        mv -f "$watchdog_log.tmp" "$watchdog_log"
        log "log trimmed from $lines to $log_keep lines"
    fi
}

# run_logged CMD...: run CMD with its output in the log, line by line; its exit status.
run_logged() {
    local line status
    set +e
    "$@" 2>&1 | while IFS= read -r line; do log "  $line"; done
    status=${PIPESTATUS[0]}
    set -e
    return "$status"
}

# -- state: survives between timer runs; integers only are read back (never sourced) --------------------
generation="" armed=0 failures=0 busy_since=0 relaunches=0 gave_up=0 healthy_since=0

load_state() {
    local key value
    generation="" armed=0 failures=0 busy_since=0 relaunches=0 gave_up=0 healthy_since=0
    [ -r "$watchdog_state" ] || return 0
    while IFS='=' read -r key value; do
        case $key in
            generation) generation=$value ;;
            armed | failures | busy_since | relaunches | gave_up | healthy_since)
                if [[ $value =~ ^[0-9]+$ ]]; then printf -v "$key" '%s' "$value"; fi
                ;;
        esac
    done <"$watchdog_state"
}

save_state() {
    printf '%s\n' "generation=$generation" "armed=$armed" "failures=$failures" "busy_since=$busy_since" \
        "relaunches=$relaunches" "gave_up=$gave_up" "healthy_since=$healthy_since" >"$watchdog_state.tmp"
    mv -f "$watchdog_state.tmp" "$watchdog_state"
}

current_lock() {
    cat "$watchdog_lock" 2>/dev/null || true
}

# -- the probe -----------------------------------------------------------------------------------------
probe_result="" probe_detail=""

probe() {
    local code rc=0 body
    code=$(health_code "$health_probe_timeout")
    if [ "$code" != 200 ] && head_exited; then
        probe_result=exited
        probe_detail="the head exited: $unit is not running on $(label 0) (/health answered ${code/#000/nothing})"
        return 0
    fi
    if [ "$code" != 200 ]; then
        probe_result=fail
        probe_detail="/health answered ${code/#000/nothing} (within $health_probe_timeout s)"
        return 0
    fi
    # The API key (if the API has one) goes through curl's config on a pipe, never into argv.
    body=$(printf 'header = "Authorization: Bearer %s"\n' "${SPARK_API_KEY:-none}" |
        curl -sS -m "$probe_timeout" -K - -H 'Content-Type: application/json' -d "$probe_body" \
            "$api/v1/chat/completions" 2>&1) || rc=$?
    if ((rc == 28)); then
        probe_result=busy
        probe_detail="/health answers 200 but the chat probe timed out after $probe_timeout s"
    elif ((rc != 0)); then
        probe_result=fail
        probe_detail="chat probe failed (curl exit $rc: ${body:0:200})"
    elif [[ $body == *'"choices"'* ]]; then
        probe_result=pass
        probe_detail="/health 200, chat probe answered"
    else
        probe_result=fail
        probe_detail="chat probe came back without choices: ${body:0:200}"
    fi
}

# -- relaunch ------------------------------------------------------------------------------------------
relaunch() {
    local dir status=0
    relaunches=$((relaunches + 1))
    failures=0
    busy_since=0
    healthy_since=0
    save_state
    dir="$postmortem_dir/$(date +%Y%m%d-%H%M%S)"
    log "relaunch $relaunches/$relaunch_limit: postmortem of every rank first: $dir"
    run_logged "$here/launch.sh" postmortem "$dir" || log "postmortem incomplete (status $?)"
    if [ "$(current_lock)" != "$generation" ]; then
        log "standing down: launch.sh stop disarmed the watchdog"
        return 0
    fi
    log "relaunch $relaunches/$relaunch_limit: launch.sh stop"
    SPARK_WATCHDOG_RELAUNCH=$generation run_logged "$here/launch.sh" stop || log "stop reported problems (status $?)"
    log "relaunch $relaunches/$relaunch_limit: launch.sh start (waits up to $ready_timeout s for /health)"
    SPARK_WATCHDOG_RELAUNCH=$generation run_logged "$here/launch.sh" start --health-timeout "$ready_timeout" \
        || status=$?
    case $status in
        0)
            log "relaunch $relaunches/$relaunch_limit: the fleet is healthy again"
            if ((watchdog_audit)); then audit_relaunch; fi
            ;;
        4) log "standing down: launch.sh stop disarmed the watchdog during the relaunch" ;;
        *) log "relaunch $relaunches/$relaunch_limit FAILED (launch.sh start exit $status)" ;;
    esac
}

# audit_relaunch: does the relaunched fleet run the plan? launch.sh audit's lines go to the log.
audit_relaunch() {
    local status=0
    run_logged "$here/launch.sh" audit || status=$?
    case $status in
        0) log "audit: the relaunched fleet matches the plan" ;;
        1) log "audit FINDING: the relaunched fleet differs from the plan (the lines above; launch.sh audit)" ;;
        *) log "audit FINDING: not every node could be compared (launch.sh audit exit $status, the lines above)" ;;
    esac
}

# record_failure DETAIL [now]: count a failed check; "now" (a head that exited) relaunches at once.
record_failure() {
    healthy_since=0
    if ((!armed)); then
        log "not armed yet (no fully passing check since launch.sh start): $1"
        return 0
    fi
    failures=$((failures + 1))
    if [ "${2:-}" = now ] && ((failures < fail_threshold)); then
        failures=$fail_threshold
    fi
    log "check failed ($failures/$fail_threshold): $1"
    ((failures >= fail_threshold)) || return 0
    if ((relaunches >= relaunch_limit)); then
        gave_up=1
        log "GIVING UP: $relaunches relaunches (the limit) since launch.sh start did not keep the fleet" \
            "healthy; an operator must look (launch.sh status; postmortems in $postmortem_dir)"
        return 0
    fi
    relaunch
}

check() {
    local lock now
    mkdir -p "$(dirname "$watchdog_log")"
    exec 9>>"$watchdog_state.flock"
    if ! flock -n 9; then
        log "another check is still running: skipped"
        return 0
    fi
    trim_log
    lock=$(current_lock)
    if [ -z "$lock" ]; then
        if [ -e "$watchdog_state" ]; then
            log "standing down: no lock $watchdog_lock (launch.sh stop disarmed the watchdog)"
            rm -f "$watchdog_state"
        fi
        return 0
    fi
    load_state
    if [ "$generation" != "$lock" ]; then
        generation=$lock armed=0 failures=0 busy_since=0 relaunches=0 gave_up=0 healthy_since=0
        log "enabled by launch.sh start ($lock): arms after the first fully passing check"
        save_state
    fi
    ((gave_up)) && return 0
    probe
    now=$(date +%s)
    case $probe_result in
        pass)
            busy_since=0
            failures=0
            if ((!armed)); then
                armed=1
                log "armed: first fully passing check ($probe_detail)"
            fi
            ((healthy_since)) || healthy_since=$now
            if ((relaunches && now - healthy_since >= reset_after)); then
                log "healthy for $((now - healthy_since)) s since the last relaunch: relaunch count reset" \
                    "(was $relaunches/$relaunch_limit)"
                relaunches=0
            fi
            ;;
        exited)
            busy_since=0
            record_failure "$probe_detail" now
            ;;
        busy)
            ((busy_since)) || busy_since=$now
            if ((now - busy_since > busy_grace)); then
                record_failure "busy for $((now - busy_since)) s, longer than the $busy_grace s grace: $probe_detail"
            else
                log "busy ($((now - busy_since)) s of $busy_grace s grace): $probe_detail"
            fi
            ;;
        *)
            busy_since=0
            record_failure "$probe_detail"
            ;;
    esac
    # A launch.sh stop during this check removed the lock: leave no state that could re-arm it.
    if [ "$(current_lock)" = "$generation" ]; then save_state; fi
}

case ${1:-} in
    check) check ;;
    loop)
        log "loop: a check every $interval s"
        while :; do
            check || log "check failed to run (status $?)"
            sleep "$interval"
        done
        ;;
    *)
        echo "usage: $0 check|loop" >&2
        exit 64
        ;;
esac
