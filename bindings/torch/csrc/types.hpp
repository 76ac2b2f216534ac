/*
 * torch dtypes and ReduceOps as weft dtypes and ops, and the checks a call
 * makes on the caller's thread before anything is queued. Every refusal
 * raises a c10::Error (ValueError/RuntimeError in Python) naming the
 * argument, as ProcessGroupGloo does for the same input.
 */
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <weft.h>

namespace weft_torch {

/* How one tensor is reduced: weft's dtype and op for the buffer handed to
 * weft, the type the tensor is widened to first where weft has no type of
 * its width (int16 -> int32, uint16 -> uint32; the results agree because
 * every op wraps or compares the same way in the wider type), and the
 * factor PREMUL_SUM multiplies by before a SUM. Complex tensors are reduced
 * as their real views (SUM, AVG and PREMUL_SUM only, as c10d allows). */
struct ReducePlan {
    weft_dtype_t dtype;
    weft_op_t op;
    bool widen = false;
    at::ScalarType wide_type = at::ScalarType::Undefined;
    bool complex = false;
    bool premul = false;
    double factor = 1.0;
    at::Tensor factor_tensor; /* defined when the factor is a tensor */
};

/* The plan for reducing tensors of type t with op; raises for a pair c10d
 * refuses (bitwise ops on floating types, AVG on bool, ...). */
ReducePlan reduce_plan(at::ScalarType t, const c10d::ReduceOp &op);

/* The one dense CPU tensor of a call; raises otherwise ("weft: <call>: ..."). */
const at::Tensor &single_cpu_tensor(const std::vector<at::Tensor> &tensors, const char *call);

/* Raises unless 0 <= root < size. */
void check_root(int64_t root, int size, const char *call);

/* The buffer weft reduces for tensor t (run on the worker): t itself where
 * it is contiguous and needs no change, else a contiguous copy (widened,
 * as real numbers, multiplied by the PREMUL_SUM factor). */
at::Tensor reduce_buffer(const at::Tensor &t, const ReducePlan &plan);
/* Stores a reduced buffer (of t's numel, in the plan's type) back into t,
 * unless it is t's own memory. */
void reduce_result(const at::Tensor &t, const ReducePlan &plan, const at::Tensor &buf);

/* A contiguous tensor holding t's data: t itself, or a copy. */
at::Tensor as_contiguous(const at::Tensor &t);
/* Copies buf (as_contiguous's result, or any tensor of dst's numel) into
 * dst unless it is dst itself. */
void copy_back(const at::Tensor &dst, const at::Tensor &buf);

/* A dense CPU tensor of a list argument; raises otherwise. */
void check_cpu_tensor(const at::Tensor &t, const char *call);

/* Raises a c10::DistBackendError for a failed weft call:
 * "weft: allreduce #12 failed: WEFT_ERR_TIMEOUT (operation timed out): <detail>". */
[[noreturn]] void raise_status(weft_status_t status, const char *call, uint64_t seq);

inline void check(weft_status_t status, const char *call, uint64_t seq)
{
    if (status != WEFT_OK) {
        raise_status(status, call, seq);
    }
}

} // namespace weft_torch
