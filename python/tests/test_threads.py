"""Sessions from several threads, and the GIL released while running."""

import threading
import time

import numpy as np

import kiln
from conftest import assert_close, make_mlp, reference



def test_two_sessions_in_two_threads():
    models = [make_mlp(seed=11), make_mlp(seed=12)]
    artifacts = [kiln.compile(m, shapes={"x": (4, 16)}) for m in models]
    errors, checked = [], [0, 0]

    def work(i):
        try:
            session = kiln.Session(artifacts[i], device="emu")
            rng = np.random.default_rng(100 + i)
            for _ in range(5):
                x = rng.standard_normal((4, 16)).astype(np.float32)
                y = session.run({"x": x})["y"]
                assert_close(
                    y, reference(models[i], {"x": x})["y"])
                checked[i] += 1
        except Exception as err:  # reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert checked == [5, 5]


def test_one_session_shared_by_two_threads(mlp_model, mlp_artifact):
    # Calls on one Session are serialised; each thread still sees its own
    # run's outputs.
    session = kiln.Session(mlp_artifact, device="emu")
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            for _ in range(4):
                x = rng.standard_normal((4, 16)).astype(np.float32)
                assert_close(session.run({"x": x})["y"],
                                           reference(mlp_model, {"x": x})["y"])
        except Exception as err:
            errors.append(err)

    threads = [threading.Thread(target=work, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def _longest_stall_during_bench(session):
    """(longest gap between the main thread's iterations, the benchmark's
    duration) while a worker thread benchmarks."""
    started, span = threading.Event(), []

    def work():
        started.set()
        t0 = time.perf_counter()
        session.bench(40, warmup=0)
        span.append(time.perf_counter() - t0)

    worker = threading.Thread(target=work)
    worker.start()
    started.wait()
    last, longest = time.perf_counter(), 0.0
    while worker.is_alive():
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    worker.join()
    return longest, span[0]


def test_the_gil_is_released_while_running(mlp_artifact):
    # The main thread keeps running Python while a worker benchmarks on emu.
    # Were the GIL held through the native call, the main thread would stall
    # for the whole call: the longest gap between its iterations would be
    # about the call's duration, on every attempt. A loaded machine may
    # deschedule the main thread once, so up to 3 attempts.
    session = kiln.Session(mlp_artifact, device="emu")
    session.run({"x": np.ones((4, 16), np.float32)})
    attempts = []
    for _ in range(3):
        longest, span = _longest_stall_during_bench(session)
        assert span > 0.05, "the benchmark was too quick to tell"
        attempts.append((longest, span))
        if longest < span / 2:
            return
    raise AssertionError(f"the main thread stalled (longest gap, run time): "
                         f"{attempts}")
