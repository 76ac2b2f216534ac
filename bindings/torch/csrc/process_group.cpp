#include "process_group.hpp"

#include <cstring>

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include "types.hpp"

namespace weft_torch {

namespace {

/* The c10d Store key of a group's unique id (the store is the group's own,
 * prefixed by torch). */
const char *const kUniqueIdKey = "weft_unique_id";

/* A contiguous tensor holding t's data: t itself, or a copy (to be copied
 * back with finish_contiguous once the operation wrote it). */
at::Tensor as_contiguous(const at::Tensor &t)
{
    return t.is_contiguous() ? t : t.contiguous();
}

void finish_contiguous(const at::Tensor &t, const at::Tensor &buf)
{
    if (!buf.is_same(t)) {
        t.copy_(buf);
    }
}

} // namespace

/* ------------------------------------------------------------------ Work */

WorkWeft::WorkWeft(int rank, c10d::OpType type, const char *title, std::vector<at::Tensor> outputs,
                   const std::optional<std::vector<at::Tensor>> &inputs)
    : c10d::Work(rank, type, title, inputs), outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get())))
{
}

std::vector<at::Tensor> WorkWeft::result()
{
    return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkWeft::getFuture()
{
    return future_;
}

uint64_t WorkWeft::getSequencenumber() const
{
    return seq_;
}

void WorkWeft::complete(std::exception_ptr error)
{
    finish(error);
    if (error) {
        future_->setError(error);
    } else {
        future_->markCompleted(c10::IValue(outputs_));
    }
}

/* --------------------------------------------------------- ProcessGroup */

ProcessGroupWeft::ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                                   int size, std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), timeout_(timeout)
{
    weft_unique_id_t id;
    weft_status_t status = weft_init();

    if (status != WEFT_OK) {
        raise_status(status, "weft_init", 0);
    }
    if (rank == 0) {
        status = weft_get_unique_id(&id);
        if (status != WEFT_OK) {
            weft_finalize();
            raise_status(status, "weft_get_unique_id", 0);
        }
        store->set(kUniqueIdKey, std::vector<uint8_t>(id.internal, id.internal + sizeof id.internal));
    } else {
        std::vector<uint8_t> bytes;
        try {
            bytes = store->get(kUniqueIdKey);
        } catch (...) {
            weft_finalize();
            throw;
        }
        if (bytes.size() != sizeof id.internal) {
            weft_finalize();
            C10_THROW_ERROR(DistBackendError,
                            c10::str("weft: the group's unique id in the store has ", bytes.size(),
                                     " bytes, not ", sizeof id.internal));
        }
        std::memcpy(id.internal, bytes.data(), sizeof id.internal);
    }
    status = weft_comm_init_rank(size, &id, rank, &comm_);
    if (status != WEFT_OK) {
        std::string detail = weft_last_error();
        weft_finalize();
        C10_THROW_ERROR(DistBackendError,
                        c10::str("weft: joining the group (rank ", rank, " of ", size,
                                 ") failed: ", weft_status_name(status), ": ", detail));
    }
    worker_ = std::thread(&ProcessGroupWeft::worker_loop, this);
}

ProcessGroupWeft::~ProcessGroupWeft()
{
    stop_worker();
    weft_comm_destroy(comm_);
    weft_finalize();
}

c10::intrusive_ptr<c10d::Backend>
ProcessGroupWeft::create(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                         const std::chrono::duration<float> &timeout)
{
    return c10::make_intrusive<ProcessGroupWeft>(
        store, rank, size, std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
}

void ProcessGroupWeft::shutdown()
{
    stop_worker();
}

void ProcessGroupWeft::stop_worker()
{
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) {
        worker_.join();
    }
}

void ProcessGroupWeft::worker_loop()
{
    for (;;) {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) {
            return; /* stopped, and everything queued has run */
        }
        auto item = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();

        std::exception_ptr error;
        try {
            item.second();
        } catch (...) {
            error = std::current_exception();
        }
        item.first->complete(error);
    }
}

c10::intrusive_ptr<WorkWeft> ProcessGroupWeft::enqueue(c10::intrusive_ptr<WorkWeft> work, Run run)
{
    {
        std::lock_guard<std::mutex> lock(mutex_);
        TORCH_CHECK(!stop_, "weft: the process group was shut down");
        work->seq_ = ++next_seq_;
        queue_.emplace_back(work, std::move(run));
    }
    cv_.notify_one();
    return work;
}

/* ----------------------------------------------------------- Collectives */

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allreduce(std::vector<at::Tensor> &tensors,
                                                           const c10d::AllreduceOptions &opts)
{
    const at::Tensor &t = single_cpu_tensor(tensors, "allreduce");
    const ReducePlan plan = reduce_plan(t.scalar_type(), opts.reduceOp);
    auto work = c10::make_intrusive<WorkWeft>(rank_, c10d::OpType::ALLREDUCE, "weft:all_reduce",
                                              tensors, tensors);
    weft_comm_t comm = comm_;
    uint64_t *seq = &work->seq_;

    return enqueue(work, [comm, t, plan, seq] {
        at::Tensor view = plan.complex ? at::view_as_real(t) : t;
        at::Tensor buf = plan.widen ? view.to(plan.wide_type).contiguous() : as_contiguous(view);

        if (plan.premul) {
            if (plan.factor_tensor.defined()) {
                buf.mul_(plan.factor_tensor.to(buf.scalar_type()));
            } else {
                buf.mul_(plan.factor);
            }
        }
        weft_status_t status = weft_allreduce(WEFT_IN_PLACE, buf.data_ptr(), (size_t)buf.numel(),
                                              plan.dtype, plan.op, comm);
        if (status != WEFT_OK) {
            raise_status(status, "allreduce", *seq);
        }
        finish_contiguous(view, buf);
    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::broadcast(std::vector<at::Tensor> &tensors,
                                                           const c10d::BroadcastOptions &opts)
{
    const at::Tensor &t = single_cpu_tensor(tensors, "broadcast");
    TORCH_CHECK_VALUE(opts.rootTensor == 0, "weft: broadcast: rootTensor ", opts.rootTensor,
                      " out of range (one tensor per process)");
    check_root(opts.rootRank, size_, "broadcast");
    auto work = c10::make_intrusive<WorkWeft>(rank_, c10d::OpType::BROADCAST, "weft:broadcast",
                                              tensors, tensors);
    weft_comm_t comm = comm_;
    const int root = (int)opts.rootRank;
    uint64_t *seq = &work->seq_;

    return enqueue(work, [comm, t, root, seq] {
        at::Tensor buf = as_contiguous(t);
        weft_status_t status = weft_bcast(buf.data_ptr(), (size_t)buf.nbytes(), WEFT_UINT8, root,
                                          comm);
        if (status != WEFT_OK) {
            raise_status(status, "broadcast", *seq);
        }
        finish_contiguous(t, buf);
    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::barrier(const c10d::BarrierOptions & /*opts*/)
{
    auto work = c10::make_intrusive<WorkWeft>(rank_, c10d::OpType::BARRIER, "weft:barrier",
                                              std::vector<at::Tensor>{}, std::nullopt);
    weft_comm_t comm = comm_;
    uint64_t *seq = &work->seq_;

    return enqueue(work, [comm, seq] {
        weft_status_t status = weft_barrier(comm);
        if (status != WEFT_OK) {
            raise_status(status, "barrier", *seq);
        }
    });
}

} // namespace weft_torch
