/* aicc runtime: executes a compiled plan over a caller-owned arena.
 * C99, no malloc, no stdio. Part of aicc; copied into every bundle. */
#include "aicc_rt.h"

#include <string.h>

static int aicc_misaligned(const void *p, size_t align)
{
    return align > 1u && ((uintptr_t)p % (uintptr_t)align) != 0u;
}

#ifdef AICC_CHECKED
aicc_check_report aicc_last_check;

#define AICC_REDZONE_BYTE 0xA5u

static uint64_t aicc_sum_bytes(uint64_t h, const unsigned char *p, size_t n)
{
    size_t i;
    for (i = 0; i < n; ++i) {
        h = (h ^ p[i]) * UINT64_C(1099511628211);   /* FNV-1a */
    }
    return h;
}

static int aicc_step_writes(const aicc_check_table *c, uint32_t step, uint32_t b)
{
    uint32_t i;
    for (i = c->writes_start[step]; i < c->writes_start[step + 1u]; ++i) {
        if (c->writes[i] == b) {
            return 1;
        }
    }
    return 0;
}

/* the bytes a step must leave alone: live buffers it does not write, and the inputs */
static uint64_t aicc_protected_sum(const aicc_plan *plan, const unsigned char *arena,
                                   const void *const *inputs, uint32_t step)
{
    const aicc_check_table *c = plan->check;
    uint64_t h = UINT64_C(14695981039346656037);
    uint32_t b;
    for (b = 0; b < c->num_bufs; ++b) {
        const aicc_check_buf *x = &c->bufs[b];
        if (x->first < step && step <= x->last && !aicc_step_writes(c, step, b)) {
            h = aicc_sum_bytes(h, arena + x->offset, x->size);
        }
    }
    for (b = 0; b < plan->num_inputs; ++b) {
        h = aicc_sum_bytes(h, (const unsigned char *)inputs[b], c->input_bytes[b]);
    }
    return h;
}

static int aicc_redzone_ok(const unsigned char *p, size_t n)
{
    size_t i;
    for (i = 0; i < n; ++i) {
        if (p[i] != AICC_REDZONE_BYTE) {
            return 0;
        }
    }
    return 1;
}

/* 0, or the step's violation recorded in aicc_last_check */
static int aicc_check_after(const aicc_plan *plan, const unsigned char *arena, uint32_t step,
                            uint64_t before, const void *const *inputs)
{
    const aicc_check_table *c = plan->check;
    uint32_t b;
    if (!aicc_redzone_ok(arena, c->redzone)) {
        aicc_last_check.kind = 1;
        aicc_last_check.step = step;
        aicc_last_check.buffer = c->num_bufs;
        return 1;
    }
    for (b = 0; b < c->num_bufs; ++b) {
        const aicc_check_buf *x = &c->bufs[b];
        if (x->first <= step && step <= x->last &&
            !aicc_redzone_ok(arena + x->offset + x->size, c->redzone)) {
            aicc_last_check.kind = 1;
            aicc_last_check.step = step;
            aicc_last_check.buffer = b;
            return 1;
        }
    }
    if (aicc_protected_sum(plan, arena, inputs, step) != before) {
        aicc_last_check.kind = 2;
        aicc_last_check.step = step;
        aicc_last_check.buffer = 0;
        return 1;
    }
    return 0;
}
#endif

int aicc_run(const aicc_plan *plan, const void *weights, void *arena, size_t arena_bytes,
             const void *const *inputs, void *const *outputs, aicc_hook_fn hook, void *user)
{
    return aicc_run_dims(plan, NULL, weights, arena, arena_bytes, inputs, outputs, hook, user);
}

