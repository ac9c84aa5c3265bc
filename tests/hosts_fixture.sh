# Sourced by the multi-host tests after script_fixture.sh: a test bed of N "hosts" on
# this one machine, so that Open MPI runs as it does across real hosts (ranks on
# different hosts over TCP, ranks on one host over shared memory) without a cluster.
#
# Each host is a process (a "holder", `sleep`) in its own network and UTS namespaces:
# its own hostname pn-hostI, its own interface eth0 at 10.231.0.(I+1)/24, linked by a
# veth pair to a bridge in this namespace. The mount namespace stays shared, so every
# host sees the same files (binaries, data, snapshots): a shared filesystem. mpirun
# runs in host 0's namespaces (or $hosts_launch's) and starts Open MPI's daemon
# (orted) on the other hosts through an rsh agent, a script that runs its command in
# that host's namespaces (nsenter) as ssh would run it on a real host; the hosts
# reach each other only over the bridge, so Open MPI sees separate nodes (names,
# addresses) on a network.
#
#   hosts_up N [SLOTS]  makes hosts pn-host0 .. pn-host(N-1) with SLOTS (2) slots each,
#                       $hostfile, and the agent; skips the test (77) where namespaces
#                       cannot be made (not root, no ip/unshare/nsenter)
#   hosts_mpirun ARG... mpirun ARG... across them (output as mpirun's), ended after
#                       $hosts_timeout (120) s; it runs on host $hosts_launch (0), so
#                       on rank 0's host unless a test says otherwise, as in a batch
#                       job (its script runs on the allocation's first node)
#   hosts_in I CMD...   CMD in host I's namespaces
#   hosts_link_down I   cuts host I off the network (its link on the bridge down), as
#                       a pulled cable or a dead switch port: its processes live on
#   hosts_link_up I     puts the link back
#   hosts_throttle I RATE  a token bucket (tc tbf) of RATE (tc's units: 2mbit) on the
#                       traffic to host I; hosts_unthrottle I removes it
#   hosts_kill I        SIGKILL to every process of host I but its holder (ranks,
#                       orted), as a node that dies; its network stays, so its kernel
#                       closes the connections, as a crashed node's does not
#   hosts_procs I       the pids of those processes
#   hosts_down          removes everything hosts_up made (also at exit, on failure)
#
# Nothing leaves the test bed: the addresses are on the bridge and in the hosts'
# namespaces only (the bridge has none, so this namespace's routes are untouched), and
# Open MPI is told to use only the bed's subnet.
hosts_net=10.231.0
hosts_dir=$tmp/hosts
hostfile=$hosts_dir/hostfile
hosts_bridge=pnbr$$ # names of links are at most 15 characters; $$ keeps tests apart
hosts_n=0
hosts_timeout=120

# Removes the hosts even when the test fails or is interrupted: sh runs the EXIT trap
# on `exit`, so a signal is turned into one.
trap 'hosts_down; rm -rf "$tmp"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# hosts_pid I: the holder of host I (its namespaces are those of this process)
hosts_pid() { cat "$hosts_dir/pn-host$1.pid"; }

# hosts_in I CMD...: CMD in host I's network and UTS namespaces
hosts_in() {
    hp=$(hosts_pid "$1"); shift
    nsenter -t "$hp" --uts --net -- "$@"
}

# hosts_procs I: the pids in host I's network namespace, its holder left out. test's
# -ef (same device and inode: the namespace's) forks nothing: a readlink a process
# took 0.4-2 s on a loaded machine, long enough for a run to pass its next snapshot
# between a fault's start and its last kill
hosts_procs() {
    hp=$(hosts_pid "$1")
    [ -e "/proc/$hp/ns/net" ] || return 0
    for p in /proc/[0-9]*/ns/net; do
        [ "$p" != "/proc/$hp/ns/net" ] && [ "$p" -ef "/proc/$hp/ns/net" ] &&
            { p=${p%/ns/net}; echo "${p#/proc/}"; }
    done
}

# the link of host I on the bridge (this namespace's end of its veth)
hosts_veth() { echo "pn$$h$1"; }
hosts_link_down() { ip link set "$(hosts_veth "$1")" down || fail "link of pn-host$1 down"; }
# hosts_link_up I: the link back up, and usable: its carrier up (a veth takes a moment)
# and no host left with the failed address resolutions of the cut (a connection
# that Open MPI tries then fails: "unable to complete a TCP connection")
hosts_link_up() {
    ip link set "$(hosts_veth "$1")" up || fail "link of pn-host$1 up"
    for _ in $(seq 1 50); do
        [ "$(cat "/sys/class/net/$(hosts_veth "$1")/operstate")" = up ] && break
        sleep 0.1
    done
    j=0
    while [ $j -lt "$hosts_n" ]; do hosts_in $j ip neigh flush dev eth0; j=$((j + 1)); done
}
# the bucket holds a burst of 32 kbit and queues at most 400 ms, then drops: TCP sees
# a slow, lossy link, as a congested one is (netem is not in every kernel; tbf is)
hosts_throttle() {
    tc qdisc add dev "$(hosts_veth "$1")" root tbf rate "$2" burst 32kbit latency 400ms ||
        fail "throttle of pn-host$1"
}
hosts_unthrottle() { tc qdisc del dev "$(hosts_veth "$1")" root || fail "unthrottle of pn-host$1"; }
hosts_kill() {
    for p in $(hosts_procs "$1"); do kill -KILL "$p"; done 2>/dev/null
}

