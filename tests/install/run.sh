#!/bin/sh
# The install test: installs the build into a temporary prefix and builds
# the frontend in this folder against it every way a user would, outside
# the source tree (it sees only the prefix): find_package (shared and
# static), `cc app.c $(pkg-config --cflags --libs loom)`, and a static link
# through `pkg-config --static`; then the README's example, compiled with
# the line the README shows. Every binary runs its steps on the default
# device under the validation layer.
#
# usage: run.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
cc=${CC:-cc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
app=$work/app

cmake --install "$build" --prefix "$prefix" >/dev/null
mkdir "$app"
cp "$src/tests/install/app.c" "$src/tests/install/CMakeLists.txt" "$app/"
# Nothing may reach the source tree's headers by accident.
unset CPATH C_INCLUDE_PATH LIBRARY_PATH || true

echo "== find_package(loom)"
cmake -S "$app" -B "$app/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$app/build" >/dev/null
if grep -rq -- "$src" "$app/build/CMakeFiles/consumer.dir/flags.make"; then
    echo "the consumer's flags name the source tree" >&2
    exit 1
fi
LD_LIBRARY_PATH="$prefix/lib" "$app/build/consumer"
"$app/build/consumer_static"

echo "== cc app.c \$(pkg-config --cflags --libs loom)"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cd "$app"
$cc -std=c11 -Wall -Wextra -Werror -o consumer_pc app.c $(pkg-config --cflags --libs loom) -lm
LD_LIBRARY_PATH="$prefix/lib" ./consumer_pc

echo "== cc app.c \$(pkg-config --static --cflags --libs loom), static-only prefix"
static=$work/static
cp -r "$prefix" "$static"
rm -f "$static"/lib/libloom.so*
PKG_CONFIG_PATH="$static/lib/pkgconfig" sh -c \
    "$cc -std=c11 -o consumer_pc_static app.c \$(pkg-config --static --cflags --libs loom) -lm"
if readelf -d consumer_pc_static | grep -q 'libloom'; then
    echo "the static consumer needs libloom at run time" >&2
    exit 1
fi
./consumer_pc_static

echo "== the README's example"
# The first C block of README.md, compiled with the line the README shows.
awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on { print }' "$src/README.md" > readme.c
line=$(grep -m1 '^cc readme.c ' "$src/README.md")
[ -n "$line" ] || { echo "README.md shows no 'cc readme.c' line" >&2; exit 1; }
echo "$line"
sh -c "$line -Wall -Werror"
LD_LIBRARY_PATH="$prefix/lib" ./readme
echo "install test: ok"
