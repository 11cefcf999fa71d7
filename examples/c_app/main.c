/* A minimal C application using an aicc bundle: one static arena, no malloc.
 * Build: make -C examples/c_app BUNDLE=path/to/bundle run */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model.h"

/* C99 has no alignas: over-allocate and align by hand. */
static unsigned char arena_raw[MODEL_ARENA_BYTES + MODEL_ARENA_ALIGN];
static float input[MODEL_INPUT0_ELEMS];
static float output[MODEL_OUTPUT0_ELEMS];
static float output2[MODEL_OUTPUT0_ELEMS];

int main(void)
{
    void *arena = (void *)(((uintptr_t)arena_raw + (MODEL_ARENA_ALIGN - 1u)) &
                           ~(uintptr_t)(MODEL_ARENA_ALIGN - 1u));
    const void *inputs[1];
    void *outputs[1];
    size_t i, best = 0;
    int st;

    for (i = 0; i < MODEL_INPUT0_ELEMS; ++i) {
        input[i] = (float)sin(0.1 * (double)i);
    }
    inputs[0] = input;
    outputs[0] = output;

    /* a too-small arena is refused with a status code, and nothing is written */
    st = model_run(NULL, arena, MODEL_ARENA_BYTES - 1u, inputs, outputs);
    if (MODEL_ARENA_BYTES > 0u && st != AICC_ERR_ARENA_SMALL) {
        fprintf(stderr, "expected AICC_ERR_ARENA_SMALL, got %d\n", st);
        return 1;
    }
    st = model_run(NULL, arena, MODEL_ARENA_BYTES, inputs, outputs);
    if (st != AICC_OK) {
        fprintf(stderr, "model_run: %s\n", aicc_status_str(st));
        return 1;
    }
    /* deterministic: a second run gives the same bits */
    outputs[0] = output2;
    st = model_run(NULL, arena, MODEL_ARENA_BYTES, inputs, outputs);
    if (st != AICC_OK || memcmp(output, output2, sizeof output) != 0) {
        fprintf(stderr, "second run differs\n");
        return 1;
    }
    for (i = 1; i < MODEL_OUTPUT0_ELEMS; ++i) {
        if (output[i] > output[best]) {
            best = i;
        }
    }
    printf("c_app: arena %u bytes, weights %u bytes, %u steps; output[0..%u): argmax %u = %g\n",
           (unsigned)MODEL_ARENA_BYTES, (unsigned)MODEL_WEIGHTS_BYTES, (unsigned)MODEL_NUM_STEPS,
           (unsigned)MODEL_OUTPUT0_ELEMS, (unsigned)best, (double)output[best]);
    return 0;
}
