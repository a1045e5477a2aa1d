#!/usr/bin/env bash
# Installs the OS packages the integration tests need when they are missing:
# redis-server (queues), prometheus + promtool (dashboards, alert rules) and
# chromium (the web view's browser test, run headless).
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
optional=()
command -v chromium >/dev/null 2>&1 || optional+=(chromium)
if [ ${#missing[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ]; then
	exit 0
fi
echo "installing: ${missing[*]} ${optional[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
	$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# A browser that cannot be installed skips the browser test (it says so)
# rather than failing the whole run.
if [ ${#optional[@]} -gt 0 ]; then
	$SUDO apt-get install -y -qq --no-install-recommends "${optional[@]}" >/dev/null ||
		echo "could not install ${optional[*]}: internal/web's browser test will skip"
fi
# The Debian packages start system services; the tests start their own on free ports.
$SUDO systemctl stop redis-server prometheus >/dev/null 2>&1 || true
