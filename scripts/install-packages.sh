#!/bin/sh
# Installs the Debian packages given that are not installed yet (`make deps` and the groups in
# the Makefile): apt-get update first, since a fresh machine's package lists may be stale or
# empty. Needs root only when something is missing.
#   scripts/install-packages.sh PACKAGE...
set -eu
missing=""
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
if [ "$(id -u)" != 0 ]; then
  echo "install-packages: installing packages needs root (apt-get install$missing)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Servers among the packages (clickhouse-server, chrony) are not started by their install: the
# tests start their own, on their own ports and sockets, and a system chronyd would also steer
# the machine's clock. invoke-rc.d asks policy-rc.d; 101 means "not now".
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
# shellcheck disable=SC2086 # one word per package
apt-get install -y -qq --no-install-recommends $missing
