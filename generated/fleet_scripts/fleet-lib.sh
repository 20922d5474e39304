# shellcheck shell=bash
# fleet-lib.sh: how the fleet scripts reach the nodes and the API; sourced by launch.sh, verify.sh and
# watchdog.sh after fleet.env (the profile's values). A static file of spark-compile: the same for every
# profile and fleet size.
#
# Environment (all optional):
#   SPARK_SSH_OPTS    extra ssh options, split on blanks (e.g. "-i /path/key -o UserKnownHostsFile=/path")
#   SPARK_API_HOST    the API's host (default: where the engine binds, from fleet.env)
#   SPARK_API_PORT    the API's port
#   SPARK_HEALTH_POLL seconds between two /health polls while waiting (default 5)
#   SPARK_API_KEY     the API's key, if it has one (the watchdog's chat probe sends it; /health needs none)
#   SPARK_ON_HEAD     1 when running on the head (the watchdog sets it): a loopback API is called directly

lib_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=fleet.env
source "$lib_here/fleet.env"

api_host=${SPARK_API_HOST:-$api_host_default}
api_port=${SPARK_API_PORT:-$api_port_default}
health_poll=${SPARK_HEALTH_POLL:-5}

ssh_base=(-o BatchMode=yes -o ConnectTimeout=10 -o ServerAliveInterval=15 -o ServerAliveCountMax=4)
ssh_extra=()
read -r -a ssh_extra <<<"${SPARK_SSH_OPTS:-}"

# The fleet scripts' one writer, reader of numbers and quoter of names (the compiler's rules, on the node side).

# shown VALUE: VALUE as one shell word (control characters escaped), for a log or a message.
shown() {
    printf '%q' "$1"
}

# The longest wait an option of the scripts may ask for: a week, the compiler's MAX_SECONDS (spec/checks.py).
# shellcheck disable=SC2034  # read by launch.sh and verify.sh, which source this file
max_seconds=604800

