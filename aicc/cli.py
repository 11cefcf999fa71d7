"""aicc command line: parse, call, report. Exit codes: 0 success, 1 validation mismatch,
2 bad input or usage, 3 internal error (a bug in aicc; rerun with --debug)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import numpy as np

from . import __version__
from .errors import AiccError, ConfigError, InputError, ValidationMismatch
from .isa_mask import LEVELS as ISA_LEVELS
from .validate import DEFAULT_ATOL, DEFAULT_RTOL


def _parse_dims(items, what):
    out = {}
    for it in items:
        name, sep, dims = it.rpartition("=")
        if not sep or not name:
            raise ConfigError(f"{what} {it!r}: expected NAME=d0,d1,...")
        try:
            vals = [int(d) for d in dims.split(",") if d.strip()]
        except ValueError:
            raise ConfigError(f"{what} {it!r}: dims must be integers") from None
        if any(v < 0 for v in vals):
            raise ConfigError(f"{what} {it!r}: dims must be >= 0")
        out[name] = vals
    return out


def _parse_buckets(items) -> dict:
    from .dynamic.symbols import parse_bucket_spec
    out = {}
    for it in items:
        name, sep, spec = it.partition("=")
        if not sep or not name:
            raise ConfigError(f"--buckets {it!r}: expected DIM=a,b,c or DIM=max:N")
        out[name] = parse_bucket_spec(spec, f"--buckets {it!r}")
    return out


def runner_options(f):
    """--runner / --runner-timeout of the verbs that run a bundle (aicc/runner)."""
    f = click.option("--runner-timeout", "runner_timeout", type=float, default=600.0,
                     show_default=True, help="Seconds one run of the program may take on the "
                     "runner.")(f)
    return click.option("--runner", default=None, metavar="RUNNER",
                        help="Where the bundle runs: local (this machine; a cross target under "
                             "its emulator), ssh://[user@]host[:port][/folder] (a Linux "
                             "device), cmd:TEMPLATE (a shell command with {exe}) [the "
                             "target's runner, else local].")(f)


def _open(bundle, runner, timeout):
    from .runner import open_bundle
    return open_bundle(bundle, runner, timeout)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="aicc")
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.pass_context
def cli(ctx, debug):
    """aicc: compile ONNX models ahead of time into portable C bundles."""
    ctx.obj = {"debug": debug}


@cli.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("-t", "--target", default="generic", show_default=True, help="Target (aicc targets).")
@click.option("-o", "--out", type=click.Path(file_okay=False), help="Bundle folder [build/<model>].")
@click.option("-c", "--config", type=click.Path(dir_okay=False), help="YAML merged over the defaults.")
@click.option("--buckets", multiple=True, metavar="DIM=a,b,c",
              help="Buckets of a dynamic dim (DIM=max:N: powers of two up to N).")
@click.option("--input-shape", multiple=True, metavar="NAME=d0,d1,...", help="Pin an input's shape.")
@click.option("--name", default=None, help="Prefix of the C symbols [model].")
@click.option("--weights-file", is_flag=True, help="Keep weights in weights.bin for the caller to load.")
@click.option("--dump-ir", is_flag=True, help="Print the IR after import and after every pass.")
@click.option("--tuning", type=click.Path(dir_okay=False),
              help="A tuning log (aicc tune): its schedules for the layers it measured.")
def build(model, target, out, config, buckets, input_shape, name, weights_file, dump_ir, tuning):
    """Compile MODEL.onnx into a bundle folder."""
    from .compiler import build as do_build
    shapes = _parse_dims(input_shape, "--input-shape")
    bucket_specs = _parse_buckets(buckets)
    overrides = {"weights": {"embed": False}} if weights_file else None
    path = do_build(model, target=target, out=out, config=config, input_shapes=shapes, name=name,
                    buckets=bucket_specs, tuning=tuning,
                    dump_ir=sys.stdout if dump_ir else None, overrides=overrides)
    m = json.loads((Path(path) / "manifest.json").read_text())
    click.echo(f"built {path}: {len(m['steps'])} steps, arena {m['arena_bytes']} bytes, "
               f"weights {m['weights_bytes']} bytes, target {m['target']}")


@cli.command()
@click.argument("bundle", type=click.Path(file_okay=False))
@click.option("-i", "--inputs", "inputs", required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--outputs", "outputs", required=True, type=click.Path(dir_okay=False))
@runner_options
def run(bundle, inputs, outputs, runner, runner_timeout):
    """Run BUNDLE on inputs.npz; write outputs.npz (keys are the graph's names)."""
    from .validate import load_npz
    feeds = load_npz(inputs)
    res = _open(bundle, runner, runner_timeout).run(feeds)
    np.savez(outputs, **res)
    click.echo(f"wrote {outputs}: " + ", ".join(f"{k} {list(v.shape)}" for k, v in res.items()))


def _report(results, rtol, atol, label, scaled=False, spread=None):
    ok = all(r.ok for r in results)
    for r in results:
        mark = "ok  " if r.ok else "FAIL"
        click.echo(f"  {mark} {r.name}: {r.metrics()}" + (f" ({r.detail})" if r.detail else ""))
    from .validate import RANGE_TOL, SPREAD_FACTOR
    tol = f"rtol {rtol:g}, atol {atol:g}" + (
        f" x the output's rms (at least 1), at least {RANGE_TOL:g} x its largest |value|"
        if scaled else "") + (
        f", at least {SPREAD_FACTOR:g} x onnxruntime's own spread (graph optimizations off, "
        f"inputs moved by half an ulp: largest {max(spread.values()):.3g})" if spread else "")
    if not ok:
        bad = [r.name for r in results if not r.ok]
        raise ValidationMismatch(f"{label}: output(s) {', '.join(map(repr, bad))} differ beyond "
                                 f"{tol}")
    click.echo(f"{label}: all {len(results)} output(s) match ({tol})")


def _per_node(b, model, feeds, rtol, atol, scaled):
    from .pernode import per_node
    rows, first, which = per_node(b, model, feeds, rtol, atol, scaled)
    for step, op, node, t, c in rows:
        mark = "ok  " if c.ok else "FAIL"
        click.echo(f"  {mark} step {step:4d} {op} {one_line(node, 40)!s} -> {one_line(t, 40)}: "
                   f"{c.metrics()}")
    tol = f"relative L2 error {rtol:g}"
    if first is not None:
        step, op, node, t, c = first
        raise ValidationMismatch(f"per-node against {which}: first tensor beyond {tol}: step "
                                 f"{step} {op} {one_line(node, 60)!r} output "
                                 f"{one_line(t, 60)!r} ({c.metrics()})")
    click.echo(f"per-node against {which}: all {len(rows)} intermediate tensor(s) with a "
               f"counterpart match ({tol})")


@cli.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.argument("bundle", type=click.Path(file_okay=False))
@click.option("-i", "--inputs", type=click.Path(dir_okay=False), help="inputs.npz [random, seeded]")
@click.option("--seed", default=0, show_default=True)
@click.option("--rtol", default=DEFAULT_RTOL, show_default=True)
@click.option("--atol", type=float, default=None,
              help=f"Absolute tolerance [default: {DEFAULT_ATOL:g} times the root mean square of "
                   "each output, when above 1]")
@click.option("--per-node", is_flag=True,
              help="Compare every intermediate tensor with the reference's (by name) and name "
                   "the first whose relative L2 error exceeds rtol (static bundles).")
@runner_options
def validate(model, bundle, inputs, seed, rtol, atol, per_node, runner, runner_timeout):
    """Compare BUNDLE with onnxruntime (or onnx.reference) on MODEL; exit 1 on mismatch."""
    from .validate import (compare_reference, dynamic_sizes, index_bounds, load_npz,
                           random_inputs, reference_outputs)
    scaled = atol is None
    atol = DEFAULT_ATOL if atol is None else atol
    b = _open(bundle, runner, runner_timeout)
    names = [o["name"] for o in b.outputs]
    bounds = index_bounds(model)
    if per_node:
        feeds = load_npz(inputs) if inputs else random_inputs(b.inputs, seed, bounds=bounds)
        return _per_node(b, model, feeds, rtol, atol, scaled)
    if inputs or not b.dynamic:
        feeds = load_npz(inputs) if inputs else random_inputs(b.inputs, seed, bounds=bounds)
        want, which = reference_outputs(model, feeds, names)
        res, spread = compare_reference(model, feeds, b.run(feeds), want, which, rtol, atol,
                                        scaled)
        _report(res, rtol, atol, f"validate against {which}", scaled, spread)
        return
    results, spreads = [], {}   # a dynamic bundle without -i: 1, each bucket and one past it
    for dims in dynamic_sizes(b.dynamic):
        feeds = random_inputs(b.inputs, seed, dims, bounds)
        want, which = reference_outputs(model, feeds, names)
        at = ",".join(f"{k}={v}" for k, v in dims.items())
        res, spread = compare_reference(model, feeds, b.run(feeds), want, which, rtol, atol,
                                        scaled)
        for c in res:
            c.name = f"{c.name} @ {at}"
            results.append(c)
        spreads.update({f"{k} @ {at}": v for k, v in spread.items()})
    _report(results, rtol, atol, f"validate against {which}", scaled, spreads)


@cli.command()
@click.argument("path", type=click.Path())
@click.option("--memory", is_flag=True, help="Bundle: memory plan report and a picture.")
@click.option("--svg", type=click.Path(dir_okay=False), help="Where to write the picture "
              "[BUNDLE/memory.svg].")
@click.option("--size", is_flag=True, help="Bundle: code, rodata and RAM on its target (the "
              "target's toolchain and size); also written to manifest.json.")
def inspect(path, memory, svg, size):
    """Show ops, shapes and support of MODEL.onnx, or the plan of a bundle folder."""
    from .inspect import inspect_bundle, inspect_model
    p = Path(path)
    if (memory or size) and not p.is_dir():
        raise ConfigError(f"{'--memory' if memory else '--size'} applies to a bundle folder")
    text, ok = ((inspect_bundle(p, memory=memory, svg=svg, size=size), True) if p.is_dir()
                else inspect_model(p))
    click.echo(text)
    if not ok:
        sys.exit(2)


@cli.command()
def targets():
    """List the targets."""
    from .targets import list_targets, load_target
    names = list_targets()
    width = max(map(len, names), default=0)
    for name in names:
        click.echo(f"{name:{width}s}  {load_target(name).description}")


@cli.group()
def golden():
    """Golden-output regression files for your own models."""


@golden.command("record")
@click.argument("model", type=click.Path(dir_okay=False))
@click.argument("bundle", type=click.Path(file_okay=False))
@click.argument("golden_dir", type=click.Path(file_okay=False))
@click.option("-i", "--inputs", type=click.Path(dir_okay=False), help="inputs.npz [random, seeded]")
@click.option("--seed", default=0, show_default=True)
@click.option("--rtol", default=DEFAULT_RTOL, show_default=True)
@click.option("--atol", default=DEFAULT_ATOL, show_default=True)
@runner_options
def golden_record(model, bundle, golden_dir, inputs, seed, rtol, atol, runner, runner_timeout):
    """Store inputs and BUNDLE's outputs in GOLDEN_DIR (checked against onnxruntime first)."""
    from .golden import record
    click.echo(record(model, _open(bundle, runner, runner_timeout), golden_dir, inputs=inputs,
                      seed=seed, rtol=rtol, atol=atol))


@golden.command("check")
@click.argument("bundle", type=click.Path(file_okay=False))
@click.argument("golden_dir", type=click.Path(file_okay=False))
@runner_options
def golden_check(bundle, golden_dir, runner, runner_timeout):
    """Rerun BUNDLE on the stored inputs; exit 1 if outputs moved beyond the stored tolerance."""
    from .golden import check
    results, rtol, atol = check(_open(bundle, runner, runner_timeout), golden_dir)
    _report(results, rtol, atol, f"golden check {golden_dir}")


@cli.command()
@click.argument("bundle", type=click.Path(file_okay=False))
@click.option("--model", type=click.Path(dir_okay=False), help="Also time onnxruntime (1 thread).")
@click.option("-i", "--inputs", type=click.Path(dir_okay=False), help="inputs.npz [random, seeded]")
@click.option("--seconds", default=2.0, show_default=True, help="Time budget per engine.")
@click.option("--warmup", default=5, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.option("--profile", "top", type=int, default=None, metavar="N",
              help="Per-step times instead (median of 50 hooked runs): the N slowest steps "
                   "(0: all, in order).")
@click.option("--ort-isa", default="native", show_default=True,
              type=click.Choice(["native", *ISA_LEVELS]),
              help="Hide newer CPU features from onnxruntime (Linux x86-64 with CPUID "
                   "faulting), e.g. avx2 to compare an x86-avx2 bundle with its AVX2 kernels.")
@runner_options
def bench(bundle, model, inputs, seconds, warmup, as_json, top, ort_isa, runner, runner_timeout):
    """Median and p90 thread CPU time per run of BUNDLE (and of onnxruntime with --model),
    interleaved. A bundle run under its emulator reports executed instructions instead."""
    from .runner import RemoteBundle, remote_runner
    spec = remote_runner(bundle, runner)
    if spec is not None:
        b = RemoteBundle(bundle, spec, runner_timeout)
        return _bench_remote(b, model, inputs, warmup, as_json, top)
    if top is not None:
        return _profile(bundle, warmup, as_json, top)
    from .bench import bench as do_bench
    res = do_bench(bundle, model, seconds=seconds, warmup=warmup, ort_isa=ort_isa,
                   inputs=inputs)
    if as_json:
        click.echo(json.dumps(res, indent=1, sort_keys=True))
        return
    for k in ("aicc", "onnxruntime"):
        if k in res:
            r = res[k]
            click.echo(f"{k:12s} median {r['median_ms']:.4f} ms  p90 {r['p90_ms']:.4f} ms  "
                       f"({r['runs']} runs)")
    if "ratio" in res:
        isa = "" if res["ort_isa"] == "native" else f" (onnxruntime on {res['ort_isa']})"
        click.echo(f"ratio aicc/onnxruntime: {res['ratio']:.3f}{isa}")


def _bench_remote(b, model, inputs, warmup, as_json, top):
    """bench of a bundle that runs as a program: instructions under an emulator (per step
    with --profile), thread CPU time on a device."""
    from .bench import bench_remote, profile_remote
    if top is not None:
        if not b.emulated:
            raise ConfigError(f"--profile on {b.where}: per-step figures need the target's "
                              "emulator (instruction counts) or this machine (time)")
        res = profile_remote(b, inputs=inputs)
        if as_json:
            click.echo(json.dumps(res, indent=1, sort_keys=True))
            return
        rows = (res["steps"] if top == 0 else
                sorted(res["steps"], key=lambda r: -r["instructions"])[:top])
        click.echo(f"{'step':>5s} {'op':18s} {'kernel':22s} {'instructions':>13s} {'share':>6s}  "
                   "node")
        for r in rows:
            click.echo(f"{r['index']:5d} {r['op'][:18]:18s} {r['kernel'][:22]:22s} "
                       f"{r['instructions']:13,d} {100 * r['share']:5.1f}%  "
                       f"{one_line(r['node'], 60)}")
        click.echo(f"sum of steps {res['sum_instructions']:,d} instructions; the whole run "
                   f"{res['instructions']:,d} ({res['counter']}; {res['emulator']})")
        return
    res = bench_remote(b, inputs=inputs, warmup=warmup, model=model)
    if as_json:
        click.echo(json.dumps(res, indent=1, sort_keys=True))
        return
    r = res["aicc"]
    if "instructions" in r:
        click.echo(f"aicc         {r['instructions']:,d} instructions per inference "
                   f"({res['counter']}; {res['emulator']})")
    else:
        click.echo(f"aicc         median {r['median_ms']:.4f} ms  p90 {r['p90_ms']:.4f} ms  "
                   f"thread CPU time on {res['where']} ({r['runs']} runs; wall median "
                   f"{r['wall_median_ms']:.4f} ms)")
    if model is not None:
        click.echo(f"onnxruntime  not run: it does not run on {res['where']} (docs/PERFORMANCE.md, "
                   "ARM: its AArch64 build under the same emulator)")


def _profile(bundle, warmup, as_json, top):
    from .bench import profile
    res = profile(bundle, warmup=warmup)
    if as_json:
        click.echo(json.dumps(res, indent=1, sort_keys=True))
        return
    rows = res["steps"] if top == 0 else sorted(res["steps"], key=lambda r: -r["ms"])[:top]
    click.echo(f"{'step':>5s} {'op':18s} {'kernel':22s} {'ms':>9s} {'share':>6s}  node")
    for r in rows:
        click.echo(f"{r['index']:5d} {r['op'][:18]:18s} {r['kernel'][:22]:22s} {r['ms']:9.4f} "
                   f"{100 * r['share']:5.1f}%  {one_line(r['node'], 60)}")
    click.echo(f"sum of step medians {res['sum_ms']:.4f} ms; run with the hook {res['hooked_ms']:.4f} "
               f"ms, without {res['plain_ms']:.4f} ms ({res['runs']} runs each)")


def _add_commands():
    from .tune.cli import tune
    cli.add_command(tune)


_add_commands()


def one_line(msg: str, limit: int = 2000) -> str:
    """Control characters (from model strings) escaped, so an error is always one line."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in msg.strip())
    return out if len(out) <= limit else out[:limit] + "..."


def main(argv=None):
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        cli.main(args=argv, prog_name="aicc", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("aicc: aborted", err=True)
        sys.exit(2)
    except click.ClickException as e:
        e.show()
        sys.exit(2)
    except AiccError as e:
        if debug:
            raise
        click.echo(f"aicc: error: {one_line(str(e))}", err=True)
        sys.exit(e.exit_code)
    except (InputError, FileNotFoundError, PermissionError, IsADirectoryError) as e:
        if debug:
            raise
        click.echo(f"aicc: error: {e}", err=True)
        sys.exit(2)
    except Exception as e:  # noqa: BLE001
        if debug:
            raise
        click.echo(f"aicc: internal error: {type(e).__name__}: {' '.join(str(e).split())[:300]} "
                   "(a bug in aicc; rerun with --debug for a traceback)", err=True)
        sys.exit(3)
    sys.exit(0)


if __name__ == "__main__":
    main()
