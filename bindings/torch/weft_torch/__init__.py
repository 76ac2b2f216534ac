"""weft as a torch.distributed backend.

    import torch.distributed as dist
    import weft_torch  # registers the backend "weft"

    dist.init_process_group("weft", rank=rank, world_size=world_size, init_method=...)

Importing the package registers "weft" for CPU tensors with
torch.distributed.Backend.register_backend. Every process group (the default
one and each new_group) gets its own weft communicator: group rank 0 puts a
weft unique id in the group's c10d Store and every rank joins with it, so any
init method works (env://, file://, tcp://, a Store).
"""

import torch  # loads libtorch before the extension
import torch.distributed as dist

from . import _C

__all__ = ["BACKEND_NAME", "weft_version", "set_reproducible"]

BACKEND_NAME = "weft"
weft_version = _C.weft_version


def set_reproducible(on=True, group=None):
    """weft's reproducible mode for the group's reductions (all_reduce,
    reduce, reduce_scatter and their forms) from now on: the same bits
    whatever the algorithm, placement and nodes, for a given group size
    (weft's WEFT_REPRODUCIBLE, per group). Every rank of the group calls it
    alike, between the same operations. group: a process group, default the
    world."""
    pg = group if group is not None else dist.group.WORLD
    _C.set_reproducible(pg._get_backend(torch.device("cpu")), bool(on))


def _create(store, rank, size, timeout):
    return _C.create_backend(store, rank, size, timeout)


if BACKEND_NAME not in dist.Backend.backend_list:
    dist.Backend.register_backend(BACKEND_NAME, _create, devices=["cpu"])
