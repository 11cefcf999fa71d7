/* onnxruntime through its C API, for the instruction counts of benchmarks/arm.py: one session
 * (one intra-op and one inter-op thread, all graph optimizations), two Run calls on the same
 * inputs into pre-allocated outputs, each between two calls of ort_bench_mark (a noinline
 * function whose address the counting QEMU plugin watches). The second run is the one counted:
 * the first pays for the arena's first allocations and the kernels' lazy set-up.
 *
 *     arm_ort_driver SPEC
 *
 * SPEC is a text file, one item per line:
 *     model PATH
 *     in NAME TYPE RANK D0 .. Dn-1 FILE     (TYPE: ONNX element type number; FILE: raw bytes)
 *     out NAME TYPE RANK D0 .. Dn-1 FILE    (written after the second run)
 * Prints "ort-ok" at the end, or "ort-error TEXT" and exits with status 1.
 *
 * onnxruntime's wheel ships libonnxruntime.so but not onnxruntime_c_api.h, so the few entries
 * of the OrtApi table used here are declared below by their index in that struct (a table of
 * function pointers that only ever grows at its end; see benchmarks/arm.py for where the
 * indices come from). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct OrtStatus OrtStatus;
typedef struct OrtEnv OrtEnv;
typedef struct OrtSession OrtSession;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtValue OrtValue;
typedef struct OrtMemoryInfo OrtMemoryInfo;

typedef struct OrtApiBase {
    const void *(*GetApi)(uint32_t version);
    const char *(*GetVersionString)(void);
} OrtApiBase;

extern const OrtApiBase *OrtGetApiBase(void);

/* indices into struct OrtApi (onnxruntime_c_api.h) */
enum {
    API_GetErrorMessage = 2,
    API_CreateEnv = 3,
    API_CreateSession = 7,
    API_Run = 9,
    API_CreateSessionOptions = 10,
    API_SetSessionGraphOptimizationLevel = 23,
    API_SetIntraOpNumThreads = 24,
    API_SetInterOpNumThreads = 25,
    API_CreateTensorWithDataAsOrtValue = 49,
    API_CreateCpuMemoryInfo = 69
};

enum { ORT_LOGGING_LEVEL_WARNING = 2, ORT_ENABLE_ALL = 99, OrtArenaAllocator = 1,
       OrtMemTypeDefault = 0 };

typedef const char *(*GetErrorMessage_fn)(const OrtStatus *);
typedef OrtStatus *(*CreateEnv_fn)(int, const char *, OrtEnv **);
typedef OrtStatus *(*CreateSession_fn)(const OrtEnv *, const char *, const OrtSessionOptions *,
                                       OrtSession **);
typedef OrtStatus *(*Run_fn)(OrtSession *, const void *, const char *const *,
                             const OrtValue *const *, size_t, const char *const *, size_t,
                             OrtValue **);
typedef OrtStatus *(*CreateSessionOptions_fn)(OrtSessionOptions **);
typedef OrtStatus *(*SetInt_fn)(OrtSessionOptions *, int);
typedef OrtStatus *(*CreateTensorWithData_fn)(const OrtMemoryInfo *, void *, size_t,
                                              const int64_t *, size_t, int, OrtValue **);
typedef OrtStatus *(*CreateCpuMemoryInfo_fn)(int, int, OrtMemoryInfo **);

static const void *const *api;

#define FN(name) ((name##_fn)api[API_##name])

volatile uint32_t ort_bench_sink;

/* where the counting plugin reads its counter (mark=ADDRESS) */
void ort_bench_mark(uint32_t what) __attribute__((noinline));
void ort_bench_mark(uint32_t what)
{
    ort_bench_sink += what;
}

/* called through a volatile pointer, so that the compiler neither inlines nor clones it */
static void (*volatile mark)(uint32_t) = ort_bench_mark;

static void check(OrtStatus *st, const char *what)
{
    if (st != NULL) {
        printf("ort-error %s: %s\n", what, ((GetErrorMessage_fn)api[API_GetErrorMessage])(st));
        exit(1);
    }
}

static void fail(const char *what)
{
    printf("ort-error %s\n", what);
    exit(1);
}

#define MAXT 16
#define MAXR 8

typedef struct {
    char name[256], file[4096];
    int type, rank;
    int64_t dims[MAXR];
    size_t bytes;
    void *data;
    OrtValue *value;
} Tensor;

static size_t elem_size(int type)
{
    switch (type) {
    case 2: case 3: case 9: return 1;          /* uint8, int8, bool */
    case 4: case 5: case 10: case 16: return 2; /* uint16, int16, float16, bfloat16 */
    case 1: case 6: case 12: return 4;          /* float, int32, uint32 */
    case 7: case 11: case 13: return 8;         /* int64, double, uint64 */
    default: fail("unsupported element type"); return 0;
    }
}

