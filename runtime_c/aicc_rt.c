/* aicc runtime: executes a compiled plan over a caller-owned arena.
 * C99, no malloc, no stdio. Part of aicc; copied into every bundle. */
#include "aicc_rt.h"

static int aicc_misaligned(const void *p, size_t align)
{
    return align > 1u && ((uintptr_t)p % (uintptr_t)align) != 0u;
}

int aicc_run(const aicc_plan *plan, const void *weights, void *arena, size_t arena_bytes,
             const void *const *inputs, void *const *outputs, aicc_hook_fn hook, void *user)
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
    for (i = 0; i < plan->num_steps; ++i) {
        if (hook != NULL) {
            hook(user, i, plan->steps[i].op, 0);
        }
        plan->steps[i].fn(&f);
        if (hook != NULL) {
            hook(user, i, plan->steps[i].op, 1);
        }
    }
    return AICC_OK;
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
    default: return "unknown status";
    }
}
