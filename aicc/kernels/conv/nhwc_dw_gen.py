"""The register-block kernel generator of the channel-last depthwise conv
(kernels/conv/nhwc_dw.py, whose docstring gives the kernels' design and rounding): the vector
flavors and their measured tuning, and ``_Gen``, one node's C text (block kernels and
driver). qgemm/nhwc_dw.py's integer form subclasses ``_Gen``.
"""
from __future__ import annotations

import hashlib

from ..gemm.clamp import clamp_expr
from ..isa.registry import ISAS
from .simd_gemm import KEY


def _flavors() -> dict:
    """The vector flavors, by name: per ISA whose description has a conv ``nhwc_dw`` entry
    one of its vectors (named as the ISA), and one of its ``nhwc_dw_narrow`` entry (few
    channels: x86-avx512's 8-lane "avx512y"). Each: vec, L (lanes), p (intrinsics prefix),
    mdecl / mload / mstore (the tail mask and masked accesses), tune, pin, isa (whose)."""
    out = {}
    for name, i in ISAS.items():
        k = i.conv_kernels
        if "nhwc_dw" in k:
            out[name] = dict(vec=i.vector["v"], L=i.lanes, p=i.prefix, isa=name, **k["nhwc_dw"])
        if "nhwc_dw_narrow" in k:
            out[k["nhwc_dw_narrow"]["name"]] = dict(k["nhwc_dw_narrow"], isa=name)
    return out


FLAVORS = _flavors()
# per flavor: channel vectors per block (at most), positions per block (at most), registers
# for a block's accumulators and weights, bytes of the input rows one output row of a channel
# strip reads (L1 budget); each measured (isa/<name>/conv.py)
TUNE = {fl: f["tune"] for fl, f in FLAVORS.items()}
LINE_BYTES = 64     # a cache line: the narrowest channel strip
# flavors whose input vectors are pinned in registers (isa/x86.PIN)
PIN = {fl for fl, f in FLAVORS.items() if f["pin"]}


