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
 * returns a WorkWeft at once. The group's queued operations run one at a
 * time, in call order, with weft's blocking calls, and each completes its
 * Work (and its future) with the result or with an exception that carries
 * weft's status and message. They run on the group's worker thread, or on
 * a thread that waits for one of them: Work::wait() on an operation still
 * queued while the worker is idle runs the queue up to that operation
 * itself (dist.all_reduce(t) is all_reduce(...).wait(): it runs on the
 * caller's thread, and no thread sleeps and wakes for it). Whoever runs the
 * queue holds the group's turn (`driving_`); the communicator is touched
 * only by the thread that holds it (weft: one thread at a time per
 * communicator). A waiting caller runs only what the worker would have run
 * before its operation completes, so blocking and order are the same either
 * way. The groups' workers run independently (each communicator has its own
 * transport endpoints; weft serializes the shared UCX worker itself).
 *
 * Timeouts: the group's torch timeout (init_process_group's or new_group's
 * `timeout`, or setTimeout later) becomes its communicator's deadline
 * (weft_comm_set_timeout) unless WEFT_TIMEOUT is set in the environment,
 * which then wins (one knob for every group while debugging). A timed-out
 * or failed collective fails its Work with weft's diagnosis, and every later
 * operation of the group fails with the same status (the communicator is
 * broken).
 *
 * Point-to-point: send and recv start weft_isend/weft_irecv and leave the
 * request pending; the worker tests the pending requests between queued
 * operations (and weft's blocking collectives progress them too), so a
 * send that waits for its receive blocks neither the worker nor the other
 * operations. A request still pending after the group's timeout
 * (the torch timeout) aborts the communicator: its Work fails with the
 * peer and tag it waited for, and so does every later operation.
 *
 * Tensors: dense CPU tensors (as c10d passes them). A non-contiguous tensor
 * goes through a contiguous copy; collectives of a list of tensors go
 * through one flat buffer.
 *
 * Device tensors (CUDA, and CPU tensors in weft's emulated device memory)
 * take weft's stream-ordered collectives for every collective (device.hpp;
 * the list forms through flat buffers, collectives.cpp): queued
 * like the others, and what runs in turn is the _enqueue call on the
 * group's stream of that device. A CUDA operation's Work is complete for
 * torch once it is enqueued; wait() orders the caller's current stream
 * after it, as ProcessGroupNCCL's does, and a failure shows at the group's
 * next operation. An emu operation's Work completes when its stream is
 * past it, with its failure (or the failure of an operation enqueued after
 * it, seen first: the communicator is broken either way).
 */
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <weft.h>

#include "device.hpp"

namespace weft_torch {

/* The Work of one queued operation. Completed by the group's worker thread:
 * wait(), isCompleted(), exception() and the future (getFuture(), as DDP's
 * communication hooks use it) all see the same completion. result() and the
 * future's value are the operation's output tensors. */
class WorkWeft : public c10d::Work {
  public:
    /* devices: of a device operation's outputs (its future is then a
     * stream-aware one, as ProcessGroupNCCL's) */
    WorkWeft(int rank, c10d::OpType type, const char *title, std::vector<at::Tensor> outputs,
             const std::optional<std::vector<at::Tensor>> &inputs,
             std::vector<c10::Device> devices = {});

    std::vector<at::Tensor> result() override;
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
    uint64_t getSequencenumber() const override;

    /* A completed receive: the rank its message came from (torch's
     * work._source_rank(), what dist.recv returns). */
    int sourceRank() const override;

    /* Called once, by the thread that ran the operation. */
    void complete(std::exception_ptr error);

    /* Without a timeout: runs the group's queue up to this operation on the
     * calling thread when the worker is not running it (the class comment
     * of ProcessGroupWeft), then waits as c10d::Work does. */
    bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;

    /* A device operation: also its stream is past it. */
    bool isCompleted() override;
    /* A device operation: the current stream waits for it (host: nothing). */
    void synchronize() override;

    uint64_t seq_ = 0;
    std::atomic<int> source_{-1};   /* set before complete() */
    std::atomic<bool> done_{false}; /* set by complete(), after finish() */
    /* the group that queued it (set by enqueue; a Work may outlive it) */
    std::optional<c10::weak_intrusive_ptr<c10d::Backend>> group_;
    /* a torch device's operation: its end on the group's stream (set
     * before complete()) */
    std::shared_ptr<DeviceDone> device_;
    /* a coalescing region's Work (endCoalescing's): the operations queued
     * inside the region, which complete (and fail) with it; set before it
     * is queued */
    std::vector<c10::intrusive_ptr<WorkWeft>> members_;
    /* the Work of device sends and receives held in an open coalescing
     * region: not queued until endCoalescing (wait() before it raises) */
    std::atomic<bool> held_{false};

    /* a held receive's tensor: one of the outputs (before it is queued) */
    void add_output(const at::Tensor &t)
    {
        outputs_.push_back(t);
    }

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

    /* collectives.cpp */
    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
        std::vector<at::Tensor> &tensors, const c10d::AllreduceCoalescedOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                          const c10d::ReduceOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                   const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allgather_coalesced(
        std::vector<std::vector<at::Tensor>> &output_lists, std::vector<at::Tensor> &inputs,
        const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
        std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
        const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::GatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                           std::vector<std::vector<at::Tensor>> &inputs,
                                           const c10d::ScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                  std::vector<std::vector<at::Tensor>> &inputs,
                                                  const c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
        at::Tensor &output, at::Tensor &input, const c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
        std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
        const c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                                 std::vector<int64_t> &output_split_sizes,
                                                 std::vector<int64_t> &input_split_sizes,
                                                 const c10d::AllToAllOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                            std::vector<at::Tensor> &inputs,
                                            const c10d::AllToAllOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst_rank,
                                        int tag) override;
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src_rank,
                                        int tag) override;
    /* dist.recv / irecv with src=None: WEFT_ANY_SOURCE (a CPU message of at
     * most one fragment between processes, weft.h) */
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
                                                 int tag) override;

    /* Coalescing (torch's _coalescing_manager with a device, as
     * batch_isend_irecv uses it): between startCoalescing and endCoalescing,
     * sends and receives are checked at the call and held; endCoalescing
     * posts them all at once. Device tensors (one device: CUDA, or emu
     * memory) as one weft group on the lane's stream (weft_group_start,
     * weft_send_enqueue / weft_recv_enqueue, weft_group_end), so ranks
     * exchanging both ways never wait for each other and nothing waits on
     * the host; CPU tensors as outside a region, one after another in call
     * order. Other calls inside the region (collectives, such as the
     * allreduce_coalesced of torch's fast path) run as usual. endCoalescing
     * returns one Work that completes when the sends and receives and
     * everything queued inside the region are done, and fails with the
     * first of their errors; each held call returns that Work too (waiting
     * for it inside the region raises). A part the region cannot take (CPU
     * and device tensors, or two devices, in one region; a non-contiguous
     * device tensor; a device receive from any rank) fails the end's Work
     * with a ValueError and nothing of the region's sends and receives is
     * sent (raising at the call would leave torch's region open). A
     * startCoalescing while a region is open (torch left it after an error
     * inside it) drops that one the same way. */
    bool supportsCoalescing() const override
    {
        return true;
    }
    void startCoalescing() override;
    c10::intrusive_ptr<c10d::Work> endCoalescing() override;

    /* Runs every queued operation, then stops taking new ones. */
    void shutdown() override;
    /* The group's deadline from the next queued operation on. */
    void setTimeout(std::chrono::milliseconds timeout) override;
    /* weft's reproducible mode (weft_comm_set_reproducible) for the group's
     * reductions queued from now on; every rank must set the same. */
    void setReproducible(bool on);

    /* WorkWeft::wait: runs queued operations on the calling thread until
     * work completed, while no other thread holds the group's turn. */
    void run_until(const WorkWeft &work);

  private:
    /* A send or receive held in a coalescing region. */
    struct Held {
        at::Tensor t;
        int peer;
        int tag;
        bool send;
    };
    /* What a queued operation leaves behind when it did not finish on the
     * worker: a started request, what to do once it is done (copy a
     * received contiguous buffer back), and what to name in a timeout. */
    struct Pending {
        weft_request_t req = nullptr;
        std::function<bool()> done; /* without a request: tells when it is done */
        std::function<void()> after;
        std::string what;
    };
    struct InFlight {
        c10::intrusive_ptr<WorkWeft> work;
        Pending pending;
        std::chrono::steady_clock::time_point deadline;
    };
    /* Runs on the worker thread; raises on failure. */
    using Run = std::function<Pending()>;
    c10::intrusive_ptr<c10d::Work> receive(std::vector<at::Tensor> &tensors, int src_rank, int tag,
                                           const char *call);

    /* Queues run for work (inside a coalescing region work also becomes a
     * member of the region's Work). */
    c10::intrusive_ptr<WorkWeft> enqueue(c10::intrusive_ptr<WorkWeft> work, Run run);
    /* A send or receive inside a coalescing region: held for endCoalescing
     * (or noted as the region's refusal), and the region's Work returned;
     * null outside a region. */
    c10::intrusive_ptr<WorkWeft> hold_p2p(const at::Tensor &t, int peer, int tag, bool send,
                                          const char *call);
    /* Ends the open region (the caller holds mutex_): its Work (null if it
     * held no send or receive), what it held, and why it was refused. */
    c10::intrusive_ptr<WorkWeft> take_region(std::vector<Held> *held, std::string *refused);
    /* Fails a dropped region's Work with why (without mutex_: the future's
     * callbacks run); a ValueError for a refused part. */
    static void fail_held(const c10::intrusive_ptr<WorkWeft> &work, const std::string &why,
                          size_t held, bool value_error);
    /* A change of the group's settings: set() on the worker, between the
     * operations queued before and after, waited for (raises its error). */
    void set_on_worker(const char *profile, std::function<void()> set);
    /* A device operation (device.hpp) on the lane of like's device: run()
     * enqueues it on the lane's stream in turn; tensors: what it reads and
     * writes (scratch: flat buffers of the lane's, kept as long). */
    c10::intrusive_ptr<WorkWeft> enqueue_device(c10d::OpType type, const char *title,
                                                std::vector<at::Tensor> outputs,
                                                std::vector<at::Tensor> inputs,
                                                std::function<void(Lane &lane, uint64_t seq)> run,
                                                std::vector<at::Tensor> scratch = {},
                                                c10::intrusive_ptr<WorkWeft> work = {});
    Lane *lane_for(const at::Tensor &t);
    c10::intrusive_ptr<c10d::Work>
    allgather_coalesced_device(const std::vector<std::vector<at::Tensor>> &lists,
                               std::vector<at::Tensor> &all_outputs,
                               std::vector<at::Tensor> &inputs, const at::Tensor &first);
    /* After an emu operation's stream passed it: its failure, or an earlier
     * device operation's (the turn holder's). */
    void check_device(Lane *lane, const char *what, uint64_t seq);
    /* A collective: run() does everything on the worker. */
    c10::intrusive_ptr<WorkWeft> enqueue_collective(c10d::OpType type, const char *title,
                                                    std::vector<at::Tensor> outputs,
                                                    std::vector<at::Tensor> inputs,
                                                    std::function<void(uint64_t seq)> run);
    void worker_loop();
    /* Runs the next queued operation; the caller holds the group's turn and
     * lock, which is released while the operation runs. */
    void run_next(std::unique_lock<std::mutex> &lock);
    /* p, also done once every member is (a coalescing region's Work), with the first member's
     * error */
    static Pending join_members(Pending p,
                                const std::vector<c10::intrusive_ptr<WorkWeft>> &members);
    /* Tests the pending requests; completes the done ones. True when any
     * finished. The caller holds the group's turn. */
    bool poll_in_flight();
    void stop_worker();

    /* The deadline the group's waits get: torch's timeout, or WEFT_TIMEOUT's
     * where the environment sets it. */
    std::chrono::milliseconds effective_timeout(std::chrono::milliseconds torch_timeout) const;

    weft_comm_t comm_ = nullptr;
    std::chrono::milliseconds timeout_; /* effective_timeout's; the turn holder's to read */
    uint64_t next_seq_ = 0;

    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::pair<c10::intrusive_ptr<WorkWeft>, Run>> queue_;
    bool driving_ = false; /* a thread holds the group's turn (mutex_) */
    /* the turn holder's; in_flight_count_ its size, read under mutex_ */
    std::vector<InFlight> in_flight_;
    size_t in_flight_count_ = 0;
    bool sleeping_ = false; /* the worker waits for enqueue's wake-up */
    bool waited_ = true;    /* operations are waited for as they are queued
                               (kLook in process_group.cpp) */
    bool stop_ = false;
    std::thread worker_;

    std::mutex lanes_mutex_;
    /* (device type, index) -> lane; the emu lane at (-1, -1) */
    std::map<std::pair<int, int>, std::unique_ptr<Lane>> lanes_;
    std::string device_error_; /* the first failed device operation's (turn holder's) */

    /* The open coalescing region (mutex_): what was queued inside it, the
     * device sends and receives it holds, their Work, and whether CPU ones
     * ran inside it. */
    bool coalescing_ = false;
    std::vector<c10::intrusive_ptr<WorkWeft>> coalesced_;
    std::vector<Held> held_;
    c10::intrusive_ptr<WorkWeft> held_work_;
    std::string refused_;    /* the first part the region could not take */
    at::Tensor region_first_; /* its first part with memory (the kind the region takes) */
};

} // namespace weft_torch
