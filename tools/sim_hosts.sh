# Simulated hosts on one machine (sourced by bash scripts:
# tests/mpi/test_twohost.sh, benchmarks/twohost.sh). Each host is a network
# namespace plus its own UTS namespace (its own hostname, so weft's node
# identity of hostname + boot id differs between hosts), IPC namespace (no
# System V segments or POSIX message queues shared between hosts) and mount
# namespace with a private tmpfs on /dev/shm (POSIX shared memory lives
# there, a mount the IPC namespace does not cover). The hosts hang off one
# bridge, in a namespace of its own (the switch), by a veth pair each, with
# private addresses $sim_net.1, .2, ...; the device is $sim_dev in every
# host. mpirun runs on the first host and starts the other hosts' daemons
# through a generated rsh agent that enters that host's namespaces, so Open
# MPI sees one node per host and every rank on a host shares that host's
# namespaces. Needs root.
#
# The sourcing script defines hosts_unavailable MESSAGE (called, and
# expected to exit, when this machine cannot build the hosts: the test
# skips, the benchmark stops), then calls:
#   hosts_setup N SLOTS   build N hosts of SLOTS ranks each (the hostfile);
#                         cleaned up on exit (hosts_cleanup)
#   hosts_rate RATE       cap every host's sending rate (tc tbf, e.g. 25gbit)
#   mpirun_hosts DEADLINE MPIRUN-ARGS...
#                         one mpirun job over the hosts with $sim_mpirun
#                         options, killed with all its processes after
#                         DEADLINE seconds; its output in $out, status in $rc
# Open MPI (its daemons' oob and ob1 over the tcp btl) and UCX (tcp on the
# bridge's subnet only, so no pair of ranks can take a shared-memory path
# whatever UCX concludes about which peers share a machine) both use the
# simulated network.

sim_tag=weft2h$$ # the namespaces and hostnames are named after this shell
sim_net=10.213.$(($$ % 254 + 1))
sim_dev=weft0
hosts=() sim_tmp='' sim_job='' sim_switch=''
out='' rc=0

# Kill whatever still runs in the hosts' network namespaces (leftover ranks,
# daemons, agents: only processes this script started can be there) and
# wait until it is gone, so that the next job starts on empty hosts.
kill_hosts() {
    local h pids i
    for i in $(seq 30); do
        pids=
        for h in "${hosts[@]}"; do
            pids+=" $(ip netns pids "$h" 2>/dev/null)"
        done
        [ -z "${pids// /}" ] && return 0
        kill -KILL $pids 2>/dev/null || true # some may have ended meanwhile
        sleep 0.1
    done
    echo "warning: processes left in the host namespaces:$pids"
}

hosts_cleanup() {
    local h
    # every step runs, whatever fails before it: a sourcing script with `set -e` would
    # otherwise leave the hosts at the first failed command (a job's wait, a kill)
    set +e
    if [ -n "$sim_job" ]; then # interrupted during a job: its group first (timeout leads one)
        kill -KILL -- "-$sim_job" 2>/dev/null || kill -KILL "$sim_job" 2>/dev/null
        wait "$sim_job" 2>/dev/null
        sim_job=
    fi
    kill_hosts
    for h in "${hosts[@]}" $sim_switch; do
        ip netns del "$h" 2>/dev/null # takes its veth ends, and so the pairs, with it
    done
    hosts=() sim_switch=''
    [ -n "$sim_tmp" ] && rm -rf "$sim_tmp"
    sim_tmp=
}

