#!/usr/bin/env bash
# What `cargo bench --bench index` measures mailgate against: notmuch (the Debian package), the
# anchor of its ingest, index size and query latency figures. Installs it with apt-get when it is
# missing (as root, or through sudo); the bench itself never installs anything and prints
# "skipped: notmuch not installed" without it.
set -euo pipefail
if command -v notmuch >/dev/null 2>&1; then
  echo "notmuch $(notmuch --version 2>/dev/null | awk '{print $2}') is installed"
  exit 0
fi
sudo=
if [ "$(id -u)" != 0 ]; then
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends notmuch
notmuch --version
