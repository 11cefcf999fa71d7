"""C text of the recurrent kernels (RNN, LSTM, GRU; see rnn.py for the op semantics).

One shared driver ``aicc_rnn`` runs every node: per direction and per batch entry, the time
steps of that entry's sequence (its sequence_lens value, or all of them) in forward or
reverse order. The input projections W x_t + Wb are computed ahead in chunks of TCH time
steps (xproj), then per step the recurrent product R h + Rb (rmul), peepholes and clip, and
the activation functions, which the step passes as an array of ``void f(TYPE *v, size_t n)``
helpers (one per activation and alpha/beta) applied to whole gate vectors.

Portable kernels (TCH = 1): the weights in their ONNX layout (rows of W and R contiguous), one
dot product per gate element with 8 partial sums. SIMD (float32, TCH = 16): the weights
transposed ([I][G*H] and [H][G*H]: derived constants, or transposed into step scratch when
fed at run time), so both products are register-blocked GEMMs with no horizontal sums
(gemm_simd: 4 time steps x 2 vectors, 1 x 8 vectors), and a chunk of input projections reads
W once (50 steps 64 -> 128 on avx512, against a four-row matvec with horizontal sums: LSTM
161 -> 128 us, GRU 126 -> 94 us; onnxruntime 137, 114).

The C text uses ``TYPE`` and ``_SFX`` placeholders (float/_f32, double/_f64).
"""
from __future__ import annotations

from ..isa.x86 import SIMD

PARAMS = """\
/* Geometry and attributes of one RNN / LSTM / GRU node. */
typedef struct {
    size_t seq, batch, input, hidden, ndir;
    int kind;                   /* 0 RNN, 1 LSTM (gates i o f c), 2 GRU (gates z r h) */
    int reverse;                /* one direction: 1 for direction=reverse */
    int layout;                 /* 0: X [seq][batch][input]; 1: X [batch][seq][input] */
    int has_clip;               /* clip gate pre-activations to [-clip, clip] */
    double clip;
    int input_forget;           /* LSTM: forget gate = 1 - input gate */
    int linear_before_reset;    /* GRU: r * (R_h h + Rb_h) instead of R_h (r * h) */
} aicc_rnn_params;"""

MATVEC = """\
/* y[j] = bias[j] (0 without bias) + m[j][.] . v for j < rows; m row-major with n columns
 * (one dot product per row: measured faster at -O2 than blocking 4 rows, which spills) */
static void aicc_rnn_matvec_SFX(size_t rows, size_t n, const TYPE *restrict m,
                                const TYPE *restrict v, const TYPE *restrict bias,
                                TYPE *restrict y)
{
    for (size_t j = 0; j < rows; ++j)
        y[j] = (bias ? bias[j] : (TYPE)0) + aicc_rnn_dot_SFX(n, m + j * n, v);
}"""

# the two products of the driver and the cell, portable: row-major W and R, one matvec per row
PRODUCTS = """\
/* g[q * GH + j] = bw[j] (0 without) + W[j][.] . x[q * xs + .] for q < m (m time steps) */
static void aicc_rnn_xproj_SFX(size_t m, size_t GH, size_t I, const TYPE *restrict x,
                               size_t xs, const TYPE *restrict w, const TYPE *restrict bw,
                               TYPE *restrict g)
{
    for (size_t q = 0; q < m; ++q)
        aicc_rnn_matvec_SFX(GH, I, w, x + q * xs, bw, g + q * GH);
}

/* y[j] = bias[j] (0 without) + R[row0 + j][.] . v for j < rows (R: [GH][H]) */
static void aicc_rnn_rmul_SFX(size_t row0, size_t rows, size_t H, size_t GH,
                              const TYPE *restrict r, const TYPE *restrict v,
                              const TYPE *restrict bias, TYPE *restrict y)
{
    (void)GH;
    aicc_rnn_matvec_SFX(rows, H, r + row0 * H, v, bias, y);
}"""

# the same products on x86 SIMD (float32): W and R transposed, a register-blocked GEMM
PRODUCTS_SIMD = """\
static void aicc_rnn_xproj_SFX(size_t m, size_t GH, size_t I, const float *restrict x,
                               size_t xs, const float *restrict wt, const float *restrict bw,
                               float *restrict g)
{
    aicc_rnn_gemm_SFX(m, GH, I, x, xs, wt, GH, bw, g, GH);
}

/* y[j] = bias[j] + R[row0 + j][.] . v for j < rows, from Rt [H][GH] */
static void aicc_rnn_rmul_SFX(size_t row0, size_t rows, size_t H, size_t GH,
                              const float *restrict rt, const float *restrict v,
                              const float *restrict bias, float *restrict y)
{
    aicc_rnn_gemm_SFX(1, rows, H, v, 0, rt + row0, GH, bias, y, 0);
}"""


