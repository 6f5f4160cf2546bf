"""Command-line options shared by `remat solve`, `export` and `compare`: formulation options and extensions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any

import typer

from remat_models.errors import ConfigurationError
from remat_models.extensions.registry import extension_names, parse_value
from remat_models.formulations import approximation_options, get_formulation

WithOption = Annotated[
    list[str] | None,
    typer.Option(
        "--with",
        help=f"Extension NAME[:key=value,...] ({', '.join(extension_names())}) or path/file.py:factory[:k=v,...].",
    ),
]
OptionOption = Annotated[
    list[str] | None,
    typer.Option("--option", "-O", help="Formulation option key=value (repeatable), e.g. -O C=3 -O order=free."),
]


# The options of `remat solve` (and the commands that share them).
MethodOption = Annotated[
    str | None,
    typer.Option("--method", "-m", help="Method: a heuristic, auto (the default) or FORMULATION[/BACKEND]."),
]
FormulationOption = Annotated[str | None, typer.Option("--formulation", "-f", help="Exact model, e.g. checkmate.")]
BackendOption = Annotated[
    str | None,
    typer.Option("--backend", help="Solver: cpsat, highs, gurobi, minizinc, pyomo:cbc (default: the formulation's)."),
]
ApproxOption = Annotated[str | None, typer.Option("--approx", help="Approximation: lp-rounding (checkmate).")]
TimeLimitOption = Annotated[float | None, typer.Option("--time-limit", help="Solver time limit in seconds.")]
InitOption = Annotated[
    str | None,
    typer.Option(
        "--init",
        help="Warm start from a heuristic method's schedule; 'auto' (default): the cheapest fitting fast "
        "heuristic; 'none': no warm start.",
    ),
]
IterationsOption = Annotated[
    str | None, typer.Option("--iterations", help="FastSA: attempts of stage 1 and 2, e.g. 20000000,2000000.")
]
SeedOption = Annotated[int, typer.Option("--seed", help="Solver / rounding / FastSA seed.")]
WorkersOption = Annotated[int, typer.Option("--workers", help="Solver threads (where supported).")]
ScheduleOutOption = Annotated[Path | None, typer.Option("--out", "-o", help="Write the schedule JSON here.")]
ImplsOption = Annotated[
    str,
    typer.Option(
        "--impls",
        help="Graphs with operator implementations: on (monet/checkmate-impls choose them, other methods "
        "plan the default view then switch greedily) or off (every method plans the default view).",
    ),
]

# Shortcut flags for formulation options (each also reachable as -O NAME=VALUE): the one place they are declared.
UnpartitionedOption = Annotated[
    bool, typer.Option("--unpartitioned", help="Checkmate without stages (small graphs); -O staged=false.")
]
AllowanceOption = Annotated[
    float | None, typer.Option("--allowance", help="LP rounding: solve the LP at (1-eps) budget; -O allowance=EPS.")
]
RetentionOption = Annotated[
    int | None, typer.Option("--C", help="Moccasin: retention intervals per node (default 2); -O C=N.")
]
OrderOption = Annotated[
    str | None, typer.Option("--order", help="Moccasin: input (stages of the input order) or free; -O order=...")
]


def shortcut_flags(
    unpartitioned: bool = False, allowance: float | None = None, retention: int | None = None, order: str | None = None
) -> dict[str, tuple[str, Any]]:
    """The shortcut flags as ``{flag: (option name, value or None if unset)}`` for :func:`collect_options`."""
    return {
        "--unpartitioned": ("staged", False if unpartitioned else None),
        "--allowance": ("allowance", allowance or None),
        "--C": ("C", retention),
        "--order": ("order", order),
    }


SolverOptionOption = Annotated[
    list[str] | None,
    typer.Option(
        "--solver-option",
        "-S",
        help="The solver's own option NAME=VALUE (repeatable), e.g. -S mip_rel_gap=0.01 (HiGHS), "
        "-S cp_model_probing_level=0 (CP-SAT), -S MIPFocus=1 (Gurobi).",
    ),
]


def parse_pairs(pairs: list[str] | None, flag: str, shape: str = "key=value") -> dict[str, Any]:
    """``key=value`` arguments of ``flag`` as a mapping (values parsed as numbers or booleans where they read so)."""
    options: dict[str, Any] = {}
    for pair in pairs or []:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise ConfigurationError(f"{flag} takes {shape}, got {pair!r}")
        options[key.strip()] = parse_value(value.strip())
    return options


def solver_options(pairs: list[str] | None) -> dict[str, Any]:
    """``-S NAME=VALUE`` pairs as a mapping."""
    return parse_pairs(pairs, "--solver-option", "NAME=VALUE")


def option_names(formulation: str, approx: str | None = None) -> list[str]:
    """The option names the formulation (or its approximation) takes."""
    if approx is not None:
        return approximation_options(approx, formulation)
    return [f.name for f in fields(get_formulation(formulation).options_type)]


def collect_options(
    formulation: str | None,
    approx: str | None,
    flags: Mapping[str, tuple[str, Any]],
    pairs: list[str] | None,
) -> dict[str, Any]:
    """Options from flags (``{flag: (option name, value or None if unset)}``) and ``-O key=value`` pairs.

    Every name is checked against what the formulation (or approximation) takes; an error names the flag.
    """
    given = {flag: (name, value) for flag, (name, value) in flags.items() if value is not None}
    options = {name: value for name, value in given.values()}
    for key, value in parse_pairs(pairs, "-O").items():
        options[key] = value
        given[f"-O {key}"] = (key, value)
    if not options:
        return options
    if formulation is None:
        raise ConfigurationError(f"{', '.join(given)} need(s) --formulation")
    known = option_names(formulation, approx)
    for flag, (name, _) in given.items():
        if name not in known:
            what = f"{formulation}/{approx}" if approx else formulation
            raise ConfigurationError(f"{flag} is not an option of {what}; it takes: {', '.join(known)}")
    return options
