#!/usr/bin/env bash
# Make sure a Redis answers at 127.0.0.1:6379 for the test suite: start redis-server if none
# answers, installing it from Debian's packages when it is missing. Prints the REDIS_URL to use.
set -euo pipefail
port="${REDIS_PORT:-6379}"
ping() { (exec 3<>/dev/tcp/127.0.0.1/"$port" && printf 'PING\r\n' >&3 && head -c 5 <&3 | grep -q PONG) 2>/dev/null; }
if ! ping; then
  if ! command -v redis-server >/dev/null 2>&1; then
    echo "redis-server not found; installing it with apt-get" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >&2
  fi
  redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
    --dir /tmp --logfile /tmp/gpu-advisor-redis-"$port".log >&2
  for _ in $(seq 1 50); do ping && break; sleep 0.1; done
  ping || { echo "could not start redis-server on port $port" >&2; exit 1; }
fi
echo "redis://127.0.0.1:$port/15"