hosts_setup() { # N SLOTS
    local n=$1 slots=$2 i h letters=abcdefghijklmnopqrstuvwxyz
    [ "$n" -ge 2 ] && [ "$n" -le 26 ] || hosts_unavailable "hosts: 2 to 26, not $n"
    trap hosts_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    sim_switch=${sim_tag}sw
    ip netns add "$sim_switch" 2>/dev/null ||
        hosts_unavailable "ip netns add failed (no network namespaces here)"
    ip -n "$sim_switch" link add br0 type bridge && ip -n "$sim_switch" link set br0 up ||
        hosts_unavailable "cannot create a bridge"
    for i in $(seq 0 $((n - 1))); do
        h=${sim_tag}${letters:$i:1}
        ip netns add "$h" || hosts_unavailable "ip netns add failed"
        hosts+=("$h")
        ip link add $sim_dev netns "$h" type veth peer name "p$i" netns "$sim_switch" &&
            ip -n "$sim_switch" link set "p$i" master br0 &&
            ip -n "$sim_switch" link set "p$i" up &&
            ip -n "$h" addr add "$sim_net.$((i + 1))/24" dev $sim_dev &&
            ip -n "$h" link set $sim_dev up && ip -n "$h" link set lo up ||
            hosts_unavailable "cannot connect host $h"
    done
    # The kernel reports the carrier up to a second after "link set up";
    # until then UCX finds the device down and would fall back to lo.
    local up
    for i in $(seq 50); do
        up=1
        for h in "${hosts[@]}"; do
            ip -n "$h" -o link show dev $sim_dev | grep -q "state UP" || up=0
        done
        [ $up -eq 1 ] && break
        sleep 0.1
    done
    sim_tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-hosts.XXXXXX") || exit 1

    # host.sh HOST COMMAND...: run COMMAND on HOST. ip netns exec also
    # remounts /sys for the namespace, which UCX reads to find network devices.
    cat >"$sim_tmp/host.sh" <<'EOF'
#!/bin/sh
host=$1
shift
exec ip netns exec "$host" unshare --uts --ipc --mount --propagation private -- sh -c '
    hostname "$0" && mount -t tmpfs -o mode=1777 weftshm /dev/shm && exec "$@"' "$host" "$@"
EOF
    # The rsh agent: plm_rsh calls it as "agent HOST COMMAND-WORDS...", the
    # words forming one shell command line as ssh would pass it.
    cat >"$sim_tmp/agent.sh" <<EOF
#!/bin/sh
host=\$1
shift
exec "$sim_tmp/host.sh" "\$host" sh -c "\$*"
EOF
    chmod +x "$sim_tmp/host.sh" "$sim_tmp/agent.sh"
    printf "%s slots=$slots\n" "${hosts[@]}" >"$sim_tmp/hostfile"
    for h in "${hosts[@]}"; do
        [ "$("$sim_tmp/host.sh" "$h" hostname 2>&1)" = "$h" ] ||
            hosts_unavailable "cannot enter host $h (unshare --uts --ipc --mount, tmpfs on /dev/shm)"
    done
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export UCX_TLS=tcp,self UCX_NET_DEVICES=$sim_dev
    sim_mpirun=(--hostfile "$sim_tmp/hostfile" --mca plm_rsh_agent "$sim_tmp/agent.sh"
                --bind-to none --oversubscribe --mca mpi_yield_when_idle 1
                --mca oob_tcp_if_include "$sim_net.0/24" --mca btl_tcp_if_include "$sim_net.0/24"
                -x UCX_TLS -x UCX_NET_DEVICES)
}

hosts_rate() { # RATE: every host's egress through a token bucket of RATE
    local h
    for h in "${hosts[@]}"; do
        ip netns exec "$h" tc qdisc replace dev $sim_dev root tbf rate "$1" burst 1mb \
            latency 10ms || return 1
    done
}

# The job runs in the background so that a signal to the sourcing script is
# handled at once; timeout signals its whole process group, and kill_hosts
# gets anything that left it.
mpirun_hosts() { # DEADLINE MPIRUN-ARGS...
    local deadline=$1
    shift
    timeout -k 5 "$deadline" "$sim_tmp/host.sh" "${hosts[0]}" \
        mpirun "${sim_mpirun[@]}" "$@" >"$sim_tmp/out" 2>&1 &
    sim_job=$!
    rc=0
    wait $sim_job || rc=$? # (a failed job is the caller's to report, also under `set -e`)
    sim_job=
    kill_hosts
    out=$(<"$sim_tmp/out")
}
