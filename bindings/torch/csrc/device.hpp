/*
 * Device tensors: the group's stream-ordered collectives (weft's _enqueue
 * forms), as ProcessGroupNCCL orders its own.
 *
 * Two kinds of tensor take this path, through one Lane per device:
 *
 *  - tensors on an accelerator torch drives with streams (CUDA): weft
 *    enqueues on a stream of the group's (torch's stream pool), which first
 *    waits for the caller's current stream at the call, so the operation
 *    sees everything the caller queued before it and nothing after. The
 *    Work's end is an event recorded on that stream after the operation:
 *    wait() and synchronize() make the caller's current stream wait for it
 *    (the host does not block), is_completed() queries it; a failed
 *    operation shows at the group's next one. The tensors' memory is
 *    recorded on the group's stream, so torch's caching allocator keeps it
 *    until the stream is past the operation.
 *
 *  - CPU tensors whose memory is weft's emulated accelerator's
 *    (weft_mem_alloc(WEFT_MEM_EMU); weft_torch.emu_empty makes them): weft
 *    enqueues on the group's emu stream, then a copy on that stream sets a
 *    flag in host memory: the Work is complete once the flag is set and
 *    weft_stream_synchronize reported no failure. Torch has no stream for
 *    them, so the caller's earlier work is done at the call (program order)
 *    and wait() waits on the host. This is how CI runs the stream-ordered
 *    path without a GPU.
 *
 *   caller: all_reduce(t)     group stream                    weft progress thread
 *   record E0 on current ---> wait E0
 *   queue op                  weft_allreduce_enqueue -------> starts when the stream
 *   (turn holder runs it)       flag wait                     reaches it ... done
 *                             record E1 (or set the flag) <-- flag written
 *   work.wait(): current stream waits E1 (emu: the host waits for the flag)
 */
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <weft.h>

namespace weft_torch
{

/* The end of one stream-ordered operation. */
class DeviceDone
{
  public:
    virtual ~DeviceDone() = default;
    /* the stream is past the operation */
    virtual bool query() = 0;
    /* the calling thread's current stream of the device waits for it
     * (emu: nothing, its Work completes on the host) */
    virtual void block_current() = 0;
    /* the group's stream it ran on (torch devices), for the Work's future */
    virtual std::optional<c10::Stream> stream() const = 0;
};

/* One device's stream of a group. prepare() runs on the caller's thread at
 * the call, enqueue-time work (weft's _enqueue call, then mark()) on the
 * thread that holds the group's turn. */
class Lane
{
  public:
    virtual ~Lane() = default;
    /* the stream weft enqueues on */
    virtual weft_stream_t stream() = 0;
    /* at the call: order the lane after the caller's work, keep the tensors */
    virtual void prepare(const std::vector<at::Tensor> &tensors) = 0;
    /* after the operation was enqueued: its end; keep: tensors the stream
     * may still use (torch devices recorded them at prepare) */
    virtual std::shared_ptr<DeviceDone> mark(const std::vector<at::Tensor> &keep) = 0;
    /* at the call: a 1-d tensor of numel elements of like's dtype in the
     * lane's memory (the flat buffer of a collective on lists of tensors) */
    virtual at::Tensor empty(int64_t numel, const at::Tensor &like) = 0;
    /* enqueue-time: copies src into dst (contiguous, as many bytes) on the
     * stream, after what was enqueued on it before */
    virtual void copy(const at::Tensor &dst, const at::Tensor &src) = 0;
    /* waits until the stream is past everything (the group's end) */
    virtual void drain() = 0;
    /* true for the emulated accelerator: its Work completes on the host */
    virtual bool host_completed() const = 0;
};

/* Which lane a tensor takes: a torch accelerator's (not CPU), weft's emu
 * (a CPU tensor in emu memory), or none (a plain CPU tensor). */
enum class LaneKind { none, torch_device, emu };
LaneKind lane_kind(const at::Tensor &t);

/* A new lane for tensors like t (lane_kind(t) != none). */
std::unique_ptr<Lane> make_lane(const at::Tensor &t);

/* A 1-d CPU tensor of numel elements of dtype in weft's emulated device
 * memory, freed with weft_mem_free when torch releases it. */
at::Tensor emu_empty(int64_t numel, at::ScalarType dtype);

} // namespace weft_torch
