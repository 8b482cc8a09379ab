//! CUDA memory between real processes. These need an NVIDIA GPU: they are
//! ignored by default and run by `scripts/gpu-test.sh` (`--ignored`) on the
//! GPU machine. (CUDA IPC handles cannot be opened in the exporting
//! process, so every test has the publisher and a subscriber in different
//! processes.)

mod common;

use std::time::{Duration, Instant};

use common::*;
use cudarc::driver::{CudaContext, DevicePtr};
use cuframes::{
    DevicePlane, ErrorKind, MemoryKind, MemoryRequest, PixelFormat, PlanePtr, Policy, Publisher,
    PublisherConfig, Subscriber, SubscriberConfig, pattern,
};

fn subscriber(env: &TestEnv, key: &str) -> Subscriber {
    let mut c = SubscriberConfig::new(key);
    c.runtime_dir = Some(env.dir().to_owned());
    c.name = "cuda-test".into();
    Subscriber::connect(c).expect("subscribe")
}

fn cuda_publish(env: &TestEnv, key: &str, options: &str) -> Proc {
    let mut args = vec!["publish", key, "--memory", "cuda"];
    args.extend(options.split_whitespace());
    let mut p = env.spawn(&format!("publish {key}"), &args);
    let deadline = Instant::now() + SOCKET_LIMIT;
    while std::os::unix::net::UnixStream::connect(env.socket(key)).is_err() {
        assert!(p.is_running(), "publisher exited: {}", p.wait(EXIT_LIMIT));
        assert!(Instant::now() < deadline, "no socket");
        std::thread::sleep(Duration::from_millis(5));
    }
    p
}

fn free_device_memory() -> usize {
    cudarc::driver::result::mem_get_info().expect("cuMemGetInfo").0
}

