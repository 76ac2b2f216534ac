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


class TestWeftBackend(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        reason = NOT_FOR_PLUGINS.get(self._testMethodName)
        if reason is not None:
            self.skipTest(reason)
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    run_tests()
