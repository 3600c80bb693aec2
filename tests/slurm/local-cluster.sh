#!/usr/bin/env bash
# A real single-node Slurm cluster (Slurm 22.05 from Debian 12) for the tests and CI:
# munge, MariaDB, slurmdbd (so sacct works), slurmctld and slurmd on this machine.
# No systemd and no cgroups: proctrack/linuxproc and task/none.
# What each step does and why: tests/slurm/README.md (verified on this project's machine kind).
#
#   tests/slurm/local-cluster.sh start          bring everything up (idempotent), wait for the node to be idle
#   tests/slurm/local-cluster.sh status         print daemon state; exit 1 unless all are up and the node is usable
#   tests/slurm/local-cluster.sh stop           stop the daemons this script started (by their pid files)
#   tests/slurm/local-cluster.sh restart-slurmctld   kill and start slurmctld only (fault tests); jobs keep running
#   tests/slurm/local-cluster.sh purge          stop, then delete Slurm state and logs (a clean first start)
#
# Needs root and the packages from .ci/install-system.sh. Environment overrides:
#   GRAPHSWEEP_SLURM_CPUS   CPUs declared for the node (default: nproc). More than nproc oversubscribes
#                           on purpose (SlurmdParameters=config_overrides), e.g. for many runs in flight.
#   GRAPHSWEEP_SLURM_WAIT_S seconds to wait for the node to become idle (default 60).
set -euo pipefail

CLUSTER=graphsweep
HOST=$(hostname -s)
ETC=/etc/slurm
LOG=/var/log/slurm-graphsweep
SPOOL=/var/spool/slurm-graphsweep
RUN=/run/slurm-graphsweep
DB_NAME=slurm_acct_db
DB_USER=slurm
DB_PASS=graphsweep-local-only   # local test cluster only; MariaDB listens on 127.0.0.1
WAIT_S=${GRAPHSWEEP_SLURM_WAIT_S:-60}

step() { printf '[local-cluster] %s\n' "$*"; }
die() { printf '[local-cluster] ERROR: %s\n' "$*" >&2; exit 1; }

# pid_alive PIDFILE NAME: the pid in PIDFILE is a live process whose command name starts with NAME.
pid_alive() {
    local pid comm
    [[ -r $1 ]] || return 1
    pid=$( { tr -dc "0-9" <"$1"; } 2>/dev/null) || return 1
    [[ -n $pid && -r /proc/$pid/comm ]] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [[ $comm == "$2"* ]]
}

# stop_pidfile PIDFILE NAME: SIGTERM the daemon named in PIDFILE, SIGKILL after 15 s.
stop_pidfile() {
    local pid i
    if ! pid_alive "$1" "$2"; then
        step "$2: not running"
        return 0
    fi
    pid=$( { tr -dc "0-9" <"$1"; } 2>/dev/null) || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
        pid_alive "$1" "$2" || { step "$2: stopped (pid $pid)"; rm -f "$1"; return 0; }
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    step "$2: killed with SIGKILL after 15 s (pid $pid)"
    rm -f "$1"
}

