/* aicc runtime: executes a compiled plan over a caller-owned arena.
 * C99, no malloc, no stdio. Part of aicc; copied into every bundle. */
#ifndef AICC_RT_H
#define AICC_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AICC_RT_VERSION 1

/* Status codes returned by aicc_run and the generated <name>_run functions. */
#define AICC_OK 0
#define AICC_ERR_NULL 1          /* a required pointer is NULL */
#define AICC_ERR_ARENA_SMALL 2   /* arena_bytes is below the plan's arena size */
#define AICC_ERR_ARENA_ALIGN 3   /* the arena is not aligned as the plan needs */
#define AICC_ERR_BAD_INPUT 4     /* an input or output pointer is NULL or misaligned */
#define AICC_ERR_WEIGHTS 5       /* no weights: the bundle keeps them outside and none given */

/* What every step function sees: base pointers of the four memory regions. */
typedef struct aicc_frame {
    unsigned char *arena;
    const unsigned char *weights;
    const void *const *inputs;
    void *const *outputs;
} aicc_frame;

typedef void (*aicc_step_fn)(const aicc_frame *f);

typedef struct aicc_step {
    aicc_step_fn fn;
    const char *op;              /* ONNX op type, for hooks and profiling */
} aicc_step;

typedef struct aicc_plan {
    uint32_t num_steps;
    const aicc_step *steps;
    size_t arena_bytes;
    size_t arena_align;
    size_t weights_bytes;
    const unsigned char *embedded_weights;   /* NULL when weights live outside */
    uint32_t num_inputs;
    const size_t *input_align;               /* element size of each input */
    uint32_t num_outputs;
    const size_t *output_align;
} aicc_plan;

/* Called before (after == 0) and after (after == 1) every step when given. */
typedef void (*aicc_hook_fn)(void *user, uint32_t step, const char *op, int after);

/* Run the plan. weights may be NULL when the bundle embeds them. Returns AICC_OK or an
 * AICC_ERR_* code; on error nothing is written. */
int aicc_run(const aicc_plan *plan, const void *weights, void *arena, size_t arena_bytes,
             const void *const *inputs, void *const *outputs, aicc_hook_fn hook, void *user);

const char *aicc_status_str(int status);

#ifdef __cplusplus
}
#endif

#endif /* AICC_RT_H */
