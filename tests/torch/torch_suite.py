"""torch's own distributed test suite (torch/testing/_internal/distributed/
distributed_test.py, as pytorch's test_distributed_spawn.py drives it for its
backends) against the backend "weft".

The suite reads BACKEND, WORLD_SIZE and TEMP_DIR from the environment (this
file sets BACKEND=weft and WORLD_SIZE=2 unless given). weft declares what
it implements through the suite's own tables (DistTestCases): subgroups and
DDP, a plugin backend. Every
spawned rank imports this file, so the tables and the registration hold there
too. Run with pytest; tests/torch/test_torch.sh runs a selection.
"""

import os
import tempfile

os.environ.setdefault("BACKEND", "weft")
os.environ.setdefault("WORLD_SIZE", "2")
if "TEMP_DIR" not in os.environ:
    os.environ["TEMP_DIR"] = tempfile.mkdtemp(prefix="weft-torch-suite-")

import weft_torch  # noqa: E402,F401  (registers "weft")
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

for feature in ("subgroup", "ddp", "plugin"):
    DistTestCases.backend_feature[feature].add("weft")

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)


# Tests whose checks cannot hold for any backend registered from outside
# torch, with the reason (printed as the skip's reason).
NOT_FOR_PLUGINS = {
    "test_ddp_logging_data_cpu":
        "torch's DDP logs backend_name 'custom' for every registered third-party backend "
        "(ProcessGroup::backendTypeToString of BackendType::CUSTOM), and the test compares "
        "it with dist.get_backend(), the registered name",
}


# Tests the suite writes for one CPU backend (gloo's or MPI's decorators)
# whose checks hold for any backend with the collectives weft has: the
# suite's skip, taken at import time from BACKEND, is the only thing between
# them and weft. Each entry names the test and the skip it lifts; the test
# runs unchanged (its own body, its other checks), and an entry whose skip
# reason no longer matches torch's is left skipped with that reason.
FOR_CPU_BACKENDS = {
    # (test_barrier_timeout_global also needs INIT_METHOD file://, a skip
    # this lift would hide: not listed)
    "Only gloo backend supports timeouts": (
        "test_barrier_timeout_group", "test_barrier_timeout_full_group"),
    "Test requires backend weft to be one of {'gloo'}": tuple(
        f"test_all_reduce_coalesced_{kind}{op}"
        for kind in ("", "group_", "full_group_")
        for op in ("sum", "product", "min", "max")) + (
        "test_grads_same_across_ranks_with_no_sync", "test_scatter_object_list"),
    "Only MPI supports CPU all_to_all_single": tuple(
        f"test_all_to_all_single_{split}_split{kind}"
        for split in ("equal", "unequal")
        for kind in ("", "_complex", "_group", "_full_group")),
    "Only MPI supports all_to_all": (
        "test_all_to_all", "test_all_to_all_complex", "test_all_to_all_group",
        "test_all_to_all_full_group"),
    # (test_accumulate_gradients_no_sync and its forms build their model
    # only under BACKEND mpi, gloo or nccl: not listed)
    "get_future is only supported on mpi, nccl and gloo": ("test_get_future",),
}


def _unskipped(fn):
    def test(self):
        return fn(self)

    test.__name__ = fn.__name__
    test.__doc__ = fn.__doc__
    return test


class TestWeftBackend(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        reason = NOT_FOR_PLUGINS.get(self._testMethodName)
        if reason is not None:
            self.skipTest(reason)
        super().setUp()
        self._spawn_processes()


for _reason, _names in FOR_CPU_BACKENDS.items():
    for _name in _names:
        _fn = getattr(DistributedTest._DistTestBase, _name, None)
        if _fn is not None and getattr(_fn, "__unittest_skip_why__", None) == _reason:
            setattr(TestWeftBackend, _name, _unskipped(_fn))


if __name__ == "__main__":
    run_tests()
