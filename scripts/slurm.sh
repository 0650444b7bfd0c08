#!/usr/bin/env bash
# Start or stop a private one-machine Slurm cluster for the tests and benchmarks: munged (as the munge user,
# its own key and socket), slurmctld and slurmd (as root), all on 127.0.0.1 and their own ports, with every
# file under $HUB_TEST_RUN_DIR/slurm. Partitions: cpu (the default) and gpu, whose node has a count-only GPU
# GRES (no device file), so that GPU routing is checked on a machine without a GPU.
# Needs Debian's slurm-wlm and munge (scripts/debian-packages.txt, installed by scripts/system-deps.sh test|bench).
#   scripts/slurm.sh start   prints the environment to export (SLURM_CONF)
#   scripts/slurm.sh stop    stops exactly the daemons it started (by their PID files)
set -euo pipefail
RUN_DIR=${HUB_TEST_RUN_DIR:-/tmp/hpcfair-test-services}
PORT=${HUB_TEST_SLURM_PORT:-56817}  # slurmctld; slurmd listens on PORT+1
DIR=$RUN_DIR/slurm
CONF=$DIR/slurm.conf
SOCKET=$DIR/munge/munge.socket
NODE=$(hostname -s)

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

write_conf() {
  local cpus memory
  cpus=$(nproc)
  memory=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
  cat >"$CONF" <<EOF
# Written by scripts/slurm.sh: a private one-machine cluster.
ClusterName=hpcfair
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/builtin
# Start batch jobs (and arrays) at the next scheduling pass (~1 s) instead of Slurm's default 3 s delay.
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
MpiDefault=none
ReturnToService=2
# Quick reactions for tests: a lost node is noticed in ~10 s, a job past its limit is killed at once, its
# memory is sampled every second and a job above its --mem is killed (OUT_OF_MEMORY without cgroups).
SlurmdTimeout=10
MessageTimeout=5
KillWait=2
OverTimeLimit=0
InactiveLimit=0
MinJobAge=600
JobRequeue=0
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
# No slurmdbd (it needs MariaDB): sacct --completion reads the job completion log instead.
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/jobcomp.log
GresTypes=gpu
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$NODE MaxTime=INFINITE State=UP
EOF
  # A file-less GPU is dropped by slurmd (22.05), so the GPU "is" /dev/null: counted, allocated, never opened.
  echo "Name=gpu Count=1 File=/dev/null" >"$DIR/gres.conf"
}

start() {
  mkdir -p "$DIR/state" "$DIR/spool" "$DIR/munge"
  chmod 755 "$RUN_DIR" "$DIR"
  alive "$DIR/slurmctld.pid" || write_conf  # a running cluster keeps the ports it was started with
  if ! alive "$DIR/munge/munged.pid"; then
    chown munge: "$DIR/munge"; chmod 711 "$DIR/munge"
    [ -f "$DIR/munge/munge.key" ] || runuser -u munge -- mungekey --create --keyfile="$DIR/munge/munge.key"
    runuser -u munge -- munged --socket="$SOCKET" --key-file="$DIR/munge/munge.key" \
      --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed"
  fi
  export SLURM_CONF=$CONF
  alive "$DIR/slurmctld.pid" || slurmctld -c -f "$CONF"  # -c: a fresh cluster, no jobs or node states of a past run
  alive "$DIR/slurmd.pid" || slurmd -f "$CONF"
  for _ in $(seq 100); do
    sinfo -h -N -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)' && break
    sleep 0.1
  done
  echo "export SLURM_CONF=$CONF"
}

stop() {
  for pidfile in "$DIR/slurmd.pid" "$DIR/slurmctld.pid" "$DIR/munge/munged.pid"; do
    if alive "$pidfile"; then
      pid=$(cat "$pidfile")
      kill "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$pidfile"
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
