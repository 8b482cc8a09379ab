# A stand-in for the official rust:<version>-bookworm image, built by
# docker/standin/build.sh from the bookworm stand-in and this machine's own Rust
# toolchain (no registry needed). Laid out as the official image: rustup and the
# toolchain in /usr/local/rustup and /usr/local/cargo, the same ENV.
ARG BASE
FROM ${BASE}
ARG RUST_VERSION

# The host's extra CA certificates (build.sh copies /usr/local/share/ca-certificates/):
# where HTTPS goes through an intercepting proxy, cargo needs them to reach crates.io.
# Only the stand-in has them; the Dockerfile users build never sees them.
COPY ca-certificates/ /usr/local/share/ca-certificates/
# The part of buildpack-deps:bookworm (the official image's base) that the cuframes
# build uses. nasm, clang, pkg-config and libx264-dev are not there: as with the
# official image, scripts/build-ffmpeg.sh installs them itself.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        ca-certificates curl git gcc g++ libc6-dev make dpkg-dev xz-utils file patch procps \
 && update-ca-certificates \
 && rm -rf /var/lib/apt/lists/*

ENV RUSTUP_HOME=/usr/local/rustup \
    CARGO_HOME=/usr/local/cargo \
    PATH=/usr/local/cargo/bin:${PATH} \
    RUST_VERSION=${RUST_VERSION}
# rustup, its proxies (cargo, rustc, ...) and the toolchain, made writable by all as in
# the official image: build.sh sets the modes in the archive (a chmod here would copy
# every file into one more layer).
ADD rust.tar /
RUN rustup --version && cargo --version && rustc --version
