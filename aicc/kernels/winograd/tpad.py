"""The channel-last zero-padded copy of a batch item for the Winograd channels form
(kernels/winograd/chan.py), vectorized: xt[(r * e2 + q) * C + c] = x[c][r - pt][q - pl] inside the
input, 0 in the padding. Per input row, blocks of L channels x L positions are loaded (L
positions of one channel per vector, masked past the row), transposed in registers (L x L:
unpack, shuffle, 128-bit lane shuffles) and stored as L positions' channel vectors (masked
past C). The scalar loop it replaces read one value per channel at stride H * W and took
more time than the input transform after it (AMD Zen 4, x86-avx512, 32 channels at 16x16: the
conv 20.5 -> 19.2 us with this copy and the faster output stores; 128 at 28x28 1.074 -> 1.055
ms). Values are copied bit for bit (NaN / Inf included).
"""
from __future__ import annotations

from ..isa.registry import ISAS


def _spell(isa: str) -> dict:
    """v: vector type; L lanes; zero; mask-load of nq floats at {p} (mask mq), mask-store of
    the first nc lanes of {v} at {p} (mask mc), and the declarations of mq and mc."""
    I = ISAS[isa]
    g, mask = I.mask, I.winograd["lane_mask"]
    return dict(v=I.vector["v"], L=I.lanes, zero=I.vector["zero"],
                mload=g["mload"].format(p="{p}", m="mq"),
                mqdecl=f"const {g['mtype']} mq = {mask.format(n='nq')};",
                mcdecl=f"const {g['mtype']} mc = {mask.format(n='nc')};",
                mstore=g["mstore"].format(p="{p}", m="mc", v="{v}"))


def lanes4(isa: str, a: list, t: str, out: list, ind: str) -> list:
    """A 4 x 4 transpose inside each 128-bit lane of the vectors a[0..3] (unpack, then
    shuffle): out[e]'s lane k = (a[0][4k + e], a[1][4k + e], a[2][4k + e], a[3][4k + e]);
    temporaries t0..t3."""
    I = ISAS[isa]
    v, (lo, hi), sh = I.vector["v"], I.winograd["unpack"], I.winograd["shuffle"]
    return [f"{ind}const {v} {t}0 = {lo}({a[0]}, {a[1]}), {t}1 = {hi}({a[0]}, {a[1]});",
            f"{ind}const {v} {t}2 = {lo}({a[2]}, {a[3]}), {t}3 = {hi}({a[2]}, {a[3]});",
            f"{ind}const {v} {out[0]} = {sh}({t}0, {t}2, 0x44), "
            f"{out[1]} = {sh}({t}0, {t}2, 0xEE);",
            f"{ind}const {v} {out[2]} = {sh}({t}1, {t}3, 0x44), "
            f"{out[3]} = {sh}({t}1, {t}3, 0xEE);"]


