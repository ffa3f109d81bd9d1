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
apt-get update -qq
# shellcheck disable=SC2086 # one word per package
apt-get install -y -qq --no-install-recommends $missing
