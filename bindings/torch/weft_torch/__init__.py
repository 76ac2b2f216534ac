"""weft as a torch.distributed backend.

    import torch.distributed as dist
    import weft_torch  # registers the backend "weft"

    dist.init_process_group("weft", rank=rank, world_size=world_size, init_method=...)

Importing the package registers "weft" for CPU and CUDA tensors with
torch.distributed.Backend.register_backend (one weft communicator per group
serves both; CUDA tensors take weft's stream-ordered collectives, see the
package's README). Every process group (the default
one and each new_group) gets its own weft communicator: group rank 0 puts a
weft unique id in the group's c10d Store and every rank joins with it, so any
init method works (env://, file://, tcp://, a Store).
"""

import torch  # loads libtorch before the extension
import torch.distributed as dist

from . import _C

__all__ = ["BACKEND_NAME", "weft_version", "set_reproducible", "emu_empty"]

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


def emu_empty(shape, dtype=torch.float32):
    """An uninitialized CPU tensor of the given shape whose memory is weft's
    emulated accelerator's (weft_mem_alloc(WEFT_MEM_EMU)). The group's
    collectives take such tensors through weft's stream-ordered
    collectives, and send/recv through its transport, the path of CUDA
    tensors: it runs without a GPU."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    numel = 1
    for n in shape:
        numel *= int(n)
    return _C.emu_empty(numel, dtype).view(shape)


def _create(store, rank, size, timeout):
    return _C.create_backend(store, rank, size, timeout)


if BACKEND_NAME not in dist.Backend.backend_list:
    dist.Backend.register_backend(BACKEND_NAME, _create, devices=["cpu", "cuda"])