def _transpose(isa: str, ind: str) -> list:
    """a0..a{L-1} (rows) -> o0..o{L-1} (columns): in-lane 4 x 4 transposes of each group of 4
    rows (b{4i+e}: per 128-bit lane k, rows 4i..4i+3 of column 4k+e), then the lanes: the two
    halves of a two-half vector (``halves``), else the four 128-bit lanes (``shuffle128``); a
    4-lane vector needs no lane step."""
    I = ISAS[isa]
    W, v = I.winograd, I.vector["v"]
    if I.lanes == 4:             # one 128-bit lane: the in-lane transpose is the whole one
        return lanes4(isa, [f"a{k}" for k in range(4)], "t0_", [f"o{e}" for e in range(4)],
                      ind)
    o = []
    for i in range(I.lanes // 4):
        o += lanes4(isa, [f"a{4 * i + k}" for k in range(4)], f"t{i}_",
                    [f"b{4 * i + e}" for e in range(4)], ind)
    if "halves" in W:
        lo, hi = W["halves"]["lo"], W["halves"]["hi"]
        for e in range(4):
            o.append(f"{ind}const {v} o{e} = {lo.format(a=f'b{e}', b=f'b{4 + e}')}, "
                     f"o{4 + e} = {hi.format(a=f'b{e}', b=f'b{4 + e}')};")
        return o
    sh = W["shuffle128"]
    for e in range(4):
        for nm, imm in (("x", "0x88"), ("z", "0xDD")):
            o.append(f"{ind}const {v} {nm}{e} = {sh}(b{e}, b{4 + e}, "
                     f"{imm}), {nm}{e}h = {sh}(b{8 + e}, b{12 + e}, {imm});")
        o.append(f"{ind}const {v} o{e} = {sh}(x{e}, x{e}h, 0x88), "
                 f"o{8 + e} = {sh}(x{e}, x{e}h, 0xDD);")
        o.append(f"{ind}const {v} o{4 + e} = {sh}(z{e}, z{e}h, 0x88), "
                 f"o{12 + e} = {sh}(z{e}, z{e}h, 0xDD);")
    return o


def pad_t(isa: str) -> tuple:
    """(name, C text): same signature as conv_winograd_t.PAD_T's aicc_wgt_pad."""
    d = _spell(isa)
    L, v = d["L"], d["v"]
    name = f"aicc_wgt_pad_{isa}"
    ind = "                "
    o = [f"/* Channel-last zero-padded copy of one batch item (2-D, {isa}; "
         "kernels/winograd/tpad.py): xt[(r * e2 + q) * C + c]",
         " * = input (c, r - pad top, q - pad left) inside the input, 0 elsewhere; blocks of "
         f"{L} channels x {L} positions",
         " * of an input row transposed in registers. */",
         f"static void {name}(const aicc_conv_params *p, size_t C, const float *restrict x,",
         "                  float *restrict xt, size_t e1, size_t e2)", "{",
         "    const size_t H = p->in[1], W = p->in[2], pt = p->pad[1], pl = p->pad[2];",
         "    const size_t HW = H * W, qe = pl + W < e2 ? pl + W : e2, n = qe - pl;",
         "    for (size_t r = 0; r < e1; ++r) {",
         "        float *restrict d = xt + r * e2 * C;",
         "        if (r < pt || r - pt >= H) {",
         "            aicc_vzero(d, e2 * C);     /* simd.VCOPY (no rep stosq) */",
         "            continue;",
         "        }",
         "        aicc_vzero(d, pl * C);",
         "        if (e2 > qe)",
         "            aicc_vzero(d + qe * C, (e2 - qe) * C);",
         "        const float *restrict s = x + (r - pt) * W;",
         "        float *restrict dq = d + pl * C;",
         f"        for (size_t c0 = 0; c0 < C; c0 += {L}u) {{",
         f"            const size_t nc = C - c0 < {L}u ? C - c0 : {L}u;",
         f"            {d['mcdecl']}",
         f"            for (size_t q0 = 0; q0 < n; q0 += {L}u) {{",
         f"                const size_t nq = n - q0 < {L}u ? n - q0 : {L}u;",
         f"                {d['mqdecl']}",
         "                const float *restrict sc = s + c0 * HW + q0;"]
    for i in range(L):
        load = d["mload"].format(p=f"sc + {i}u * HW")
        o.append(f"{ind}const {v} a{i} = " +
                 (load if i == 0 else f"{i}u < nc ? {load} : {d['zero']}") + ";")
    o += _transpose(isa, ind)
    o.append(f"{ind}float *restrict dd = dq + q0 * C + c0;")
    for j in range(L):
        st = d["mstore"].format(p=f"dd + {j}u * C", v=f"o{j}")
        o.append(f"{ind}{st};" if j == 0 else f"{ind}if ({j}u < nq) {st};")
    o += ["            }", "        }", "    }", "}"]
    return name, "\n".join(o)