# bounded VALUE MAX: 0 when VALUE is a decimal number (ASCII digits only) no greater than MAX.
bounded() {
    [[ $1 =~ ^[0-9]{1,18}$ ]] && ((10#$1 <= $2))
}

# one_line VALUE: 0 when VALUE holds no control character (a newline in a path would forge a line of a
# key=value file or of a log).
one_line() {
    local LC_ALL=C
    [[ $1 != *[[:cntrl:]]* ]]
}

# replace_file FILE: stdin becomes FILE, through a temporary in FILE's folder renamed over it; only a regular
# file (or none) is replaced, never written through: a symlink, a FIFO or a device node there is refused.
replace_file() {
    local target=$1 tmp
    if [ -L "$target" ] || { [ -e "$target" ] && [ ! -f "$target" ]; }; then
        echo "refusing to write $(shown "$target"): it is not a regular file (a symlink, a device, a folder)" >&2
        cat >/dev/null
        return 1
    fi
    tmp=$(mktemp -- "$(dirname -- "$target")/.$(basename -- "$target").XXXXXX") || { cat >/dev/null; return 1; }
    if ! cat >"$tmp" || ! mv -fT -- "$tmp" "$target"; then
        rm -f -- "$tmp"
        return 1
    fi
}

# env_count NAME VALUE MAX: returns when VALUE (a variable the operator set) is a number from 1 to MAX; else
# the script stops with exit 64 and says so (a word there would reach sleep, a URL or bash arithmetic).
env_count() {
    if ! bounded "$2" "$3" || ((10#$2 < 1)); then
        echo "$1=$(shown "$2"): expected a whole number from 1 to $3" >&2
        exit 64
    fi
}

if ! one_line "$api_host"; then
    echo "SPARK_API_HOST=$(shown "$api_host"): expected a host name or address on one line" >&2
    exit 64
fi
env_count SPARK_API_PORT "$api_port" 65535
env_count SPARK_HEALTH_POLL "$health_poll" 3600
api_port=$((10#$api_port)) health_poll=$((10#$health_poll))
api="http://$api_host:$api_port"

label() {
    printf 'rank %s (%s)' "$1" "${rank_nodes[$1]}"
}

# Single-quote for the remote login shell: safe in sh, dash and bash alike, newlines included.
sq() {
    printf "'%s'" "${1//\'/\'\\\'\'}"
}

# Runs on the node: ssh users other than root need passwordless sudo for systemctl and docker.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

# remote RANK FUNCTION [ARGS...]: run one of the node_* functions below on the rank's node over ssh.
# The function travels as its own source (declare -f), so the code that runs on the nodes is the code
# that was linted here. Exit status 255 means ssh itself failed.
remote() {
    remote_stdin "$@" </dev/null
}

# remote_stdin: the same, with this script's stdin forwarded (install sends a tar through it).
remote_stdin() {
    local rank=$1 fn=$2 script cmd arg
    shift 2
    # Every node_* function travels (they call each other), with the one constant they read.
    script="set -euo pipefail; $(declare -p image_names_py); $(declare -f as_root "${node_functions[@]}");"
    script+=" $fn \"\$@\""
    cmd="bash -c $(sq "$script") spark-fleet"
    for arg in "$@"; do
        cmd+=" $(sq "$arg")"
    done
    # shellcheck disable=SC2029  # expanded here on purpose: $cmd is already quoted for the remote shell
    ssh "${ssh_base[@]}" "${ssh_extra[@]}" "${rank_ssh[$rank]}" "$cmd"
}

# -- functions that run on the nodes ------------------------------------------------------------------

# node_unit start|stop|state UNIT: start also prints the state it left (one round trip fewer).
node_unit() {
    case $1 in
        start)
            as_root systemctl start "$2"
            systemctl is-active "$2" || true
            ;;
        stop) as_root systemctl stop "$2" ;;
        state) systemctl is-active "$2" || true ;;
    esac
}

# The image's overlay, asked without arming it (SPARK_ENGRAM_DIR empty): the sitecustomize Python finds at
# start-up and the .py files of its folder (the overlay's own, unless it is site-packages), every SPARK_*
# name they mention. The first line says which file was read.
image_names_py='import importlib.util, os, re, sys
spec = importlib.util.find_spec("sitecustomize")
if spec is None or not spec.origin:
    sys.exit("no sitecustomize on the image python path")
files, top = [spec.origin], os.path.dirname(spec.origin)
if os.path.basename(top) not in ("site-packages", "dist-packages"):
    files += [os.path.join(d, n) for d, _, names in os.walk(top) for n in sorted(names) if n.endswith(".py")]
found = set()
for path in files:
    try:
        with open(path, errors="replace") as handle:
            found.update(re.findall(r"SPARK_[A-Z0-9_]+", handle.read()))
    except OSError:
        pass
print("sitecustomize " + spec.origin)
print("\n".join(sorted(found)))'

# node_overlay_check MODE IMAGE FLAGS: one line; "!" first when the image's overlay lacks a name.
node_overlay_check() {
    local mode=$1 image=$2 flags=$3 listing what name
    local -a wanted=() missing=()
    if [ "$mode" = off ]; then
        echo "overlay-ok (not checked: operations.image_check.mode is off)"
        return 0
    fi
    if [ -z "$flags" ]; then
        echo "overlay-ok (this rank sets no SPARK_* name)"
        return 0
    fi
    if [ "$mode" = cli ]; then
        what="the overlay CLI ('python3 -m spark_overlay flags')"
        listing=$(as_root docker run --rm --network none --entrypoint python3 "$image" -m spark_overlay flags 2>&1) \
            || { echo "!overlay-MISMATCH: the image has no $what: $(tail -n 1 <<<"$listing")"; return 1; }
    else
        what="its sitecustomize"
        listing=$(as_root docker run --rm --network none -e SPARK_ENGRAM_DIR= --entrypoint python3 "$image" \
            -c "$image_names_py" 2>&1) \
            || { echo "!overlay-MISMATCH: cannot read $what: $(tail -n 1 <<<"$listing")"; return 1; }
    fi
    IFS=, read -r -a wanted <<<"$flags"
    for name in "${wanted[@]}"; do
        grep -qx -- "$name" <<<"$listing" || missing+=("$name")
    done
    if ((${#missing[@]})); then
        echo "!overlay-MISMATCH: the image's overlay ($(head -n 1 <<<"$listing")) does not know ${missing[*]}:" \
            "it would run stock SGLang"
        return 1
    fi
    echo "overlay-ok ($(head -n 1 <<<"$listing"); knows all ${#wanted[@]} SPARK_* names of this rank)"
}

# node_rows_check KIND PATH EXPECT: one line; "!" first when the rank's Engram rows are not there.
node_rows_check() {
    local kind=$1 path=$2 expect=$3 out
    case $kind in
        local)
            if [ ! -r "$path" ]; then
                echo "!rows-MISSING: $path (make this rank's copy with engram.py copy)"
                return 1
            elif ! command -v python3 >/dev/null; then
                echo "rows-ok $path (no python3 on the node: ranges not compared)"
            elif ! out=$(python3 -c 'import json, sys
layers = json.load(open(sys.argv[1]))["layers"]
print(",".join(f"{k}:{v[0]}:{v[1]}" for k, v in sorted(layers.items(), key=lambda kv: int(kv[0]))))' "$path" 2>&1); then
                echo "!rows-MISSING: $path is not a readable Engram manifest: $(tail -n 1 <<<"$out")"
                return 1
            elif [ "$out" != "$expect" ]; then
                echo "!rows-MISMATCH: $path holds $out, the plan gives this rank $expect"
                return 1
            else
                echo "rows-ok $path ($out)"
            fi
            ;;
        shards)
            if [ ! -r "$path" ]; then
                echo "!rows-MISSING: $path (this node must hold the checkpoint)"
                return 1
            fi
            echo "rows-ok $path (rows read from the checkpoint's shards)"
            ;;
    esac
}

# node_tables_check CONFIG TABLES: the checkpoint's config.json must give the profile's Engram row counts.
node_tables_check() {
    local config=$1 tables=$2 out
    [ -n "$tables" ] || return 0
    if ! out=$(python3 -c 'import json, sys
config = json.load(open(sys.argv[1]))
config = config.get("text_config", config)
pairs = zip(config["engram_layer_ids"], config["engram_num_embeddings"], strict=True)
print(",".join(f"{layer}:{rows}" for layer, rows in sorted(pairs)))' "$config" 2>&1); then
        echo "!tables-UNREADABLE: $config: $(tail -n 1 <<<"$out")"
        return 1
    fi
    if [ "$out" != "$tables" ]; then
        echo "!tables-MISMATCH: $config gives Engram rows $out, the profile says $tables (model.engram.tables)"
        return 1
    fi
    echo "tables-ok: $config gives $out"
}

# node_models_check DIRS: every model directory the rank mounts (':'-joined) holds a config.json; docker
# would otherwise mount an empty directory and the engine fail minutes later.
node_models_check() {
    local dirs=$1 dir bad=0
    local -a list=()
    [ -n "$dirs" ] || return 0
    IFS=: read -r -a list <<<"$dirs"
    for dir in "${list[@]}"; do
        if [ -r "$dir/config.json" ]; then
            echo "model-ok: $dir"
        else
            echo "!model-MISSING: $dir/config.json is not readable on this node"
            bad=1
        fi
    done
    return "$bad"
}

# node_preflight RANK IMAGE INSTALL_DIR UNIT UNIT_DIR ROWS_KIND ROWS_PATH ROWS_EXPECT FLAGS MODE IMAGE_CHECK GPU
#                CONFIG TABLES MODELS
# One line per check; a line starting with "!" is a problem. MODE start also refuses an active unit; GPU
# later leaves the free-GPU wait to after the cutover (the previous stack holds the GPUs until then).
node_preflight() {
    local image=$2 install=$3 unit=$4 unit_dir=$5 rows_kind=$6 rows_path=$7 rows_expect=$8 flags=$9
    local mode=${10} image_check=${11} gpu=${12} config=${13} tables=${14} models=${15} bad=0 active=0 out
    if [ ! -x "$install/preflight.sh" ] || [ ! -f "$unit_dir/$unit" ]; then
        echo "!install-MISSING: $install/preflight.sh or $unit_dir/$unit is not there (run: launch.sh install)"
        return 1
    fi
    if systemctl is-active --quiet "$unit"; then
        active=1
        if [ "$mode" = start ]; then
            echo "!ALREADY-RUNNING: $unit is active (launch.sh stop first, or launch.sh restart)"
            bad=1
        fi
    fi
    if as_root docker image inspect "$image" >/dev/null 2>&1; then
        echo "image-ok $image"
        node_overlay_check "$image_check" "$image" "$flags" || bad=1
    else
        echo "!image-MISSING $image (docker pull it on this node)"
        bad=1
    fi
    node_rows_check "$rows_kind" "$rows_path" "$rows_expect" || bad=1
    node_tables_check "$config" "$tables" || bad=1
    node_models_check "$models" || bad=1
    if out=$(as_root "$install/preflight.sh" gid 2>&1); then
        echo "gid-ok: RoCE v2 GID index $(tail -n 1 <<<"$out")"
    else
        echo "!$(tail -n 1 <<<"$out")"
        bad=1
    fi
    if ((active)); then
        echo "gpu: held by the running $unit (not checked)"
    elif [ "$gpu" = later ]; then
        echo "gpu: checked after the previous stack is stopped"
    elif out=$(as_root "$install/preflight.sh" gpu-free 2>&1); then
        echo "gpu-free"
    else
        echo "!$(tail -n 1 <<<"$out")"
        bad=1
    fi
    return "$bad"
}

# node_gpu_free INSTALL_DIR: wait until no process holds the GPU (preflight.sh's tries); its last line.
node_gpu_free() {
    local out
    if out=$(as_root "$1/preflight.sh" gpu-free 2>&1); then
        echo "gpu-free"
    else
        echo "!$(tail -n 1 <<<"$out")"
        return 1
    fi
}

# node_free_gib: the "available" column of free -g.
node_free_gib() {
    free -g | awk '$1 == "Mem:" { print $7 }'
}

# node_http_code URL TIMEOUT: the HTTP status of URL fetched on this node (a loopback API), 000 if none.
node_http_code() {
    curl -sS -m "$2" -o /dev/null -w '%{http_code}' "$1" 2>/dev/null || true
}

# node_lock set|clear|get|show LOCK STATE [GENERATION]: the watchdog's lock; present = the watchdog may act.
node_lock() {
    local lock=$2 state=$3 armed
    case $1 in
        set)
            mkdir -p "$(dirname "$lock")"
            printf '%s\n' "$4" >"$lock.tmp"
            mv -f "$lock.tmp" "$lock"
            ;;
        clear)
            [ -e "$lock" ] || return 0
            armed=$(sed -n 's/^armed=//p' "$state" 2>/dev/null || true)
            if grep -qx "generation=$(cat "$lock")" "$state" 2>/dev/null && [ "$armed" = 1 ]; then
                echo "armed"
            else
                echo "enabled, not yet armed"
            fi
            rm -f "$lock"
            ;;
        get) cat "$lock" 2>/dev/null || true ;;
        show)
            if [ ! -e "$lock" ]; then
                echo "not enabled (launch.sh start enables it)"
            elif grep -qx "generation=$(cat "$lock")" "$state" 2>/dev/null; then
                echo "enabled; $(grep -E '^(armed|failures|relaunches|gave_up)=' "$state" | tr '\n' ' ')"
            else
                echo "enabled, no check since launch.sh start"
            fi
            ;;
    esac
}

# arm_watchdog: enable rank 0's watchdog under a new lock generation, the one place a generation is made
# (`launch.sh arm`, `launch.sh start --rearm` and a window's restore): the controller's clock and PID, so
# the watchdog sees a new enabling and starts its count again, and a relaunch under the old one gives up.
arm_watchdog() {
    remote 0 node_lock set "$watchdog_lock" "$watchdog_state" "$(date +%s)-$$"
}

# node_bootlog UNIT PATTERN: the lines of the unit's current run that match PATTERN (extended regex).
node_bootlog() {
    local id
    id=$(systemctl show -p InvocationID --value "$1" 2>/dev/null || true)
    if [ -n "$id" ]; then
        as_root journalctl --no-pager -o cat -u "$1" "_SYSTEMD_INVOCATION_ID=$id" | grep -E -- "$2" || true
    else
        as_root journalctl --no-pager -o cat -b -u "$1" | grep -E -- "$2" || true
    fi
}

# node_postmortem UNIT CONTAINER LINES: what a postmortem keeps of a node, captured before teardown.
node_postmortem() {
    local unit=$1 container=$2 lines=$3
    echo "== $(hostname) $(date -Is)"
    echo "== systemctl status $unit"
    timeout 30 systemctl status --no-pager -n 0 "$unit" 2>&1 || true
    echo "== journalctl -u $unit (last $lines lines)"
    as_root timeout 120 journalctl --no-pager -u "$unit" -n "$lines" 2>&1 || true
    echo "== docker ps -a"
    as_root timeout 30 docker ps -a --filter "name=^${container}\$" 2>&1 || true
    echo "== nvidia-smi"
    timeout 30 nvidia-smi 2>&1 || true
    echo "== free -g"
    free -g 2>&1 || true
    echo "== dmesg (last 300 lines)"
    as_root timeout 30 dmesg -T 2>&1 | tail -n 300 || true
}

# node_audit_section NAME STATUS FILE: one section of an audit capture, "NAME STATUS BYTES" then the bytes
# (audit.py reads it: the bytes are data, whatever they hold).
node_audit_section() {
    printf '%s %s %s\n' "$1" "$2" "$(wc -c <"$3")"
    cat "$3"
    printf '\n'
}

# node_audit_run NAME COMMAND...: COMMAND's output as section NAME (its stderr instead when it fails).
node_audit_run() {
    local name=$1 out err status=0
    shift
    out=$(mktemp)
    err=$(mktemp)
    "$@" >"$out" 2>"$err" || status=$?
    ((status == 0)) || cat "$err" >>"$out"
    node_audit_section "$name" "$status" "$out"
    rm -f "$out" "$err"
}

# node_audit_redacted NAMES VALUES COMMAND...: COMMAND's output with every JSON string "NAME=value" whose
# NAME matches the ERE NAMES (any case) cut to "NAME=(redacted)", and every match of VALUES to (redacted):
# a secret never leaves the node in a capture.
node_audit_redacted() {
    local names=$1 values=${2//\//\\/}
    shift 2
    "$@" | sed -E -e 's/"([A-Za-z0-9_]*('"$names"')[A-Za-z0-9_]*)=([^"\\]|\\.)*"/"\1=(redacted)"/gI' \
        -e "s/$values/(redacted)/g"
}

# node_audit CONTAINER IMAGE UNIT UNIT_DIR INSTALL_DIR NAMES VALUES [TIMER LOCK]: what the audit compares,
# read on the node: the container's and the image's docker inspect (secrets redacted, see above), the
# unit's state, the sha256 of the installed unit and env files, and on the head the watchdog's timer and
# lock. Always exits 0 (each status is recorded).
node_audit() {
    local container=$1 image=$2 unit=$3 unit_dir=$4 install=$5 names=$6 values=$7 timer=${8:-} lock=${9:-} id
    # docker's Go template for the image id (split in two: this static file holds no template braces).
    local image_field='{''{.Image}}'
    node_audit_run container node_audit_redacted "$names" "$values" as_root docker inspect --type container \
        "$container"
    node_audit_run image node_audit_redacted "$names" "$values" as_root docker image inspect "$image"
    if id=$(as_root docker inspect --type container --format "$image_field" "$container" 2>/dev/null); then
        node_audit_run container_image node_audit_redacted "$names" "$values" as_root docker image inspect "$id"
    fi
    node_audit_run unit_state systemctl is-active "$unit"
    node_audit_run sha256 as_root sha256sum "$unit_dir/$unit" "$install"/*.env
    if [ -n "$timer" ]; then
        node_audit_run watchdog_timer systemctl is-active "$timer"
        node_audit_run watchdog_lock cat "$lock"
    fi
    return 0
}

# node_install DEST UNIT_DIR [UNIT...]: unpack the tar on stdin into DEST, install the units, reload.
node_install() {
    local dest=$1 unit_dir=$2 tmp name
    shift 2
    tmp=$(mktemp -d)
    tar -xf - -C "$tmp"
    as_root install -d -m 0755 "$dest"
    as_root cp -R "$tmp/." "$dest/"
    for name in "$@"; do
        as_root install -m 0644 "$tmp/$name" "$unit_dir/$name"
    done
    rm -rf "$tmp"
    as_root systemctl daemon-reload
}

# node_enable UNIT: enable and start a unit (the watchdog's timer).
node_enable() {
    as_root systemctl enable --now "$1"
}

# The functions remote sends along, found once.
mapfile -t node_functions < <(compgen -A function node_)

# -- the head's API -------------------------------------------------------------------------------------

# api_here: 0 when this machine can call the API itself; a loopback API is only reachable on the head.
api_here() {
    ((!api_via_head)) || [ "${SPARK_ON_HEAD:-0}" = 1 ]
}

# health_code TIMEOUT: the HTTP status of /health, 000 when nothing answered in time.
health_code() {
    if api_here; then
        curl -sS -m "$1" -o /dev/null -w '%{http_code}' "$api/health" 2>/dev/null || true
    else
        remote 0 node_http_code "$api/health" "$1" 2>/dev/null || true
    fi
}

# head_exited: 0 when the head's unit is no longer running (failed or inactive); unreachable is not exited.
head_exited() {
    local state
    state=$(remote 0 node_unit state "$unit" 2>/dev/null) || return 1
    [ "$state" = failed ] || [ "$state" = inactive ]
}

# wait_health TIMEOUT: poll /health until it answers 200, at most TIMEOUT seconds.
# 0 healthy; 1 not healthy in time; 3 the head's unit exited while waiting.
wait_health() {
    local timeout=$1 start=$SECONDS code
    while :; do
        code=$(health_code 10)
        if [ "$code" = 200 ]; then
            echo "health OK after $((SECONDS - start)) s: $api/health$(api_here || echo ' (on the head)')"
            return 0
        fi
        if head_exited; then
            echo "the head exited after $((SECONDS - start)) s: $unit is not running on $(label 0)"
            return 3
        fi
        if ((SECONDS - start >= timeout)); then
            echo "not healthy after $timeout s: $api/health answered ${code:-nothing}"
            return 1
        fi
        sleep "$health_poll"
    done
}
