# libcuframes, the `cuframes` command, the patched FFmpeg and the GStreamer plugin
# (cuframessink, cuframessrc), built by the same scripts CI runs (no second recipe
# here). NVDEC/NVENC/CUDA come from the host driver through the NVIDIA container
# toolkit (`--gpus all`); nothing CUDA is needed at build time (the library loads
# libcuda at run time, FFmpeg's CUDA filters are compiled by clang).
#
#   docker build -t cuframes .
#   docker run --rm --gpus all cuframes ffmpeg -h muxer=cuframes
#   docker run --rm cuframes gst-inspect-1.0 cuframessrc
#
# The runtime image holds stripped programs, libcuframes.so and the plugin only; to
# build C programs against libcuframes (header, static library, pkg-config) use the
# build stage: `docker build --target build`. CI builds this file from local stand-ins
# of the two base images (scripts/test-docker.sh): see docs/containers.md.

# Rust 1.92: the GStreamer plugin's rust-version (gstreamer-rs 0.25; the other crates
# need 1.88, the workspace's).
ARG RUST_IMAGE=rust:1.92-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
# The FFmpeg line the image ships (scripts/build-ffmpeg.sh --ffmpeg): the newest, 9.0;
# 8.1 and 7.1 build too (--build-arg FFMPEG_LINE=7.1).
ARG FFMPEG_LINE=9.0

FROM ${RUST_IMAGE} AS build
ARG FFMPEG_LINE
WORKDIR /src
# GStreamer's development files for the plugin (rust/gst-cuframes: its -sys crates ask
# pkg-config): the -dev packages of the list CI installs (scripts/lib/gstreamer.sh),
# bookworm's 1.22; the rest of that list (gst-launch-1.0, plugins) is for the tests and
# would add 86 packages. Before `COPY . .`, so that a change to the sources does not
# install them again.
COPY scripts/lib/gstreamer.sh scripts/lib/
RUN bash -c '. scripts/lib/gstreamer.sh \
 && GSTREAMER_PACKAGES=($(printf "%s\n" "${GSTREAMER_PACKAGES[@]}" | grep -- "-dev$")) \
 && ensure_gstreamer'
# .dockerignore keeps build outputs (target/, build/) and files the build does not
# read out of the context.
COPY . .
# libcuframes (static + shared + header + pkg-config), the cuframes CLI and the
# GStreamer plugin (a build of its own: built with the CLI, Cargo would unify the
# features both ask of their dependencies).
RUN scripts/install.sh --prefix /opt/cuframes \
 && cargo build --release --locked -p cuframes-cli \
 && install -D -m 0755 target/release/cuframes /opt/cuframes/bin/cuframes \
 && cargo build --release --locked -p gst-cuframes \
 && install -D -m 0644 target/release/libgstcuframes.so /opt/cuframes/lib/gstreamer-1.0/libgstcuframes.so
# FFmpeg of that line from Debian's source package (9.0: forky's) + ffmpeg-patches/,
# into build/ffmpeg-LINE; through build/ccache when the context has one (.dockerignore).
RUN scripts/build-ffmpeg.sh --ffmpeg "$FFMPEG_LINE" \
 && cp -a "build/ffmpeg-$FFMPEG_LINE" /opt/ffmpeg
