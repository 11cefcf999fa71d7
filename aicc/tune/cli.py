"""The `aicc tune` command (registered on aicc.cli's group)."""
from __future__ import annotations

import json

import click


def _parse_shapes(items):
    from ..cli import _parse_dims
    return _parse_dims(items, "--input-shape")


@click.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("-t", "--target", default="generic", show_default=True, help="Target (aicc targets).")
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False),
              help="The tuning log (JSON); resumed when it exists.")
@click.option("--budget", default="10m", show_default=True,
              help="Time to spend, e.g. 300s, 10m, 1h (import and pipeline included).")
@click.option("-c", "--config", type=click.Path(dir_okay=False), help="YAML merged over the defaults.")
@click.option("--input-shape", multiple=True, metavar="NAME=d0,d1,...", help="Pin an input's shape.")
@click.option("--per-job", default=5, show_default=True,
              help="Candidates per problem and round (besides the default).")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="Run the jobs on a Ray cluster (host:port, or local to start one here).")
@click.option("--runner", default=None, metavar="RUNNER",
              help="Where the candidates run (as aicc bench: an emulator counts instructions).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def tune(model, target, out, budget, config, input_shape, per_job, ray_address, runner,
         as_json):
    """Measure kernel schedules for each distinct layer of MODEL on the machine that runs
    TARGET, into the log OUT for `aicc build --tuning OUT`."""
    from .search import parse_budget, tune as do_tune
    parse_budget(budget)                  # a bad budget fails before the model is read
    executor = None
    if ray_address is not None:
        from ..config import Options
        from .ray_exec import RayExecutor
        executor = RayExecutor(ray_address, Options.load(target, config), runner)
    try:
        res = do_tune(model, target, out, budget=budget, config=config,
                      input_shapes=_parse_shapes(input_shape), per_job=per_job,
                      executor=executor, runner=runner,
                      progress=None if as_json else (lambda m: click.echo(m, err=True)))
    except KeyboardInterrupt:
        click.echo(f"aicc: interrupted; every finished measurement is in {out}", err=True)
        raise SystemExit(130) from None
    finally:
        if executor is not None:
            executor.close()
    if as_json:
        click.echo(json.dumps(res, indent=1))
        return
    tuned = [p for p in res["problems"] if p["schedule"]]
    click.echo(f"{res['log']}: {res['records']} records, {res['jobs']} jobs this run "
               f"({'budget used' if res['stopped'] == 'budget' else 'every candidate tried'}); "
               f"{len(tuned)} of {len(res['problems'])} layers take a tuned schedule")
    for p in res["problems"]:
        r = "" if p["ratio"] is None else f"{p['ratio']:.2f}x"
        s = json.dumps(p["schedule"], sort_keys=True) if p["schedule"] else "default"
        click.echo(f"  {p['label']:44s} x{p['nodes']:<3d} tried {p['tried']:3d}/"
                   f"{p['candidates']:<3d} {r:>6s} {s}")