# wait_for SECONDS WHAT CMD...: poll CMD every 0.2 s until it succeeds.
wait_for() {
    local secs=$1 what=$2 i
    shift 2
    for ((i = 0; i < secs * 5; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    return 1
}

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
mariadb_ok() { mysqladmin --protocol=socket ping >/dev/null 2>&1; }
slurmdbd_ok() { pid_alive "$RUN/slurmdbd.pid" slurmdbd && sacctmgr -n -P list cluster format=Cluster >/dev/null 2>&1; }
slurmctld_ok() { pid_alive "$RUN/slurmctld.pid" slurmctld && scontrol ping 2>/dev/null | grep -q 'is UP'; }
slurmd_ok() { pid_alive "$RUN/slurmd.pid" slurmd; }
node_state() { sinfo -h -n "$HOST" -o '%T' 2>/dev/null | head -n1; }
node_idle() { [[ $(node_state) =~ ^(idle|mixed|allocated|completing)$ ]]; }

check_prereqs() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (the daemons run as root/munge/mysql); run it with sudo or in CI"
    local missing=() c
    for c in munged munge unmunge mysqld_safe mysqladmin mysql slurmdbd slurmctld slurmd sacctmgr sbatch sinfo scontrol sacct; do
        command -v "$c" >/dev/null 2>&1 || missing+=("$c")
    done
    ((${#missing[@]} == 0)) || die "missing commands: ${missing[*]}; install the packages with: sudo bash .ci/install-system.sh"
}

start_munge() {
    if munge_ok; then step "munge: already up"; return 0; fi
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    chmod 0755 /run/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
        step "munge: created /etc/munge/munge.key"
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    rm -f /run/munge/munge.socket.2.lock 2>/dev/null || true
    runuser -u munge -- munged --force </dev/null >>"$LOG/munged.out" 2>&1 ||
        die "munged failed to start; see /var/log/munge/munged.log and $LOG/munged.out"
    wait_for 10 munge munge_ok || die "munge does not answer 'munge -n | unmunge' after 10 s; see /var/log/munge/munged.log"
    step "munge: started"
}

start_mariadb() {
    if mariadb_ok; then
        step "mariadb: already up"
    else
        mkdir -p /run/mysqld
        chown mysql:mysql /run/mysqld
        if [[ ! -d /var/lib/mysql/mysql ]]; then
            step "mariadb: initialising /var/lib/mysql"
            mariadb-install-db --user=mysql --datadir=/var/lib/mysql >>"$LOG/mariadb-install.log" 2>&1 ||
                die "mariadb-install-db failed; see $LOG/mariadb-install.log"
        fi
        touch "$LOG/mariadb.log"
        chown mysql:mysql "$LOG/mariadb.log"   # the server writes it as user mysql
        # setsid + nohup: the server must outlive this script and the pytest process that ran it.
        setsid nohup mysqld_safe --skip-syslog --log-error="$LOG/mariadb.log" </dev/null >>"$LOG/mysqld_safe.out" 2>&1 &
        wait_for 60 mariadb mariadb_ok || die "MariaDB does not answer 'mysqladmin ping' after 60 s; see $LOG/mariadb.log"
        step "mariadb: started"
    fi
    mysql --protocol=socket -u root <<SQL || die "could not create database $DB_NAME / user $DB_USER in MariaDB (run as root; see $LOG/mariadb.log)"
CREATE DATABASE IF NOT EXISTS $DB_NAME;
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'localhost';
FLUSH PRIVILEGES;
SQL
    step "mariadb: database $DB_NAME and user $DB_USER ready"
}

write_configs() {
    local cpus mem_avail mem
    cpus=${GRAPHSWEEP_SLURM_CPUS:-$(nproc)}
    mem_avail=$(awk '/^MemAvailable:/ {print int($2/1024)}' /proc/meminfo)
    mem=$((mem_avail * 9 / 10))
    ((mem >= 512)) || die "only ${mem_avail} MB memory available; the local cluster needs at least 600 MB"
    mkdir -p "$ETC" "$LOG" "$SPOOL/ctld" "$SPOOL/d" "$RUN"

    cat >"$ETC/slurmdbd.conf.new" <<EOF
# Written by tests/slurm/local-cluster.sh: local test cluster only.
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=$DB_USER
StoragePass=$DB_PASS
StorageLoc=$DB_NAME
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
DebugLevel=info
EOF

    cat >"$ETC/slurm.conf.new" <<EOF
# Written by tests/slurm/local-cluster.sh: a single-node test cluster without systemd or cgroups.
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Jobs without --mem get this much per CPU instead of the whole node, so several run at once.
DefMemPerCPU=1024
# Trust this file over detected hardware, so GRAPHSWEEP_SLURM_CPUS may oversubscribe.
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
JobCompType=jobcomp/none
StateSaveLocation=$SPOOL/ctld
SlurmdSpoolDir=$SPOOL/d
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# Fault tests: a node set down comes back when slurmd registers again; failed-node jobs requeue.
ReturnToService=2
JobRequeue=1
# Fast scheduling for tests: the main and backfill loops run every 2 s (defaults 60 s and 30 s).
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2,batch_sched_delay=1
MessageTimeout=10
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
# SIGTERM -> SIGKILL after 2 s at a time limit or scancel; no grace beyond the limit.
KillWait=2
OverTimeLimit=0
# Finished jobs leave slurmctld memory after 30 s; sacct keeps them in slurmdbd.
MinJobAge=30
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    chmod 0600 "$ETC/slurmdbd.conf.new"
    chmod 0644 "$ETC/slurm.conf.new"
    mv -f "$ETC/slurmdbd.conf.new" "$ETC/slurmdbd.conf"
    mv -f "$ETC/slurm.conf.new" "$ETC/slurm.conf"
    step "config: wrote $ETC/slurm.conf (node $HOST, CPUs=$cpus, RealMemory=${mem} MB, partition debug) and $ETC/slurmdbd.conf"
}

start_slurmdbd() {
    if slurmdbd_ok; then
        step "slurmdbd: already up"
    else
        pid_alive "$RUN/slurmdbd.pid" slurmdbd || slurmdbd </dev/null >>"$LOG/slurmdbd.out" 2>&1 ||
            die "slurmdbd failed to start; see $LOG/slurmdbd.log"
        wait_for 30 slurmdbd slurmdbd_ok || die "slurmdbd does not answer 'sacctmgr list cluster' after 30 s; see $LOG/slurmdbd.log"
        step "slurmdbd: started"
    fi
    if sacctmgr -n -P list cluster format=Cluster 2>/dev/null | grep -qx "$CLUSTER"; then
        step "sacctmgr: cluster $CLUSTER already registered"
    else
        sacctmgr -i add cluster "$CLUSTER" >>"$LOG/sacctmgr.out" 2>&1 || die "sacctmgr -i add cluster $CLUSTER failed; see $LOG/sacctmgr.out"
        step "sacctmgr: registered cluster $CLUSTER"
    fi
}

start_slurmctld() {
    if slurmctld_ok; then step "slurmctld: already up"; return 0; fi
    pid_alive "$RUN/slurmctld.pid" slurmctld || slurmctld </dev/null >>"$LOG/slurmctld.out" 2>&1 ||
        die "slurmctld failed to start; see $LOG/slurmctld.log"
    wait_for 30 slurmctld slurmctld_ok || die "slurmctld does not answer 'scontrol ping' after 30 s; see $LOG/slurmctld.log"
    step "slurmctld: started"
}

start_slurmd() {
    if slurmd_ok; then step "slurmd: already up"; return 0; fi
    slurmd -N "$HOST" </dev/null >>"$LOG/slurmd.out" 2>&1 || die "slurmd failed to start; see $LOG/slurmd.log"
    wait_for 10 slurmd slurmd_ok || die "slurmd exited right after starting; see $LOG/slurmd.log"
    step "slurmd: started"
}

wait_node_idle() {
    local i state resumed=0
    for ((i = 0; i < WAIT_S * 5; i++)); do
        state=$(node_state)
        if [[ $state =~ ^(idle|mixed|allocated|completing)$ ]]; then
            step "node $HOST: $state, partition debug ready"
            return 0
        fi
        # A fault test may have left the node down or drained; take it back into service once.
        if ((resumed == 0)) && [[ $state =~ ^(down|drain|drained|draining|fail) ]]; then
            scontrol update nodename="$HOST" state=resume >>"$LOG/scontrol.out" 2>&1 || true
            step "node $HOST: was $state, resumed"
            resumed=1
        fi
        sleep 0.2
    done
    die "node $HOST is '${state:-unknown}' after ${WAIT_S} s, not idle; reason: $(sinfo -h -R -n "$HOST" -o '%E' 2>/dev/null); see $LOG/slurmctld.log and $LOG/slurmd.log"
}

cmd_start() {
    check_prereqs
    mkdir -p "$LOG" "$RUN"
    step "start: logs in $LOG"
    start_munge
    start_mariadb
    if ! slurmctld_ok || ! slurmd_ok || ! slurmdbd_ok; then
        write_configs
    else
        step "config: daemons up, keeping $ETC/slurm.conf"
    fi
    start_slurmdbd
    start_slurmctld
    start_slurmd
    wait_node_idle
    step "start: done (sbatch/sacct ready on cluster $CLUSTER)"
}

cmd_status() {
    local rc=0 state
    report() { if "$2"; then step "$1: up"; else step "$1: DOWN"; rc=1; fi; }
    command -v sinfo >/dev/null 2>&1 || die "Slurm is not installed; run: sudo bash .ci/install-system.sh"
    report munge munge_ok
    report mariadb mariadb_ok
    report slurmdbd slurmdbd_ok
    report slurmctld slurmctld_ok
    report slurmd slurmd_ok
    state=$(node_state || true)
    if node_idle; then step "node $HOST: $state"; else step "node $HOST: ${state:-unknown} (not usable)"; rc=1; fi
    return $rc
}

# Jobs would outlive slurmd (slurmstepd keeps running) and hold CPUs at the next start: cancel them first.
cancel_all_jobs() {
    local ids
    slurmctld_ok || return 0
    ids=$(squeue -h -o '%i' 2>/dev/null | tr '\n' ' ')
    if [[ -z ${ids// /} ]]; then step "jobs: none queued or running"; return 0; fi
    # shellcheck disable=SC2086
    scancel $ids >>"$LOG/scontrol.out" 2>&1 || true
    wait_for 30 jobs-gone bash -c '[[ -z $(squeue -h -o %i -t PD,R,CG,S) ]]' || true
    step "jobs: cancelled $ids"
}

cmd_stop() {
    [[ $(id -u) -eq 0 ]] || die "must run as root"
    cancel_all_jobs
    stop_pidfile "$RUN/slurmd.pid" slurmd
    stop_pidfile "$RUN/slurmctld.pid" slurmctld
    stop_pidfile "$RUN/slurmdbd.pid" slurmdbd
    if mariadb_ok; then
        mysqladmin --protocol=socket -u root shutdown >/dev/null 2>&1 || true
        wait_for 30 mariadb-stop bash -c '! mysqladmin --protocol=socket ping' && step "mariadb: stopped" ||
            step "mariadb: still answering after 30 s (see $LOG/mariadb.log)"
    else
        step "mariadb: not running"
    fi
    stop_pidfile /run/munge/munged.pid munged
}

cmd_restart_slurmctld() {
    [[ $(id -u) -eq 0 ]] || die "must run as root"
    stop_pidfile "$RUN/slurmctld.pid" slurmctld
    start_slurmctld
    wait_node_idle
}

cmd_purge() {
    check_prereqs
    mkdir -p "$LOG"
    stop_pidfile "$RUN/slurmd.pid" slurmd
    stop_pidfile "$RUN/slurmctld.pid" slurmctld
    stop_pidfile "$RUN/slurmdbd.pid" slurmdbd
    # Job ids restart at 1 without the slurmctld state, so the old job records must go too.
    start_munge
    mariadb_ok || start_mariadb
    mysql --protocol=socket -u root -e "DROP DATABASE IF EXISTS $DB_NAME" || die "could not drop database $DB_NAME"
    step "mariadb: dropped database $DB_NAME"
    cmd_stop
    rm -rf "$SPOOL" "$LOG" "$RUN"
    step "purge: removed $SPOOL, $LOG and $RUN; the next start is a clean cluster"
}

case ${1:-} in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    restart-slurmctld) cmd_restart_slurmctld ;;
    purge) cmd_purge ;;
    *)
        echo "usage: $0 start|stop|status|restart-slurmctld|purge" >&2
        exit 2
        ;;
esac
