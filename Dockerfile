# libcuframes, the `cuframes` command and the patched FFmpeg, built by the same
# scripts CI runs (no second recipe here). NVDEC/NVENC/CUDA come from the host
# driver through the NVIDIA container toolkit (`--gpus all`); nothing CUDA is
# needed at build time (the library loads libcuda at run time, FFmpeg's CUDA
# filters are compiled by clang).
#
#   docker build -t cuframes .
#   docker run --rm --gpus all cuframes ffmpeg -h muxer=cuframes
#
# The runtime image holds stripped programs and libcuframes.so only; to build C
# programs against libcuframes (header, static library, pkg-config) use the build
# stage: `docker build --target build`. CI builds this file from local stand-ins of
# the two base images (scripts/test-docker.sh): see docs/containers.md.

ARG RUST_IMAGE=rust:1.88-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
# The FFmpeg line the image ships (scripts/build-ffmpeg.sh --ffmpeg): the newest, 9.0;
# 8.1 and 7.1 build too (--build-arg FFMPEG_LINE=7.1).
ARG FFMPEG_LINE=9.0

FROM ${RUST_IMAGE} AS build
ARG FFMPEG_LINE
WORKDIR /src
# .dockerignore keeps build outputs (target/, build/) and files the build does not
# read out of the context.
COPY . .
# libcuframes (static + shared + header + pkg-config) and the cuframes CLI.
RUN scripts/install.sh --prefix /opt/cuframes \
 && cargo build --release --locked -p cuframes-cli \
 && install -D -m 0755 target/release/cuframes /opt/cuframes/bin/cuframes
# FFmpeg of that line from Debian's source package (9.0: forky's) + ffmpeg-patches/,
# into build/ffmpeg-LINE; through build/ccache when the context has one (.dockerignore).
RUN scripts/build-ffmpeg.sh --ffmpeg "$FFMPEG_LINE" \
 && cp -a "build/ffmpeg-$FFMPEG_LINE" /opt/ffmpeg
# What the runtime image takes, in /dist: the programs and the shared library,
# stripped (the release profile keeps line tables). ffprobe (9 MB, statically linked
# like ffmpeg) is used by nothing here and stays in the build stage.
RUN install -d /dist/cuframes/bin /dist/cuframes/lib /dist/ffmpeg/bin \
 && install -m 0755 /opt/cuframes/bin/cuframes /dist/cuframes/bin/ \
 && install -m 0755 /opt/ffmpeg/bin/ffmpeg /dist/ffmpeg/bin/ \
 && cp -P /opt/cuframes/lib/libcuframes.so* /dist/cuframes/lib/ \
 && strip --strip-all /dist/cuframes/bin/* /dist/ffmpeg/bin/* \
 && strip --strip-unneeded /dist/cuframes/lib/libcuframes.so.*.*.* \
 && install -D -m 0644 -t /dist/cuframes/share/doc/cuframes LICENSE-MIT LICENSE-APACHE

FROM ${RUNTIME_IMAGE} AS runtime
ARG FFMPEG_LINE
# What is in the image, under which licences: libcuframes and the cuframes command
# are MIT OR Apache-2.0 (/opt/cuframes/share/doc/cuframes/); the ffmpeg built with the
# patches links libx264 (--enable-gpl), so that binary is GPL-2.0-or-later (its text:
# /usr/share/common-licenses/GPL-2; the FFmpeg patches alone are LGPL-2.1-or-later,
# ffmpeg-patches/README.md). The Debian packages keep their own, in /usr/share/doc.
LABEL org.opencontainers.image.title="cuframes" \
      org.opencontainers.image.description="Zero-copy sharing of decoded GPU video frames between processes: the patched ffmpeg (cuframes muxer, input device, source filter), libcuframes and the cuframes command" \
      org.opencontainers.image.source="https://github.com/cuframes/cuframes" \
      org.opencontainers.image.licenses="(MIT OR Apache-2.0) AND GPL-2.0-or-later"
# The libraries ffmpeg loads (scripts/build-ffmpeg.sh says why each): libx264, libsrt
# on GnuTLS; GnuTLS and zlib are in the base image already (apt uses them). No CA
# certificates (ca-certificates brings OpenSSL, 9 MB): FFmpeg does not verify TLS peers
# unless told to (-tls_verify 1 -ca_file BUNDLE), as docs/containers.md says.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libx264-164 libsrt1.5-gnutls libgnutls30 zlib1g \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /dist/ /opt/
# Every library the programs need is here, and ffmpeg is of the line asked for.
RUN ! ldd /opt/ffmpeg/bin/ffmpeg /opt/cuframes/bin/cuframes | grep 'not found' \
 && /opt/ffmpeg/bin/ffmpeg -hide_banner -version | grep -q "^ffmpeg version ${FFMPEG_LINE}\."
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