# What the runtime image takes, in /dist (for /opt) and /dist-usr (for /usr): the
# programs, the shared library and the plugin, stripped (the release profile keeps line
# tables). ffprobe (9 MB, statically linked like ffmpeg) is used by nothing here and
# stays in the build stage. The plugin goes where GStreamer looks for plugins (its
# pluginsdir, /usr/lib/x86_64-linux-gnu/gstreamer-1.0 on amd64), as the
# gstreamer1.0-cuframes package puts it: every GStreamer program in the image and in
# images made from it finds it, with no GST_PLUGIN_PATH, which a user's own would
# replace (and `env -i` or a program's clean environment would lose).
RUN install -d /dist/cuframes/bin /dist/cuframes/lib /dist/ffmpeg/bin \
 && install -m 0755 /opt/cuframes/bin/cuframes /dist/cuframes/bin/ \
 && install -m 0755 /opt/ffmpeg/bin/ffmpeg /dist/ffmpeg/bin/ \
 && cp -P /opt/cuframes/lib/libcuframes.so* /dist/cuframes/lib/ \
 && plugins=$(pkg-config --variable=pluginsdir gstreamer-1.0) \
 && case $plugins in /usr/lib/*/gstreamer-1.0) ;; *) echo "pluginsdir $plugins is not under /usr/lib"; exit 1 ;; esac \
 && plugins=/dist-usr${plugins#/usr} \
 && install -D -m 0644 /opt/cuframes/lib/gstreamer-1.0/libgstcuframes.so "$plugins/libgstcuframes.so" \
 && strip --strip-all /dist/cuframes/bin/* /dist/ffmpeg/bin/* \
 && strip --strip-unneeded /dist/cuframes/lib/libcuframes.so.*.*.* "$plugins/libgstcuframes.so" \
 && install -D -m 0644 -t /dist/cuframes/share/doc/cuframes LICENSE-MIT LICENSE-APACHE

FROM ${RUNTIME_IMAGE} AS runtime
ARG FFMPEG_LINE
# What is in the image, under which licences: libcuframes, the cuframes command and
# the GStreamer plugin are MIT OR Apache-2.0 (/opt/cuframes/share/doc/cuframes/); the
# ffmpeg built with the patches links libx264 (--enable-gpl), so that binary is
# GPL-2.0-or-later (its text: /usr/share/common-licenses/GPL-2; the FFmpeg patches alone
# are LGPL-2.1-or-later, ffmpeg-patches/README.md). The Debian packages, GStreamer's
# (LGPL-2.1-or-later) among them, are not built here and keep their own, in
# /usr/share/doc/PACKAGE/copyright; the label names what this Dockerfile builds.
LABEL org.opencontainers.image.title="cuframes" \
      org.opencontainers.image.description="Zero-copy sharing of decoded GPU video frames between processes: the patched ffmpeg (cuframes muxer, input device, source filter), libcuframes, the cuframes command and the GStreamer elements cuframessink and cuframessrc" \
      org.opencontainers.image.source="https://github.com/cuframes/cuframes" \
      org.opencontainers.image.licenses="(MIT OR Apache-2.0) AND GPL-2.0-or-later"
# The libraries ffmpeg loads (scripts/build-ffmpeg.sh says why each): libx264, libsrt
# on GnuTLS; GnuTLS and zlib are in the base image already (apt uses them). No CA
# certificates (ca-certificates brings OpenSSL, 9 MB): FFmpeg does not verify TLS peers
# unless told to (-tls_verify 1 -ca_file BUNDLE), as docs/containers.md says.
# GStreamer 1.22 for the plugin: the libraries it links (libgstreamer, libgstbase;
# libgstvideo of plugins-base) and gst-launch-1.0, gst-inspect-1.0 (gstreamer1.0-tools),
# 15 MB. No plugins besides GStreamer's core elements (filesrc, filesink, fdsink,
# queue, tee, ...) and ours: not gstreamer1.0-plugins-base (videoconvert, videotestsrc:
# 18 MB more), nor GStreamer's CUDA library and nvcodec (libgstreamer-plugins-bad1.0-0,
# 258 MB more; with gstreamer1.0-plugins-bad, 527 MB), which CUDA memory through the
# elements needs and which is not yet shown working (docs/gstreamer.md). The plugin
# looks GstCuda up at run time, so it loads and runs on host memory without it.
# docs/containers.md: the measured sizes, and how to add them in an image made from this.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libx264-164 libsrt1.5-gnutls libgnutls30 zlib1g \
        libgstreamer1.0-0 libgstreamer-plugins-base1.0-0 gstreamer1.0-tools \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /dist/ /opt/
COPY --from=build /dist-usr/ /usr/
# Every library the programs and the plugin need is here, ffmpeg is of the line asked
# for, and GStreamer finds both elements in its own plugin directory (a registry of
# the check's own, which does not stay in the image).
RUN ! ldd /opt/ffmpeg/bin/ffmpeg /opt/cuframes/bin/cuframes /usr/lib/*/gstreamer-1.0/libgstcuframes.so | grep 'not found' \
 && /opt/ffmpeg/bin/ffmpeg -hide_banner -version | grep -q "^ffmpeg version ${FFMPEG_LINE}\." \
 && GST_REGISTRY=/tmp/gst-check.bin gst-inspect-1.0 cuframessink >/dev/null \
 && GST_REGISTRY=/tmp/gst-check.bin gst-inspect-1.0 cuframessrc >/dev/null \
 && rm -f /tmp/gst-check.bin
# The runtime directory is /tmp-like (1777): a volume mounted there starts with this
# mode, so a publisher of any uid can create its socket, and who may subscribe is its
# own choice (0600 by default, 0660 with `-group`). docs/containers.md has the rest.
RUN install -d -m 1777 /run/cuframes
# One hardware queue per CUDA context (the driver's default is 8): FFmpeg's CUDA work runs
# on one stream per device, and a context with one queue takes about a quarter as long
# to make and far less GPU memory, so a GPU holds hundreds of such processes and a crowd
# of them starts in seconds (docs/benchmarks.md, "Start-up and the whole job"). Set it
# higher (-e CUDA_DEVICE_MAX_CONNECTIONS=8) for a program whose streams must overlap.
ENV CUDA_DEVICE_MAX_CONNECTIONS=1
ENV PATH=/opt/ffmpeg/bin:/opt/cuframes/bin:${PATH} \
    LD_LIBRARY_PATH=/opt/cuframes/lib \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,video,utility \
    CUFRAMES_RUNTIME_DIR=/run/cuframes
VOLUME ["/run/cuframes"]
CMD ["cuframes", "--help"]
