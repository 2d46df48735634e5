# Two emulated hosts for the netns tests (sourced by bash scripts): network
# namespaces joined by a veth pair, addresses that exist only inside them,
# and, through host_run, a hostname of their own (a UTS namespace) so that
# launchers and MPI see two nodes. Namespaces do not isolate shared memory:
# the tests force UCX onto TCP where they mean TCP.
#
#   hosts_up TAG      creates hosts a and b: $ns_a/$ns_b, $addr_a/$addr_b,
#                     $dev_a/$dev_b, $name_a/$name_b, $net (a /24), $work
#   host_run a|b CMD  runs CMD in that host (network, hostname, /sys of its own)
#   wait_line FILE PATTERN [SECONDS]   bounded wait for a line
#   rx_bytes a|b      bytes received on that host's veth end
# Everything is torn down on exit (hosts_down, from the EXIT trap): whatever
# runs in the namespaces is killed, the namespaces and $work removed.

hosts_pids=()

hosts_down() {
    local ns
    for p in "${hosts_pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for ns in "${ns_a:-}" "${ns_b:-}"; do
        [ -n "$ns" ] || continue
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    done
    wait 2>/dev/null || true
    for ns in "${ns_a:-}" "${ns_b:-}"; do
        [ -n "$ns" ] && ip netns del "$ns" 2>/dev/null || true
    done
    # Mounts the hosts made (bind mounts under $work) die with their namespaces.
    [ -n "${work:-}" ] && rm -rf "$work"
    return 0
}

# Root and ip netns are this test's packages (iproute2): skip (77) without them.
hosts_need_root() {
    if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v unshare >/dev/null; then
        echo "$1: SKIP: needs root, ip (iproute2) and unshare (util-linux)"
        exit 77
    fi
}

hosts_up() {
    local tag=$1
    # A /24 of its own per run: two runs at once do not collide inside their namespaces.
    local third=$(($$ % 200 + 20))
    net=10.214.$third
    ns_a=rs-$tag-a-$$ ns_b=rs-$tag-b-$$
    addr_a=$net.1 addr_b=$net.2
    dev_a=rs$$a dev_b=rs$$b
    name_a=rs-$tag-node-a name_b=rs-$tag-node-b
    work=$(mktemp -d)
    chmod 755 "$work"
    trap hosts_down EXIT
    ip netns add "$ns_a"
    ip netns add "$ns_b"
    ip link add "$dev_a" type veth peer name "$dev_b"
    ip link set "$dev_a" netns "$ns_a"
    ip link set "$dev_b" netns "$ns_b"
    ip -n "$ns_a" addr add "$addr_a/24" dev "$dev_a"
    ip -n "$ns_b" addr add "$addr_b/24" dev "$dev_b"
    for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
    ip -n "$ns_a" link set "$dev_a" up
    ip -n "$ns_b" link set "$dev_b" up
}

# host_run a|b CMD...: in the host's network namespace, with its hostname
# (UTS namespace) and a /sys of that network namespace (UCX lists its
# devices there), /sys/fs/cgroup kept (slurmd needs it). A private mount
# namespace: HOST_BIND="SRC:DST ..." bind-mounts besides. HOST_EXEC=1 execs
# (for "HOST_EXEC=1 host_run ... &": then $! is the command's own pid).
host_run() {
    local h=$1 ns name cg
    shift
    if [ "$h" = a ]; then ns=$ns_a name=$name_a; else ns=$ns_b name=$name_b; fi
    cg=$work/.cgroup-$h-$RANDOM
    mkdir -p "$cg"
    local binds="" b
    for b in ${HOST_BIND:-}; do binds="$binds mount --bind '${b%%:*}' '${b#*:}';"; done
    # shellcheck disable=SC2016
    ${HOST_EXEC:+exec} nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private \
        sh -c 'set -e; hostname "$0"; '"$binds"'
               if [ -d /sys/fs/cgroup ]; then mount --rbind /sys/fs/cgroup "$1"; fi
               umount -l /sys; mount -t sysfs sysfs /sys
               if [ -d "$1/cpu" ] || [ -e "$1/cgroup.controllers" ]; then mount --rbind "$1" /sys/fs/cgroup; fi
               shift; exec "$@"' "$name" "$cg" "$@"
}

wait_line() { # file pattern [seconds, 30]
    local n=$((${3:-30} * 10))
    for _ in $(seq "$n"); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "no '$2' in $1 within ${3:-30} s:" >&2
    cat "$1" >&2 2>/dev/null || true
    return 1
}

rx_bytes() { # a|b
    if [ "$1" = a ]; then
        ip netns exec "$ns_a" cat "/sys/class/net/$dev_a/statistics/rx_bytes"
    else
        ip netns exec "$ns_b" cat "/sys/class/net/$dev_b/statistics/rx_bytes"
    fi
}