hosts_up() {
    n=$1 slots=${2:-2}
    [ "$(id -u)" -eq 0 ] || { echo "SKIP: namespaces need root"; exit 77; }
    for t in ip unshare nsenter; do
        command -v $t >/dev/null 2>&1 || { echo "SKIP: no $t"; exit 77; }
    done
    mkdir -p "$hosts_dir" || fail "mkdir $hosts_dir"
    # one multi-host test at a time (make -j check runs tests side by side): each
    # starts a cluster's worth of ranks and daemons on the same cores, and two at
    # once slowed a fault test's ranks past its bound; the lock goes with the test
    if command -v flock >/dev/null 2>&1; then
        exec 9>"${TMPDIR:-/tmp}/pipenet-hosts.lock"
        flock -w 900 9 || fail "another multi-host test held the test bed for 15 min"
    fi
    # root in a container may lack the capabilities for new namespaces
    unshare --uts --net true 2>"$hosts_dir/err" ||
        { echo "SKIP: cannot make namespaces: $(cat "$hosts_dir/err")"; exit 77; }
    # a bridge the test can make is the sign that it may make the rest
    ip link add "$hosts_bridge" type bridge 2>"$hosts_dir/err" ||
        { echo "SKIP: cannot make a bridge: $(cat "$hosts_dir/err")"; exit 77; }
    ip link set "$hosts_bridge" up || fail "bridge up"
    : >"$hostfile"
    i=0
    while [ $i -lt "$n" ]; do
        # the holder: unshare execs sleep in the new namespaces, so $! is their process
        unshare --uts --net sleep 100000 &
        echo $! >"$hosts_dir/pn-host$i.pid"
        hosts_n=$((i + 1))
        # wait until the holder is in its namespaces (unshare has exec'd sleep)
        for _ in $(seq 1 100); do
            [ "$(readlink /proc/$!/ns/net)" != "$(readlink /proc/$$/ns/net)" ] && break
            sleep 0.02
        done
        veth=pn$$h$i
        hosts_in $i hostname "pn-host$i" || fail "hostname of pn-host$i"
        ip link add "$veth" type veth peer name eth0 netns "$(hosts_pid $i)" ||
            fail "veth for pn-host$i"
        ip link set "$veth" master "$hosts_bridge" up || fail "$veth on the bridge"
        hosts_in $i ip addr add "$hosts_net.$((i + 1))/24" dev eth0 || fail "address of pn-host$i"
        hosts_in $i ip link set eth0 up || fail "eth0 of pn-host$i up"
        hosts_in $i ip link set lo up || fail "lo of pn-host$i up"
        echo "pn-host$i slots=$slots" >>"$hostfile"
        i=$((i + 1))
    done
    # Open MPI's rsh agent: called as `agent HOST COMMAND...`, it runs COMMAND in HOST's
    # namespaces through sh -c, as ssh gives its arguments to the remote shell.
    cat >"$hosts_dir/rsh" <<EOF
#!/bin/sh
host=\$1; shift
exec nsenter -t "\$(cat "$hosts_dir/\$host.pid")" --uts --net -- sh -c "\$*"
EOF
    chmod +x "$hosts_dir/rsh"
    # (the bridge runs no STP, so its ports forward at once: nothing to wait for)
}

# hosts_mpirun ARG...: mpirun on host $hosts_launch (0) over the hostfile, with the
# agent, both of Open MPI's networks (its daemons' out-of-band one and the TCP BTL) on
# the bed's subnet
hosts_launch=0
hosts_mpirun() {
    hosts_in "$hosts_launch" timeout --foreground -k 10 "$hosts_timeout" mpirun --oversubscribe --hostfile "$hostfile" \
        --mca plm_rsh_agent "$hosts_dir/rsh" \
        --mca oob_tcp_if_include "$hosts_net.0/24" --mca btl_tcp_if_include "$hosts_net.0/24" \
        "$@"
}

# hosts_down: ends every process left in a host's namespaces (ranks, orted), then the
# holders (their namespaces go with them, and the veths inside), the veths and the bridge
hosts_down() {
    i=0
    while [ $i -lt "$hosts_n" ]; do
        hp=$(hosts_pid $i 2>/dev/null)
        if [ -n "$hp" ]; then
            for p in $(hosts_procs $i); do kill -KILL "$p"; done 2>/dev/null
            kill -KILL "$hp" 2>/dev/null
        fi
        ip link del "pn$$h$i" 2>/dev/null
        [ -z "$hp" ] || wait "$hp" 2>/dev/null # reap the holder
        i=$((i + 1))
    done
    hosts_n=0
    ip link del "$hosts_bridge" 2>/dev/null
}
