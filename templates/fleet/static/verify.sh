#!/usr/bin/env bash
# verify.sh: prove the booted fleet of fleet.env runs with its overlay, fabric and memory as planned, from
# each rank's boot log (the current run of its unit, read over ssh) and `free -g` on every node.
# A static file of spark-compile: what is expected comes from fleet.env.
#
#   verify.sh [--timeout S] [--calibrate FILE]
#       wait for /health on the head (default: the profile's health timeout), then check; with --calibrate,
#       also write each rank's measured memory to FILE as the profile's pins (model.weights_per_rank,
#       draft_weights_per_rank, pre_load_available_per_rank, cuda_graph_per_rank), for the next compile to
#       predict this fleet from; the pre-load pin ("Load weight begin. avail mem=") keeps the prediction
#       moving with mem_fraction_static as SGLang's does, so available_per_rank is left out
#
# Expected (each only where the plan implies it):
#   every rank  "overlay: N hooks armed" (or "N import hooks armed") with exactly the plan's N;
#               "engram layer L: rank r/W owns rows [lo, hi) of N" with the plan's lo, hi and N;
#               "Engram <source> layer=L ... gather_us_per_call=U" with U at most the profile's maximum
#               (about 1,000 at idle; the 1.2 stall was far above it);
#               "MXFP8 dense GEMMs routed" (SPARK_MXFP8_BACKEND not stock);
#               "RoCE collectives on: world=W";
#               `free -g`: at least operations.verify.min_free_gib GiB available
#   the head    "DSV4 memory calculation ... full_token=T" with T inside operations.verify.kv_tokens;
#               "Served-model aliases" naming every alias (when the profile has aliases);
#               "The server is fired up"
# Every rank's memory is printed as MEASURED against the compile's prediction (never a failure): the
# target's and the draft's weights ("Load weight end ... mem usage="), the KV budget, bytes_per_full_token
# and full_token ("DSV4 memory calculation"), and CUDA graph memory ("Capture ... end ... mem usage=").
# Each check prints PASS or FAIL with what it found; the exit status is the number of failures (at most 125).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=fleet-lib.sh
source "$here/fleet-lib.sh"

pattern='overlay: [0-9]+ (import )?hooks armed|DSV4 memory calculation|RoCE collectives on|engram layer [0-9]+: rank'
pattern+='|Engram [a-z]+ layer=[0-9]+.*gather_us_per_call|MXFP8 dense GEMMs routed|Served-model aliases'
pattern+='|The server is fired up|Load weight begin|Load weight end|Capture .* end\. '

failures=0
checks=0
pass() {
    checks=$((checks + 1))
    echo "PASS $*"
}
fail() {
    checks=$((checks + 1))
    failures=$((failures + 1))
    echo "FAIL $*"
}

