/*
 * Every collective and point-to-point. Each checks its arguments on the caller's thread (sizes,
 * dtypes, roots, list lengths: a ValueError before anything is queued),
 * then queues a function for the group's worker (process_group.hpp).
 *
 * Data that is not reduced moves as bytes (WEFT_UINT8), so every dtype
 * works. Lists of tensors go through one flat contiguous buffer; a single
 * contiguous tensor is used in place.
 *
 * Device tensors (device.hpp) of all_reduce, broadcast, reduce,
 * all_gather_into_tensor, reduce_scatter_tensor and all_to_all_single go to
 * weft's _enqueue forms on the group's stream, in place; those of the list
 * forms (all_gather, gather, scatter, reduce_scatter, all_to_all) through a
 * flat buffer of the lane's, copied into or out of on the same stream. They
 * must be contiguous (as NCCL's), and a reduction must need no conversion
 * (no PREMUL_SUM, no int16/uint16). The coalesced forms of all_reduce,
 * all_gather_into_tensor and reduce_scatter_tensor enqueue one collective per
 * tensor in one turn; allgather_coalesced (lists) packs its inputs into one
 * block and runs one allgather of the blocks. send and recv take them
 * through weft's transport (p2p_tensor).
 */
#include <numeric>

#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "process_group.hpp"
#include "types.hpp"