def _tile(d, R, CV) -> str:
    """C block: rows t..t+R-1, columns j..j+CV*L-1 of gemm_simd, FMA chains over k."""
    L, v = d["L"], d["v"]
    accs = [(r, c) for r in range(R) for c in range(CV)]
    init = "\n".join(f"        {v} a{r}_{c} = bias ? {d['ld']}(bias + j + {c * L}u) : {d['zero']};"
                     for r, c in accs)
    bl = ", ".join(f"b{c} = {d['ld']}(bk + {c * L}u)" for c in range(CV))
    xl = ", ".join(f"x{r} = {d['set1']}(x[(t + {r}u) * xs + k])" for r in range(R))
    fm = "\n".join(f"            a{r}_{c} = {d['fma']}(x{r}, b{c}, a{r}_{c});" for r, c in accs)
    st = "\n".join(f"        {d['st']}(y + (t + {r}u) * ldy + j + {c * L}u, a{r}_{c});"
                   for r, c in accs)
    return f"""\
    for (; j + {CV * L}u <= N; j += {CV * L}u) {{
{init}
        for (size_t k = 0; k < K; ++k) {{
            const float *restrict bk = bt + k * ldb + j;
            const {v} {bl};
            const {v} {xl};
{fm}
        }}
{st}
    }}"""


def gemm_simd(isa: str) -> str:
    """C text of aicc_rnn_gemm_SFX for an x86 SIMD ISA (float32)."""
    d = SIMD[isa]
    L = d["L"]

    def rows(R, CV):
        return f"""\
    j = 0;
{_tile(d, R, CV)}
{_tile(d, R, 1)}
    for (; j < N; ++j)
        for (size_t r = 0; r < {R}u; ++r) {{
            float a = bias ? bias[j] : 0.0f;
            for (size_t k = 0; k < K; ++k)
                a = fmaf(x[(t + r) * xs + k], bt[k * ldb + j], a);
            y[(t + r) * ldy + j] = a;
        }}"""
    return f"""\
/* y[t * ldy + j] = bias[j] (0 without) + sum over k < K of x[t * xs + k] * bt[k * ldb + j] for
 * t < T, j < N ({isa}): tiles of 4 rows x {2 * L} columns, then 1 row x {8 * L} columns, each an
 * FMA chain over k from the bias; single vectors, then the N % {L} columns with fmaf (the
 * same arithmetic per element everywhere). */
static void aicc_rnn_gemm_SFX(size_t T, size_t N, size_t K, const float *restrict x, size_t xs,
                              const float *restrict bt, size_t ldb, const float *restrict bias,
                              float *restrict y, size_t ldy)
{{
    size_t t = 0, j;
    for (; t + 4u <= T; t += 4u) {{
{rows(4, 2)}
    }}
    for (; t < T; ++t) {{
{rows(1, 8)}
    }}
}}"""


DOT = """\
/* sum of a[i] * b[i] for i < n, in 8 partial sums (vectorizes at -O2 without reassociation) */
static TYPE aicc_rnn_dot_SFX(size_t n, const TYPE *restrict a, const TYPE *restrict b)
{
    TYPE acc[8] = {0}, s = 0;
    const size_t n8 = n - n % 8;
    size_t i = 0;
    for (; i < n8; i += 8)
        for (size_t u = 0; u < 8; ++u)
            acc[u] += a[i + u] * b[i + u];
    for (; i < n; ++i)
        s += a[i] * b[i];
    return s + (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])));
}"""

LINALG = """\
PRODUCTS

/* x[i] = min(max(x[i], -clip), clip) when the node has a clip attribute (NaN stays NaN) */
static void aicc_rnn_clip_SFX(const aicc_rnn_params *p, TYPE *x, size_t n)
{
    const TYPE c = (TYPE)p->clip;
    if (!p->has_clip)
        return;
    for (size_t i = 0; i < n; ++i)
        x[i] = x[i] < -c ? -c : (x[i] > c ? c : x[i]);
}

typedef void (*aicc_rnn_fn_SFX)(TYPE *, size_t);"""

