#!/bin/sh
# Installs the Debian 12 packages loom needs, only those missing. Needs root
# (or sudo) when something is missing; prints what it installs.
set -e
PKGS="cmake make gcc pkg-config libxxhash-dev check libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers glslc libshaderc-dev glslang-dev spirv-tools"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing
