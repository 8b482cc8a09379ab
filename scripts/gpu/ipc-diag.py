"""Which process pairs can open a legacy CUDA IPC handle here (CuPy)."""
import multiprocessing as mp
import sys


def importer(handle, q):
    import cupy as cp
    try:
        ptr = cp.cuda.runtime.ipcOpenMemHandle(handle)
        q.put(f"ok ptr=0x{ptr:x}")
        cp.cuda.runtime.ipcCloseMemHandle(ptr)
    except Exception as e:  # noqa: BLE001
        q.put(f"error {e}")


def exporter(q_handle, q_done):
    import cupy as cp
    a = cp.zeros(1 << 20, dtype=cp.uint8)
    q_handle.put(cp.cuda.runtime.ipcGetMemHandle(a.data.ptr))
    q_done.get()


if __name__ == "__main__":
    mp.set_start_method("spawn")
    import cupy as cp
    a = cp.zeros(1 << 20, dtype=cp.uint8)
    h = cp.cuda.runtime.ipcGetMemHandle(a.data.ptr)
    q = mp.Queue()
    p = mp.Process(target=importer, args=(h, q))
    p.start()
    print("parent exports, child imports:", q.get(), flush=True)
    p.join()
    qh, qd = mp.Queue(), mp.Queue()
    e = mp.Process(target=exporter, args=(qh, qd))
    e.start()
    h2 = qh.get()
    q2 = mp.Queue()
    importer(h2, q2)
    print("child exports, parent imports:", q2.get(), flush=True)
    e2 = mp.Process(target=importer, args=(h2, q2))
    e2.start()
    print("child exports, sibling imports:", q2.get(), flush=True)
    e2.join()
    qd.put(1)
    e.join()
    if len(sys.argv) > 1:
        raw = open(f"/dev/shm/cuframes-{sys.argv[1]}", "rb").read()
        q3 = mp.Queue()
        importer(bytes(raw[0x100 + 0x20:0x100 + 0x60]), q3)
        print("cuframes publisher slot 0, imported by a python process:", q3.get(), flush=True)
