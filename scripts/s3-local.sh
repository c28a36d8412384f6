#!/usr/bin/env bash
# Starts and stops a real S3-compatible server on this machine, from Debian 12's packages. Two
# servers, chosen by S3_SERVER:
#   swift    (the default) OpenStack Swift (proxy, account, container and object servers, one
#            replica, one device) with its s3api middleware (AWS SigV4) and tempauth, and
#            memcached for the auth tokens. Objects are files under DIR. Its s3api answers a
#            conditional PUT (If-None-Match: *) with 501 NotImplemented.
#   radosgw  Ceph's RADOS Gateway on a one-node Ceph cluster: one monitor and one OSD whose
#            objects live in its memory (memstore: they are gone when the server stops), no
#            manager, no authentication between the daemons. RGW honours If-None-Match: * (412
#            to the second writer): the atomic lock of `tarmac convert -o s3://` is tested on it.
# Everything they write (configuration, data, logs, pids) stays under DIR; nothing runs as a
# system service and nothing needs root. The tests use it (tests/e2e/test_s3*.py); so can you:
#
#   eval "$(scripts/s3-local.sh start /tmp/s3)"    # prints export AWS_ENDPOINT_URL=... lines
#   aws s3 mb s3://bucket; tarmac convert s3://bucket/shards/ -o out/
#   scripts/s3-local.sh stop /tmp/s3
#   S3_SERVER=radosgw scripts/s3-local.sh start /tmp/rgw    # the same on Ceph's RGW
#
# start DIR   starts the servers on free ports of 127.0.0.1 and waits until they answer (at most
#             S3_LOCAL_TIMEOUT seconds, default 60); then prints the export lines (also kept in
#             DIR/env). A new secret key each start; Swift's objects under DIR are kept, RGW's
#             cluster is made anew at each start.
#             DIR/reader-env holds the keys of a second user, who may do nothing a bucket's ACL
#             does not grant (tests of a denied PUT).
# stop DIR    stops the servers that `start DIR` started (by the pids in DIR/run).
# Packages: scripts/setup-deps.sh test (swift-proxy swift-account swift-container swift-object
# memcached); scripts/setup-deps.sh ci (radosgw ceph-mon ceph-osd). Swift's servers read
# /etc/swift/swift.conf (installed by the package) for the hash of its paths; the rest of their
# configuration is under DIR/etc.
# RGW's bucket names have 3 to 63 characters, as on AWS.
set -euo pipefail

usage() { echo "usage: $0 start DIR | stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
mkdir -p "$2"
DIR=$(cd "$2" && pwd)
RUN=$DIR/run
# stopped in this order: the gateway before the OSD before the monitor
SERVERS=(memcached account container object proxy radosgw osd mon)
SERVER=${S3_SERVER:-swift}

# Whether process $1 runs: a zombie does not (ours are orphans, reaped when init gets to it).
running() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

stop() {
  local s pid
  for s in "${SERVERS[@]}"; do
    [ -f "$RUN/$s.pid" ] || continue
    pid=$(cat "$RUN/$s.pid")
    # only a process whose command line names DIR is ours to stop
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$DIR"; then
      # radosgw takes 6 s to shut down cleanly, and keeps nothing (its objects are in the OSD)
      if [ "$s" = radosgw ]; then kill -9 "$pid" 2>/dev/null || true; fi
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do running "$pid" || break; sleep 0.1; done
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
case "$SERVER" in
  swift | radosgw) ;;
  *) echo "$0: S3_SERVER=$SERVER: choose swift (the default) or radosgw" >&2; exit 2 ;;
esac

launch() { # name command...
  local name=$1; shift
  setsid "$@" </dev/null >>"$DIR/log/$name.log" 2>&1 &
  echo $! >"$RUN/$name.pid"
}

# Prints the export lines and keeps them in DIR/env, the reader's keys in DIR/reader-env.
# Arguments: endpoint, access key, secret, region, the reader's access key and secret, the start.
print_env() {
  cat >"$DIR/env" <<EOF
export AWS_ENDPOINT_URL=$1
export AWS_ACCESS_KEY_ID=$2
export AWS_SECRET_ACCESS_KEY=$3
export AWS_REGION=$4
EOF
  cat >"$DIR/reader-env" <<EOF
export AWS_ACCESS_KEY_ID=$5
export AWS_SECRET_ACCESS_KEY=$6
EOF
  cat "$DIR/env"
  echo "# $SERVER started in $(/usr/bin/python3 -c "import time; print(f'{time.time() - $7:.1f}')")" \
    "s; stop: $0 stop $DIR" >&2
}

