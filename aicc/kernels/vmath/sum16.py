"""Float sums in aicc's fixed order, vectorizable without reassociating (no -ffast-math):

    s[j] (j < 16) adds term(x[j]), term(x[j + 16]), term(x[j + 32]), ... in ascending order,
    then s[j] += s[j + 8] (j < 8), s[j] += s[j + 4], s[j] += s[j + 2], s[0] += s[1].

Every target evaluates exactly this order (the 16 running sums are 2 AVX2 / 1 AVX-512 / 4 SSE
vector accumulators the C compiler keeps in registers), so results do not depend on the target;
they differ from a sequential sum (and from onnxruntime's order) by rounding only, and the
error grows like a 16-way pairwise sum's. NaN and Inf propagate as in any sum (Inf + -Inf is
NaN); the first term of an empty sum is the identity 0.

Used by the normalizations (layer / group / instance / RMS norm statistics) and the contiguous-row
reductions (ReduceSum, ReduceMean, ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum).
"""
from __future__ import annotations

from ...emit_c.cwriter import c_literal, ctype

# the term added per element, as a template of v (and mu for "sqdev")
TERMS = {
    "sum": "{v}",
    "sq": "{v} * {v}",
    "abs": "{fabs}({v})",
    "sqdev": "({v} - mu) * ({v} - mu)",
}


def sum16(ctx, dt, term: str = "sum") -> str:
    """Name of ``static T aicc_sum16_<term>_<t>(const T *x, size_t n[, T mu])``: the sum of
    term(x[0 .. n)) in the order above (term ``sqdev`` takes the mean mu)."""
    ct = ctype(dt)
    sfx = "f32" if ct == "float" else "f64"
    fabs = "fabsf" if ct == "float" else "fabs"
    name = f"aicc_sum16_{term}_{sfx}"
    t = TERMS[term].format(v="x[i + j]", fabs=fabs)
    tail = TERMS[term].format(v="x[i + (size_t)j]", fabs=fabs)
    mu = f", {ct} mu" if term == "sqdev" else ""
    z = c_literal(0, dt)
    ctx.helper(f"aicc_0_{name}", f"""\
/* Sum of {TERMS[term].format(v='x[i]', fabs=fabs)} over i < n in the 16-lane order (kernels/vmath/sum16.py). */
static {ct} {name}(const {ct} *restrict x, size_t n{mu})
{{
    {ct} s[16];
    size_t i = 0;
    for (int j = 0; j < 16; ++j) s[j] = {z};
    for (; i + 16u <= n; i += 16u)
        for (int j = 0; j < 16; ++j) s[j] += {t};
    for (int j = 0; i + (size_t)j < n; ++j) s[j] += {tail};
    for (int w = 8; w > 0; w /= 2)
        for (int j = 0; j < w; ++j) s[j] += s[j + w];
    return s[0];
}}""")
    return name
