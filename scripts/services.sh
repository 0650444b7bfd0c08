#!/usr/bin/env bash
# Start or stop the test services: a private PostgreSQL cluster and a private Redis, both on
# 127.0.0.1 and on their own ports, so nothing else on the machine is touched; and a private Slurm cluster
# (scripts/slurm.sh, HUB_TEST_SLURM_PORT) where Slurm is installed.
#   scripts/services.sh start   prints the environment to export (eval "$(scripts/services.sh start)")
#   scripts/services.sh stop    stops exactly the servers it started (by their PID files)
set -euo pipefail
RUN_DIR=${HUB_TEST_RUN_DIR:-/tmp/hpcfair-test-services}
PG_PORT=${HUB_TEST_PG_PORT:-55432}
REDIS_PORT=${HUB_TEST_REDIS_PORT:-56379}
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
PG_DATA=$RUN_DIR/pg

as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
  mkdir -p "$RUN_DIR"; chmod 755 "$RUN_DIR"
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    mkdir -p "$PG_DATA"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$PG_DATA"
    as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust -E UTF8 >/dev/null
  fi
  if ! as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; then
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -w -l "$PG_DATA/server.log" -o \
      "-p $PG_PORT -k $PG_DATA -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
      start >/dev/null
  fi
  if [ ! -f "$RUN_DIR/redis.pid" ] || ! kill -0 "$(cat "$RUN_DIR/redis.pid")" 2>/dev/null; then
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --daemonize yes --pidfile "$RUN_DIR/redis.pid" \
      --save "" --appendonly no --dir "$RUN_DIR" --logfile "$RUN_DIR/redis.log" >/dev/null
    for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  fi
  # A private one-machine Slurm cluster (scripts/slurm.sh) where Slurm is installed and we are root (its daemons
  # run as root and munge): tests/jobs/test_slurm.py
  if command -v slurmctld >/dev/null && [ "$(id -u)" -eq 0 ]; then "$(dirname "$0")/slurm.sh" start; fi
  echo "export DATABASE_URL=postgres://postgres@127.0.0.1:$PG_PORT/hpcfair"
  echo "export HUB_BROKER_URL=redis://127.0.0.1:$REDIS_PORT/0"
}

stop() {
  if command -v slurmctld >/dev/null && [ "$(id -u)" -eq 0 ]; then "$(dirname "$0")/slurm.sh" stop; fi
  if [ -f "$PG_DATA/postmaster.pid" ]; then
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null || true
  fi
  if [ -f "$RUN_DIR/redis.pid" ]; then
    kill "$(cat "$RUN_DIR/redis.pid")" 2>/dev/null || true
    rm -f "$RUN_DIR/redis.pid"
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
