#!/usr/bin/env bash
# A throwaway two-node Slurm cluster on this one machine, for tests: one munged, one slurmctld and two
# slurmd (n1, n2; Debian's slurmd is built with multiple-slurmd support, so both run on one host on
# ports of their own). Everything lives under a folder the caller gives (a temp dir); nothing under
# /etc, /run or /var is read or written, and no fixed port is assumed free.
#
#   tests/fleet/slurm-cluster.sh check         exit 0 when every binary is there; else one line naming
#                                              the missing ones and exit 77 (a test's skip code)
#   tests/fleet/slurm-cluster.sh start DIR     start the cluster under DIR (which must exist) and wait,
#                                              up to $SLURM_CLUSTER_TIMEOUT s (30), for n1 and n2 to be
#                                              idle and the scheduler to have run once (about 3 s in
#                                              all); prints 'export SLURM_CONF=DIR/slurm.conf' on stdout
#                                              (all else goes to stderr), so  eval "$(... start DIR)"
#   tests/fleet/slurm-cluster.sh stop DIR      cancel any jobs left, stop exactly the daemons that start
#                                              recorded in DIR/pids (by pid), wait for them, remove what
#                                              start made except DIR/log (SLURM_CLUSTER_KEEP=1: keep all)
#
# SLURM_CLUSTER_DEBUG=debug2 raises the daemons' log level (DIR/log/*.log; default info).
# SLURM_CLUSTER_HEALTHCHECK=PROGRAM makes PROGRAM each slurmd's HealthCheckProgram, run every
# $SLURM_CLUSTER_HEALTHCHECK_INTERVAL s (default 2) on every node, whatever its state (slurmd sets
# SLURMD_NODENAME for it; it also runs once as each slurmd starts).
#
# Runs as root (SlurmUser=root, no cgroups: proctrack/linuxproc, task/none). DIR's path must be short
# (unix socket paths are limited to 107 bytes; slurmstepd puts its sockets in DIR/spool/NODE/).
# Packages (Debian 12): slurm-wlm munge openmpi-bin libopenmpi-dev, --no-install-recommends is enough.
#
# Open MPI 4.1 on it: n1 and n2 are one host, so Open MPI's shared-memory btl (vader) of two ranks on
# n1 and two on n2 use the same segment files and crash: give MPI programs OMPI_MCA_btl=self,tcp
# (with OMPI_MCA_btl_tcp_if_include=lo). In a job, mpirun starts its remote daemons through srun (its
# plm/slurm; plm rsh cannot resolve n1/n2); a direct launch needs 'srun --mpi=pmix' (MpiDefault=none:
# a plain srun of an MPI program fails in MPI_Init, Open MPI having no PMI-1/2 support).
set -euo pipefail

prog=tests/fleet/slurm-cluster.sh
PATH=$PATH:/usr/sbin:/sbin:/usr/local/sbin
timeout_s=${SLURM_CLUSTER_TIMEOUT:-30}

say() { echo "slurm-cluster: $*" >&2; }
die() { say "error: $*"; exit 1; }
usage() { echo "usage: $prog check | start DIR | stop DIR" >&2; exit 2; }

needed=(munged munge unmunge slurmctld slurmd sbatch srun sinfo squeue scancel scontrol sdiag mpirun)