# Ceph's RGW on a cluster of one monitor and one memstore OSD, made anew under DIR/ceph. Its
# daemons do without cephx (auth ... = none), so there are no keyrings to hand around; the S3
# users' keys are RGW's own.
start_radosgw() {
  local b missing=()
  for b in radosgw radosgw-admin ceph-mon ceph-osd ceph monmaptool; do
    command -v "$b" >/dev/null || missing+=("$b")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "$0: not installed: ${missing[*]} (scripts/setup-deps.sh ci installs radosgw," \
      "ceph-mon and ceph-osd)" >&2
    exit 3
  fi
  stop
  rm -rf "$DIR/ceph"
  mkdir -p "$DIR/ceph/mon/a" "$DIR/ceph/osd/0" "$DIR/ceph/rgw" "$RUN" "$DIR/log"
  local start p_mon p_rgw fsid osd_uuid conf=$DIR/ceph/ceph.conf
  start=$(date +%s.%N)
  read -r p_mon p_rgw < <(/usr/bin/python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
  fsid=$(/usr/bin/python3 -c 'import uuid; print(uuid.uuid4())')
  osd_uuid=$(/usr/bin/python3 -c 'import uuid; print(uuid.uuid4())')
  # Pools of one replica and 8 placement groups; no manager, so no autoscaler. The OSD's store
  # is capped at S3_LOCAL_RGW_BYTES (default 4 GiB of memory). RGW asks for cephx and a secure
  # monitor connection by default: both off here.
  cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = 127.0.0.1:$p_mon
public addr = 127.0.0.1
cluster addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
keyring = $DIR/ceph/keyring
admin socket = $RUN/\$name.asok
log file = $DIR/log/\$name.log
pid file = $RUN/\$name.own.pid
crash dir = $DIR/ceph/crash
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail crit = 1
[mon]
mon data = $DIR/ceph/mon/a
mon initial members = a
[osd]
osd data = $DIR/ceph/osd/0
osd objectstore = memstore
memstore device bytes = ${S3_LOCAL_RGW_BYTES:-4294967296}
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$p_rgw
rgw data = $DIR/ceph/rgw
EOF
  ceph-authtool --create-keyring "$DIR/ceph/keyring" --gen-key -n mon. --cap mon 'allow *' \
    >/dev/null
  monmaptool --create --add a "127.0.0.1:$p_mon" --fsid "$fsid" "$DIR/ceph/monmap" >/dev/null
  ceph-mon -c "$conf" --mkfs -i a --monmap "$DIR/ceph/monmap" --keyring "$DIR/ceph/keyring" \
    >>"$DIR/log/mon.log" 2>&1
  # -f: in the foreground of its setsid (the pid in DIR/run is the daemon's)
  launch mon ceph-mon -c "$conf" -i a -f
  local timeout=${S3_LOCAL_TIMEOUT:-60}
  fail() {
    echo "$0: $1; the logs: $DIR/log/" >&2
    tail -n 5 "$DIR"/log/*.log >&2 || true
    stop
    exit 1
  }
  ceph -c "$conf" --connect-timeout "$timeout" osd create "$osd_uuid" >/dev/null 2>>"$DIR/log/mon.log" ||
    fail "the Ceph monitor did not answer within ${timeout}s"
  ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" >>"$DIR/log/osd.log" 2>&1 ||
    fail "ceph-osd --mkfs failed"
  launch osd ceph-osd -c "$conf" -i 0 -f
  local deadline=$((SECONDS + timeout))
  until ceph -c "$conf" osd stat 2>/dev/null | grep -q ' 1 up'; do
    [ $SECONDS -lt $deadline ] || fail "the Ceph OSD was not up within ${timeout}s"
    kill -0 "$(cat "$RUN/osd.pid")" 2>/dev/null || fail "ceph-osd exited"
    sleep 0.2
  done
  # radosgw-admin makes RGW's pools and the users; the gateway reads them when it starts.
  local secret reader_secret
  secret=$(/usr/bin/python3 -c 'import secrets; print(secrets.token_hex(20))')
  reader_secret=$(/usr/bin/python3 -c 'import secrets; print(secrets.token_hex(20))')
  timeout "$timeout" radosgw-admin -c "$conf" -n client.rgw user create --uid tarmac \
    --display-name tarmac --access-key tarmac --secret "$secret" >/dev/null 2>>"$DIR/log/rgw.log" ||
    fail "radosgw-admin user create failed"
  timeout "$timeout" radosgw-admin -c "$conf" -n client.rgw user create --uid reader \
    --display-name reader --access-key reader --secret "$reader_secret" \
    >/dev/null 2>>"$DIR/log/rgw.log" || fail "radosgw-admin user create failed"
  launch radosgw radosgw -c "$conf" -n client.rgw -f
  until /usr/bin/python3 -c 'import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=2)' "http://127.0.0.1:$p_rgw/" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "radosgw did not answer within ${timeout}s"
    kill -0 "$(cat "$RUN/radosgw.pid")" 2>/dev/null || fail "radosgw exited"
    sleep 0.1
  done
  print_env "http://127.0.0.1:$p_rgw" tarmac "$secret" us-east-1 reader "$reader_secret" "$start"
}

if [ "$SERVER" = radosgw ]; then
  start_radosgw
  exit 0
fi

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
for s in memcached account container object proxy; do
  pid=$(cat "$RUN/$s.pid")
  kill -0 "$pid" 2>/dev/null || { echo "$0: $s exited; its log: $DIR/log/$s.log" >&2; stop; exit 1; }
done

print_env "http://127.0.0.1:$P_PROXY" "$ACCESS" "$SECRET" "$REGION" tarmac:reader \
  "$READER_SECRET" "$START"
