"""C text of the recurrent kernels (RNN, LSTM, GRU; see rnn.py for the op semantics).

One shared driver ``aicc_rnn`` runs every node: per direction and per batch entry, the time
steps of that entry's sequence (its sequence_lens value, or all of them) in forward or
reverse order. Per step the gate pre-activations are two matrix-vector products with the
weights in their ONNX layout (rows of W and R are contiguous, so each gate element is one
dot product, computed with 8 partial sums; on the x86 SIMD targets four rows at a time with
vector FMA chains, MATVEC_SIMD: LSTM 50 x 64 -> 128 on avx512 212 -> 160 us), the biases,
peepholes and clip, then the
activation functions, which the step passes as an array of ``void f(TYPE *v, size_t n)``
helpers (one per activation and alpha/beta) applied to whole gate vectors.

The weights are read where they are (constants in the weights image or run-time inputs); the
step scratch holds the gate vectors and the state (2 * G * H + 3 * H elements).
The C text uses ``TYPE`` and ``_SFX`` placeholders (float/_f32, double/_f64).
"""
from __future__ import annotations

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

# the x86 SIMD form (float32): the same rows, four at a time with vector FMA chains
MATVEC_SIMD = """\
/* y[j] = bias[j] (0 without bias) + m[j][.] . v for j < rows; m row-major with n columns
 * (ISA): four rows at a time, each an FMA chain over n in vectors of L (v's vector shared),
 * summed across lanes, then the n % L tail; the last rows % 4 rows as single dot products. */
static void aicc_rnn_matvec_SFX(size_t rows, size_t n, const float *restrict m,
                                const float *restrict v, const float *restrict bias,
                                float *restrict y)
{
    const size_t nv = n - n % Lu;
    size_t j = 0;
    for (; j + 4u <= rows; j += 4u) {
        const float *restrict m0 = m + j * n;
        V a0 = ZERO, a1 = ZERO, a2 = ZERO, a3 = ZERO;
        for (size_t i = 0; i < nv; i += Lu) {
            const V x = LD(v + i);
            a0 = FMA(LD(m0 + i), x, a0);
            a1 = FMA(LD(m0 + n + i), x, a1);
            a2 = FMA(LD(m0 + 2u * n + i), x, a2);
            a3 = FMA(LD(m0 + 3u * n + i), x, a3);
        }
        float s[4];
        s[0] = HSUM(a0);
        s[1] = HSUM(a1);
        s[2] = HSUM(a2);
        s[3] = HSUM(a3);
        for (size_t r = 0; r < 4u; ++r) {
            for (size_t i = nv; i < n; ++i)
                s[r] += m0[r * n + i] * v[i];
            y[j + r] = (bias ? bias[j + r] : 0.0f) + s[r];
        }
    }
    for (; j < rows; ++j)
        y[j] = (bias ? bias[j] : 0.0f) + aicc_rnn_dot_SFX(n, m + j * n, v);
}"""

# sum of the lanes of a vector, per ISA
HSUM = {
    "avx2": """\
static float aicc_rnn_hsum_avx2(__m256 a)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}""",
    "avx512": """\
static float aicc_rnn_hsum_avx512(__m512 a)
{
    return _mm512_reduce_add_ps(a);
}""",
}

LINALG = """\
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
}

MATVEC

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
/* One time step of one batch entry: x (input row), h and c (state, updated in place), wd/rd
 * the direction's W [G*H][I] and R [G*H][H], bw/br the W and R biases (NULL: none), pd the
 * peepholes [3][H] (i, o, f; NULL: none), f the direction's activations. gx, gr, tmp:
 * scratch of G*H, G*H and H elements. */
static void aicc_rnn_cell_SFX(const aicc_rnn_params *p, const aicc_rnn_fn_SFX *f,
                              const TYPE *restrict x, const TYPE *restrict wd,
                              const TYPE *restrict rd, const TYPE *bw, const TYPE *br,
                              const TYPE *pd, TYPE *restrict h, TYPE *restrict c,
                              TYPE *restrict gx, TYPE *restrict gr, TYPE *restrict tmp)
{
    const size_t H = p->hidden, G = p->kind == 0 ? 1 : (p->kind == 1 ? 4 : 3), GH = G * H;
    const int gru_late = p->kind == 2 && !p->linear_before_reset;
    aicc_rnn_matvec_SFX(GH, p->input, wd, x, bw, gx);
    aicc_rnn_matvec_SFX(gru_late ? 2 * H : GH, H, rd, h, br, gr);
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
            aicc_rnn_matvec_SFX(H, H, rd + 2 * H * H, tmp, br ? br + 2 * H : NULL, gr + 2 * H);
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
 * inputs and outputs are NULL when absent. ws: scratch of 2 * G * H + 3 * H elements. */
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
    TYPE *gx = ws, *gr = ws + GH, *h = ws + 2 * GH, *c = h + H, *tmp = c + H;
    for (size_t d = 0; d < D; ++d) {
        const int rev = D == 2 ? (int)d : p->reverse;
        const TYPE *bw = b ? b + d * 2 * GH : NULL, *br = b ? b + d * 2 * GH + GH : NULL;
        const TYPE *pd = pp ? pp + d * 3 * H : NULL;
        for (size_t n = 0; n < B; ++n) {
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
                aicc_rnn_cell_SFX(p, acts + d * nact,
                                  x + (p->layout ? n * T + t : t * B + n) * I,
                                  w + d * GH * I, r + d * GH * H, bw, br, pd, h, c, gx, gr, tmp);
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
    """LINALG with the portable matvec, or for an x86 SIMD ``isa`` (float32) the four-row
    vector one and its lane-sum helper (TYPE and _SFX still to fill)."""
    if isa is None:
        return LINALG.replace("MATVEC", MATVEC)
    from .simd import SIMD
    d = SIMD[isa]
    mv = (MATVEC_SIMD.replace("(ISA)", f"({isa})").replace("Lu", f"{d['L']}u")
          .replace("ZERO", d["zero"]).replace("LD(", f"{d['ld']}(")
          .replace("FMA(", f"{d['fma']}(").replace("HSUM(", f"aicc_rnn_hsum_{isa}(")
          .replace("        V a0", f"        {d['v']} a0").replace("const V x", f"const {d['v']} x")
          .replace("of L (", f"of {d['L']} ("))
    return HSUM[isa] + "\n\n" + LINALG.replace("MATVEC", mv)