CELL = """\
/* One time step of one batch entry: gx the step's input projection W x + Wb (G*H, updated in
 * place), h and c (state, updated in place), rd the direction's R (as rmul reads it), br the R
 * bias (NULL: none), pd the peepholes [3][H] (i, o, f; NULL: none), f the direction's
 * activations. gr, tmp: scratch of G*H and H elements. */
static void aicc_rnn_cell_SFX(const aicc_rnn_params *p, const aicc_rnn_fn_SFX *f,
                              const TYPE *restrict rd, const TYPE *br, const TYPE *pd,
                              TYPE *restrict h, TYPE *restrict c, TYPE *restrict gx,
                              TYPE *restrict gr, TYPE *restrict tmp)
{
    const size_t H = p->hidden, G = p->kind == 0 ? 1 : (p->kind == 1 ? 4 : 3), GH = G * H;
    const int gru_late = p->kind == 2 && !p->linear_before_reset;
    aicc_rnn_rmul_SFX(0, gru_late ? 2 * H : GH, H, GH, rd, h, br, gr);
    if (p->kind == 0) {                       /* RNN: h = f(Wx + Rh + Wb + Rb) */
        for (size_t k = 0; k < H; ++k)
            gx[k] += gr[k];
        aicc_rnn_clip_SFX(p, gx, H);
        f[0](gx, H);
        for (size_t k = 0; k < H; ++k)
            h[k] = gx[k];
    } else if (p->kind == 1) {                /* LSTM */
        TYPE *gi = gx, *go = gx + H, *gf = gx + 2 * H, *gc = gx + 3 * H;
        for (size_t k = 0; k < GH; ++k)
            gx[k] += gr[k];
        if (pd)
            for (size_t k = 0; k < H; ++k) {
                gi[k] += pd[k] * c[k];
                gf[k] += pd[2 * H + k] * c[k];
            }
        aicc_rnn_clip_SFX(p, gi, H);
        f[0](gi, H);
        if (p->input_forget) {
            for (size_t k = 0; k < H; ++k)
                gf[k] = (TYPE)1 - gi[k];
        } else {
            aicc_rnn_clip_SFX(p, gf, H);
            f[0](gf, H);
        }
        aicc_rnn_clip_SFX(p, gc, H);
        f[1](gc, H);
        for (size_t k = 0; k < H; ++k)
            c[k] = gf[k] * c[k] + gi[k] * gc[k];
        if (pd)
            for (size_t k = 0; k < H; ++k)
                go[k] += pd[H + k] * c[k];
        aicc_rnn_clip_SFX(p, go, H);
        f[0](go, H);
        for (size_t k = 0; k < H; ++k)
            tmp[k] = c[k];
        f[2](tmp, H);
        for (size_t k = 0; k < H; ++k)
            h[k] = go[k] * tmp[k];
    } else {                                  /* GRU */
        TYPE *gz = gx, *gs = gx + H, *gh = gx + 2 * H;
        for (size_t k = 0; k < 2 * H; ++k)
            gx[k] += gr[k];
        aicc_rnn_clip_SFX(p, gx, 2 * H);
        f[0](gx, 2 * H);                      /* z and r */
        if (gru_late) {                       /* R_h (r * h) + Rb_h */
            for (size_t k = 0; k < H; ++k)
                tmp[k] = gs[k] * h[k];
            aicc_rnn_rmul_SFX(2 * H, H, H, GH, rd, tmp, br ? br + 2 * H : NULL, gr + 2 * H);
            for (size_t k = 0; k < H; ++k)
                gh[k] += gr[2 * H + k];
        } else {                              /* r * (R_h h + Rb_h) */
            for (size_t k = 0; k < H; ++k)
                gh[k] += gs[k] * gr[2 * H + k];
        }
        aicc_rnn_clip_SFX(p, gh, H);
        f[1](gh, H);
        for (size_t k = 0; k < H; ++k)
            h[k] = ((TYPE)1 - gz[k]) * gh[k] + gz[k] * h[k];
    }
}"""

