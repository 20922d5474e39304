#!/bin/bash
# spark-compile import --trace: the stand-in for docker, ssh, nvidia-smi, ip and friends inside the sandbox.
# It records how it was called (one file per call: the host it ran "on", then the argv, each word
# length-prefixed) and answers like an idle machine; it never starts a container or reaches a host.
export LC_ALL=C
tool=${0##*/}
rec=""
record() {
    local word
    for word in "${SPARK_TRACE_HOST:-}" "$tool" "$@"; do rec+="${#word}:${word}"; done
    printf '%s' "$rec" > "$SPARK_TRACE/calls/${EPOCHREALTIME/./}-$$-$RANDOM"
}
case "$tool" in
    sleep) exit 0 ;;
    sudo) exec "$@" ;;
esac
record "$@"
case "$tool" in
    docker)
        case "${1:-}" in
            run)
                name=""
                prev=""
                for word in "$@"; do
                    [[ $prev == --name ]] && name=$word
                    [[ $word == --name=* ]] && name=${word#--name=}
                    prev=$word
                done
                [[ -n $name ]] && printf '%s\n' "$name" >> "$SPARK_TRACE/state/containers"
                # The container's id: the sha256 of this call's record, so import knows which run a
                # `docker exec ID` means.
                printf '%s' "$rec" | /usr/bin/sha256sum | /usr/bin/cut -c1-64 ;;
            ps) [[ -f $SPARK_TRACE/state/containers ]] && cat "$SPARK_TRACE/state/containers" ;;
            inspect) echo running ;;
        esac
        exit 0 ;;
    ssh)
        # Skip ssh's options, take the destination, run the remote command here with the host recorded.
        while [[ $# -gt 0 && $1 == -* ]]; do
            case "$1" in
                --) shift; break ;;
                -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;
                *) shift ;;
            esac
        done
        dest=${1:-}
        [[ $# -gt 0 ]] && shift
        export SPARK_TRACE_HOST=$dest
        if [[ $# -eq 0 ]]; then exec bash -s; fi
        exec bash -c "$*" ;;
    ibdev2netdev)
        IFS=, read -ra hcas <<< "${SPARK_TRACE_HCAS:-}"
        for hca in "${hcas[@]}"; do printf '%s port 1 ==> %s (Up)\n' "$hca" "${SPARK_TRACE_IFACE:-}"; done ;;
    ibv_devinfo)
        IFS=, read -ra hcas <<< "${SPARK_TRACE_HCAS:-}"
        for hca in "${hcas[@]}"; do printf 'hca_id:\t%s\n' "$hca"; done ;;
    ip)
        # `ip addr show [DEV]`: the loopback when no device is named, the fabric interface with the host's address.
        host=${SPARK_TRACE_HOST:-$SPARK_TRACE_HEAD} dev=""
        for word in "$@"; do
            case "$word" in -*|a|addr|address|show|list|dev) ;; *) dev=$word ;; esac
        done
        [[ -z $dev ]] && printf '1: lo    inet 127.0.0.1/8 scope host lo\n'
        if [[ -n ${SPARK_TRACE_IFACE:-} && ( -z $dev || $dev == "$SPARK_TRACE_IFACE" ) ]]; then
            printf '2: %s    inet %s/24 scope global %s\n' "$SPARK_TRACE_IFACE" "${host##*@}" "$SPARK_TRACE_IFACE"
        fi ;;
    hostname)
        host=${SPARK_TRACE_HOST:-$SPARK_TRACE_HEAD}
        if [[ ${1:-} == -I ]]; then echo "${host##*@}"; else echo "node-${host##*@}" | tr . -; fi ;;
    curl|wget)
        # A healthy server's answer, so a readiness loop (until curl -sf .../health; do sleep; done) ends.
        [[ " $* " == *"%{http_code}"* ]] && printf '200' || printf '{"status":"ok"}\n' ;;
esac
exit 0
