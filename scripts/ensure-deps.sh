#!/usr/bin/env bash
# Installs the OS packages the integration tests need when they are missing:
# redis-server (queues), redis-sentinel (failover tests), prometheus +
# promtool (dashboards, alert rules) and chromium (the web view's browser
# test, run headless).
set -euo pipefail

# The MCP Inspector, a third-party MCP client, for amkctl mcp's interop test
# (cmd/amkctl/mcp_test.go): installed from npm into .cache/mcp-inspector/VERSION
# when Node is here. Without npm, or when the registry cannot be reached, it is
# skipped with a message and the test skips too; it never fails the build.
ensure_mcp_inspector() {
	local version=0.17.2
	local dir
	dir="$(dirname "$0")/../.cache/mcp-inspector/$version"
	if [ -x "$dir/node_modules/.bin/mcp-inspector" ]; then
		return 0
	fi
	if ! command -v npm >/dev/null 2>&1; then
		echo "skipping the MCP Inspector: no npm (Node.js) on this machine; its test will skip"
		return 0
	fi
	echo "installing @modelcontextprotocol/inspector@$version into .cache/mcp-inspector/$version"
	if ! timeout 300 npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
		"@modelcontextprotocol/inspector@$version" >/dev/null 2>&1; then
		echo "skipping the MCP Inspector: npm install failed (registry unreachable?); its test will skip"
	fi
	return 0
}
ensure_mcp_inspector

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || missing+=(redis-sentinel)
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
$SUDO systemctl stop redis-server redis-sentinel prometheus >/dev/null 2>&1 || true