int aicc_run_dims(const aicc_plan *plan, const int64_t *dims, const void *weights, void *arena,
                  size_t arena_bytes, const void *const *inputs, void *const *outputs,
                  aicc_hook_fn hook, void *user)
{
    aicc_frame f;
    uint32_t i;
    if (plan == NULL || arena == NULL) {
        return AICC_ERR_NULL;
    }
    if ((plan->num_inputs > 0u && inputs == NULL) || (plan->num_outputs > 0u && outputs == NULL)) {
        return AICC_ERR_NULL;
    }
    if (arena_bytes < plan->arena_bytes) {
        return AICC_ERR_ARENA_SMALL;
    }
    if (aicc_misaligned(arena, plan->arena_align)) {
        return AICC_ERR_ARENA_ALIGN;
    }
    if (weights == NULL) {
        weights = plan->embedded_weights;
    }
    if (weights == NULL && plan->weights_bytes > 0u) {
        return AICC_ERR_WEIGHTS;
    }
    for (i = 0; i < plan->num_inputs; ++i) {
        if (inputs[i] == NULL || aicc_misaligned(inputs[i], plan->input_align[i])) {
            return AICC_ERR_BAD_INPUT;
        }
    }
    for (i = 0; i < plan->num_outputs; ++i) {
        if (outputs[i] == NULL || aicc_misaligned(outputs[i], plan->output_align[i])) {
            return AICC_ERR_BAD_INPUT;
        }
    }
    f.arena = (unsigned char *)arena;
    f.weights = (const unsigned char *)weights;
    f.inputs = inputs;
    f.outputs = outputs;
    f.dims = dims;
#ifdef AICC_CHECKED
    aicc_last_check.kind = 0;
    if (plan->check != NULL) {
        memset(arena, (int)AICC_REDZONE_BYTE, plan->check->redzone);
    }
#endif
    for (i = 0; i < plan->num_steps; ++i) {
#ifdef AICC_CHECKED
        uint64_t before = 0;
        if (plan->check != NULL) {
            const aicc_check_table *c = plan->check;
            uint32_t b;
            for (b = 0; b < c->num_bufs; ++b) {
                if (c->bufs[b].first == i) {
                    memset(f.arena + c->bufs[b].offset + c->bufs[b].size,
                           (int)AICC_REDZONE_BYTE, c->redzone);
                }
            }
            before = aicc_protected_sum(plan, f.arena, inputs, i);
        }
#endif
        if (hook != NULL) {
            hook(user, i, plan->steps[i].op, 0);
        }
        plan->steps[i].fn(&f);
        if (hook != NULL) {
            hook(user, i, plan->steps[i].op, 1);
        }
#ifdef AICC_CHECKED
        if (plan->check != NULL && aicc_check_after(plan, f.arena, i, before, inputs)) {
            return AICC_ERR_CHECK;
        }
#endif
    }
    return AICC_OK;
}

void aicc_copy_box(void *dst, const int64_t *dst_shape, const void *src, const int64_t *src_shape,
                   const int64_t *box, uint32_t rank, size_t esize, int zero_rest)
{
    /* rows of the innermost axis are copied whole; idx walks the outer axes of the box */
    int64_t idx[AICC_MAX_RANK];
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    size_t row, total = esize;
    uint32_t k;
    if (rank == 0u) {
        memcpy(d, s, esize);
        return;
    }
    for (k = 0; k < rank; ++k) {
        total *= (size_t)dst_shape[k];
        if (box[k] <= 0) {
            if (zero_rest) {
                memset(d, 0, total);
            }
            return;
        }
    }
    if (zero_rest) {
        memset(d, 0, total);
    }
    row = (size_t)box[rank - 1u] * esize;
    for (k = 0; k < rank; ++k) {
        idx[k] = 0;
    }
    for (;;) {
        size_t doff = 0, soff = 0;
        for (k = 0; k + 1u < rank; ++k) {
            doff = doff * (size_t)dst_shape[k] + (size_t)idx[k];
            soff = soff * (size_t)src_shape[k] + (size_t)idx[k];
        }
        memcpy(d + doff * (size_t)dst_shape[rank - 1u] * esize,
               s + soff * (size_t)src_shape[rank - 1u] * esize, row);
        k = rank - 1u;
        while (k > 0u) {
            --k;
            if (++idx[k] < box[k]) {
                break;
            }
            idx[k] = 0;
            if (k == 0u) {
                return;
            }
        }
        if (rank == 1u) {
            return;
        }
    }
}

const char *aicc_status_str(int status)
{
    switch (status) {
    case AICC_OK: return "ok";
    case AICC_ERR_NULL: return "null pointer";
    case AICC_ERR_ARENA_SMALL: return "arena too small";
    case AICC_ERR_ARENA_ALIGN: return "arena misaligned";
    case AICC_ERR_BAD_INPUT: return "bad input or output pointer";
    case AICC_ERR_WEIGHTS: return "weights missing";
    case AICC_ERR_DIMS: return "dynamic dim out of range";
    case AICC_ERR_CHECK: return "checked mode: a step wrote outside its buffers";
    default: return "unknown status";
    }
}
