#!/usr/bin/env bash
# Copies the header-only dependencies and GoogleTest's sources from this Debian machine into .deps/
# (ignored by git), so the tree can be built on a machine without Debian's -dev packages, such as the
# GPU machines: cmake picks them up from DETAUDIT_DEPS_DIR (default .deps).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.deps}
rm -rf "$out"
mkdir -p "$out/include"
cp -r /usr/include/nlohmann "$out/include/"
cp -r /usr/include/CLI "$out/include/"
cp -r /usr/include/fmt "$out/include/"
cp /usr/include/xxhash.h /usr/include/zlib.h /usr/include/zconf.h /usr/include/sqlite3.h "$out/include/"
cp -r /usr/src/googletest "$out/googletest"
# hwloc: headers and the shared library (it needs only libc, libm and libudev at run time); SQLite for
# the result history and zlib, in case the GPU machine lacks libsqlite3.so.0 or the -dev symlinks.
cp -r /usr/include/hwloc.h /usr/include/hwloc "$out/include/"
# hwloc.h includes hwloc/autogen/config.h, which Debian keeps in the multiarch folder.
cp -r /usr/include/x86_64-linux-gnu/hwloc/autogen "$out/include/hwloc/"
# Each library is copied twice, as the name programs load (libX.so.N, through the rpath) and as plain
# libX.so, the name find_library picks first: CMake links a plain .so by its full path, while it turns
# a path ending in .so.N into -lX, which finds nothing on a machine without the -dev package.
mkdir -p "$out/lib"
for lib in libhwloc.so.15 libsqlite3.so.0 libz.so.1; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" "$out/lib/$lib"
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" "$out/lib/${lib%.so.*}.so"
done
# The training set, for the training design on machines without dataset-fashion-mnist.
if [ -d /usr/share/datasets/fashion-mnist ]; then
  mkdir -p "$out/fashion-mnist"
  cp /usr/share/datasets/fashion-mnist/train-*-ubyte.gz "$out/fashion-mnist/"
fi
du -sh "$out"
