#!/bin/bash
# check-series.sh TREE: builds each patch of TREE's series on its own (minimal
# configuration: the cuframes components, CUDA, and what ffmpeg needs to run),
# then the whole series shared, without libavdevice and without libavfilter.
# Prints one line per build: OK/FAIL, what, seconds.
set -u
TREE=$1
W=/work/ffdev/check; rm -rf $W; mkdir -p $W
export CCACHE_DIR=/work/ffdev/ccache CCACHE_COMPILERCHECK=content PATH=/usr/lib/ccache:$PATH
NV=/work/ffdev/nvprefix/lib/pkgconfig
MIN=(--disable-everything --disable-doc --disable-autodetect --disable-debug
     --enable-libcuframes --enable-ffnvcodec --enable-cuda --enable-cuda-llvm
     --enable-muxer=cuframes,null --enable-demuxer=lavfi --enable-indev=cuframes,lavfi
     --enable-filter=cuframes,testsrc2,format,null,scale,hwupload_cuda,hwdownload,scale_cuda
     --enable-encoder=wrapped_avframe,rawvideo --enable-decoder=wrapped_avframe,rawvideo
     --enable-protocol=file,pipe)
build() {  # build NAME COMMIT PKGCONFIG_DIR CONFIGURE-ARGS...
    local name=$1 commit=$2 pc=$3 t=$SECONDS d=$W/$1
    shift 3
    git -C "$TREE" worktree add -q --detach "$d" "$commit" 2>/dev/null || { echo "FAIL $name: worktree"; return; }
    ( cd "$d" && PKG_CONFIG_PATH=$NV:$pc ./configure "${MIN[@]}" "$@" >config.out 2>&1 &&
      nice make -j2 >make.out 2>&1 ) && r=OK || r=FAIL
    local comps; comps=$(grep -Eo '^CONFIG_CUFRAMES_[A-Z]+=yes' "$d/ffbuild/config.mak" 2>/dev/null | sed 's/CONFIG_//;s/=yes//' | tr '\n' ' ')
    local warn; warn=$(grep -E "cuframes|libcuframes" "$d/make.out" 2>/dev/null | grep -ci "warning")
    echo "$r $name ($(git -C "$TREE" log -1 --format=%s "$commit")): enabled: ${comps:-none}; cuframes warnings: $warn; $((SECONDS - t)) s"
    [ $r = OK ] || { tail -15 "$d/config.out" "$d/make.out" 2>/dev/null | sed 's/^/    /'; }
    git -C "$TREE" worktree remove --force "$d"
}
STATIC=/work/ffdev/cuframes/lib/pkgconfig
SHARED=/work/ffdev/cuframes-shared/lib/pkgconfig
n=$(git -C "$TREE" rev-list --count pristine..HEAD)
for i in $(seq 1 "$n"); do
    build "patch-$i" "$(git -C "$TREE" rev-list --reverse pristine..HEAD | sed -n "${i}p")" $STATIC --pkg-config-flags=--static
done
build shared HEAD $SHARED --enable-shared --disable-static
build no-avdevice HEAD $STATIC --pkg-config-flags=--static --disable-avdevice
build no-avfilter HEAD $STATIC --pkg-config-flags=--static --disable-avfilter
