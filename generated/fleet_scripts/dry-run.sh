# shellcheck shell=bash
# dry-run.sh: `launch.sh --dry-run`, what start would do rank by rank, printed from fleet.env alone; no node
# is contacted. Sourced by launch.sh (after fleet-lib.sh). A static file of spark-compile.

if [ -z "${lib_here:-}" ]; then
    # shellcheck source=fleet-lib.sh
    source "$(dirname "${BASH_SOURCE[0]}")/fleet-lib.sh"
fi

# dry_words WORD...: the words quoted for bash, one option (with its values) per line.
dry_words() {
    local word line="" count=0
    for word in "$@"; do
        if [ -n "$line" ] && { [[ $word == -?* ]] || ((count > 1)); }; then
            printf '%s \\\n' "$line"
            line="      " count=0
        fi
        line+="${line:+ }$(printf '%q' "$word")"
        count=$((count + 1))
    done
    printf '%s\n' "$line"
}

dry_run() {
    local rank line
    echo "DRY RUN of 'launch.sh start' for $profile${release:+ ($release)}: no node is contacted."
    echo "Remote commands run as: ssh ${ssh_base[*]} ${ssh_extra[*]} TARGET bash -c '...'"
    echo
    echo "1. Preflight on every node at once; any problem aborts before anything is stopped or started:"
    echo "   ssh reachable; docker image inspect $image; the image's overlay must know every SPARK_* name"
    echo "   the rank sets (check: $image_check); Engram rows present; the checkpoint's config.json gives the"
    echo "   profile's row counts (${engram_tables:-no Engram}); preflight.sh gid (RoCE v2 GID);"
    echo "   preflight.sh gpu-free ($gpu_wait_tries tries, $gpu_wait_seconds s apart); $unit not already active."
    for rank in "${ranks[@]}"; do
        printf '   rank %s (%s, %s): %s SPARK_* names; ' "$rank" "${rank_nodes[$rank]}" "${rank_ssh[$rank]}" \
            "$(tr ',' '\n' <<<"${rank_flags[$rank]}" | grep -c . || true)"
        if [ -n "${rank_rows_kind[$rank]}" ]; then
            echo "rows ${rank_rows_expect[$rank]} from ${rank_rows_path[$rank]}"
        else
            echo "no Engram rows"
        fi
    done
    echo
    if [ -n "$prev_unit" ]; then
        echo "2. Cutover: systemctl stop $prev_unit on every node (ranks ${stop_order[*]}), then wait for free GPUs."
    elif ((${#prev_stop[@]})); then
        echo "2. Cutover: run $(printf '%q ' "${prev_stop[@]}")here, then wait for free GPUs on every node."
    else
        echo "2. Cutover: no previous stack (operations.previous_stack is not set)."
    fi
    echo
    echo "3. Start, workers first (ranks ${start_order[*]}), each until its unit is active:"
    for rank in "${start_order[@]}"; do
        local -n exec_lines="rank${rank}_exec" docker_argv="rank${rank}_docker" env_lines="rank${rank}_env"
        echo
        echo "== rank $rank: ${rank_nodes[$rank]} (${rank_roles[$rank]}), ssh ${rank_ssh[$rank]}"
        echo "   systemctl start $unit   (RoCE v2 GID index: ${rank_gid[$rank]}), whose unit runs:"
        for line in "${exec_lines[@]}"; do
            echo "     $line"
        done
        echo "   where docker-run.sh runs:"
        printf '       '
        dry_words "${docker_argv[@]}"
        echo "     with this environment (from the env files):"
        for line in "${env_lines[@]}"; do
            echo "       $line"
        done
        echo "   then wait until $unit is active on ${rank_nodes[$rank]} (at most $unit_active_timeout s)"
        unset -n exec_lines docker_argv env_lines
    done
    echo
    local where=""
    ((api_via_head)) && where=" on the head, over ssh"
    echo "4. Wait for $api/health$where (at most $health_timeout s)."
    if [ "${SPARK_WINDOW:-0}" = 1 ]; then
        echo "5. No smoke checks and no watchdog: a release window's candidate (SPARK_WINDOW=1); the window runs"
        echo "   its gate next."
    elif ((watchdog_enabled)); then
        echo "5. The smoke checks: python3 $lib_here/smoke.py against $api$where; any failure stops here"
        echo "   (exit 5) with the watchdog NOT enabled (launch.sh arm once they pass)."
        echo "6. Only when every smoke check passed: enable the watchdog on ${rank_nodes[0]} (lock $watchdog_lock):"
        echo "   $watchdog_timer checks every $watchdog_interval s and arms after its first fully passing check."
    else
        echo "5. No smoke checks and no watchdog: operations.watchdog is off (launch.sh arm would say so)."
    fi
}
