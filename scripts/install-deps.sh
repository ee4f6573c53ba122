#!/usr/bin/env bash
# Installs the Debian packages dptrain needs, only those that are missing.
# Usage: scripts/install-deps.sh [extra-package ...]
set -euo pipefail

packages=(cmake make gcc pkg-config python3 zlib1g-dev libdnnl-dev libplplot-dev plplot-driver-cairo
          libprotobuf-c-dev protobuf-c-compiler libonnx-dev libisal-dev
          libcmocka-dev dataset-fashion-mnist libopenmpi-dev openmpi-bin iproute2 libpng-dev
          libjpeg62-turbo-dev libarchive-dev python3-dev python3-venv
          # what `pkg-config --static libarchive` links (libdptrain.a's users)
          nettle-dev libacl1-dev liblzma-dev libzstd-dev liblz4-dev libbz2-dev libxml2-dev "$@")

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "installing Debian packages: ${missing[*]}" >&2
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "error: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q >&2
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