#[test]
#[ignore = "needs an NVIDIA GPU: run by scripts/gpu-test.sh"]
fn cuda_frames_reach_two_verifying_subscribers() {
    let env = TestEnv::new();
    let key = env.key("cuda2");
    let publisher = cuda_publish(
        &env,
        &key,
        "--size 1920x1080 --fps 0 --frames 600 --policy strict-wait --wait-subscribers 2",
    );
    let a = env.subscribe(&key, "--verify --frames 600");
    let b = env.subscribe(&key, "--verify --frames 600 --name second");
    for s in [a, b] {
        let summary = s.wait(Duration::from_secs(60)).assert_success().json();
        assert_eq!(summary["memory"], "cuda", "{summary}");
        assert_all_verified(&summary, 1, 600);
        eprintln!("subscriber: {summary}");
    }
    let out = publisher.wait(EXIT_LIMIT);
    out.assert_success();
    assert!(out.stderr.contains("cuda memory"), "{out}");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run by scripts/gpu-test.sh"]
fn auto_picks_cuda_when_a_gpu_is_present() {
    let env = TestEnv::new();
    let key = env.key("auto");
    let out = env.run(&[
        "publish", &key, "--memory", "auto", "--frames", "1", "--size", "64x64",
    ]);
    out.assert_success();
    assert!(out.stderr.contains("cuda memory"), "{out}");
}

/// The subscriber's frames are the mapped slots themselves: device pointers,
/// one per slot, the same every time the ring comes round (opened once).
#[test]
#[ignore = "needs an NVIDIA GPU: run by scripts/gpu-test.sh"]
fn leases_point_into_the_mapped_slots() {
    let env = TestEnv::new();
    let key = env.key("zerocopy");
    let publisher = cuda_publish(
        &env,
        &key,
        "--size 1280x720 --fps 0 --frames 64 --ring 4 --policy strict-wait --wait-subscribers 1",
    );
    let mut sub = subscriber(&env, &key);
    assert_eq!(sub.info().memory, MemoryKind::Cuda);
    let layout = sub.info().layout.clone();
    let mut by_slot = std::collections::HashMap::new();
    let mut plane = Vec::new();
    for want in 1..=64u64 {
        let lease = sub.next(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(lease.seq(), want);
        let PlanePtr::Device(y) = lease.plane(0).ptr else {
            panic!("CUDA frames must be device pointers")
        };
        let PlanePtr::Device(uv) = lease.plane(1).ptr else {
            panic!("device pointers")
        };
        assert_eq!(uv - y, layout.planes()[1].offset as u64, "planes lie in one slot");
        let first = *by_slot.entry(lease.slot()).or_insert(y);
        assert_eq!(
            first,
            y,
            "slot {} maps to one address for its whole life",
            lease.slot()
        );
        for p in 0..2 {
            lease.read_plane(p, &mut plane).unwrap();
            assert!(
                pattern::check_plane(&layout, want - 1, p, &plane),
                "seq {want} plane {p}"
            );
        }
        lease.release().unwrap();
    }
    assert_eq!(by_slot.len(), 4);
    eprintln!("slot addresses: {by_slot:x?}");
    publisher.wait(EXIT_LIMIT).assert_success();
}

/// kill -9 of the publisher: the subscriber learns at once, and once it
/// closes its mappings the device memory of the slots returns.
#[test]
#[ignore = "needs an NVIDIA GPU: run by scripts/gpu-test.sh"]
fn killed_publisher_frees_device_memory_once_mappings_close() {
    let ctx = CudaContext::new(0).unwrap();
    ctx.bind_to_thread().unwrap();
    let env = TestEnv::new();
    let key = env.key("kill");
    let before = free_device_memory();
    let mut publisher = cuda_publish(&env, &key, "--size 3840x2160 --fps 200 --frames 0 --ring 8");
    let mut sub = subscriber(&env, &key);
    let slots_bytes = sub.info().layout.size() * 8;
    let lease = sub.next(Some(Duration::from_secs(10))).unwrap();
    drop(lease);
    let running = free_device_memory();
    publisher.kill9();
    let killed = Instant::now();
    let err = loop {
        match sub.next(Some(Duration::from_secs(5))) {
            Ok(_) => continue,
            Err(e) => break e,
        }
    };
    let noticed = killed.elapsed();
    assert_eq!(err.kind(), ErrorKind::Disconnected, "{err}");
    assert!(noticed < Duration::from_millis(500), "noticed after {noticed:?}");
    std::thread::sleep(Duration::from_millis(300)); // let the driver tear the dead context down
    let dead_but_mapped = free_device_memory();
    drop(sub);
    std::thread::sleep(Duration::from_millis(300));
    let closed = free_device_memory();
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    eprintln!(
        "free MiB: before {:.0}, publishing {:.0}, publisher dead + mapped {:.0}, mappings closed {:.0}; slots {:.0} MiB; noticed in {noticed:?}",
        mib(before),
        mib(running),
        mib(dead_but_mapped),
        mib(closed),
        mib(slots_bytes)
    );
    assert!(running + slots_bytes <= before, "the slots were allocated");
    let tolerance = 64 << 20;
    assert!(
        closed + tolerance >= before,
        "device memory did not come back: before {before}, after {closed}"
    );
}

/// Publishing device planes (D2D into CUDA slots, and D2H into host slots)
/// from this process, verified by a `cuframes subscribe` process.
#[test]
#[ignore = "needs an NVIDIA GPU: run by scripts/gpu-test.sh"]
fn device_planes_publish_into_cuda_and_host_slots() {
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    for memory in [MemoryRequest::Cuda, MemoryRequest::Host] {
        let env = TestEnv::new();
        let key = env.key("devsrc");
        let mut cfg = PublisherConfig::new(key.clone(), PixelFormat::Nv12, 640, 360);
        cfg.memory = memory;
        cfg.policy = Policy::StrictWait;
        cfg.runtime_dir = Some(env.dir().to_owned());
        cfg.cuda = Some(cuframes::CudaBinding {
            context: ctx.cu_ctx() as usize,
            stream: 0,
        });
        let mut publisher = Publisher::create(cfg).unwrap();
        let layout = publisher.layout().clone();
        let sub = env.subscribe(&key, "--verify --frames 100");
        publisher
            .wait_for_subscribers(1, Duration::from_secs(10))
            .unwrap();
        for frame in 0..100u64 {
            let mut host: Vec<Vec<u8>> = layout
                .planes()
                .iter()
                .map(|p| vec![0; p.pitch * p.rows])
                .collect();
            let mut planes: Vec<&mut [u8]> = host.iter_mut().map(Vec::as_mut_slice).collect();
            pattern::fill_frame(&layout, frame, &mut planes);
            let device: Vec<_> = host.iter().map(|h| stream.clone_htod(h).unwrap()).collect();
            let ptrs: Vec<DevicePlane> = device
                .iter()
                .zip(layout.planes())
                .map(|(d, p)| DevicePlane {
                    ptr: d.device_ptr(&stream).0,
                    pitch: p.pitch,
                })
                .collect();
            stream.synchronize().unwrap();
            publisher.publish_device(&ptrs, frame as i64).unwrap();
            stream.synchronize().unwrap();
        }
        publisher.flush(Duration::from_secs(5)).unwrap();
        drop(publisher);
        let summary = sub.wait(Duration::from_secs(30)).assert_success().json();
        assert_all_verified(&summary, 1, 100);
        eprintln!("{memory:?} slots from device planes: {summary}");
    }
}

/// EXTERNAL ownership: the caller's own device buffers are the slots; frames
/// are written into them directly and published with no copy by the library.
#[test]
#[ignore = "needs an NVIDIA GPU: run by scripts/gpu-test.sh"]
fn external_slots_are_published_without_a_copy() {
    let ctx = CudaContext::new(0).unwrap();
    ctx.bind_to_thread().unwrap();
    let env = TestEnv::new();
    let key = env.key("external");
    let (format, width, height, ring) = (PixelFormat::Nv12, 1280, 720, 4);
    let layout = cuframes::FrameLayout::aligned(format, width, height, cuframes::PITCH_ALIGNMENT).unwrap();
    // Legacy allocations (IPC handles need them), one per slot.
    let buffers: Vec<u64> = (0..ring)
        // SAFETY: a context is bound to this thread; the buffers are freed below.
        .map(|_| unsafe { cudarc::driver::result::malloc_sync(layout.size()) }.unwrap())
        .collect();
    let mut cfg = PublisherConfig::new(key.clone(), format, width, height);
    cfg.memory = MemoryRequest::Cuda;
    cfg.ring_size = ring;
    cfg.policy = Policy::StrictWait;
    cfg.runtime_dir = Some(env.dir().to_owned());
    cfg.external_slots = Some(buffers.clone());
    let mut publisher = Publisher::create(cfg).unwrap();
    let sub = env.subscribe(&key, "--verify --frames 60");
    publisher
        .wait_for_subscribers(1, Duration::from_secs(10))
        .unwrap();
    let mut frame_bytes = vec![0u8; layout.size()];
    for frame in 0..60u64 {
        let target = publisher.acquire_slot().unwrap();
        assert_eq!(target.index, ((frame + 1) % ring as u64) as usize);
        let PlanePtr::Device(y) = target.planes[0] else {
            panic!("device slot")
        };
        assert_eq!(y, buffers[target.index], "the slot is the caller's buffer");
        {
            let (y_bytes, uv_bytes) = frame_bytes.split_at_mut(layout.planes()[1].offset);
            pattern::fill_frame(&layout, frame, &mut [y_bytes, uv_bytes]);
        }
        // SAFETY: `y` is the base of a live allocation of layout.size() bytes.
        unsafe { cudarc::driver::result::memcpy_htod_sync(y, &frame_bytes) }.unwrap();
        publisher.commit_slot(frame as i64).unwrap();
    }
    assert_eq!(
        publisher.commit_slot(0).unwrap_err().kind(),
        ErrorKind::InvalidArgument,
        "commit without acquire"
    );
    publisher.flush(Duration::from_secs(5)).unwrap();
    drop(publisher);
    let summary = sub.wait(Duration::from_secs(30)).assert_success().json();
    assert_all_verified(&summary, 1, 60);
    for b in buffers {
        // SAFETY: allocated above with malloc_sync; no one uses it any more.
        unsafe { cudarc::driver::result::free_sync(b) }.unwrap();
    }
}

/// kill -9 of one of two strict-wait subscribers of a CUDA publisher: the
/// publisher drops it at once (not after its 30 s ACK timeout) and the other
/// subscriber gets every frame.
#[test]
#[ignore = "needs an NVIDIA GPU: run by scripts/gpu-test.sh"]
fn killed_subscriber_of_a_cuda_publisher_costs_nothing() {
    let env = TestEnv::new();
    let key = env.key("killsub");
    let started = Instant::now();
    let publisher = cuda_publish(
        &env,
        &key,
        "--size 1280x720 --fps 200 --frames 1200 --policy strict-wait --ack-timeout-ms 30000 --wait-subscribers 2",
    );
    let survivor = env.subscribe(&key, "--verify --frames 0 --name survivor");
    let mut victim = env.subscribe(&key, "--verify --frames 0 --name victim");
    std::thread::sleep(Duration::from_millis(1500));
    victim.kill9();
    let summary = survivor.wait(Duration::from_secs(60)).assert_success().json();
    assert_all_verified(&summary, 1, 1200);
    publisher.wait(EXIT_LIMIT).assert_success();
    let took = started.elapsed();
    eprintln!("1200 frames at 200 fps with a subscriber killed after 1.5 s: {took:?}; survivor {summary}");
    assert!(
        took < Duration::from_secs(20),
        "the publisher waited for the dead subscriber: {took:?}"
    );
}
