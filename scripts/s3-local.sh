#!/usr/bin/env bash
# Starts and stops a real S3-compatible server on this machine, from Debian 12's packages:
# OpenStack Swift (proxy, account, container and object servers, one replica, one device) with
# its s3api middleware (AWS SigV4) and tempauth, and memcached for the auth tokens. Everything
# it writes (configuration, rings, objects, logs, pids) stays under DIR; nothing runs as a
# system service and nothing needs root. The tests use it (tests/e2e/test_s3.py); so can you:
#
#   eval "$(scripts/s3-local.sh start /tmp/s3)"    # prints export AWS_ENDPOINT_URL=... lines
#   aws s3 mb s3://bucket; tarmac convert s3://bucket/shards/ -o out/
#   scripts/s3-local.sh stop /tmp/s3
#
# start DIR   starts the servers on free ports of 127.0.0.1 and waits until they answer (at most
#             S3_LOCAL_TIMEOUT seconds, default 60); then prints the export lines (also kept in
#             DIR/env). A new secret key each start; the objects under DIR are kept.
#             DIR/reader-env holds the keys of a second user, tarmac:reader, who may do nothing
#             a bucket's ACL does not grant (tests of a denied PUT).
# stop DIR    stops the servers that `start DIR` started (by the pids in DIR/run).
# Packages: scripts/setup-deps.sh test (swift-proxy swift-account swift-container swift-object
# memcached). Swift's servers read /etc/swift/swift.conf (installed by the package) for the hash
# of its paths; the rest of their configuration is under DIR/etc.
set -euo pipefail

usage() { echo "usage: $0 start DIR | stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
mkdir -p "$2"
DIR=$(cd "$2" && pwd)
RUN=$DIR/run
SERVERS=(memcached account container object proxy)

stop() {
  local s pid
  for s in "${SERVERS[@]}"; do
    [ -f "$RUN/$s.pid" ] || continue
    pid=$(cat "$RUN/$s.pid")
    # only a process whose command line names DIR is ours to stop
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$DIR"; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$RUN/$s.pid"
  done
}

case "$cmd" in
  stop) stop; exit 0 ;;
  start) ;;
  *) usage ;;
esac

missing=()
for b in swift-proxy-server swift-account-server swift-container-server swift-object-server \
  memcached; do
  command -v "$b" >/dev/null || missing+=("$b")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "$0: not installed: ${missing[*]} (scripts/setup-deps.sh test installs them)" >&2
  exit 3
fi
[ -r /etc/swift/swift.conf ] || {
  echo "$0: /etc/swift/swift.conf is missing (the swift package installs it; reinstall swift)" >&2
  exit 3
}

stop # a server left from an earlier start of DIR
mkdir -p "$DIR/etc" "$DIR/srv/d1" "$RUN" "$DIR/log" "$DIR/cache"
START=$(date +%s.%N)
# Swift keeps an object's metadata in user extended attributes of its file.
if ! /usr/bin/python3 -c '
import os, sys
p = os.path.join(sys.argv[1], ".xattr-check")
open(p, "w").close()
try:
    os.setxattr(p, "user.swift.check", b"1")
finally:
    os.remove(p)' "$DIR/srv/d1" 2>/dev/null; then
  echo "$0: the filesystem of $DIR has no user extended attributes, which Swift stores" \
    "objects' metadata in: choose a DIR on ext4, xfs or btrfs" >&2
  exit 1
fi

