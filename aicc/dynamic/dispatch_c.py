"""C of a dynamic-shape bundle: every bucket's steps and plan in one file, plus the dispatcher.

``<name>_run_dims(weights, arena, arena_bytes, dims, inputs, outputs)`` checks the dims
(1 <= dim <= its largest bucket, else AICC_ERR_DIMS and nothing written), picks the smallest
bucket of each dim that holds it, copies dynamic inputs (actual shape, dense) into zero-padded
staging buffers at the end of the arena, runs the bucket's plan with the actual dims, and
copies the real region of each padded output to the caller's dense, actual-shape buffer.
``<name>_run`` runs at the largest dims. ``<name>_input_shape``/``<name>_output_shape`` give
the actual shapes for given dims.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import CWriter
from ..emit_c.model_c import (source_entry_points, source_helpers, source_preamble,
                               source_steps)
from .extent import FDIV_C


MAX0_C = """\
/* an extent formula's value, never negative */
static AICC_UNUSED int64_t aicc_max0(int64_t v)
{
    return v < 0 ? 0 : v;
}"""


def _arr(vals) -> str:
    return ", ".join(str(int(v)) for v in vals) or "0"


def _shape_fn(w, name, fname, items, what):
    """items: per tensor, a list of C expressions (one per axis) over `dims`."""
    w(f"int {fname}(const int64_t *dims, uint32_t k, int64_t *shape)")
    w("{")
    w("    if (dims == NULL || shape == NULL) {")
    w("        return AICC_ERR_NULL;")
    w("    }")
    w(f"    if (!{name}_dims_ok(dims)) {{")
    w("        return AICC_ERR_DIMS;")
    w("    }")
    w("    switch (k) {")
    for k, axes in enumerate(items):
        w(f"    case {k}u:   /* {what} {k} */")
        for a, ex in enumerate(axes):
            w(f"        shape[{a}] = {ex};")
        w("        return AICC_OK;")
    w("    default:")
    w("        return AICC_ERR_BAD_INPUT;")
    w("    }")
    w("}")
    w()


def dynamic_source(d, name: str, model_sha: str, embedded: bool) -> str:
    """d: aicc.dynamic.build.DynamicBundle."""
    w = CWriter()
    wsym = f"{name}_weights"
    helpers = dict(d.helpers)
    helpers.setdefault("aicc_fdiv", FDIV_C)
    helpers.setdefault("aicc_max0", MAX0_C)
    source_preamble(w, name, model_sha, embedded, wsym)
    source_helpers(w, helpers)
    for k, p in enumerate(d.plans):
        w(f"/* ---- bucket {k}: {d.at(p.dims)} ---- */")
        w()
        source_steps(w, p.prog, f"{name}_b{k}_plan_data", embedded, wsym, fn_prefix=f"b{k}_")
    nin, nout, ns = len(d.inputs), len(d.outputs), len(d.names)
    w("/* ---- dispatcher ---- */")
    w()
    w(f"static const int64_t {name}_dim_max[{ns}] = {{ {_arr(d.maxima)} }};")
    for s, n in enumerate(d.names):
        b = d.buckets[n]
        w(f"static const int64_t {name}_buckets{s}[{len(b)}] = {{ {_arr(b)} }};   "
          f"/* {d.c_names[s]} */")
    w()
    for k, p in enumerate(d.plans):
        for i, t in enumerate(d.inputs):
            if t.staged:
                sh = p.prog.graph.shape(t.name)
                w(f"static const int64_t {name}_b{k}_in{i}[{len(sh)}] = {{ {_arr(sh)} }};")
        for i, t in enumerate(d.outputs):
            if t.staged:
                sh = p.prog.graph.shape(t.name)
                w(f"static const int64_t {name}_b{k}_out{i}[{len(sh)}] = {{ {_arr(sh)} }};")
    w()
    w(f"typedef struct {name}_bucket {{")
    w("    const aicc_plan *plan;")
    w("    size_t arena_need;                  /* the plan's arena plus the staging buffers */")
    w(f"    size_t in_stage[{max(nin, 1)}], out_stage[{max(nout, 1)}];  /* staging offsets */")
    w(f"    const int64_t *in_shape[{max(nin, 1)}];")
    w(f"    const int64_t *out_shape[{max(nout, 1)}];")
    w(f"}} {name}_bucket;")
    w()
    w(f"static const {name}_bucket {name}_bucket_table[{len(d.plans)}] = {{")
    for k, p in enumerate(d.plans):
        ins = ", ".join(f"{name}_b{k}_in{i}" if t.staged else "NULL" for i, t in enumerate(d.inputs))
        outs = ", ".join(f"{name}_b{k}_out{i}" if t.staged else "NULL"
                         for i, t in enumerate(d.outputs))
        w(f"    {{ &{name}_b{k}_plan_data, {p.arena_need}u, {{ {_arr(p.in_stage) if nin else '0'} }}, "
          f"{{ {_arr(p.out_stage) if nout else '0'} }},")
        w(f"      {{ {ins or 'NULL'} }}, {{ {outs or 'NULL'} }} }},   /* {d.at(p.dims)} */")
    w("};")
    w()
    w(f"static int {name}_dims_ok(const int64_t *dims)")
    w("{")
    w("    uint32_t s;")
    w(f"    for (s = 0; s < {ns}u; ++s) {{")
    w(f"        if (dims[s] < 1 || dims[s] > {name}_dim_max[s]) {{")
    w("            return 0;")
    w("        }")
    w("    }")
    w("    return 1;")
    w("}")
    w()
    _shape_fn(w, name, f"{name}_input_shape", [t.c_shape for t in d.inputs], "input")
    _shape_fn(w, name, f"{name}_output_shape", [t.c_shape for t in d.outputs], "output")
    esz_in = ", ".join(f"{np.dtype(t.dtype).itemsize}u" for t in d.inputs) or "1u"
    esz_out = ", ".join(f"{np.dtype(t.dtype).itemsize}u" for t in d.outputs) or "1u"
    rk_in = ", ".join(f"{len(t.c_shape)}u" for t in d.inputs) or "0u"
    rk_out = ", ".join(f"{len(t.c_shape)}u" for t in d.outputs) or "0u"
    w(f"static const size_t {name}_in_esize[{max(nin, 1)}] = {{ {esz_in} }};")
    w(f"static const size_t {name}_out_esize[{max(nout, 1)}] = {{ {esz_out} }};")
    w(f"static const uint32_t {name}_in_rank[{max(nin, 1)}] = {{ {rk_in} }};")
    w(f"static const uint32_t {name}_out_rank[{max(nout, 1)}] = {{ {rk_out} }};")
    w()
    w(f"int {name}_run_dims_hooked(const void *weights, void *arena, size_t arena_bytes,")
    w("    const int64_t *dims, const void *const *inputs, void *const *outputs,")
    w("    aicc_hook_fn hook, void *user)")
    w("{")
    w(f"    const void *ins[{max(nin, 1)}];")
    w(f"    void *outs[{max(nout, 1)}];")
    w("    int64_t shape[AICC_MAX_RANK];")
    w(f"    const {name}_bucket *bk;")
    w("    unsigned char *a = (unsigned char *)arena;")
    w("    size_t b = 0;")
    w("    uint32_t k;")
    w("    int st;")
    w("    if (dims == NULL || arena == NULL || "
      f"({nin}u > 0u && inputs == NULL) || ({nout}u > 0u && outputs == NULL)) {{")
    w("        return AICC_ERR_NULL;")
    w("    }")
    w(f"    if (!{name}_dims_ok(dims)) {{")
    w("        return AICC_ERR_DIMS;")
    w("    }")
    for s, n in enumerate(d.names):
        nb = len(d.buckets[n])
        w(f"    /* {d.c_names[s]}: the smallest bucket that holds it */")
        w(f"    for (k = 0; {name}_buckets{s}[k] < dims[{s}]; ++k) {{")
        w("    }")
        w(f"    b = b * {nb}u + k;")
    w(f"    bk = &{name}_bucket_table[b];")
    w("    if (arena_bytes < bk->arena_need) {")
    w("        return AICC_ERR_ARENA_SMALL;")
    w("    }")
    w(f"    if ((uintptr_t)arena % (uintptr_t){d.align}u != 0u) {{")
    w("        return AICC_ERR_ARENA_ALIGN;")
    w("    }")
    w(f"    for (k = 0; k < {nin}u; ++k) {{")
    w(f"        if (inputs[k] == NULL || (uintptr_t)inputs[k] % {name}_in_esize[k] != 0u) {{")
    w("            return AICC_ERR_BAD_INPUT;")
    w("        }")
    w("    }")
    w(f"    for (k = 0; k < {nout}u; ++k) {{")
    w(f"        if (outputs[k] == NULL || (uintptr_t)outputs[k] % {name}_out_esize[k] != 0u) {{")
    w("            return AICC_ERR_BAD_INPUT;")
    w("        }")
    w("    }")
    w("    if (weights == NULL && bk->plan->embedded_weights == NULL && "
      "bk->plan->weights_bytes > 0u) {")
    w("        return AICC_ERR_WEIGHTS;       /* before anything is written */")
    w("    }")
    w(f"    for (k = 0; k < {nin}u; ++k) {{   /* dynamic inputs: zero-padded into the bucket's shape */")
    w("        ins[k] = inputs[k];")
    w("        if (bk->in_shape[k] != NULL) {")
    w(f"            {name}_input_shape(dims, k, shape);")
    w("            aicc_copy_box(a + bk->in_stage[k], bk->in_shape[k], inputs[k], shape, shape,")
    w(f"                          {name}_in_rank[k], {name}_in_esize[k], 1);")
    w("            ins[k] = a + bk->in_stage[k];")
    w("        }")
    w("    }")
    w(f"    for (k = 0; k < {nout}u; ++k) {{")
    w("        outs[k] = bk->out_shape[k] != NULL ? (void *)(a + bk->out_stage[k]) : outputs[k];")
    w("    }")
    w("    st = aicc_run_dims(bk->plan, dims, weights, arena, arena_bytes, ins, outs, hook, user);")
    w("    if (st != AICC_OK) {")
    w("        return st;")
    w("    }")
    w(f"    for (k = 0; k < {nout}u; ++k) {{   /* padded outputs: the real region, dense */")
    w("        if (bk->out_shape[k] != NULL) {")
    w(f"            {name}_output_shape(dims, k, shape);")
    w("            aicc_copy_box(outputs[k], shape, outs[k], bk->out_shape[k], shape,")
    w(f"                          {name}_out_rank[k], {name}_out_esize[k], 0);")
    w("        }")
    w("    }")
    w("    return AICC_OK;")
    w("}")
    w()
    w(f"int {name}_run_dims(const void *weights, void *arena, size_t arena_bytes,")
    w("    const int64_t *dims, const void *const *inputs, void *const *outputs)")
    w("{")
    w(f"    return {name}_run_dims_hooked(weights, arena, arena_bytes, dims, inputs, outputs,")
    w("                                NULL, NULL);")
    w("}")
    w()
    # the largest bucket's plan; without dims, a run at the largest dims
    source_entry_points(w, name, f"{name}_b{len(d.plans) - 1}_plan_data",
                        f"{name}_run_dims_hooked(weights, arena, arena_bytes, {name}_dim_max, "
                        "inputs,\n                                outputs, hook, user)")
    return w.text()


def dynamic_header_extra(d, name: str) -> str:
    P = name.upper()
    w = CWriter()
    w("/* ---- dynamic dims: one plan per bucket, all in one arena of "
      f"{P}_ARENA_BYTES bytes ---- */")
    w(f"#define {P}_NUM_DIMS {len(d.names)}u")
    for s, n in enumerate(d.names):
        w(f"#define {P}_DIM{s}_MAX {d.maxima[s]}   /* {d.c_names[s]}: buckets "
          f"{', '.join(map(str, d.buckets[n]))} */")
    w(f"#define {P}_NUM_BUCKETS {len(d.plans)}u")
    for kind, ts in (("INPUT", d.inputs), ("OUTPUT", d.outputs)):
        for i, t in enumerate(ts):
            w(f"#define {P}_{kind}{i}_RANK {len(t.c_shape)}u   /* shape {t.text_shape} */")
    w()
    w("/* Run with the actual dims (dims[i]: dynamic dim i, 1..its max). Inputs and outputs are")
    w(" * dense, of the actual shapes (<name>_input_shape / _output_shape); output buffers of")
    w(f" * {P}_OUTPUTn_BYTES (the largest) always suffice. AICC_ERR_DIMS: a dim out of range,")
    w(" * nothing written. <name>_run runs at the largest dims. */")
    w(f"int {name}_run_dims(const void *weights, void *arena, size_t arena_bytes,")
    w("    const int64_t *dims, const void *const *inputs, void *const *outputs);")
    w(f"int {name}_run_dims_hooked(const void *weights, void *arena, size_t arena_bytes,")
    w("    const int64_t *dims, const void *const *inputs, void *const *outputs,")
    w("    aicc_hook_fn hook, void *user);")
    w(f"int {name}_input_shape(const int64_t *dims, uint32_t k, int64_t *shape);")
    w(f"int {name}_output_shape(const int64_t *dims, uint32_t k, int64_t *shape);")
    w()
    return w.text()
