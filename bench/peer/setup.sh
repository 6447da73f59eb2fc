#!/bin/sh
# Sets up the llama.cpp peer (bench/peer/README.md): fetches llama.cpp's
# prebuilt Vulkan libraries and the matching source from npm (version pinned
# below) into bench/.peer/ (git-ignored), takes llama.h and the ggml headers
# from the source's git bundle, and builds llama-peer against the libraries.
#
#   bench/.peer/dist/        llama-peer and the libraries it loads, with a
#                            $ORIGIN rpath: runs here, and from any place
#   .gl/peer/peer.tar.xz     the same folder packed for a device run (the
#                            Vulkan library alone is 55 MB unpacked)
#   .gl/peer/llama-peer      a launcher: unpacks the archive once into
#                            ${TMPDIR:-/tmp} and runs llama-peer from there
#
# Needs npm, git, gcc and xz. PEER_CARRY=DIR packs into DIR instead of .gl/peer.
set -e
cd "$(dirname "$0")/../.."
VERSION=3.21.1
WORK=bench/.peer
DIST=$WORK/dist
CARRY=${PEER_CARRY:-.gl/peer}
PKG_LIBS=@node-llama-cpp/linux-x64-vulkan
PKG_SRC=node-llama-cpp

mkdir -p "$WORK/npm" "$CARRY"
for d in "$WORK" "$CARRY"; do
  git check-ignore -q "$d/" || { echo "setup: $d is not git-ignored" >&2; exit 1; }
done

# 1. The two npm packages, kept once fetched.
libs_tgz=$WORK/npm/node-llama-cpp-linux-x64-vulkan-$VERSION.tgz
src_tgz=$WORK/npm/node-llama-cpp-$VERSION.tgz
for spec in "$PKG_LIBS@$VERSION" "$PKG_SRC@$VERSION"; do
  case $spec in
    "$PKG_LIBS"*) f=$libs_tgz ;;
    *) f=$src_tgz ;;
  esac
  [ -s "$f" ] || (cd "$WORK/npm" && npm pack --silent "$spec" >/dev/null)
  [ -s "$f" ] || { echo "setup: npm pack $spec did not give $f" >&2; exit 1; }
done

# 2. Headers from the source package's git bundle (the libraries' commit).
rm -rf "$WORK/pkg" "$WORK/include" "$WORK/src.git"
mkdir -p "$WORK/pkg/libs" "$WORK/pkg/src" "$WORK/include"
tar xzf "$libs_tgz" -C "$WORK/pkg/libs"
tar xzf "$src_tgz" -C "$WORK/pkg/src" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
git init -q --bare "$WORK/src.git"
git -C "$WORK/src.git" fetch -q "$PWD/$WORK/pkg/src/package/llama/gitRelease.bundle" HEAD
git -C "$WORK/src.git" archive FETCH_HEAD include/llama.h ggml/include | tar x -C "$WORK/include"
commit=$(git -C "$WORK/src.git" rev-parse --short FETCH_HEAD)
tag=$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$WORK/pkg/src/package/llama/llama.cpp.info.json")

# 3. The libraries llama-peer needs: llama, ggml, ggml-base, and the
#    backends ggml loads at run time (Vulkan, and every CPU variant: ggml
#    picks the one the host's CPU runs best).
bins=$WORK/pkg/libs/package/bins/linux-x64-vulkan
rm -rf "$DIST"
mkdir -p "$DIST"
cp "$bins"/libllama.vulkan.*.so "$bins"/libggml.vulkan.*.so "$bins"/libggml-base.so \
   "$bins"/libggml-vulkan.so "$bins"/libggml-cpu-*.so "$DIST"/
libllama=$(basename "$DIST"/libllama.vulkan.*.so)
libggml=$(basename "$DIST"/libggml.vulkan.*.so)

# 4. llama-peer, linked against them by SONAME, found through $ORIGIN.
gcc -std=c11 -O2 -g -Wall -Wextra -Werror \
    -I "$WORK/include/include" -I "$WORK/include/ggml/include" \
    bench/peer/llama_peer.c -o "$DIST/llama-peer" \
    -L "$DIST" -l":$libllama" -l":$libggml" -l:libggml-base.so \
    -Wl,-rpath,'$ORIGIN' -Wl,--disable-new-dtags -lm
printf 'llama.cpp %s (%s), npm %s@%s\n' "$tag" "$commit" "$PKG_LIBS" "$VERSION" > "$DIST/VERSION"
if ldd "$DIST/llama-peer" | grep -q 'not found'; then
  echo "setup: llama-peer has unresolved libraries:" >&2
  ldd "$DIST/llama-peer" >&2
  exit 1
fi

# 5. The folder to carry: the archive and its launcher.
tar cf - -C "$DIST" . | xz -T0 -6 > "$CARRY/peer.tar.xz.tmp"
mv "$CARRY/peer.tar.xz.tmp" "$CARRY/peer.tar.xz"
cp bench/peer/launch.sh "$CARRY/llama-peer"
chmod +x "$CARRY/llama-peer"
cp "$DIST/VERSION" "$CARRY/VERSION"
echo "setup: $(cat "$DIST/VERSION")"
echo "setup: $DIST/llama-peer ($(du -sh "$DIST" | cut -f1) unpacked); carry $CARRY ($(du -sh "$CARRY" | cut -f1))"
