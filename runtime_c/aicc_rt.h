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
#define AICC_ERR_DIMS 6          /* a dynamic dim is below 1 or above its largest bucket */
#define AICC_ERR_CHECK 7         /* checked mode: a step wrote outside its buffers */

/* Largest tensor rank the padding copies handle (bundles with dynamic dims). */
#define AICC_MAX_RANK 8

/* What every step function sees: base pointers of the four memory regions. */
typedef struct aicc_frame {
    unsigned char *arena;
    const unsigned char *weights;
    const void *const *inputs;
    void *const *outputs;
    const int64_t *dims;         /* actual values of the dynamic dims (NULL: static plan) */
} aicc_frame;

typedef void (*aicc_step_fn)(const aicc_frame *f);

typedef struct aicc_step {
    aicc_step_fn fn;
    const char *op;              /* ONNX op type, for hooks and profiling */
} aicc_step;

/* Checked mode (bundles built with memory: {checked: true}, compiled with -DAICC_CHECKED):
 * every arena buffer is followed by a redzone; before each step the runtime fills the
 * redzones of the buffers that step produces and sums the bytes of every live buffer it
 * must not write (and of the inputs); after the step it verifies both. */
typedef struct aicc_check_buf {
    size_t offset, size;
    uint32_t first, last;        /* steps that produce and last read it */
} aicc_check_buf;

typedef struct aicc_check_table {
    size_t redzone;              /* guard bytes after every buffer, and before the first */
    uint32_t num_bufs;
    const aicc_check_buf *bufs;
    const uint32_t *writes_start;   /* step k may write bufs writes[writes_start[k] ..] */
    const uint32_t *writes;
    const size_t *input_bytes;
} aicc_check_table;

/* What checked mode found (kind: 0 none, 1 a redzone changed, 2 a live buffer or an input
 * the step must not write changed). Debug builds only: one global, not reentrant. */
typedef struct aicc_check_report {
    int kind;
    uint32_t step;
    uint32_t buffer;             /* redzone: the buffer it follows (num_bufs: the leading one) */
} aicc_check_report;

#ifdef AICC_CHECKED
extern aicc_check_report aicc_last_check;
#endif

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
    const aicc_check_table *check;           /* NULL unless built for checked mode */
} aicc_plan;

/* Called before (after == 0) and after (after == 1) every step when given. */
typedef void (*aicc_hook_fn)(void *user, uint32_t step, const char *op, int after);

/* Run the plan. weights may be NULL when the bundle embeds them. Returns AICC_OK or an
 * AICC_ERR_* code; on error nothing is written. */
int aicc_run(const aicc_plan *plan, const void *weights, void *arena, size_t arena_bytes,
             const void *const *inputs, void *const *outputs, aicc_hook_fn hook, void *user);

/* The same for a plan compiled for one bucket of dynamic dims: dims are the actual values of
 * the model's dynamic dims, which step functions read for loop bounds and padding fills. */
int aicc_run_dims(const aicc_plan *plan, const int64_t *dims, const void *weights, void *arena,
                  size_t arena_bytes, const void *const *inputs, void *const *outputs,
                  aicc_hook_fn hook, void *user);

/* Copy the leading box `box` (rank dims) of a dense row-major tensor of shape src_shape into
 * a dense tensor of shape dst_shape; elements of dst outside the box are set to zero when
 * zero_rest is nonzero. Element size esize bytes. Used to pad inputs into a bucket's shape
 * and to crop outputs to the actual shape. */
void aicc_copy_box(void *dst, const int64_t *dst_shape, const void *src, const int64_t *src_shape,
                   const int64_t *box, uint32_t rank, size_t esize, int zero_rest);

const char *aicc_status_str(int status);

#ifdef __cplusplus
}
#endif

#endif /* AICC_RT_H */