# Five free ports, chosen by the kernel (a port taken between this and the bind fails the start).
read -r P_MEMCACHE P_ACCOUNT P_CONTAINER P_OBJECT P_PROXY < <(/usr/bin/python3 -c '
import socket
socks = [socket.socket() for _ in range(5)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
USER_NAME=$(id -un)
SECRET=$(/usr/bin/python3 -c 'import secrets; print(secrets.token_hex(20))')
READER_SECRET=$(/usr/bin/python3 -c 'import secrets; print(secrets.token_hex(20))')
ACCESS=tarmac:tarmac # tempauth's account:user is the S3 access key
REGION=us-east-1

backend_conf() { # name port
  cat >"$DIR/etc/$1-server.conf" <<EOF
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = $2
workers = 0
user = $USER_NAME
swift_dir = $DIR/etc
devices = $DIR/srv
mount_check = false
disable_fallocate = true
log_name = $1

[pipeline:main]
pipeline = healthcheck $1-server

[app:$1-server]
use = egg:swift#$1

[filter:healthcheck]
use = egg:swift#healthcheck
EOF
}
backend_conf account "$P_ACCOUNT"
backend_conf container "$P_CONTAINER"
backend_conf object "$P_OBJECT"
cat >"$DIR/etc/proxy-server.conf" <<EOF
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = $P_PROXY
workers = 0
user = $USER_NAME
swift_dir = $DIR/etc
log_name = proxy

[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:s3api]
use = egg:swift#s3api
location = $REGION

[filter:tempauth]
use = egg:swift#tempauth
user_tarmac_tarmac = $SECRET .admin
# a user of the same account without rights of its own (a denied PUT); see DIR/reader-env
user_tarmac_reader = $READER_SECRET

[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:$P_MEMCACHE

[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:healthcheck]
use = egg:swift#healthcheck
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:listing_formats]
use = egg:swift#listing_formats
[filter:copy]
use = egg:swift#copy
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo
EOF

# One device, one replica, 2^6 partitions: the smallest ring Swift accepts for a single node
# (Swift's RingBuilder in one process: swift-ring-builder takes half a second a call).
/usr/bin/python3 - "$DIR/etc" "$P_ACCOUNT" "$P_CONTAINER" "$P_OBJECT" <<'EOF'
import sys
from swift.common.ring import RingBuilder
etc = sys.argv[1]
for name, port in zip(("account", "container", "object"), sys.argv[2:]):
    builder = RingBuilder(6, 1, 1)
    builder.add_dev({"id": 0, "region": 1, "zone": 1, "ip": "127.0.0.1", "port": int(port),
                     "device": "d1", "weight": 1.0})
    builder.rebalance()
    builder.save(f"{etc}/{name}.builder")
    builder.get_ring().save(f"{etc}/{name}.ring.gz")
EOF

launch() { # name command...
  local name=$1; shift
  setsid "$@" </dev/null >>"$DIR/log/$name.log" 2>&1 &
  echo $! >"$RUN/$name.pid"
}
launch memcached memcached -l 127.0.0.1 -p "$P_MEMCACHE" -U 0 -m 16 -P "$RUN/memcached.own.pid" \
  -u "$USER_NAME" -c 64
# -v: log to the console (our log file); Swift logs to syslog otherwise
for s in account container object proxy; do
  launch "$s" "swift-$s-server" "$DIR/etc/$s-server.conf" -v
done

TIMEOUT=${S3_LOCAL_TIMEOUT:-60}
if ! /usr/bin/python3 - "$TIMEOUT" "$P_ACCOUNT" "$P_CONTAINER" "$P_OBJECT" "$P_PROXY" <<'EOF'
import sys, time, urllib.request
deadline = time.monotonic() + float(sys.argv[1])
for port in sys.argv[2:]:
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthcheck", timeout=2) as r:
                if r.status == 200: break
        except OSError:
            pass
        if time.monotonic() > deadline: sys.exit(1)
        time.sleep(0.1)
EOF
then
  echo "$0: the servers did not answer within ${TIMEOUT}s; their logs: $DIR/log/" >&2
  tail -n 5 "$DIR"/log/*.log >&2 || true
  stop
  exit 1
fi
for s in "${SERVERS[@]}"; do
  pid=$(cat "$RUN/$s.pid")
  kill -0 "$pid" 2>/dev/null || { echo "$0: $s exited; its log: $DIR/log/$s.log" >&2; stop; exit 1; }
done

cat >"$DIR/env" <<EOF
export AWS_ENDPOINT_URL=http://127.0.0.1:$P_PROXY
export AWS_ACCESS_KEY_ID=$ACCESS
export AWS_SECRET_ACCESS_KEY=$SECRET
export AWS_REGION=$REGION
EOF
cat >"$DIR/reader-env" <<EOF
export AWS_ACCESS_KEY_ID=tarmac:reader
export AWS_SECRET_ACCESS_KEY=$READER_SECRET
EOF
cat "$DIR/env"
echo "# started in $(/usr/bin/python3 -c "import time; print(f'{time.time() - $START:.1f}')") s; stop: $0 stop $DIR" >&2
