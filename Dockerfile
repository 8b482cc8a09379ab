# syntax=docker/dockerfile:1
#
# libcuframes, the `cuframes` command and the patched FFmpeg, built by the same
# scripts CI runs (no second recipe here). NVDEC/NVENC/CUDA come from the host
# driver through the NVIDIA container toolkit (`--gpus all`); nothing CUDA is
# needed at build time (the library loads libcuda at run time, FFmpeg's CUDA
# filters are compiled by clang).
#
#   docker build -t cuframes .
#   docker run --rm --gpus all cuframes ffmpeg -h muxer=cuframes

ARG RUST_IMAGE=rust:1.88-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${RUST_IMAGE} AS build
WORKDIR /src
COPY . .
# libcuframes (static + shared + header + pkg-config) and the cuframes CLI.
RUN scripts/install.sh --prefix /opt/cuframes \
 && cargo build --release --locked -p cuframes-cli \
 && install -D -m 0755 target/release/cuframes /opt/cuframes/bin/cuframes
# FFmpeg 7.1 from Debian's trixie source package + ffmpeg-patches/, into build/ffmpeg.
RUN scripts/build-ffmpeg.sh \
 && cp -a build/ffmpeg /opt/ffmpeg

FROM ${RUNTIME_IMAGE} AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends libx264-164 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/cuframes /opt/cuframes
COPY --from=build /opt/ffmpeg /opt/ffmpeg
ENV PATH=/opt/ffmpeg/bin:/opt/cuframes/bin:${PATH} \
    LD_LIBRARY_PATH=/opt/cuframes/lib \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,video,utility \
    CUFRAMES_RUNTIME_DIR=/run/cuframes
VOLUME ["/run/cuframes"]
CMD ["cuframes", "--help"]