namespace weft_torch {

namespace {

/* Every tensor of list is a dense CPU tensor of like's dtype and numel. */
void check_like(const std::vector<at::Tensor> &list, const at::Tensor &like, const char *call)
{
    for (const at::Tensor &t : list) {
        check_cpu_tensor(t, call);
        TORCH_CHECK_VALUE(t.scalar_type() == like.scalar_type(), "weft: ", call,
                          ": tensors of different dtypes (", t.scalar_type(), " and ",
                          like.scalar_type(), ")");
        TORCH_CHECK_VALUE(t.numel() == like.numel(), "weft: ", call,
                          ": tensors of different sizes (", t.numel(), " and ", like.numel(),
                          " elements)");
    }
}

/* The list argument of one tensor list per process, of size tensors. */
const std::vector<at::Tensor> &one_list(const std::vector<std::vector<at::Tensor>> &lists,
                                        int size, const char *call)
{
    TORCH_CHECK_VALUE(lists.size() == 1, "weft: ", call,
                      " takes one tensor list per process, got ", lists.size());
    TORCH_CHECK_VALUE((int)lists[0].size() == size, "weft: ", call, ": the list has ",
                      lists[0].size(), " tensors, the group ", size, " ranks");
    return lists[0];
}

/* The tensors of list one after another in a new contiguous 1-d tensor. */
at::Tensor flatten(const std::vector<at::Tensor> &list)
{
    std::vector<at::Tensor> flat;
    flat.reserve(list.size());
    for (const at::Tensor &t : list) {
        flat.push_back(t.reshape(-1));
    }
    return at::cat(flat);
}

/* Copies consecutive slices of flat (a contiguous 1-d tensor) into list. */
void unflatten(const at::Tensor &flat, const std::vector<at::Tensor> &list)
{
    int64_t offset = 0;
    for (const at::Tensor &t : list) {
        t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
        offset += t.numel();
    }
}

at::Tensor flat_empty(int64_t numel, const at::Tensor &like)
{
    return at::empty({numel}, like.options().memory_format(at::MemoryFormat::Contiguous));
}

void check_equal_types(const at::Tensor &a, const at::Tensor &b, const char *call)
{
    TORCH_CHECK_VALUE(a.scalar_type() == b.scalar_type(), "weft: ", call,
                      ": input and output dtypes differ (", b.scalar_type(), " and ",
                      a.scalar_type(), ")");
}

/* weft's allreduce of t in place, as plan says */
void allreduce_one(const at::Tensor &t, const ReducePlan &plan, weft_comm_t comm, const char *call,
                   uint64_t seq)
{
    at::Tensor buf = reduce_buffer(t, plan);
    check(weft_allreduce(WEFT_IN_PLACE, buf.data_ptr(), (size_t)buf.numel(), plan.dtype, plan.op,
                         comm),
          call, seq);
    reduce_result(t, plan, buf);
}

/* every rank's input, in rank order, into output (size x input's numel) */
void allgather_into(const at::Tensor &output, const at::Tensor &input, weft_comm_t comm,
                    const char *call, uint64_t seq)
{
    at::Tensor src = as_contiguous(input);
    at::Tensor dst = as_contiguous(output);
    check(weft_allgather(src.data_ptr(), dst.data_ptr(), (size_t)src.nbytes(), WEFT_UINT8, comm),
          call, seq);
    copy_back(output, dst);
}

/* Dense CPU tensors of one dtype, whole of size x part's numel. */
void check_whole_and_part(const at::Tensor &whole, const at::Tensor &part, int size,
                          const char *call)
{
    check_cpu_tensor(whole, call);
    check_cpu_tensor(part, call);
    check_equal_types(whole, part, call);
    TORCH_CHECK_VALUE(whole.numel() == size * part.numel(), "weft: ", call, ": ", whole.numel(),
                      " elements, not the group's ", size, " times ", part.numel());
}

/* out-of-place reduce-scatter of input (size x output's numel elements)
 * into output */
void reduce_scatter_into(const at::Tensor &output, const at::Tensor &input, const ReducePlan &plan,
                         weft_comm_t comm, int size, uint64_t seq)
{
    at::Tensor in = reduce_buffer(input, plan);
    const at::Tensor out_view = plan.complex ? at::view_as_real(output) : output;
    at::Tensor out = (!plan.widen && out_view.is_contiguous())
                         ? out_view
                         : at::empty({out_view.numel()}, in.options());

    check(weft_reduce_scatter(in.data_ptr(), out.data_ptr(), (size_t)(in.numel() / size),
                              plan.dtype, plan.op, comm),
          "reduce_scatter", seq);
    reduce_result(output, plan, out);
}

/* ------------------------------------------------------ Device tensors */

/* The single tensor of a call takes the device path. */
bool device_call(const std::vector<at::Tensor> &tensors)
{
    return tensors.size() == 1 && tensors[0].defined() &&
           lane_kind(tensors[0]) != LaneKind::none;
}

/* t is a dense contiguous tensor on like's device (and lane) of like's dtype. */
void check_device_tensor(const at::Tensor &t, const at::Tensor &like, const char *call)
{
    TORCH_CHECK_VALUE(t.defined(), "weft: ", call, ": a tensor is undefined");
    TORCH_CHECK_VALUE(t.layout() == at::kStrided, "weft: ", call,
                      ": only dense (strided) tensors are supported, got layout ", t.layout());
    TORCH_CHECK_VALUE(t.device() == like.device() && lane_kind(t) == lane_kind(like), "weft: ",
                      call, ": tensors on different devices (", t.device(), " and ", like.device(),
                      ", or one in weft's emulated device memory and one not)");
    TORCH_CHECK_VALUE(t.is_contiguous(), "weft: ", call,
                      ": a non-contiguous device tensor is not supported yet (pass a contiguous "
                      "one)");
    check_equal_types(t, like, call);
}

/* Device tensors of one device and dtype, whole of size x part's numel. */
void check_device_whole_and_part(const at::Tensor &whole, const at::Tensor &part, int size,
                                 const char *call)
{
    check_device_tensor(whole, whole, call);
    check_device_tensor(part, whole, call);
    TORCH_CHECK_VALUE(whole.numel() == size * part.numel(), "weft: ", call, ": ", whole.numel(),
                      " elements, not the group's ", size, " times ", part.numel());
}

/* How a device tensor of type t is reduced: weft's dtype and op as they
 * are (complex as twice as many reals); refuses what needs a conversion. */
ReducePlan device_plan(const at::Tensor &t, const c10d::ReduceOp &op, const char *call)
{
    const ReducePlan plan = reduce_plan(t.scalar_type(), op);
    TORCH_CHECK_VALUE(!plan.premul, "weft: ", call,
                      ": ReduceOp.PREMUL_SUM of a device tensor is not supported yet");
    TORCH_CHECK_VALUE(!plan.widen, "weft: ", call, ": reductions of ", t.scalar_type(),
                      " device tensors are not supported yet");
    return plan;
}

/* elements weft reduces for t */
size_t device_count(const at::Tensor &t, const ReducePlan &plan)
{
    return (size_t)t.numel() * (plan.complex ? 2 : 1);
}

/* The tensor of a one-tensor call: a device tensor (*device set) or a CPU one. */
const at::Tensor &single_tensor(const std::vector<at::Tensor> &tensors, const char *call,
                                bool *device)
{
    *device = device_call(tensors);
    if (*device) {
        check_device_tensor(tensors[0], tensors[0], call);
        return tensors[0];
    }
    return single_cpu_tensor(tensors, call);
}

/* Every tensor of list is like like (dtype, numel) and where it is: on its
 * device (and lane) when device, else a dense CPU tensor. */
void check_list(const std::vector<at::Tensor> &list, const at::Tensor &like, bool device,
                const char *call)
{
    if (!device) {
        check_like(list, like, call);
        return;
    }
    for (const at::Tensor &t : list) {
        check_device_tensor(t, like, call);
        TORCH_CHECK_VALUE(t.numel() == like.numel(), "weft: ", call,
                          ": tensors of different sizes (", t.numel(), " and ", like.numel(),
                          " elements)");
    }
}

/* An input of a call on several device tensors: a dense contiguous tensor
 * on first's device and lane (an empty one has no memory, so no lane). */
void check_device_input(const at::Tensor &t, const at::Tensor &first, const char *call)
{
    check_device_tensor(t, t, call);
    TORCH_CHECK_VALUE(t.device() == first.device() &&
                          (t.numel() == 0 || lane_kind(t) == lane_kind(first)),
                      "weft: ", call, ": tensors on different devices (", t.device(), " and ",
                      first.device(), ", or one in weft's emulated device memory and one not)");
}

/* A contiguous tensor's memory as a 1-d uint8 tensor (a view). */
at::Tensor as_bytes(const at::Tensor &t)
{
    return t.reshape(-1).view(at::kByte);
}

/* Part r of n elements of a flat tensor. */
at::Tensor part(const at::Tensor &flat, size_t r, int64_t n)
{
    return flat.narrow(0, (int64_t)r * n, n);
}

} // namespace

/* ----------------------------------------------------------- Collectives */

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allreduce(std::vector<at::Tensor> &tensors,
                                                           const c10d::AllreduceOptions &opts)
{
    weft_comm_t comm = comm_;
    if (device_call(tensors)) {
        const at::Tensor &t = tensors[0];
        check_device_tensor(t, t, "allreduce");
        const ReducePlan plan = device_plan(t, opts.reduceOp, "allreduce");
        return enqueue_device(c10d::OpType::ALLREDUCE, "weft:all_reduce", tensors, {},
                              [comm, t, plan](Lane &lane, uint64_t seq) {
                                  check(weft_allreduce_enqueue(WEFT_IN_PLACE, t.data_ptr(),
                                                               device_count(t, plan), plan.dtype,
                                                               plan.op, comm, lane.stream()),
                                        "allreduce", seq);
                              });
    }
    const at::Tensor &t = single_cpu_tensor(tensors, "allreduce");
    const ReducePlan plan = reduce_plan(t.scalar_type(), opts.reduceOp);

    return enqueue_collective(c10d::OpType::ALLREDUCE, "weft:all_reduce", tensors, tensors,
                              [comm, t, plan](uint64_t seq) {
                                  allreduce_one(t, plan, comm, "allreduce", seq);
                              });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::broadcast(std::vector<at::Tensor> &tensors,
                                                           const c10d::BroadcastOptions &opts)
{
    const bool device = device_call(tensors);
    const at::Tensor &t = device ? tensors[0] : single_cpu_tensor(tensors, "broadcast");
    TORCH_CHECK_VALUE(opts.rootTensor == 0, "weft: broadcast: rootTensor ", opts.rootTensor,
                      " out of range (one tensor per process)");
    check_root(opts.rootRank, size_, "broadcast");
    weft_comm_t comm = comm_;
    const int root = (int)opts.rootRank;

    if (device) {
        check_device_tensor(t, t, "broadcast");
        return enqueue_device(c10d::OpType::BROADCAST, "weft:broadcast", tensors, {},
                              [comm, t, root](Lane &lane, uint64_t seq) {
                                  check(weft_bcast_enqueue(t.data_ptr(), (size_t)t.nbytes(),
                                                           WEFT_UINT8, root, comm, lane.stream()),
                                        "broadcast", seq);
                              });
    }

    return enqueue_collective(c10d::OpType::BROADCAST, "weft:broadcast", tensors, tensors,
                              [comm, t, root](uint64_t seq) {
                                  at::Tensor buf = as_contiguous(t);
                                  check(weft_bcast(buf.data_ptr(), (size_t)buf.nbytes(),
                                                   WEFT_UINT8, root, comm),
                                        "broadcast", seq);
                                  copy_back(t, buf);
                              });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::barrier(const c10d::BarrierOptions & /*opts*/)
{
    weft_comm_t comm = comm_;

    return enqueue_collective(c10d::OpType::BARRIER, "weft:barrier", {}, {},
                              [comm](uint64_t seq) { check(weft_barrier(comm), "barrier", seq); });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupWeft::allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                      const c10d::AllreduceCoalescedOptions &opts)
{
    const bool device = !tensors.empty() && device_call({tensors[0]});
    std::vector<ReducePlan> plans;
    for (const at::Tensor &t : tensors) {
        if (device) {
            check_device_tensor(t, tensors[0], "allreduce_coalesced");
            plans.push_back(device_plan(t, opts.reduceOp, "allreduce_coalesced"));
        } else {
            check_cpu_tensor(t, "allreduce_coalesced");
            plans.push_back(reduce_plan(t.scalar_type(), opts.reduceOp));
        }
    }
    weft_comm_t comm = comm_;
    if (device) {
        /* one _enqueue call per tensor, in order, on the lane's stream */
        return enqueue_device(c10d::OpType::ALLREDUCE_COALESCED, "weft:all_reduce_coalesced",
                              tensors, {}, [comm, tensors, plans](Lane &lane, uint64_t seq) {
                                  for (size_t i = 0; i < tensors.size(); i++) {
                                      check(weft_allreduce_enqueue(
                                                WEFT_IN_PLACE, tensors[i].data_ptr(),
                                                device_count(tensors[i], plans[i]), plans[i].dtype,
                                                plans[i].op, comm, lane.stream()),
                                            "allreduce_coalesced", seq);
                                  }
                              });
    }
    return enqueue_collective(c10d::OpType::ALLREDUCE_COALESCED, "weft:all_reduce_coalesced",
                              tensors, tensors, [comm, tensors, plans](uint64_t seq) {
                                  for (size_t i = 0; i < tensors.size(); i++) {
                                      allreduce_one(tensors[i], plans[i], comm,
                                                    "allreduce_coalesced", seq);
                                  }
                              });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::reduce(std::vector<at::Tensor> &tensors,
                                                        const c10d::ReduceOptions &opts)
{
    const bool device = device_call(tensors);
    const at::Tensor &t = device ? tensors[0] : single_cpu_tensor(tensors, "reduce");
    if (device) {
        check_device_tensor(t, t, "reduce");
    }
    const ReducePlan plan = device ? device_plan(t, opts.reduceOp, "reduce")
                                   : reduce_plan(t.scalar_type(), opts.reduceOp);
    TORCH_CHECK_VALUE(opts.rootTensor == 0, "weft: reduce: rootTensor ", opts.rootTensor,
                      " out of range (one tensor per process)");
    check_root(opts.rootRank, size_, "reduce");
    weft_comm_t comm = comm_;
    const int root = (int)opts.rootRank;
    const bool is_root = root == rank_;

    if (device) {
        return enqueue_device(
            c10d::OpType::REDUCE, "weft:reduce", tensors, {},
            [comm, t, plan, root, is_root](Lane &lane, uint64_t seq) {
                check(weft_reduce_enqueue(is_root ? WEFT_IN_PLACE : t.data_ptr(),
                                          is_root ? t.data_ptr() : nullptr, device_count(t, plan),
                                          plan.dtype, plan.op, root, comm, lane.stream()),
                      "reduce", seq);
            });
    }

    return enqueue_collective(
        c10d::OpType::REDUCE, "weft:reduce", tensors, tensors,
        [comm, t, plan, root, is_root](uint64_t seq) {
            at::Tensor buf = reduce_buffer(t, plan);
            if (is_root) {
                check(weft_reduce(WEFT_IN_PLACE, buf.data_ptr(), (size_t)buf.numel(), plan.dtype,
                                  plan.op, root, comm),
                      "reduce", seq);
                reduce_result(t, plan, buf);
            } else {
                check(weft_reduce(buf.data_ptr(), nullptr, (size_t)buf.numel(), plan.dtype,
                                  plan.op, root, comm),
                      "reduce", seq);
            }
        });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupWeft::allgather(std::vector<std::vector<at::Tensor>> &outputs,
                            std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &)
{
    bool device;
    const at::Tensor &in = single_tensor(inputs, "allgather", &device);
    const std::vector<at::Tensor> &outs = one_list(outputs, size_, "allgather");
    check_list(outs, in, device, "allgather");
    weft_comm_t comm = comm_;
    const int size = size_;

    if (device) {
        /* into a flat buffer of the lane's, then each rank's part copied out on the stream */
        at::Tensor flat = lane_for(in)->empty(size * in.numel(), in);
        return enqueue_device(
            c10d::OpType::ALLGATHER, "weft:all_gather", outs, inputs,
            [comm, in, outs, flat](Lane &lane, uint64_t seq) {
                check(weft_allgather_enqueue(in.data_ptr(), flat.data_ptr(), (size_t)in.nbytes(),
                                             WEFT_UINT8, comm, lane.stream()),
                      "allgather", seq);
                for (size_t r = 0; r < outs.size(); r++) {
                    lane.copy(outs[r], part(flat, r, in.numel()));
                }
            },
            {flat});
    }

    return enqueue_collective(c10d::OpType::ALLGATHER, "weft:all_gather", outs, inputs,
                              [comm, in, outs, size](uint64_t seq) {
                                  at::Tensor src = as_contiguous(in);
                                  at::Tensor flat = flat_empty(size * in.numel(), in);
                                  check(weft_allgather(src.data_ptr(), flat.data_ptr(),
                                                       (size_t)src.nbytes(), WEFT_UINT8, comm),
                                        "allgather", seq);
                                  unflatten(flat, outs);
                              });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::_allgather_base(at::Tensor &output,
                                                                 at::Tensor &input,
                                                                 const c10d::AllgatherOptions &)
{
    weft_comm_t comm = comm_;
    if (device_call({output})) {
        check_device_whole_and_part(output, input, size_, "all_gather_into_tensor");
        return enqueue_device(c10d::OpType::_ALLGATHER_BASE, "weft:all_gather_into_tensor",
                              {output}, {input},
                              [comm, output, input](Lane &lane, uint64_t seq) {
                                  check(weft_allgather_enqueue(input.data_ptr(), output.data_ptr(),
                                                               (size_t)input.nbytes(), WEFT_UINT8,
                                                               comm, lane.stream()),
                                        "all_gather_into_tensor", seq);
                              });
    }
    check_whole_and_part(output, input, size_, "all_gather_into_tensor");

    return enqueue_collective(c10d::OpType::_ALLGATHER_BASE, "weft:all_gather_into_tensor",
                              {output}, {input}, [comm, output, input](uint64_t seq) {
                                  allgather_into(output, input, comm, "all_gather_into_tensor",
                                                 seq);
                              });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupWeft::allgather_coalesced(std::vector<std::vector<at::Tensor>> &output_lists,
                                      std::vector<at::Tensor> &inputs,
                                      const c10d::AllgatherOptions &)
{
    TORCH_CHECK_VALUE(!inputs.empty(), "weft: allgather_coalesced: no input tensors");
    TORCH_CHECK_VALUE(output_lists.size() == (size_t)size_,
                      "weft: allgather_coalesced: ", output_lists.size(),
                      " output lists for a group of ", size_);
    /* device tensors when one input is (an empty one has no memory to tell) */
    const at::Tensor *first = &inputs[0];
    for (const at::Tensor &t : inputs) {
        if (t.defined() && lane_kind(t) != LaneKind::none) {
            first = &t;
            break;
        }
    }
    const bool device = first->defined() && lane_kind(*first) != LaneKind::none;
    std::vector<at::Tensor> all_outputs;
    for (const auto &list : output_lists) {
        TORCH_CHECK_VALUE(list.size() == inputs.size(), "weft: allgather_coalesced: an output list"
                          " of ", list.size(), " tensors for ", inputs.size(), " inputs");
        for (size_t i = 0; i < list.size(); i++) {
            if (device) {
                check_device_input(inputs[i], *first, "allgather_coalesced");
                check_list({list[i]}, inputs[i], true, "allgather_coalesced");
            } else {
                check_cpu_tensor(inputs[i], "allgather_coalesced");
                check_like({list[i]}, inputs[i], "allgather_coalesced");
            }
            all_outputs.push_back(list[i]);
        }
    }
    weft_comm_t comm = comm_;
    const int size = size_;

    if (device) {
        return allgather_coalesced_device(output_lists, all_outputs, inputs, *first);
    }

    /* one allgather of every input packed together: rank r's block is its
     * inputs one after another */
    return enqueue_collective(
        c10d::OpType::ALLGATHER_COALESCED, "weft:all_gather_coalesced", all_outputs, inputs,
        [comm, inputs, output_lists, size](uint64_t seq) {
            at::Tensor block = flatten(inputs);
            at::Tensor src = block.view(at::kByte);
            at::Tensor flat = at::empty({size * src.numel()}, src.options());
            check(weft_allgather(src.data_ptr(), flat.data_ptr(), (size_t)src.numel(),
                                 WEFT_UINT8, comm),
                  "allgather_coalesced", seq);
            for (int r = 0; r < size; r++) {
                at::Tensor theirs = flat.narrow(0, r * src.numel(), src.numel())
                                        .view(block.scalar_type());
                unflatten(theirs, output_lists[(size_t)r]);
            }
        });
}

/* allgather_coalesced of device tensors (any dtypes, one device): the
 * inputs' bytes one after another into a block of the lane's, one
 * allgather of the blocks into a flat buffer, each rank's block cut into
 * its outputs: copies and collective in order on the lane's stream. */
c10::intrusive_ptr<c10d::Work>
ProcessGroupWeft::allgather_coalesced_device(const std::vector<std::vector<at::Tensor>> &lists,
                                             std::vector<at::Tensor> &all_outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const at::Tensor &first)
{
    int64_t bytes = 0;
    for (const at::Tensor &t : inputs) {
        bytes += (int64_t)t.nbytes();
    }
    const at::Tensor like = as_bytes(first);
    Lane *lane = lane_for(like);
    at::Tensor block = lane->empty(std::max<int64_t>(bytes, 1), like);
    at::Tensor flat = lane->empty(std::max<int64_t>(size_ * bytes, 1), like);
    weft_comm_t comm = comm_;

    return enqueue_device(
        c10d::OpType::ALLGATHER_COALESCED, "weft:all_gather_coalesced", all_outputs, inputs,
        [comm, inputs, lists, block, flat, bytes](Lane &lane, uint64_t seq) {
            int64_t offset = 0;
            for (const at::Tensor &t : inputs) {
                if (t.nbytes() > 0) {
                    lane.copy(block.narrow(0, offset, (int64_t)t.nbytes()), as_bytes(t));
                }
                offset += (int64_t)t.nbytes();
            }
            check(weft_allgather_enqueue(block.data_ptr(), flat.data_ptr(), (size_t)bytes,
                                         WEFT_UINT8, comm, lane.stream()),
                  "allgather_coalesced", seq);
            for (size_t r = 0; r < lists.size(); r++) {
                offset = (int64_t)r * bytes;
                for (const at::Tensor &t : lists[r]) {
                    if (t.nbytes() > 0) {
                        lane.copy(as_bytes(t), flat.narrow(0, offset, (int64_t)t.nbytes()));
                    }
                    offset += (int64_t)t.nbytes();
                }
            }
        },
        {block, flat});
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupWeft::allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                  std::vector<at::Tensor> &inputs,
                                                  const c10d::AllgatherOptions &)
{
    TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "weft: allgather_into_tensor_coalesced: ",
                      outputs.size(), " outputs for ", inputs.size(), " inputs");
    const bool device = !outputs.empty() && device_call({outputs[0]});
    for (size_t i = 0; i < inputs.size(); i++) {
        if (device) {
            check_device_whole_and_part(outputs[i], inputs[i], size_,
                                        "allgather_into_tensor_coalesced");
            check_device_tensor(outputs[i], outputs[0], "allgather_into_tensor_coalesced");
        } else {
            check_whole_and_part(outputs[i], inputs[i], size_, "allgather_into_tensor_coalesced");
        }
    }
    weft_comm_t comm = comm_;
    if (device) {
        return enqueue_device(
            c10d::OpType::COALESCED, "weft:all_gather_into_tensor_coalesced", outputs, inputs,
            [comm, outputs, inputs](Lane &lane, uint64_t seq) {
                for (size_t i = 0; i < inputs.size(); i++) {
                    check(weft_allgather_enqueue(inputs[i].data_ptr(), outputs[i].data_ptr(),
                                                 (size_t)inputs[i].nbytes(), WEFT_UINT8, comm,
                                                 lane.stream()),
                          "allgather_into_tensor_coalesced", seq);
                }
            });
    }

    return enqueue_collective(c10d::OpType::COALESCED, "weft:all_gather_into_tensor_coalesced",
                              outputs, inputs, [comm, outputs, inputs](uint64_t seq) {
                                  for (size_t i = 0; i < inputs.size(); i++) {
                                      allgather_into(outputs[i], inputs[i], comm,
                                                     "allgather_into_tensor_coalesced", seq);
                                  }
                              });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::gather(std::vector<std::vector<at::Tensor>> &outputs,
                                                        std::vector<at::Tensor> &inputs,
                                                        const c10d::GatherOptions &opts)
{
    bool device;
    const at::Tensor &in = single_tensor(inputs, "gather", &device);
    check_root(opts.rootRank, size_, "gather");
    const int root = (int)opts.rootRank;
    std::vector<at::Tensor> outs;
    if (rank_ == root) {
        outs = one_list(outputs, size_, "gather");
        check_list(outs, in, device, "gather");
    } else {
        TORCH_CHECK_VALUE(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                          "weft: gather: only the root (rank ", root, ") takes an output list");
    }
    weft_comm_t comm = comm_;
    const int size = size_;

    if (device) {
        at::Tensor flat; /* the root's: every rank's part, copied out on the stream */
        if (!outs.empty()) {
            flat = lane_for(in)->empty(size * in.numel(), in);
        }
        std::vector<at::Tensor> scratch;
        if (flat.defined()) {
            scratch.push_back(flat);
        }
        return enqueue_device(
            c10d::OpType::GATHER, "weft:gather", outs, inputs,
            [comm, in, outs, flat, root](Lane &lane, uint64_t seq) {
                check(weft_gather_enqueue(in.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr,
                                          (size_t)in.nbytes(), WEFT_UINT8, root, comm,
                                          lane.stream()),
                      "gather", seq);
                for (size_t r = 0; r < outs.size(); r++) {
                    lane.copy(outs[r], part(flat, r, in.numel()));
                }
            },
            scratch);
    }

    return enqueue_collective(c10d::OpType::GATHER, "weft:gather", outs, inputs,
                              [comm, in, outs, root, size](uint64_t seq) {
                                  at::Tensor src = as_contiguous(in);
                                  at::Tensor flat;
                                  if (!outs.empty()) {
                                      flat = flat_empty(size * in.numel(), in);
                                  }
                                  check(weft_gather(src.data_ptr(),
                                                    flat.defined() ? flat.data_ptr() : nullptr,
                                                    (size_t)src.nbytes(), WEFT_UINT8, root, comm),
                                        "gather", seq);
                                  if (flat.defined()) {
                                      unflatten(flat, outs);
                                  }
                              });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupWeft::scatter(std::vector<at::Tensor> &outputs,
                          std::vector<std::vector<at::Tensor>> &inputs,
                          const c10d::ScatterOptions &opts)
{
    bool device;
    const at::Tensor &out = single_tensor(outputs, "scatter", &device);
    check_root(opts.rootRank, size_, "scatter");
    const int root = (int)opts.rootRank;
    std::vector<at::Tensor> ins;
    if (rank_ == root) {
        ins = one_list(inputs, size_, "scatter");
        check_list(ins, out, device, "scatter");
    } else {
        TORCH_CHECK_VALUE(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                          "weft: scatter: only the root (rank ", root, ") takes an input list");
    }
    weft_comm_t comm = comm_;

    if (device) {
        at::Tensor flat; /* the root's: the parts copied in on the stream */
        std::vector<at::Tensor> scratch;
        if (!ins.empty()) {
            flat = lane_for(out)->empty((int64_t)ins.size() * out.numel(), out);
            scratch.push_back(flat);
        }
        return enqueue_device(
            c10d::OpType::SCATTER, "weft:scatter", outputs, ins,
            [comm, out, ins, flat, root](Lane &lane, uint64_t seq) {
                for (size_t r = 0; r < ins.size(); r++) {
                    lane.copy(part(flat, r, out.numel()), ins[r]);
                }
                check(weft_scatter_enqueue(flat.defined() ? flat.data_ptr() : nullptr,
                                           out.data_ptr(), (size_t)out.nbytes(), WEFT_UINT8, root,
                                           comm, lane.stream()),
                      "scatter", seq);
            },
            scratch);
    }

    return enqueue_collective(c10d::OpType::SCATTER, "weft:scatter", outputs, ins,
                              [comm, out, ins, root](uint64_t seq) {
                                  at::Tensor flat;
                                  if (!ins.empty()) {
                                      flat = flatten(ins);
                                  }
                                  at::Tensor dst = as_contiguous(out);
                                  check(weft_scatter(flat.defined() ? flat.data_ptr() : nullptr,
                                                     dst.data_ptr(), (size_t)dst.nbytes(),
                                                     WEFT_UINT8, root, comm),
                                        "scatter", seq);
                                  copy_back(out, dst);
                              });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupWeft::reduce_scatter(std::vector<at::Tensor> &outputs,
                                 std::vector<std::vector<at::Tensor>> &inputs,
                                 const c10d::ReduceScatterOptions &opts)
{
    bool device;
    const at::Tensor &out = single_tensor(outputs, "reduce_scatter", &device);
    const std::vector<at::Tensor> &ins = one_list(inputs, size_, "reduce_scatter");
    check_list(ins, out, device, "reduce_scatter");
    weft_comm_t comm = comm_;
    const int size = size_;

    if (device) {
        const ReducePlan plan = device_plan(out, opts.reduceOp, "reduce_scatter");
        /* the parts copied into a flat buffer on the stream, reduced from there */
        at::Tensor flat = lane_for(out)->empty(size * out.numel(), out);
        return enqueue_device(
            c10d::OpType::REDUCE_SCATTER, "weft:reduce_scatter", outputs, ins,
            [comm, out, ins, flat, plan](Lane &lane, uint64_t seq) {
                for (size_t r = 0; r < ins.size(); r++) {
                    lane.copy(part(flat, r, out.numel()), ins[r]);
                }
                check(weft_reduce_scatter_enqueue(flat.data_ptr(), out.data_ptr(),
                                                  device_count(out, plan), plan.dtype, plan.op,
                                                  comm, lane.stream()),
                      "reduce_scatter", seq);
            },
            {flat});
    }
    const ReducePlan plan = reduce_plan(out.scalar_type(), opts.reduceOp);

    return enqueue_collective(c10d::OpType::REDUCE_SCATTER, "weft:reduce_scatter", outputs, ins,
                              [comm, out, ins, plan, size](uint64_t seq) {
                                  reduce_scatter_into(out, flatten(ins), plan, comm, size, seq);
                              });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupWeft::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                       const c10d::ReduceScatterOptions &opts)
{
    weft_comm_t comm = comm_;
    const int size = size_;
    if (device_call({output})) {
        check_device_whole_and_part(input, output, size, "reduce_scatter_tensor");
        const ReducePlan plan = device_plan(output, opts.reduceOp, "reduce_scatter_tensor");
        return enqueue_device(c10d::OpType::_REDUCE_SCATTER_BASE, "weft:reduce_scatter_tensor",
                              {output}, {input},
                              [comm, output, input, plan](Lane &lane, uint64_t seq) {
                                  check(weft_reduce_scatter_enqueue(
                                            input.data_ptr(), output.data_ptr(),
                                            device_count(output, plan), plan.dtype, plan.op, comm,
                                            lane.stream()),
                                        "reduce_scatter_tensor", seq);
                              });
    }
    check_whole_and_part(input, output, size_, "reduce_scatter_tensor");
    const ReducePlan plan = reduce_plan(output.scalar_type(), opts.reduceOp);

    return enqueue_collective(c10d::OpType::_REDUCE_SCATTER_BASE, "weft:reduce_scatter_tensor",
                              {output}, {input}, [comm, output, input, plan, size](uint64_t seq) {
                                  reduce_scatter_into(output, input, plan, comm, size, seq);
                              });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupWeft::reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                  std::vector<at::Tensor> &inputs,
                                                  const c10d::ReduceScatterOptions &opts)
{
    TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "weft: reduce_scatter_tensor_coalesced: ",
                      outputs.size(), " outputs for ", inputs.size(), " inputs");
    const bool device = !outputs.empty() && device_call({outputs[0]});
    std::vector<ReducePlan> plans;
    for (size_t i = 0; i < inputs.size(); i++) {
        if (device) {
            check_device_whole_and_part(inputs[i], outputs[i], size_,
                                        "reduce_scatter_tensor_coalesced");
            check_device_tensor(outputs[i], outputs[0], "reduce_scatter_tensor_coalesced");
            plans.push_back(device_plan(outputs[i], opts.reduceOp,
                                        "reduce_scatter_tensor_coalesced"));
        } else {
            check_whole_and_part(inputs[i], outputs[i], size_, "reduce_scatter_tensor_coalesced");
            plans.push_back(reduce_plan(outputs[i].scalar_type(), opts.reduceOp));
        }
    }
    weft_comm_t comm = comm_;
    const int size = size_;
    if (device) {
        return enqueue_device(
            c10d::OpType::COALESCED, "weft:reduce_scatter_tensor_coalesced", outputs, inputs,
            [comm, outputs, inputs, plans](Lane &lane, uint64_t seq) {
                for (size_t i = 0; i < inputs.size(); i++) {
                    check(weft_reduce_scatter_enqueue(
                              inputs[i].data_ptr(), outputs[i].data_ptr(),
                              device_count(outputs[i], plans[i]), plans[i].dtype, plans[i].op,
                              comm, lane.stream()),
                          "reduce_scatter_tensor_coalesced", seq);
                }
            });
    }

    return enqueue_collective(c10d::OpType::COALESCED, "weft:reduce_scatter_tensor_coalesced",
                              outputs, inputs, [comm, outputs, inputs, plans, size](uint64_t seq) {
                                  for (size_t i = 0; i < inputs.size(); i++) {
                                      reduce_scatter_into(outputs[i], inputs[i], plans[i], comm,
                                                          size, seq);
                                  }
                              });
}

namespace {

/* Byte counts and displacements of split sizes along dim 0 (an empty list:
 * equal parts). */
void byte_splits(const at::Tensor &t, const std::vector<int64_t> &splits, int size,
                 const char *side, std::vector<size_t> &counts, std::vector<size_t> &displs)
{
    TORCH_CHECK_VALUE(t.dim() >= 1 || splits.empty(), "weft: all_to_all_single: the ", side,
                      " needs a first dimension to split");
    const int64_t rows = t.dim() >= 1 ? t.size(0) : t.numel();
    const size_t row_bytes = rows == 0 ? 0 : (size_t)(t.nbytes() / (size_t)rows);
    std::vector<int64_t> parts = splits;
    if (parts.empty()) {
        TORCH_CHECK_VALUE(rows % size == 0, "weft: all_to_all_single: the ", side, "'s ", rows,
                          " rows do not split evenly among ", size, " ranks");
        parts.assign((size_t)size, rows / size);
    }
    TORCH_CHECK_VALUE((int)parts.size() == size, "weft: all_to_all_single: ", parts.size(), " ",
                      side, " split sizes for a group of ", size);
    int64_t sum = 0;
    for (int64_t p : parts) {
        TORCH_CHECK_VALUE(p >= 0, "weft: all_to_all_single: a negative ", side, " split size");
        sum += p;
    }
    TORCH_CHECK_VALUE(sum == rows, "weft: all_to_all_single: the ", side,
                      " split sizes add up to ", sum, ", the tensor has ", rows, " rows");
    counts.resize((size_t)size);
    displs.resize((size_t)size);
    size_t offset = 0;
    for (int r = 0; r < size; r++) {
        counts[(size_t)r] = (size_t)parts[(size_t)r] * row_bytes;
        displs[(size_t)r] = offset;
        offset += counts[(size_t)r];
    }
}

} // namespace

c10::intrusive_ptr<c10d::Work>
ProcessGroupWeft::alltoall_base(at::Tensor &output, at::Tensor &input,
                                std::vector<int64_t> &output_split_sizes,
                                std::vector<int64_t> &input_split_sizes,
                                const c10d::AllToAllOptions &)
{
    const bool device = device_call({output});
    if (device) {
        check_device_tensor(output, output, "all_to_all_single");
        check_device_tensor(input, output, "all_to_all_single");
    } else {
        check_cpu_tensor(input, "all_to_all_single");
        check_cpu_tensor(output, "all_to_all_single");
    }
    check_equal_types(output, input, "all_to_all_single");
    std::vector<size_t> scounts, sdispls, rcounts, rdispls;
    byte_splits(input, input_split_sizes, size_, "input", scounts, sdispls);
    byte_splits(output, output_split_sizes, size_, "output", rcounts, rdispls);
    weft_comm_t comm = comm_;

    if (device) {
        /* weft copies the count arrays when it enqueues */
        return enqueue_device(
            c10d::OpType::ALLTOALL_BASE, "weft:all_to_all_single", {output}, {input},
            [comm, output, input, scounts, sdispls, rcounts, rdispls](Lane &lane, uint64_t seq) {
                check(weft_alltoallv_enqueue(input.data_ptr(), output.data_ptr(), scounts.data(),
                                             sdispls.data(), rcounts.data(), rdispls.data(),
                                             WEFT_UINT8, comm, lane.stream()),
                      "all_to_all_single", seq);
            });
    }

    return enqueue_collective(
        c10d::OpType::ALLTOALL_BASE, "weft:all_to_all_single", {output}, {input},
        [comm, output, input, scounts, sdispls, rcounts, rdispls](uint64_t seq) {
            at::Tensor src = as_contiguous(input);
            at::Tensor dst = as_contiguous(output);
            check(weft_alltoallv(src.data_ptr(), dst.data_ptr(), scounts.data(), sdispls.data(),
                                 rcounts.data(), rdispls.data(), WEFT_UINT8, comm),
                  "all_to_all_single", seq);
            copy_back(output, dst);
        });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::alltoall(std::vector<at::Tensor> &outputs,
                                                          std::vector<at::Tensor> &inputs,
                                                          const c10d::AllToAllOptions &)
{
    TORCH_CHECK_VALUE((int)inputs.size() == size_ && (int)outputs.size() == size_,
                      "weft: all_to_all: ", inputs.size(), " inputs and ", outputs.size(),
                      " outputs for a group of ", size_);
    const bool device = device_call({inputs[0]});
    std::vector<size_t> scounts, sdispls, rcounts, rdispls;
    size_t soff = 0, roff = 0;
    for (int r = 0; r < size_; r++) {
        if (device) {
            check_device_tensor(inputs[(size_t)r], inputs[0], "all_to_all");
            check_device_tensor(outputs[(size_t)r], inputs[0], "all_to_all");
        } else {
            check_cpu_tensor(inputs[(size_t)r], "all_to_all");
            check_cpu_tensor(outputs[(size_t)r], "all_to_all");
        }
        check_equal_types(outputs[(size_t)r], inputs[0], "all_to_all");
        check_equal_types(inputs[(size_t)r], inputs[0], "all_to_all");
        scounts.push_back(inputs[(size_t)r].nbytes());
        sdispls.push_back(soff);
        soff += scounts.back();
        rcounts.push_back(outputs[(size_t)r].nbytes());
        rdispls.push_back(roff);
        roff += rcounts.back();
    }
    weft_comm_t comm = comm_;

    if (device) {
        /* flat buffers of the lane's: the inputs copied in, the outputs out, on the stream */
        const int64_t es = (int64_t)inputs[0].element_size();
        Lane *lane = lane_for(inputs[0]);
        at::Tensor src = lane->empty((int64_t)soff / es, inputs[0]);
        at::Tensor dst = lane->empty((int64_t)roff / es, inputs[0]);
        return enqueue_device(
            c10d::OpType::ALLTOALL, "weft:all_to_all", outputs, inputs,
            [comm, outputs, inputs, src, dst, scounts, sdispls, rcounts, rdispls,
             es](Lane &lane, uint64_t seq) {
                for (size_t r = 0; r < inputs.size(); r++) {
                    lane.copy(src.narrow(0, (int64_t)sdispls[r] / es, (int64_t)scounts[r] / es),
                              inputs[r]);
                }
                check(weft_alltoallv_enqueue(src.data_ptr(), dst.data_ptr(), scounts.data(),
                                             sdispls.data(), rcounts.data(), rdispls.data(),
                                             WEFT_UINT8, comm, lane.stream()),
                      "all_to_all", seq);
                for (size_t r = 0; r < outputs.size(); r++) {
                    lane.copy(outputs[r],
                              dst.narrow(0, (int64_t)rdispls[r] / es, (int64_t)rcounts[r] / es));
                }
            },
            {src, dst});
    }

    return enqueue_collective(
        c10d::OpType::ALLTOALL, "weft:all_to_all", outputs, inputs,
        [comm, outputs, inputs, scounts, sdispls, rcounts, rdispls, roff](uint64_t seq) {
            at::Tensor src = flatten(inputs).view(at::kByte);
            at::Tensor dst = at::empty({(int64_t)roff}, src.options());
            check(weft_alltoallv(src.data_ptr(), dst.data_ptr(), scounts.data(), sdispls.data(),
                                 rcounts.data(), rdispls.data(), WEFT_UINT8, comm),
                  "all_to_all", seq);
            unflatten(dst.view(outputs[0].scalar_type()), outputs);
        });
}

/* ------------------------------------------------------ point-to-point */

namespace {

/*
 * The tensor of a send or receive: a CPU tensor (emu memory included), or a
 * contiguous tensor of a torch accelerator (CUDA), which weft's transport
 * carries from and to device memory itself (staged through the host where
 * UCX cannot). Such a tensor's stream order is kept on the host: the
 * caller's current stream is marked at the call (ready), and the worker
 * waits for that mark before weft touches the memory; the operation ends
 * when weft is done with it, so work queued after wait() sees it. (A device
 * operation of the group refuses to start while one is in flight.)
 */
const at::Tensor &p2p_tensor(const std::vector<at::Tensor> &tensors, const char *call,
                             std::shared_ptr<c10::Event> *ready)
{
    TORCH_CHECK_VALUE(tensors.size() == 1, "weft: ", call, " takes one tensor per process, got ",
                      tensors.size());
    const at::Tensor &t = tensors[0];
    if (!t.defined() || t.device().is_cpu()) {
        check_cpu_tensor(t, call);
        return t;
    }
    TORCH_CHECK_VALUE(t.layout() == at::kStrided, "weft: ", call,
                      ": only dense (strided) tensors are supported, got layout ", t.layout());
    TORCH_CHECK_VALUE(t.is_contiguous(), "weft: ", call,
                      ": a non-contiguous device tensor is not supported (pass a contiguous one)");
    const c10::impl::DeviceGuardImplInterface *impl =
        c10::impl::getDeviceGuardImpl(t.device().type());
    *ready = std::make_shared<c10::Event>(t.device().type());
    (*ready)->record(impl->getStream(t.device()));
    return t;
}

/* The device a send or receive runs under: a device tensor's (p2p_tensor marked it), none for
 * CPU tensors. */
std::optional<c10::Device> device_of(const at::Tensor &t, const std::shared_ptr<c10::Event> &ready)
{
    return ready ? std::optional<c10::Device>(t.device()) : std::nullopt;
}

} // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::send(std::vector<at::Tensor> &tensors,
                                                      int dst_rank, int tag)
{
    std::shared_ptr<c10::Event> ready; /* device tensors: the caller's stream at the call */
    const at::Tensor &t = p2p_tensor(tensors, "send", &ready);
    check_root(dst_rank, size_, "send");
    TORCH_CHECK_VALUE(tag >= 0 && tag <= WEFT_TAG_UB, "weft: send: tag ", tag,
                      " is outside 0..", WEFT_TAG_UB);
    if (c10::intrusive_ptr<WorkWeft> held = hold_p2p(t, dst_rank, tag, true, "send")) {
        return held; /* queued at endCoalescing */
    }
    auto work = c10::make_intrusive<WorkWeft>(rank_, c10d::OpType::SEND, "weft:send", tensors,
                                              std::optional<std::vector<at::Tensor>>(tensors));
    weft_comm_t comm = comm_;
    const uint64_t *seq = &work->seq_;

    return enqueue(work, [comm, t, dst_rank, tag, seq, ready] {
        /* the device's context current on this thread, so that weft sees device memory */
        c10::OptionalDeviceGuard guard(device_of(t, ready));
        if (ready) {
            ready->synchronize();
        }
        at::Tensor buf = as_contiguous(t);
        Pending p;
        check(weft_isend(buf.data_ptr(), (size_t)buf.nbytes(), WEFT_UINT8, dst_rank, tag, comm,
                         &p.req),
              "send", *seq);
        p.after = [buf] {}; /* keeps the sent copy alive */
        p.what = c10::str("send to rank ", dst_rank, " tag ", tag);
        return p;
    });
}

/* recv and recvAnysource: src_rank WEFT_ANY_SOURCE for the latter; the
 * worker records the sender in the work (sourceRank). */
c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::receive(std::vector<at::Tensor> &tensors,
                                                         int src_rank, int tag, const char *call)
{
    std::shared_ptr<c10::Event> ready; /* device tensors: the caller's stream at the call */
    const at::Tensor &t = p2p_tensor(tensors, call, &ready);
    if (src_rank != WEFT_ANY_SOURCE) {
        check_root(src_rank, size_, call);
    }
    TORCH_CHECK_VALUE(tag >= 0 && tag <= WEFT_TAG_UB, "weft: ", call, ": tag ", tag,
                      " is outside 0..", WEFT_TAG_UB);
    if (c10::intrusive_ptr<WorkWeft> held = hold_p2p(t, src_rank, tag, false, call)) {
        return held; /* queued at endCoalescing */
    }
    const bool any = src_rank == WEFT_ANY_SOURCE;
    auto work = c10::make_intrusive<WorkWeft>(
        rank_, any ? c10d::OpType::RECVANYSOURCE : c10d::OpType::RECV,
        any ? "weft:recv_anysource" : "weft:recv", tensors, std::nullopt);
    weft_comm_t comm = comm_;
    const uint64_t *seq = &work->seq_;

    return enqueue(work, [comm, t, src_rank, tag, seq, any, ready] {
        c10::OptionalDeviceGuard guard(device_of(t, ready)); /* as send's */
        if (ready) {
            ready->synchronize(); /* nothing queued before the call still uses t */
        }
        at::Tensor buf = as_contiguous(t);
        Pending p;
        check(weft_irecv(buf.data_ptr(), (size_t)buf.nbytes(), WEFT_UINT8, src_rank, tag, comm,
                         &p.req),
              "recv", *seq);
        p.after = [t, buf] { copy_back(t, buf); };
        p.what = any ? c10::str("recv from any rank tag ", tag)
                     : c10::str("recv from rank ", src_rank, " tag ", tag);
        return p;
    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::recv(std::vector<at::Tensor> &tensors,
                                                      int src_rank, int tag)
{
    return receive(tensors, src_rank, tag, "recv");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::recvAnysource(std::vector<at::Tensor> &tensors,
                                                               int tag)
{
    return receive(tensors, WEFT_ANY_SOURCE, tag, "recv_anysource");
}

} // namespace weft_torch
