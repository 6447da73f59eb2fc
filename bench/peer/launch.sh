#!/bin/sh
# llama-peer's launcher in a carried folder (setup.sh copies it there as
# llama-peer, beside peer.tar.xz): unpacks the archive once per content into
# ${TMPDIR:-/tmp}/loom-peer-<checksum>/ and runs llama-peer from there with
# the arguments given. Without an xz program it unpacks through Python.
set -e
here=$(cd "$(dirname "$0")" && pwd)
sum=$(cksum < "$here/peer.tar.xz" | cut -d' ' -f1)
dir=${TMPDIR:-/tmp}/loom-peer-$sum
if [ ! -x "$dir/llama-peer" ]; then
  tmp=$dir.$$
  rm -rf "$tmp"
  mkdir -p "$tmp"
  if command -v xz >/dev/null 2>&1; then
    xz -dc "$here/peer.tar.xz" | tar xf - -C "$tmp"
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
      "$here/peer.tar.xz" "$tmp"
  fi
  mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"   # another launcher got there first
fi
exec "$dir/llama-peer" "$@"