cmd_check() {
  local missing=() b
  for b in "${needed[@]}"; do command -v "$b" >/dev/null 2>&1 || missing+=("$b"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "missing: ${missing[*]} (apt-get install --no-install-recommends slurm-wlm munge openmpi-bin libopenmpi-dev)"
    exit 77
  fi
}

# Listening TCP ports (v4 and v6), one a line, from ss or, without it, /proc/net/tcp*.
listening_ports() {
  if command -v ss >/dev/null 2>&1; then
    ss -Htln | awk '{n = split($4, a, ":"); print a[n]}'
  else
    local hex
    { awk 'FNR > 1 && $4 == "0A" {split($2, a, ":"); print a[2]}' /proc/net/tcp /proc/net/tcp6 2>/dev/null || true; } |
      while read -r hex; do echo $((16#$hex)); done
  fi
}

# Three consecutive free ports below the ephemeral range (so no outgoing connection holds one),
# starting from a point drawn from this shell's pid and $RANDOM.
pick_ports() {
  local used base p tries=0
  used=$(listening_ports | sort -un)
  base=$(( 20000 + (($$ * 7 + RANDOM) % 1200) * 10 ))
  while [ $tries -lt 1200 ]; do
    for p in "$base" $((base + 1)) $((base + 2)); do
      grep -qx "$p" <<<"$used" && break
      [ "$p" = $((base + 2)) ] && { echo "$base $((base + 1)) $((base + 2))"; return 0; }
    done
    base=$(( base + 10 )); [ "$base" -lt 32000 ] || base=20000
    tries=$((tries + 1))
  done
  die "no three consecutive free TCP ports between 20000 and 32000"
}

# is_ours PID NAME: PID is alive and is the program NAME (guards against a pid reused since).
is_ours() {
  local comm
  kill -0 "$1" 2>/dev/null || return 1
  comm=$(cat "/proc/$1/comm" 2>/dev/null) || return 1
  [ "$comm" = "$2" ]
}

# stop_pids FILE: TERM each recorded daemon, wait up to 15 s, then KILL those left; by pid only.
stop_pids() {
  local file=$1 name pid left
  [ -f "$file" ] || return 0
  # slurmds first, then slurmctld, then munged (reverse of the start order)
  tac "$file" | while read -r name pid; do
    [ -n "${pid:-}" ] || continue
    if is_ours "$pid" "$name"; then kill -TERM "$pid" 2>/dev/null || true; fi
  done
  for _ in $(seq 1 150); do
    left=0
    while read -r name pid; do [ -n "${pid:-}" ] && is_ours "$pid" "$name" && left=1; done <"$file"
    [ $left -eq 0 ] && return 0
    sleep 0.1
  done
  while read -r name pid; do
    if [ -n "${pid:-}" ] && is_ours "$pid" "$name"; then
      say "$name ($pid) ignored SIGTERM for 15 s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done <"$file"
  sleep 0.2
}

# What start made under DIR, less DIR/log (all of it kept with SLURM_CLUSTER_KEEP=1).
remove_files() {
  [ "${SLURM_CLUSTER_KEEP:-0}" != 1 ] || return 0
  rm -rf "$dir/state" "$dir/spool" "$dir/run" "$dir/tmp" "$dir/munge.key" "$dir/munge.socket" \
    "$dir/munge.socket.lock" "$dir/slurm.conf" "$dir/plugstack.conf"
}

# The daemons' own logs; a daemon's stdout/stderr (NAME.out) only where it wrote no NAME.log, as when
# it died before opening it (with -D, slurmctld and slurmd copy their log to stderr too).
tail_logs() {
  local f
  for f in "$1"/log/*; do
    [ -f "$f" ] || continue
    case $f in *.out) [ -s "${f%.out}.log" ] && continue ;; esac
    echo "---- last lines of $f" >&2
    tail -n 25 "$f" >&2
  done
}

# launch NAME LOG CMD...: start CMD in a session of its own (not a process group leader here, so
# setsid execs in place and $! is the daemon itself), its output into LOG, and record its pid once
# the exec has happened (before it, /proc/PID/comm still names bash or setsid).
launch() {
  local name=$1 log=$2 pid; shift 2
  setsid "$@" </dev/null >>"$log" 2>&1 &
  pid=$!
  echo "$name $pid" >>"$dir/pids"
  for _ in $(seq 1 50); do
    is_ours "$pid" "$name" && return 0
    kill -0 "$pid" 2>/dev/null || die "$name exited at once (see $log)"
    sleep 0.05
  done
  die "$name ($pid) did not start: /proc/$pid/comm is $(cat "/proc/$pid/comm" 2>/dev/null)"
}

# wait_for SECONDS DESCRIPTION CMD...: poll CMD every 0.2 s; fail when a recorded daemon died.
wait_for() {
  local limit=$1 what=$2 start name pid; shift 2
  start=$(date +%s)
  until "$@" >/dev/null 2>&1; do
    while read -r name pid; do
      is_ours "$pid" "$name" || die "$name ($pid) exited while waiting for $what"
    done <"$dir/pids"
    [ $(( $(date +%s) - start )) -lt "$limit" ] || die "timed out after ${limit}s waiting for $what"
    sleep 0.2
  done
}

munge_works() { munge -n -S "$dir/munge.socket" | unmunge -S "$dir/munge.socket"; }
both_idle() {
  [ "$(sinfo -h -N -p debug -o '%N %t' 2>/dev/null | sort -u | tr '\n' ' ')" = "n1 idle n2 idle " ]
}
# slurmctld's main scheduler first runs about 3 s after it starts; until then a batch job waits (srun
# and salloc do not), and the first 'sbatch --wait' of a test took 4-10 s instead of 2.
sched_ran() {
  local cycles
  cycles=$(sdiag 2>/dev/null | awk '/^Main schedule statistics/ {f = 1} f && /Total cycles:/ {print $3; exit}')
  [ "${cycles:-0}" -ge 1 ]
}

started=0
cmd_start() {
  local ctl_port p1 p2 t0
  [ -d "$dir" ] || die "$dir is not a folder (create it first, e.g. mktemp -d)"
  dir=$(cd "$dir" && pwd -P)
  [ ! -e "$dir/pids" ] || die "$dir/pids exists: a cluster may be running there (run '$prog stop $dir' first)"
  # slurmstepd's socket: DIR/spool/n1/n1_JOBID.4294967294 (about 40 bytes past DIR) in sun_path's 107
  [ ${#dir} -le 60 ] || die "$dir is ${#dir} bytes long; unix sockets under it would pass 107 bytes (use a folder under /tmp)"
  [ "$(id -u)" = 0 ] || die "run as root (SlurmUser=root and slurmd must run as root)"
  local missing; missing=$(cmd_check) || die "$missing"
  t0=$(date +%s.%N)

  on_fail() {
    local rc=$?
    [ $rc -ne 0 ] && [ $started -eq 1 ] || return 0
    say "start failed; stopping what was started"
    tail_logs "$dir"
    stop_pids "$dir/pids"
    rm -f "$dir/pids"
    remove_files
    exit $rc
  }
  trap on_fail EXIT
  trap 'exit 130' INT TERM

  mkdir -p "$dir/log" "$dir/state" "$dir/spool/n1" "$dir/spool/n2" "$dir/run" "$dir/tmp/n1" "$dir/tmp/n2"
  chmod go-w "$dir"   # munged refuses a socket folder that others may write to
  : >"$dir/pids"
  started=1

  # munge: a key of our own and a daemon on a socket of our own
  rm -f "$dir/munge.key"
  if command -v mungekey >/dev/null 2>&1; then
    mungekey --create --keyfile="$dir/munge.key" --bits=1024
  else
    dd if=/dev/urandom of="$dir/munge.key" bs=1 count=1024 status=none
  fi
  chmod 0400 "$dir/munge.key"
  # --foreground logs to stderr (so no --log-file); --force: a DIR made by mktemp -d is 0700, which
  # munged refuses ('Socket is inaccessible: execute permissions for all required') unless forced
  launch munged "$dir/log/munged.log" munged --foreground --force \
    --socket="$dir/munge.socket" --key-file="$dir/munge.key" --pid-file="$dir/run/munged.pid" \
    --seed-file="$dir/run/munged.seed" --num-threads=2
  wait_for 10 "munged to answer on $dir/munge.socket" munge_works

  read -r ctl_port p1 p2 < <(pick_ports)
  cat >"$dir/slurm.conf" <<EOF
# Written by $prog for a throwaway test cluster; ports $ctl_port (slurmctld), $p1 (n1), $p2 (n2).
ClusterName=detaudit-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctl_port
SlurmdPort=$p1
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=${SLURM_CLUSTER_DEBUG:-info}
SlurmdDebug=${SLURM_CLUSTER_DEBUG:-info}
PlugStackConfig=$dir/plugstack.conf
# per node: srun --mpi=pmix puts spmix_appdir_UID_JOB.STEP under TmpFS, and the two slurmds share a host
TmpFS=$dir/tmp/%n
# no cgroups. linuxproc rather than pgid: pgid's wait for a step's process group backs off 1 s, 2 s, ...,
# and srun's helper outlives a batch script by a moment: a 0.1 s batch job took 3-4 s (now about 1 s)
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobContainerType=job_container/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# start a batch job at once (by default its scheduling may wait batch_sched_delay=3 s)
SchedulerParameters=batch_sched_delay=0
SlurmdParameters=config_overrides
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
InactiveLimit=0
KillWait=5
# 'sbatch --wait' polls at 2 s, then 8 s later while MinJobAge > 4 (a 2.5 s job took 10 s), and every
# 2 s with 4; so a finished job's record (scontrol show job) goes 4 s or more after it ends (0 is not
# allowed: slurmctld says 'MinJobAge must be at least 2')
MinJobAge=4
SlurmdTimeout=60
SlurmctldTimeout=60
${SLURM_CLUSTER_HEALTHCHECK:+HealthCheckProgram=$SLURM_CLUSTER_HEALTHCHECK
HealthCheckInterval=${SLURM_CLUSTER_HEALTHCHECK_INTERVAL:-2}
HealthCheckNodeState=ANY}
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$p1 CPUs=2 State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$p2 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
EOF
  : >"$dir/plugstack.conf"
  export SLURM_CONF=$dir/slurm.conf

  launch slurmctld "$dir/log/slurmctld.out" slurmctld -D -c -f "$dir/slurm.conf"
  wait_for 15 "slurmctld to answer on port $ctl_port" scontrol ping
  launch slurmd "$dir/log/slurmd-n1.out" slurmd -D -N n1 -f "$dir/slurm.conf"
  launch slurmd "$dir/log/slurmd-n2.out" slurmd -D -N n2 -f "$dir/slurm.conf"
  wait_for "$timeout_s" "nodes n1 and n2 to be idle" both_idle
  wait_for "$timeout_s" "slurmctld's first scheduling cycle" sched_ran

  trap - EXIT INT TERM
  say "cluster up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s:" \
    "slurmctld :$ctl_port, n1 :$p1, n2 :$p2; pids in $dir/pids"
  echo "export SLURM_CONF=$dir/slurm.conf"
}

cmd_stop() {
  [ -d "$dir" ] || die "$dir is not a folder"
  dir=$(cd "$dir" && pwd -P)
  [ -f "$dir/pids" ] || { say "no $dir/pids: nothing to stop"; return 0; }
  export SLURM_CONF=$dir/slurm.conf
  # Jobs first, so that no slurmstepd (which slurmd does not own as a child) outlives the cluster.
  if [ -f "$SLURM_CONF" ] && scontrol ping >/dev/null 2>&1; then
    if [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
      say "cancelling jobs still queued or running"
      scancel --full --quiet --partition=debug 2>/dev/null || true
      for _ in $(seq 1 100); do
        [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
        sleep 0.2
      done
    fi
  fi
  # a slurmstepd still serving a step keeps its socket in the spool folder; give it a moment
  for _ in $(seq 1 50); do
    compgen -G "$dir/spool/n*/n*_*" >/dev/null || break
    sleep 0.2
  done
  compgen -G "$dir/spool/n*/n*_*" >/dev/null &&
    say "warning: step sockets still in $dir/spool after 10 s: $(cd "$dir/spool" && echo n*/n*_*)"
  stop_pids "$dir/pids"
  local name pid alive=()
  while read -r name pid; do
    [ -n "${pid:-}" ] && is_ours "$pid" "$name" && alive+=("$name:$pid")
  done <"$dir/pids"
  [ ${#alive[@]} -eq 0 ] || die "still running after SIGKILL: ${alive[*]}"
  rm -f "$dir/pids"
  remove_files
  say "stopped"
}

case "${1:-}" in
  check) [ $# -eq 1 ] || usage; cmd_check ;;
  start) [ $# -eq 2 ] || usage; dir=$2; cmd_start ;;
  stop) [ $# -eq 2 ] || usage; dir=$2; cmd_stop ;;
  *) usage ;;
esac
