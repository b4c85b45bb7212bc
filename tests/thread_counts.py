"""Run a simulation under several Numba thread counts, for tests that results do not depend on them."""

import numba


def on_thread_counts(run, counts=(1, 2)):
    """``run()`` under each Numba thread count of ``counts`` in turn (the process's count restored
    afterwards); returns their results in that order."""
    # The project's machines (developers' and CI's) have 2 cores; a 1-core machine cannot show this.
    assert max(counts) <= numba.config.NUMBA_NUM_THREADS, (
        f"this check needs {max(counts)} Numba threads (NUMBA_NUM_THREADS >= {max(counts)})"
    )
    before = numba.get_num_threads()
    try:
        results = []
        for threads in counts:
            numba.set_num_threads(threads)
            results.append(run())
        return results
    finally:
        numba.set_num_threads(before)
