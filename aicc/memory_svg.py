"""A picture of a memory plan: each buffer a box, x = steps it lives, y = arena offset."""
from __future__ import annotations

from html import escape


def plan_svg(manifest: dict, width: int = 900, height: int = 500) -> str:
    bufs = manifest["memory"]["buffers"]
    steps = max([b["last_step"] for b in bufs] + [len(manifest["steps"]) - 1, 0]) + 1
    arena = max(manifest["arena_bytes"], 1)
    left, top, pw, ph = 70, 30, width - 90, height - 70
    sx, sy = pw / steps, ph / arena
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="18">memory plan: arena {arena} bytes, peak live '
           f'{manifest["memory"]["peak_live_bytes"]} bytes, {steps} steps</text>',
           f'<rect x="{left}" y="{top}" width="{pw:.1f}" height="{ph:.1f}" fill="#f4f4f4" '
           f'stroke="#888"/>']
    palette = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
               "#ff9da7", "#9c755f", "#bab0ac"]
    for k, b in enumerate(bufs):
        if not b["size"]:
            continue
        x = left + b["first_step"] * sx
        w = max((b["last_step"] - b["first_step"] + 1) * sx, 1.0)
        y = top + ph - (b["offset"] + b["size"]) * sy
        h = max(b["size"] * sy, 0.5)
        out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
                   f'fill="{palette[k % len(palette)]}" fill-opacity="0.8" stroke="#333" '
                   f'stroke-width="0.3"><title>{escape(str(b["tensor"]))}: {b["size"]} bytes '
                   f'at {b["offset"]}, steps {b["first_step"]}-{b["last_step"]}</title></rect>')
    out.append(f'<text x="{left + pw / 2:.0f}" y="{height - 12}" text-anchor="middle">step</text>')
    out.append(f'<text x="12" y="{top + ph / 2:.0f}" transform="rotate(-90 12 {top + ph / 2:.0f})" '
               f'text-anchor="middle">arena offset (bytes)</text>')
    out.append(f'<text x="{left - 4}" y="{top + ph}" text-anchor="end">0</text>')
    out.append(f'<text x="{left - 4}" y="{top + 10}" text-anchor="end">{arena}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def memory_report(manifest: dict, top: int = 5) -> list:
    mem = manifest["memory"]
    bufs = mem["buffers"]
    peak = mem["peak_live_bytes"]
    arena = manifest["arena_bytes"]
    lines = [f"  arena {arena} bytes; lower bound (peak live bytes in this order) {peak}; "
             f"ratio {arena / peak if peak else 1.0:.4f}"]
    if bufs:
        steps = sorted({b["first_step"] for b in bufs})
        live = {s: sum(b["size"] for b in bufs if b["first_step"] <= s <= b["last_step"])
                for s in steps}
        s = max(live, key=lambda k: (live[k], -k))
        at = sorted((b for b in bufs if b["first_step"] <= s <= b["last_step"]),
                    key=lambda b: -b["size"])[:top]
        op = manifest["steps"][s]["op"] if s < len(manifest["steps"]) else "?"
        lines.append(f"  peak at step {s} ({op}): {live[s]} bytes live; largest:")
        for b in at:
            lines.append(f"    {b['size']:>10d} bytes  {b['tensor']!r} (steps {b['first_step']}-"
                         f"{b['last_step']}, offset {b['offset']})")
    return lines