DRIVER = """\
/* RNN / LSTM / GRU over the whole sequence. Per direction d (bidirectional: 0 forward,
 * 1 reverse) and batch entry n: the state starts at initial_h/initial_c (zero when absent),
 * the entry's L = sequence_lens[n] steps (clamped to [0, seq]; all steps without lens) run
 * in time order t = 0..L-1 (forward) or L-1..0 (reverse), each writing its h into Y; Y is
 * zero for t >= L; Y_h / Y_c get the final state (zero when L == 0, as onnxruntime). Optional
 * inputs and outputs are NULL when absent. The input projections of TCH steps at a time go
 * into ws (TCH * G * H elements), followed by G * H + 3 * H elements of step scratch; w and r
 * as xproj and rmul read them. */
static void aicc_rnn_SFX(const aicc_rnn_params *p, const aicc_rnn_fn_SFX *acts,
                         const TYPE *restrict x, const TYPE *restrict w, const TYPE *restrict r,
                         const TYPE *restrict b, const int32_t *restrict lens,
                         const TYPE *restrict h0, const TYPE *restrict c0,
                         const TYPE *restrict pp, TYPE *restrict y, TYPE *restrict yh,
                         TYPE *restrict yc, TYPE *restrict ws)
{
    const size_t H = p->hidden, I = p->input, T = p->seq, B = p->batch, D = p->ndir;
    const size_t G = p->kind == 0 ? 1 : (p->kind == 1 ? 4 : 3), GH = G * H;
    const size_t nact = p->kind == 0 ? 1 : (p->kind == 1 ? 3 : 2);
    TYPE *gxa = ws, *gr = ws + TCHu * GH, *h = gr + GH, *c = h + H, *tmp = c + H;
    for (size_t d = 0; d < D; ++d) {
        const int rev = D == 2 ? (int)d : p->reverse;
        const TYPE *bw = b ? b + d * 2 * GH : NULL, *br = b ? b + d * 2 * GH + GH : NULL;
        const TYPE *pd = pp ? pp + d * 3 * H : NULL;
        for (size_t n = 0; n < B; ++n) {
            size_t m = 0;                 /* steps in gxa, the chunk from a multiple of TCH */
            const size_t hs = (p->layout ? n * D + d : d * B + n) * H;
            size_t L = T;
            if (lens)
                L = lens[n] < 0 ? 0 : ((size_t)lens[n] < T ? (size_t)lens[n] : T);
            for (size_t k = 0; k < H; ++k) {
                h[k] = h0 ? h0[hs + k] : (TYPE)0;
                c[k] = c0 ? c0[hs + k] : (TYPE)0;
            }
            for (size_t s = 0; s < T; ++s) {
                const size_t t = s < L ? (rev ? L - 1 - s : s) : s;
                TYPE *yt = y ? y + (p->layout ? (n * T + t) * D + d : (t * D + d) * B + n) * H
                             : NULL;
                if (s >= L) {                 /* past the entry's length */
                    if (yt)
                        for (size_t k = 0; k < H; ++k)
                            yt[k] = 0;
                    continue;
                }
                if (s % TCHu == 0) {          /* project the inputs of the next chunk */
                    m = L - s < TCHu ? L - s : TCHu;
                    const size_t t0 = rev ? L - s - m : s;     /* its earliest time step */
                    aicc_rnn_xproj_SFX(m, GH, I, x + (p->layout ? n * T + t0 : t0 * B + n) * I,
                                       p->layout ? I : B * I, w + d * GH * I, bw, gxa);
                }
                aicc_rnn_cell_SFX(p, acts + d * nact, r + d * GH * H, br, pd, h, c,
                                  gxa + (rev ? m - 1 - s % TCHu : s % TCHu) * GH, gr, tmp);
                if (yt)
                    for (size_t k = 0; k < H; ++k)
                        yt[k] = h[k];
            }
            if (yh)
                for (size_t k = 0; k < H; ++k)
                    yh[hs + k] = L ? h[k] : (TYPE)0;
            if (yc)
                for (size_t k = 0; k < H; ++k)
                    yc[hs + k] = L ? c[k] : (TYPE)0;
        }
    }
}"""


def linalg(isa: str | None = None) -> str:
    """LINALG with the portable products, or for an x86 SIMD ``isa`` (float32) the GEMM ones
    (TYPE and _SFX still to fill)."""
    if isa is None:
        return LINALG.replace("PRODUCTS", "\n\n".join((DOT, MATVEC, PRODUCTS)))
    return LINALG.replace("PRODUCTS", gemm_simd(isa) + "\n\n" + PRODUCTS_SIMD)


def tch(isa: str | None) -> int:
    """Time steps per chunk of input projections (DRIVER's TCH)."""
    return 16 if isa else 1
