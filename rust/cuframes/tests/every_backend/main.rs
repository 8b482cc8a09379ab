//! The library's behavioural suite over every memory backend: each scenario
//! is written once and run on host memory, on CUDA memory shared as file
//! descriptors and on CUDA memory shared as IPC handles
//! (`common/backend.rs`: `every_backend!`, `Backend`, the publisher in a
//! child process).
//!
//! `cargo test` runs the `host::` instances; the `needs_gpu::cuda_fd::` and
//! `needs_gpu::cuda_ipc::` ones are ignored and run on the GPU machine by
//! `scripts/gpu-test.sh run lib` (`--ignored --test-threads=1`).

#[path = "../common/mod.rs"]
mod common;

mod held_frames;
mod lifecycle;
mod policies;
mod trust;
