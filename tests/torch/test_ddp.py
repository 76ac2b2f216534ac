"""DistributedDataParallel on weft_torch: a small model trained for a few
dozen steps under weft and under gloo, from the same start on the same
data, must end with the same parameters (bitwise at 2 processes, where a sum
of two gradients has one order; within float64 rounding at 3). Once with
DDP's own allreduce and once with the allreduce communication hook, which
runs on Work.get_future().
"""

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from common import spawn

STEPS = 30


def make_model():
    torch.manual_seed(1234)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 4)).double()


def train(rank, group, hook):
    model = make_model()
    if rank != 0:
        # DDP broadcasts rank 0's parameters at construction: start elsewhere
        with torch.no_grad():
            for p in model.parameters():
                p.add_(float(rank))
    ddp = DDP(model, process_group=group, bucket_cap_mb=0.001)
    if hook:
        ddp.register_comm_hook(group, default_hooks.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(rank)
    for _ in range(STEPS):
        x = torch.randn(8, 16, generator=g, dtype=torch.float64)
        y = torch.randn(8, 4, generator=g, dtype=torch.float64)
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def _ddp(rank, size, gloo):
    # both forms in one job: its start costs more than the training
    for hook in (False, True):
        _ddp_once(rank, size, gloo, hook)


def _ddp_once(rank, size, gloo, hook):
    weft = dist.group.WORLD
    mine = train(rank, weft, hook)
    theirs = train(rank, gloo, hook)
    start = [p.detach() for p in make_model().parameters()]
    for i, (a, b, s) in enumerate(zip(mine, theirs, start)):
        assert not torch.equal(a, s), f"parameter {i} did not change"
        if size == 2:
            assert torch.equal(a, b), f"parameter {i}: weft and gloo differ (hook {hook})"
        else:
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    # every rank holds the same model
    flat = torch.cat([p.reshape(-1) for p in mine])
    lo, hi = flat.clone(), flat.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    assert torch.equal(lo, hi), "the ranks' models differ"


@pytest.mark.parametrize("size", [2, 3])
def test_ddp_matches_gloo(size):
    spawn(_ddp, size)
