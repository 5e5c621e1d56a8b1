#!/usr/bin/env bash
# Installs the system packages that `npm test` needs and the machine lacks, on Debian (12 or 13)
# or Ubuntu, as root: redis-server (the tests' private Redis), valkey-server (the durability tests:
# WAITAOF), chromium (the dashboard's browser tests) and prometheus (promtool checks the alert
# rules). Valkey 8 is in Debian 12's bookworm-backports suite: where no valkey-server is
# available otherwise, the suite is added to the `Suites:` line of the machine's existing Debian
# source file. Idempotent: a second run installs nothing. `.ci/run` runs it too.
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# The example webhook receiver's test runs examples/python/webhook_receiver.py.
command -v python3 >/dev/null 2>&1 || need+=(python3)
want_valkey=0
command -v valkey-server >/dev/null 2>&1 || want_valkey=1
if [ ${#need[@]} -eq 0 ] && [ "$want_valkey" -eq 0 ]; then
  echo "prerequisites: all installed"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
valkey_suite=()
if [ "$want_valkey" -eq 1 ]; then
  candidate=$(apt-cache policy valkey-server 2>/dev/null | awk '/Candidate:/ {print $2}')
  sources=/etc/apt/sources.list.d/debian.sources
  if { [ -z "$candidate" ] || [ "$candidate" = "(none)" ]; } && [ -f "$sources" ] &&
    grep -q '^Suites: bookworm bookworm-updates$' "$sources"; then
    echo "prerequisites: adding bookworm-backports to $sources for valkey-server"
    sed -i '0,/^Suites: bookworm bookworm-updates$/s//Suites: bookworm bookworm-updates bookworm-backports/' "$sources"
    apt-get update -qq
  fi
  if grep -qs 'bookworm-backports' "$sources"; then valkey_suite=(-t bookworm-backports); fi
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "prerequisites: installing ${need[*]}"
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ "$want_valkey" -eq 1 ]; then
  echo "prerequisites: installing valkey-server"
  apt-get install -y -qq "${valkey_suite[@]}" valkey-server >/dev/null
fi
echo "prerequisites: done"
