#!/usr/bin/env bash
# `make stack`: the hub on the full stack, without Docker: PostgreSQL, Redis, SeaweedFS's S3 server and
# Oxigraph's SPARQL server (scripts/services.sh, their data under var/stack), two Celery workers and the web
# server (hub_serve), all on 127.0.0.1. Ctrl-C stops the hub, then the services. Ports: HUB_STACK_PG_PORT (55433),
# HUB_STACK_REDIS_PORT (56380), HUB_STACK_S3_PORT (the first of SeaweedFS's eight; 23800), HUB_STACK_SPARQL_PORT
# (7878), --bind for the web server (hub_serve's other options pass through too).
set -euo pipefail
cd "$(dirname "$0")/.."
export HUB_TEST_RUN_DIR=${HUB_STACK_DIR:-$PWD/var/stack}
export HUB_TEST_PG_PORT=${HUB_STACK_PG_PORT:-55433} HUB_TEST_REDIS_PORT=${HUB_STACK_REDIS_PORT:-56380} \
  HUB_TEST_S3_PORT=${HUB_STACK_S3_PORT:-23800} HUB_TEST_SPARQL_PORT=${HUB_STACK_SPARQL_PORT:-7878}
trap 'scripts/services.sh stop' EXIT
exports=$(scripts/services.sh start)  # fails here, not at the next command, when a service cannot start
eval "$exports"
database() { psql -h 127.0.0.1 -p "$HUB_TEST_PG_PORT" -U postgres -tAq "$@"; }
[ "$(database -c "SELECT 1 FROM pg_database WHERE datname = 'hpcfair'")" = 1 ] || database -c "CREATE DATABASE hpcfair"
export HUB_VAR_DIR=$HUB_TEST_RUN_DIR/var HUB_STORAGE=s3 HUB_S3_ENDPOINT=$HUB_TEST_S3_ENDPOINT \
  HUB_S3_ACCESS_KEY=$HUB_TEST_S3_ACCESS_KEY HUB_S3_SECRET_KEY=$HUB_TEST_S3_SECRET_KEY \
  HUB_SPARQL_STORE_URL=$HUB_TEST_SPARQL_URL
.venv/bin/python manage.py hub_serve --celery-workers 2 "$@"