def _groups(nv: int, vbmax: int) -> list:
    """Balanced split of nv channel vectors into groups of at most vbmax (larger first)."""
    ng = -(-nv // vbmax)
    base, extra = divmod(nv, ng)
    return [base + 1] * extra + [base] * (ng - extra)


class _Gen:
    """C text of one node's kernels: geometry literals, the block kernels used, the driver.
    The float32 form; hooks (xt ... row_end) let qconv_nhwc.py's integer form share it."""
    xt = yt = ytn = "float"     # input, block output, driver output element types
    kparams, kargs = "float lo, float hi", "lo, hi"     # the block kernels' extra parameters
    dparams = "float *restrict y, float lo, float hi,\n    void (*ep)(float *, size_t)"
    prefix = "aicc_dwn"                # driver name prefix
    hkey = f"{KEY}.7.dwn"              # the helpers' order key (after what the text calls)
    pin_flavors = PIN                  # flavors whose input vectors are pinned in registers

    def __init__(self, fl, geo, clamp: tuple = (True, True), post: tuple = (False, False)):
        f = self.f = FLAVORS[fl]
        self.clamp = clamp      # the sides of [lo, hi] applied: (lo finite, hi finite)
        # (post-affine, residual): after the clamp y * pm[c] + pa[c], then + r (float form)
        self.post, self.resid = post
        if self.post:
            extra = ", const float *restrict pm, const float *restrict pa" + (
                ", const float *restrict r" if self.resid else "")
            self.kparams += extra
            self.kargs += ", pm + c, pa + c" + (", ro + c" if self.resid else "")
            self.dparams = self.dparams.replace("float *restrict y,", "float *restrict y,"
                                                + extra[1:] + ",")
        self.pinned = fl in self.pin_flavors
        self.fl, self.g = fl, geo
        self.L = f["L"]
        self.C = geo.cin
        self.nv = -(-self.C // self.L)
        self.cp = self.nv * self.L
        self.tail = self.C - (self.nv - 1) * self.L     # lanes of the last vector
        vbmax, pbmax, regs, l1 = TUNE[fl]
        self.vb = vb = min(vbmax, self.nv)
        # channel strip: vectors whose input rows of one output row fit l1 bytes, at least a
        # cache line of channels (strips of half lines read and write each line twice:
        # Xception-41's 128 x 150 x 150, x86-avx2, 3.41 ms in 8-channel strips, 2.95 in 16)
        rows = (geo.kh - 1) * geo.dy + 1
        line = -(-LINE_BYTES // (self.L * 4))
        self.sv = max(-(-line // vb), l1 // (rows * geo.w * self.L * 4) // vb) * vb
        self.pbcap = max(1, min(pbmax, (regs - vb * min(geo.kw, 3)) // vb, geo.ow))
        key = (fl, geo.n, geo.h, geo.w, geo.cin, geo.kh, geo.kw, geo.sy, geo.sx, geo.dy, geo.dx,
               geo.pt, geo.pl, geo.pb, geo.pr, TUNE[fl], clamp) + ((post,) if any(post) else ())
        self.tag = hashlib.sha1(repr(key).encode()).hexdigest()[:10]
        self.name = f"{self.prefix}_{fl}_{self.tag}"
        self.patterns: dict = {}   # block pattern -> index
        self.funcs: dict = {}      # kernel name -> text

    def load(self, ptr: str, masked: bool) -> str:
        """One input vector at ptr (masked: the tail lanes)."""
        return self.f["mload"].format(p=ptr) if masked else self.op("loadu", ptr)

    def stores(self, acc, masked: bool) -> list:
        """A block's accumulators clamped to [lo, hi] (then the post-affine and the residual)
        and stored at y."""
        f, L, C = self.f, self.L, self.C
        o = ["    {"] + [f"        const {f['vec']} v{s} = {self.op('set1', s)};" if on else
                          f"        (void){s};" for s, on in zip(("lo", "hi"), self.clamp)]
        if self.post:       # pm / pa are padded to whole vectors
            for v in range(len(acc[0]) if acc else 0):
                o.append(f"        const {f['vec']} pm{v} = {self.op('loadu', f'pm + {v * L}u')}"
                         f", pa{v} = {self.op('loadu', f'pa + {v * L}u')};")
        for p, row in enumerate(acc):
            for v, a in enumerate(row):
                val = clamp_expr(a, self.clamp, f"{f['p']}_min_ps", f"{f['p']}_max_ps")
                if self.post:
                    val = self.op("add", self.op("mul", val, f"pm{v}"), f"pa{v}")
                if self.resid:
                    val = self.op("add", val, self.load(f"r + {p * C + v * L}u",
                                                        masked and v == len(row) - 1))
                ptr = f"y + {p * C + v * L}u"
                st = (f["mstore"].format(p=ptr, v=val) if masked and v == len(row) - 1
                      else self.op("storeu", ptr, val))
                o.append(f"        {st};")
        return o + ["    }"]

    def row_dst(self, off: str) -> str:
        """Where output row oy goes (off: its offset in the batch item's output)."""
        return f"yn + {off}"

    def row_end(self) -> list:
        """After each output row (one strip): the activation epilogue."""
        return [f"    if (ep)\n        ep(yr, {self.g.ow * self.C}u);"]

    def op(self, name, *args):
        return f"{self.f['p']}_{name}_ps(" + ", ".join(args) + ")"

    def block(self, o0: int, pb: int):
        """(pattern, bx) of output columns [o0, o0 + pb): per position its valid taps as
        (kx, input column - bx), bx the first input column read (0 when none)."""
        g = self.g
        taps = [[(kx, ox * g.sx - g.pl + kx * g.dx) for kx in range(g.kw)
                 if 0 <= ox * g.sx - g.pl + kx * g.dx < g.w] for ox in range(o0, o0 + pb)]
        bx = min((ix for t in taps for _, ix in t), default=0)
        return tuple(tuple((kx, ix - bx) for kx, ix in t) for t in taps), bx

    def kernel(self, pat, vb: int, masked: bool) -> str:
        """Block kernel: the positions of pat x vb vectors (the last masked to the tail)."""
        g, f, L, C = self.g, self.f, self.L, self.C
        idx = self.patterns.setdefault(pat, len(self.patterns))
        name = f"{self.name}_k{idx}v{vb}" + ("m" if masked else "")
        if name in self.funcs:
            return name
        vec, pb = f["vec"], len(pat)
        o = [f"/* {pb} output position(s) x {vb} channel vector(s)"
             + (f", the last masked to {self.tail} lanes" if masked else "")
             + ": from zero, one FMA per\n * tap inside the input ((ky, kx) ascending), "
             "+ bias, clamp, store. x: the block's first input column. */",
             f"static void {name}(const {self.xt} *restrict x, const float *restrict w,",
             f"    const float *restrict b, {self.yt} *restrict y, size_t nky, "
             f"{self.kparams})", "{"]
        if masked:
            o.append("    " + f["mdecl"].format(c=8 - self.tail, mask=hex((1 << self.tail) - 1)))
        acc = [[f"a{p}_{v}" for v in range(vb)] for p in range(pb)]
        o.append(f"    {vec} " + ", ".join(f"{acc[p][v]} = {self.op('setzero')}"
                                            for p in range(pb) for v in range(vb)) + ";")
        users: dict = {}          # input column -> [(position, kx)], kx ascending per position
        for p, t in enumerate(pat):
            for kx, q in t:
                users.setdefault(q, []).append((p, kx))
        if not users:
            o.append("    (void)x; (void)w; (void)nky;")
        else:
            kxs = sorted({kx for t in pat for kx, _ in t})
            o.append("    for (size_t i = 0; i < nky; ++i) {")
            o.append(f"        const {self.xt} *restrict xi = x + i * {g.dy * g.w * C}u;")
            o.append(f"        const float *restrict wi = w + i * {g.kw * self.cp}u;")
            for kx in kxs:
                o.append(f"        const {vec} " + ", ".join(
                    f"w{kx}_{v} = {self.op('loadu', f'wi + {kx * self.cp + v * L}u')}"
                    for v in range(vb)) + ";")
            for q in sorted(users):     # ascending columns: ascending kx for every position
                for v in range(vb):
                    ptr = f"xi + {q * C + v * L}u"
                    ld = self.load(ptr, masked and v == vb - 1)
                    o.append(f"        {{ {vec} s = {ld}; AICC_PIN(s);" if self.pinned else
                             f"        {{ const {vec} s = {ld};")
                    for p, kx in users[q]:
                        o.append(f"          {acc[p][v]} = "
                                 f"{self.op('fmadd', 's', f'w{kx}_{v}', acc[p][v])};")
                    o[-1] += " }"
            o.append("    }")
        o.append("    {")
        for v in range(vb):
            o.append(f"        const {vec} b{v} = {self.op('loadu', f'b + {v * L}u')};")
            o += [f"        {acc[p][v]} = {self.op('add', acc[p][v], f'b{v}')};"
                  for p in range(pb)]
        o.append("    }")
        o += self.stores(acc, masked)
        o.append("}")
        self.funcs[name] = "\n".join(o)
        return name

    def calls(self, ind, pat, groups, c0, masked) -> list:
        """Lines running one block (xo, yo) over the channel groups from channel c0."""
        out, cv, i = [], 0, 0
        while i < len(groups):
            vb, n = groups[i], 1
            while i + n < len(groups) and groups[i + n] == vb:
                n += 1
            last_masked = masked and i + n == len(groups)
            full = n - 1 if last_masked else n
            args = f"xo + c, wr + c, bp + c, yo + c, nky, {self.kargs}"
            if full:
                k = self.kernel(pat, vb, False)
                a, b = f"{c0} + {cv * self.L}u", f"{c0} + {(cv + full * vb) * self.L}u"
                if full == 1:
                    out.append(f"{ind}{{ const size_t c = {a}; {k}({args}); }}")
                else:
                    out.append(f"{ind}for (size_t c = {a}; c < {b}; c += {vb * self.L}u)")
                    out.append(f"{ind}    {k}({args});")
                cv += full * vb
            if last_masked:
                k = self.kernel(pat, vb, True)
                out.append(f"{ind}{{ const size_t c = {c0} + {cv * self.L}u; {k}({args}); }}")
                cv += vb
            i += n
        return out

    def rows(self, groups, c0, masked: bool, ep_rows: bool) -> list:
        """The row loop of one batch item over the channel groups from c0."""
        g, C, cp = self.g, self.C, self.cp
        nb = -(-g.ow // self.pbcap)
        pb = -(-g.ow // nb)
        blocks = [(o0, *self.block(o0, min(pb, g.ow - o0))) for o0 in range(0, g.ow, pb)]
        o = [f"for (size_t oy = 0; oy < {g.oh}u; ++oy) {{",
             f"    const long iy0 = (long)(oy * {g.sy}u) - {g.pt}L;",
             f"    const size_t ky0 = iy0 < 0 ? (size_t)((-iy0 + {g.dy - 1}L) / {g.dy}L) : 0u;",
             f"    const long last = ({g.h - 1}L - iy0) / {g.dy}L;  /* last tap row inside */",
             f"    const size_t ky1 = iy0 > {g.h - 1}L ? 0u : (last >= {g.kh}L ? {g.kh}u : "
             "(size_t)last + 1u);",
             "    const size_t nky = ky1 > ky0 ? ky1 - ky0 : 0u;",
             f"    const {self.xt} *restrict xr = xn + (nky ? (size_t)(iy0 + (long)(ky0 * {g.dy}u))"
             f" * {g.w * C}u : 0u);",
             f"    const float *restrict wr = wt + (nky ? ky0 : 0u) * {g.kw * cp}u;",
             f"    {self.yt} *restrict yr = {self.row_dst(f'oy * {g.ow * C}u')};"]
        if self.resid:
            o.append(f"    const float *restrict rr = rn + oy * {g.ow * C}u;")
        i = 0
        while i < len(blocks):          # runs of equal blocks at a regular input stride
            o0, pat, bx = blocks[i]
            n = 1
            while i + n < len(blocks) and blocks[i + n][1] == pat and \
                    blocks[i + n][2] == bx + n * pb * g.sx:
                n += 1
            if n == 1:
                o += ["    {", f"        const {self.xt} *restrict xo = xr + {bx * C}u;",
                      f"        {self.yt} *restrict yo = yr + {o0 * C}u;"]
                if self.resid:
                    o.append(f"        const float *restrict ro = rr + {o0 * C}u;")
            else:
                o += [f"    for (size_t j = 0; j < {n}u; ++j) {{",
                      f"        const {self.xt} *restrict xo = xr + {bx * C}u + j * "
                      f"{pb * g.sx * C}u;",
                      f"        {self.yt} *restrict yo = yr + {o0 * C}u + j * {pb * C}u;"]
                if self.resid:
                    o.append(f"        const float *restrict ro = rr + {o0 * C}u + j * "
                             f"{pb * C}u;")
            o += self.calls(" " * 8, pat, groups, c0, masked)
            o.append("    }")
            i += n
        if ep_rows:
            o += self.row_end()
        return o + ["}"]

    def text(self) -> str:
        g, C, cp, L = self.g, self.C, self.cp, self.L
        vb, sv = self.vb, self.sv
        full, rest = divmod(self.nv, sv)
        if full and not rest and self.tail != L:     # the last strip has the masked vector
            full, rest = full - 1, sv
        o = [f"/* {self.fl} channel-last depthwise conv (kernels/conv/nhwc_dw.py): {g.n}x{g.h}x{g.w}x{C}"
             f" -> {g.oh}x{g.ow}, {g.kh}x{g.kw} taps, stride {g.sy}x{g.sx}, dilation "
             f"{g.dy}x{g.dx}, pads {[g.pt, g.pl, g.pb, g.pr]};\n * wt [tap][{cp}], bp [{cp}]; "
             f"strips of {sv * L} channels (groups of {vb} vectors). */",
             f"static void {self.name}(const {self.xt} *restrict x, const float *restrict wt,",
             f"    const float *restrict bp, {self.dparams})", "{",
             f"    for (size_t n = 0; n < {g.n}u; ++n) {{",
             f"        const {self.xt} *restrict xn = x + n * {g.h * g.w * C}u;",
             f"        {self.ytn} *restrict yn = y + n * {g.oh * g.ow * C}u;"]
        if self.resid:
            o.append(f"        const float *restrict rn = r + n * {g.oh * g.ow * C}u;")
        one = full + (1 if rest else 0) == 1
        if full:
            if full > 1:
                o.append(f"        for (size_t c0 = 0; c0 < {full * sv * L}u; c0 += {sv * L}u)")
            else:
                o.append("        {\n            const size_t c0 = 0;")
            o += ["        " + ln for ln in self.rows(_groups(sv, vb), "c0", False, one)]
            if full == 1:
                o.append("        }")
        if rest:
            o += ["        " + ln for ln in self.rows(_groups(rest, vb), f"{full * sv * L}u",
                                                       self.tail != L, one)]
        if not one:
            o.append(f"        if (ep)\n            ep(yn, {g.oh * g.ow * C}u);")
        o += ["    }", "}"]
        return "\n\n".join(self.funcs.values()) + "\n\n" + "\n".join(o)