timeout=$health_timeout
calibrate=""
while (($#)); do
    case $1 in
        --timeout)
            if ! bounded "${2:-}" "$max_seconds" || ((10#$2 < 1)); then
                echo "verify.sh: --timeout needs seconds (a whole number from 1 to $max_seconds)" >&2
                exit 64
            fi
            timeout=$((10#$2))
            shift
            ;;
        --calibrate) calibrate=${2:?--calibrate needs a file}; shift ;;
        *) echo "usage: $0 [--timeout S] [--calibrate FILE]" >&2; exit 64 ;;
    esac
    shift
done
declare -a measured_weights=() measured_draft=() measured_pre_load=() measured_graphs=()

# found PATTERN LOG: the last line of LOG matching PATTERN, or "nothing".
found() {
    local line
    line=$(grep -E -- "$1" <<<"$2" | tail -n 1 || true)
    echo "${line:-nothing}"
}

check_hooks() {
    local who=$1 log=$2 want=$3 hooks
    ((want > 0)) || return 0
    hooks=$(grep -Eo 'overlay: [0-9]+ (import )?hooks armed' <<<"$log" | tail -n 1 | grep -Eo '[0-9]+' || true)
    if [ "$hooks" = "$want" ]; then
        pass "$who: overlay: $hooks hooks armed"
    else
        fail "$who: expected 'overlay: $want hooks armed', found: $(found 'overlay: ' "$log")"
    fi
}

check_engram() {
    local rank=$1 who=$2 log=$3 entry line layer us
    for entry in "${expected_engram[@]}"; do
        [ "${entry%%|*}" = "$rank" ] || continue
        line=${entry#*|}
        layer=${line#engram layer }
        layer=${layer%%:*}
        if grep -qF -- "$line" <<<"$log"; then
            pass "$who: $line"
        else
            fail "$who: expected '$line', found: $(found "engram layer $layer: " "$log")"
        fi
    done
    for entry in "${expected_gather[@]}"; do
        [ "${entry%%|*}" = "$rank" ] || continue
        layer=${entry#*|}
        us=$(grep -E "Engram [a-z]+ layer=$layer\b" <<<"$log" | tail -n 1 |
            sed -nE 's/.*gather_us_per_call[=: ]+([0-9]+(\.[0-9]+)?).*/\1/p' || true)
        if [ -z "$us" ]; then
            fail "$who: expected 'Engram ... layer=$layer ... gather_us_per_call=U', found: nothing"
        elif awk -v u="$us" -v m="$gather_us_max" 'BEGIN { exit !(u <= m) }'; then
            pass "$who: Engram layer $layer gather $us us per call (at most $gather_us_max)"
        else
            fail "$who: Engram layer $layer gather $us us per call, above $gather_us_max (the Engram stall?)"
        fi
    done
}

# expect_line WHO LOG TEXT: a fixed line (prefix) must be in the log.
expect_line() {
    if grep -qF -- "$3" <<<"$2"; then
        pass "$1: $(grep -F -- "$3" <<<"$2" | tail -n 1)"
    else
        fail "$1: expected '$3', found: $(found "${3%% *}" "$2")"
    fi
}

check_head() {
    local who=$1 log=$2 kv alias line
    if ((expect_kv)); then
        kv=$(grep -Eo 'DSV4 memory calculation.*full_token=[0-9]+' <<<"$log" | tail -n 1 || true)
        kv=${kv##*full_token=}
        if [ -z "$kv" ]; then
            fail "$who: expected 'DSV4 memory calculation ... full_token=', found: $(found 'DSV4 memory' "$log")"
        elif ((kv >= kv_min && kv <= kv_max)); then
            pass "$who: KV pool $kv tokens (full_token=$kv, expected $kv_min-$kv_max)"
        else
            fail "$who: KV pool full_token=$kv is outside $kv_min-$kv_max"
        fi
    fi
    if [ -n "$expect_aliases" ]; then
        line=$(grep -F 'Served-model aliases' <<<"$log" | tail -n 1 || true)
        local -a missing=()
        IFS=, read -r -a aliases <<<"$expect_aliases"
        for alias in "${aliases[@]}"; do
            grep -qw -- "$alias" <<<"$line" || missing+=("$alias")
        done
        if [ -z "$line" ]; then
            fail "$who: expected 'Served-model aliases ...', found: nothing"
        elif ((${#missing[@]})); then
            fail "$who: the aliases line lacks ${missing[*]}: $line"
        else
            pass "$who: $line"
        fi
    fi
    expect_line "$who" "$log" "The server is fired up"
}

# number PATTERN TEXT: the first number sed captures with PATTERN in TEXT (empty when none).
number() {
    sed -nE "s/$1/\1/p" <<<"$2" | head -n 1
}

# total: the sum of the numbers on stdin, two decimals (empty when there are none).
total() {
    awk '{ s += $1; n++ } END { if (n) printf "%.2f", s }'
}

# versus MEASURED PREDICTED: "M (predicted P, +D%)", saying which side is missing.
versus() {
    if [ -z "$1" ]; then
        echo "not in the boot log (predicted ${2:-nothing})"
    elif [ -z "$2" ]; then
        echo "$1 (no prediction)"
    else
        awk -v m="$1" -v p="$2" 'BEGIN { d = p ? (m - p) / p * 100 : 0; printf "%s (predicted %s, %+.1f%%)", m, p, d }'
    fi
}

report_memory() {
    local rank=$1 who=$2 log=$3 loads line weights draft graphs available bpft full pre_load
    loads=$(grep -F 'Load weight end' <<<"$log" || true)
    weights=$(number '.*mem usage=([0-9.]+) GB.*' "$(head -n 1 <<<"$loads")")
    draft=$(tail -n +2 <<<"$loads" | sed -nE 's/.*mem usage=([0-9.]+) GB.*/\1/p' | total)
    # grep finds nothing in a log without a CUDA-graph line: under pipefail that must not end verify.sh.
    graphs=$({ grep -E 'Capture .* end\. ' <<<"$log" || true; } | sed -nE 's/.*mem usage=([0-9.]+) GB.*/\1/p' | total)
    pre_load=$(number '.*Load weight begin\. avail mem=([0-9.]+) GB.*' "$({ grep -F 'Load weight begin' <<<"$log" || true; } | head -n 1)")
    line=$(grep -F 'DSV4 memory calculation' <<<"$log" | tail -n 1 || true)
    available=$(number '.*available_bytes=([0-9.]+) GB.*' "$line")
    bpft=$(number '.*bytes_per_full_token=([0-9.]+).*' "$line")
    full=$(number '.*full_token=([0-9]+).*' "$line")
    echo "MEASURED $who: weights $(versus "$weights" "${predicted_weights[$rank]:-}") GiB;" \
        "draft $(versus "$draft" "${predicted_draft[$rank]:-}") GiB;" \
        "available_bytes $(versus "$available" "${predicted_available[$rank]:-}") GiB;" \
        "bytes_per_full_token $(versus "$bpft" "${predicted_bpft[$rank]:-}");" \
        "full_token $(versus "$full" "${predicted_full_token[$rank]:-}"); CUDA graphs ${graphs:-not in the boot log} GiB"
    measured_weights[rank]=$weights
    measured_draft[rank]=${weights:+${draft:-0}}
    measured_pre_load[rank]=$pre_load
    measured_graphs[rank]=$graphs
}

# pin_line KEY VALUES...: "  KEY: [v0, v1, ...]" when every rank has a value, else a comment saying which lacks it.
pin_line() {
    local key=$1 rank
    shift
    local -a values=("$@")
    for rank in "${ranks[@]}"; do
        if [ -z "${values[rank]:-}" ]; then
            echo "  # $key: not in the boot log of $(label "$rank")"
            return 0
        fi
    done
    local IFS=,
    local joined="${values[*]}"
    echo "  $key: [${joined//,/, }]"
}

write_calibration() {
    {
        echo "# Measured by verify.sh on the booted fleet of $profile: fold these pins into the profile's model"
        echo "# section, so that the next compile predicts this fleet's memory from them (GiB, in rank order)."
        echo "model:"
        pin_line weights_per_rank "${measured_weights[@]}"
        pin_line draft_weights_per_rank "${measured_draft[@]}"
        pin_line pre_load_available_per_rank "${measured_pre_load[@]}"
        pin_line cuda_graph_per_rank "${measured_graphs[@]}"
    } | replace_file "$calibrate" || return 1
    echo "calibration written to $(shown "$calibrate")"
}

check_rank() {
    local rank=$1 log=$2 who
    who=$(label "$rank")
    check_hooks "$who" "$log" "${rank_hooks[$rank]}"
    check_engram "$rank" "$who" "$log"
    ((expect_mxfp8)) && expect_line "$who" "$log" "MXFP8 dense GEMMs routed"
    ((expect_roce)) && expect_line "$who" "$log" "RoCE collectives on: world=$world"
    ((rank == 0)) && check_head "$who" "$log"
    report_memory "$rank" "$who" "$log"
    return 0
}

check_free() {
    local rank=$1 gib
    if ! gib=$(remote "$rank" node_free_gib) || ! [[ $gib =~ ^[0-9]+$ ]]; then
        fail "$(label "$rank"): cannot read free -g (${gib:-no output})"
    elif ((gib >= min_free_gib)); then
        pass "$(label "$rank"): free -g: $gib GiB available (at least $min_free_gib)"
    else
        fail "$(label "$rank"): free -g: $gib GiB available, below $min_free_gib: host memory is the GPU's"
    fi
}

if out=$(wait_health "$timeout"); then
    pass "head: $out"
else
    fail "head: $out"
    echo "verify: $checks checks, $failures failed"
    exit "$failures"
fi
for rank in "${ranks[@]}"; do
    if ! log=$(remote "$rank" node_bootlog "$unit" "$pattern"); then
        fail "$(label "$rank"): cannot read the journal of $unit over ssh"
        continue
    fi
    check_rank "$rank" "$log"
    check_free "$rank"
done
[ -z "$calibrate" ] || write_calibration || fail "calibration: not written to $(shown "$calibrate")"
echo "verify: $checks checks, $failures failed"
exit $((failures > 125 ? 125 : failures))