static void read_tensor(FILE *f, Tensor *t)
{
    int i;
    size_t n = 1;
    if (fscanf(f, "%255s %d %d", t->name, &t->type, &t->rank) != 3 || t->rank < 0 ||
        t->rank > MAXR) {
        fail("bad tensor line in the spec");
    }
    for (i = 0; i < t->rank; ++i) {
        long long d;
        if (fscanf(f, "%lld", &d) != 1 || d < 0) {
            fail("bad dimension in the spec");
        }
        t->dims[i] = (int64_t)d;
        n *= (size_t)d;
    }
    if (fscanf(f, "%4095s", t->file) != 1) {
        fail("no file in the spec");
    }
    t->bytes = n * elem_size(t->type);
    t->data = calloc(t->bytes ? t->bytes : 1, 1);
    if (t->data == NULL) {
        fail("out of memory");
    }
}

int main(int argc, char **argv)
{
    static Tensor ins[MAXT], outs[MAXT];
    const char *in_names[MAXT], *out_names[MAXT];
    const OrtValue *in_vals[MAXT];
    OrtValue *out_vals[MAXT];
    char model[4096] = "", key[16];
    int nin = 0, nout = 0, i, r;
    const char *ver;
    FILE *f;
    OrtEnv *env;
    OrtSessionOptions *so;
    OrtSession *sess;
    OrtMemoryInfo *mem;

    if (argc != 2 || (f = fopen(argv[1], "r")) == NULL) {
        fail("usage: arm_ort_driver SPEC");
    }
    while (fscanf(f, "%15s", key) == 1) {
        if (strcmp(key, "model") == 0) {
            if (fscanf(f, "%4095s", model) != 1) {
                fail("bad model line in the spec");
            }
        } else if (strcmp(key, "in") == 0 && nin < MAXT) {
            read_tensor(f, &ins[nin++]);
        } else if (strcmp(key, "out") == 0 && nout < MAXT) {
            read_tensor(f, &outs[nout++]);
        } else {
            fail("bad spec");
        }
    }
    fclose(f);
    for (i = 0; i < nin; ++i) {
        FILE *g = fopen(ins[i].file, "rb");
        if (g == NULL || fread(ins[i].data, 1, ins[i].bytes, g) != ins[i].bytes) {
            fail("cannot read an input file");
        }
        fclose(g);
    }

    /* the API version of this library: ORT 1.N has API version N */
    ver = OrtGetApiBase()->GetVersionString();
    api = OrtGetApiBase()->GetApi((uint32_t)atoi(strchr(ver, '.') + 1));
    if (api == NULL) {
        fail("GetApi returned NULL");
    }
    check(FN(CreateEnv)(ORT_LOGGING_LEVEL_WARNING, "aicc-arm-bench", &env), "CreateEnv");
    check(FN(CreateSessionOptions)(&so), "CreateSessionOptions");
    check(((SetInt_fn)api[API_SetIntraOpNumThreads])(so, 1), "SetIntraOpNumThreads");
    check(((SetInt_fn)api[API_SetInterOpNumThreads])(so, 1), "SetInterOpNumThreads");
    check(((SetInt_fn)api[API_SetSessionGraphOptimizationLevel])(so, ORT_ENABLE_ALL),
          "SetSessionGraphOptimizationLevel");
    check(FN(CreateSession)(env, model, so, &sess), "CreateSession");
    check(FN(CreateCpuMemoryInfo)(OrtArenaAllocator, OrtMemTypeDefault, &mem),
          "CreateCpuMemoryInfo");
    for (i = 0; i < nin; ++i) {
        OrtValue *v = NULL;
        check(((CreateTensorWithData_fn)api[API_CreateTensorWithDataAsOrtValue])(
                  mem, ins[i].data, ins[i].bytes, ins[i].dims, (size_t)ins[i].rank,
                  ins[i].type, &v), "CreateTensorWithDataAsOrtValue (input)");
        in_names[i] = ins[i].name;
        in_vals[i] = v;
    }
    for (i = 0; i < nout; ++i) {
        check(((CreateTensorWithData_fn)api[API_CreateTensorWithDataAsOrtValue])(
                  mem, outs[i].data, outs[i].bytes, outs[i].dims, (size_t)outs[i].rank,
                  outs[i].type, &out_vals[i]), "CreateTensorWithDataAsOrtValue (output)");
        out_names[i] = outs[i].name;
    }
    for (r = 0; r < 2; ++r) {
        OrtStatus *st;
        mark(0u);
        st = FN(Run)(sess, NULL, in_names, in_vals, (size_t)nin, out_names, (size_t)nout,
                     out_vals);
        mark(1u);
        check(st, "Run");
    }
    for (i = 0; i < nout; ++i) {
        FILE *g = fopen(outs[i].file, "wb");
        if (g == NULL || fwrite(outs[i].data, 1, outs[i].bytes, g) != outs[i].bytes) {
            fail("cannot write an output file");
        }
        fclose(g);
    }
    printf("ort-ok %s\n", ver);
    return 0;
}
