#!/usr/bin/env bash
# Installs the OS packages the integration tests need when they are missing:
# redis-server (queues), redis-sentinel (failover tests) and prometheus +
# promtool (dashboards, alert rules).
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || missing+=(redis-sentinel)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
echo "installing: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The Debian packages start system services; the tests start their own on free ports.
$SUDO systemctl stop redis-server redis-sentinel prometheus >/dev/null 2>&1 || true
