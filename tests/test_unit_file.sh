#!/bin/sh
# test_unit_file.sh — the systemd units as `make install` writes them.
# rtomod.service must be a notify service with a watchdog, restart on
# failure, run as its own user with the hardening options and a memory
# limit, and keep the NVIDIA device nodes reachable; rtomo-router.service
# must run the router with its arguments from router.env, restart on
# failure, as the same user, hardened, without devices.  Both must pass
# `systemd-analyze verify` where systemd is installed.
set -eu
units=${top_builddir:-.}/systemd
unit=$units/rtomod.service
router=$units/rtomo-router.service
for u in "$unit" "$router"; do
  [ -f "$u" ] || { echo "no $u (make builds it)"; exit 1; }
done

fail=0
need() {   # need UNIT LINE
  if ! grep -qx "$2" "$1"; then
    echo "FAIL: $1 lacks the line: $2"; fail=1
  fi
}
for line in 'Type=notify' 'NotifyAccess=main' 'Restart=on-failure' \
            'User=rtomo' 'NoNewPrivileges=yes' 'ProtectSystem=strict' \
            'ProtectHome=yes' 'PrivateTmp=yes' 'DevicePolicy=closed' \
            'DeviceAllow=char-nvidia-frontend rw' 'DeviceAllow=char-nvidia-uvm rw' \
            'DeviceAllow=/dev/nvidiactl rw' 'WantedBy=multi-user.target'; do
  need "$unit" "$line"
done
grep -q '^WatchdogSec=[1-9]' "$unit" || { echo "FAIL: no WatchdogSec"; fail=1; }
grep -q '^MemoryMax=[1-9]' "$unit" || { echo "FAIL: no MemoryMax"; fail=1; }
grep -q '^ExecStart=/.*/rtomod --config /.*/rtomo/rtomod.json$' "$unit" ||
  { echo "FAIL: ExecStart does not run rtomod with its configuration"; fail=1; }
for line in 'Restart=on-failure' 'User=rtomo' 'NoNewPrivileges=yes' \
            'ProtectSystem=strict' 'PrivateDevices=yes' \
            'WantedBy=multi-user.target'; do
  need "$router" "$line"
done
grep -q '^EnvironmentFile=/.*/rtomo/router.env$' "$router" ||
  { echo "FAIL: the router's arguments do not come from router.env"; fail=1; }
grep -q '^ExecStart=/.*/rtomo-router \$ROUTER_ARGS$' "$router" ||
  { echo "FAIL: ExecStart does not run rtomo-router with ROUTER_ARGS"; fail=1; }
for u in "$unit" "$router"; do
  if grep -q '@[a-z]*@' "$u"; then
    echo "FAIL: unsubstituted placeholders in $u"; fail=1
  fi
done
[ "$fail" -eq 0 ] || exit 1

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "systemd-analyze not installed: static checks passed, verify skipped"
  exit 0
fi
build=$(cd "${top_builddir:-.}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s|^ExecStart=[^ ]*|ExecStart=$build/rtomod|" "$unit" > "$tmp/rtomod.service"
echo "ROUTER_ARGS=--daemon tcp://127.0.0.1:5555=0:1" > "$tmp/router.env"
sed -e "s|^ExecStart=[^ ]*|ExecStart=$build/rtomo-router|" \
    -e "s|^EnvironmentFile=.*|EnvironmentFile=$tmp/router.env|" \
    "$router" > "$tmp/rtomo-router.service"
for name in rtomod rtomo-router; do
  out=$(systemd-analyze verify "$tmp/$name.service" 2>&1) || {
    echo "FAIL: systemd-analyze verify $name.service:"; echo "$out"; exit 1; }
  if echo "$out" | grep -q "$name.service"; then
    echo "FAIL: systemd-analyze verify complained:"; echo "$out"; exit 1
  fi
done
echo "systemd-analyze verify: clean"
