/*
 * weft_torch: weft as a torch.distributed (c10d) backend.
 *
 * One ProcessGroupWeft per torch process group: its own weft communicator,
 * made with weft_comm_init_rank from a unique id that group rank 0 creates
 * and puts in the group's c10d Store (torch gives each group a store with
 * its own prefix, so new_group needs nothing more), and its own worker
 * thread.
 *
 * Threading, as ProcessGroupMPI and ProcessGroupGloo do it: each collective
 * call checks its arguments on the caller's thread (a bad argument raises
 * there, and nothing is queued or sent), then queues the operation and
 * returns a WorkWeft at once. The worker thread runs the group's queued
 * operations one at a time, in call order, with weft's blocking calls, and
 * completes each Work (and its future) with the result or with an exception
 * that carries weft's status and message. The communicator is touched only
 * by the worker thread (weft: one thread at a time per communicator), and
 * the groups' workers run independently (each communicator has its own
 * transport endpoints; weft serializes the shared UCX worker itself).
 *
 * Timeouts: every wait inside weft ends at WEFT_TIMEOUT (seconds, read once
 * per process by weft_init); a timed-out or failed collective fails its
 * Work with weft's diagnosis, and every later operation of the group fails
 * with the same status (the communicator is broken).
 *
 * Tensors: dense CPU tensors, one per call (as c10d passes them). A
 * non-contiguous tensor goes through a contiguous copy.
 */
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <weft.h>

namespace weft_torch {

/* The Work of one queued operation. Completed by the group's worker thread:
 * wait(), isCompleted(), exception() and the future (getFuture(), as DDP's
 * communication hooks use it) all see the same completion. result() and the
 * future's value are the operation's output tensors. */
class WorkWeft : public c10d::Work {
  public:
    WorkWeft(int rank, c10d::OpType type, const char *title, std::vector<at::Tensor> outputs,
             const std::optional<std::vector<at::Tensor>> &inputs);

    std::vector<at::Tensor> result() override;
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
    uint64_t getSequencenumber() const override;

    /* Called once, by the worker thread. */
    void complete(std::exception_ptr error);

    uint64_t seq_ = 0;

  private:
    std::vector<at::Tensor> outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupWeft : public c10d::Backend {
  public:
    /* Collective over the group's ranks: joins (or, at rank 0, creates) the
     * group's weft communicator through store. Raises on failure. */
    ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                     std::chrono::milliseconds timeout);
    /* Runs what is queued, stops the worker, destroys the communicator. */
    ~ProcessGroupWeft() override;

    /* The creator torch.distributed.Backend.register_backend calls. */
    static c10::intrusive_ptr<c10d::Backend> create(const c10::intrusive_ptr<c10d::Store> &store,
                                                    int rank, int size,
                                                    const std::chrono::duration<float> &timeout);

    const std::string getBackendName() const override
    {
        return "weft";
    }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;

    /* Runs every queued operation, then stops taking new ones. */
    void shutdown() override;

  private:
    using Run = std::function<void()>;

    c10::intrusive_ptr<WorkWeft> enqueue(c10::intrusive_ptr<WorkWeft> work, Run run);
    void worker_loop();
    void stop_worker();

    weft_comm_t comm_ = nullptr;
    std::chrono::milliseconds timeout_;
    uint64_t next_seq_ = 0;

    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::pair<c10::intrusive_ptr<WorkWeft>, Run>> queue_;
    bool stop_ = false;
    std::thread worker_;
};

} // namespace weft_torch
