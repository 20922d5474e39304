#!/bin/bash
# spark-compile import --trace: the sandbox's init (pid 1 of its own user, mount, pid and network namespaces).
# "seal" builds a fresh root (a tmpfs holding only /usr and /etc read-only, the launcher's folder, HOME, the
# stand-ins and a /proc and /dev of its own), pivots into it, then re-executes itself as "run" with every
# capability dropped; "run" starts the launcher under limits, ends the whole tree at the deadline and writes the
# recorded calls to the result descriptor. Its environment is fixed by spark-compile: the launcher's own
# variables (--env) reach only the launcher, after the sandbox is sealed.
set -u
shopt -s extglob
mode=$1
if [[ $mode == seal ]]; then
    stage=$2 folder=$3 home=$4 hcas=$5
    root=$stage/root
    mount --make-rprivate / || exit 97
    mkdir "$root" && mount -t tmpfs -o size=512m,mode=755 sandbox-root "$root" || exit 97
    for dir in usr etc proc dev tmp var/tmp opt srv mnt/old run home spark-trace/bin spark-trace/rw; do
        mkdir -p "$root/$dir" || exit 97
    done
    for link in bin lib lib64 sbin; do
        if [[ -L /$link ]]; then ln -s "$(readlink "/$link")" "$root/$link" || exit 97
        elif [[ -d /$link ]]; then mkdir "$root/$link" && mount --rbind -o ro "/$link" "$root/$link" || exit 97; fi
    done
    for dir in usr etc; do mount --rbind "/$dir" "$root/$dir" && mount -o remount,bind,ro "$root/$dir" || exit 97; done
    cp -r "$stage/bin/." "$root/spark-trace/bin/" || exit 97
    # A launcher that calls a tool by its path (/usr/bin/ssh, subprocess.run(["/usr/bin/docker", ...])) reaches the
    # stand-in too; the init's own timer is /usr/bin/sleep.
    for tool in "$root"/spark-trace/bin/*; do
        [[ ${tool##*/} == sleep ]] && continue
        for dir in usr/bin usr/sbin usr/local/bin usr/local/sbin; do
            [[ -f $root/$dir/${tool##*/} && ! -L $root/$dir/${tool##*/} ]] || continue
            mount --bind "$tool" "$root/$dir/${tool##*/}" && mount -o remount,bind,ro "$root/$dir/${tool##*/}" || exit 97
        done
    done
    mount -t tmpfs -o size=16m,mode=755 sandbox-calls "$root/spark-trace/rw" || exit 97
    mkdir "$root/spark-trace/rw/calls" "$root/spark-trace/rw/state" || exit 97
    mount -t tmpfs -o size=256m,mode=1777 sandbox-tmp "$root/tmp" || exit 97
    mkdir -p "$root$home" "$root$folder" && cp -r "$stage/work/." "$root$folder/" || exit 97
    for dir in "$home" "$folder"; do mount --bind "$root$dir" "$root$dir" || exit 97; done
    mount -t proc proc "$root/proc" || exit 97
    mount -t tmpfs -o size=1m,mode=755 sandbox-dev "$root/dev" || exit 97
    for dev in null zero full random urandom; do
        : > "$root/dev/$dev" && mount --bind "/dev/$dev" "$root/dev/$dev" || exit 97
    done
    ln -s /proc/self/fd "$root/dev/fd" && ln -s fd/0 "$root/dev/stdin" && ln -s fd/1 "$root/dev/stdout" &&
        ln -s fd/2 "$root/dev/stderr" && mkdir "$root/dev/shm" "$root/dev/pts" || exit 97
    mount -t tmpfs -o size=64m,mode=1777 sandbox-shm "$root/dev/shm" || exit 97
    # Launchers look for /dev/infiniband before they pass --device: present when --rdma-devices names HCAs.
    [[ -z $hcas ]] || mkdir "$root/dev/infiniband" || exit 97
    cp "$stage/env" "$root/spark-trace/env" && cp "$0" "$root/spark-trace/init" || exit 97
    mount -o remount,bind,ro "$root/dev" && mount -o remount,bind,ro "$root" || exit 97
    cd "$root" && pivot_root . mnt/old || exit 97
    # The host's tree is gone from this namespace: nothing left to unmount or reach.
    umount -l /mnt/old || exit 97
    cd / || exit 97
    exec /usr/bin/setpriv --no-new-privs --inh-caps=-all --ambient-caps=-all --bounding-set=-all \
        --securebits=+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked,+keep_caps_locked \
        -- /bin/bash --noprofile --norc /spark-trace/init run "${@:6}"
    exit 97
fi
# run: no capability from here on; pid 1, so the namespace ends (and every process in it) when this does.
folder=$2 limit=$3 procs=$4 memory=$5 result=$6 script=$7
shift 7
exec 9>&"$result" && eval "exec $result>&-" || exit 97
ulimit -u "$procs" -v "$memory" -f 262144 || exit 97
mapfile -d '' -t vars < /spark-trace/env
cd "$folder" || exit 97
if [[ $(/usr/bin/head -c 2 "./$script") == '#!' ]] && /usr/bin/chmod u+x "./$script"; then
    /usr/bin/env -i "${vars[@]}" "./$script" "$@" 9>&- < /dev/null &  # its own interpreter
elif [[ $script == *.py ]]; then  # a Python launcher without a #! line: python3 found on the launcher's PATH
    /usr/bin/env -i "${vars[@]}" python3 "./$script" "$@" 9>&- < /dev/null &
else
    /usr/bin/env -i "${vars[@]}" /bin/bash "./$script" "$@" 9>&- < /dev/null &
fi
launcher=$!
/usr/bin/sleep "$limit" 9>&- &
timer=$!
exec 2>/dev/null  # the init's own notices (a job killed) are not the launcher's output
others() {  # live processes besides this one and the timer (zombies are done)
    local proc state n=0
    for proc in /proc/[0-9]*; do
        [[ ${proc#/proc/} == @(1|$timer|$BASHPID) ]] && continue  # $BASHPID: this $(...) itself
        read -r _ _ state _ < "$proc/stat" 2>/dev/null || continue
        [[ $state == Z ]] || n=$((n + 1))
    done
    echo "$n"
}
status=timeout
wait -n "$launcher" "$timer"
code=$?
if kill -0 "$timer" 2>/dev/null; then
    status=$code
    # The launcher's background jobs (an ssh to a worker) run until they are done or the deadline comes.
    while kill -0 "$timer" 2>/dev/null && [[ $(others) -gt 0 ]]; do /usr/bin/sleep 0.05; done
    kill -0 "$timer" 2>/dev/null || status=timeout
fi
{ kill -KILL -1; wait; } 2>/dev/null
printf 'status %s\n' "$status" >&9
count=0
for call in /spark-trace/rw/calls/*; do
    [[ -f $call && ! -L $call ]] || continue
    count=$((count + 1))
    [[ $count -le $SPARK_TRACE_MAX_CALLS ]] || break
    size=$(/usr/bin/stat -c %s -- "$call")
    [[ $size -le $SPARK_TRACE_MAX_RECORD ]] || { printf 'oversized\n' >&9; continue; }
    printf 'call %s\n' "$size" >&9 && /usr/bin/head -c "$size" -- "$call" >&9
done
exit 0
