"""Command-line options shared by `remat solve`, `export` and `compare`: formulation options and extensions."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from remat_models.core.transfer import TransferModel
from remat_models.core.units import parse_size
from remat_models.errors import BudgetError, ConfigurationError
from remat_models.extensions.registry import extension_names, parse_value
from remat_models.planning.methods import MethodRef

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
    typer.Option("--method", "-m", help="Method: a heuristic, auto (the default) or FORMULATION, FORMULATION/BACKEND."),
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
WindowsOption = Annotated[
    bool | None,
    typer.Option(
        "--windows/--whole",
        help="Formulations: re-solve windows of the warm start with the model (--windows) or solve the whole "
        "graph (--whole); default: windows above the formulation's window_nodes or where the model is too large.",
    ),
]
IterationsOption = Annotated[
    str | None, typer.Option("--iterations", help="FastSA: attempts of stage 1 and 2, e.g. 20000000,2000000.")
]
SeedOption = Annotated[int, typer.Option("--seed", help="Solver / rounding / FastSA seed.")]
WorkersOption = Annotated[int, typer.Option("--workers", help="Solver threads (where supported).")]
ScheduleOutOption = Annotated[Path | None, typer.Option("--out", "-o", help="Write the schedule JSON here.")]
ForceOption = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Let an over-budget or interrupted result replace an existing --out file (else the old file is kept).",
    ),
]
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
    unpartitioned: bool = False,
    allowance: float | None = None,
    retention: int | None = None,
    order: str | None = None,
    iterations: str | None = None,
) -> dict[str, tuple[str, Any]]:
    """The shortcut flags as ``{flag: (option name, value or None if unset)}`` for :func:`collect_options`."""
    return {
        "--unpartitioned": ("staged", False if unpartitioned else None),
        "--allowance": ("allowance", allowance or None),
        "--C": ("C", retention),
        "--order": ("order", order),
        "--iterations": ("iterations", None if iterations is None else _iteration_pair(iterations)),
    }


def _iteration_pair(text: str) -> tuple[int, int]:
    try:
        first, second = (int(part) for part in text.split(","))
    except ValueError:
        raise ConfigurationError(f"--iterations takes two counts N1,N2, got {text!r}") from None
    if first < 0 or second < 0:
        raise ConfigurationError(f"--iterations must be non-negative, got {text!r}")
    return first, second


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
        name = key.strip()
        if name in options:  # -O C=2 -O C=3, bw=1,bw=2: which one was meant?
            given = f"{options[name]!r} and {value.strip()!r}"
            raise ConfigurationError(f"{flag} sets {name!r} twice ({given}); give it once")
        options[name] = parse_value(value.strip())
    return options


def solver_options(pairs: list[str] | None) -> dict[str, Any]:
    """``-S NAME=VALUE`` pairs as a mapping."""
    return parse_pairs(pairs, "--solver-option", "NAME=VALUE")


def collect_options(ref: MethodRef, flags: Mapping[str, tuple[str, Any]], pairs: list[str] | None) -> dict[str, Any]:
    """Options from flags (``{flag: (option name, value or None if unset)}``) and ``-O key=value`` pairs.

    Every name is checked against what the method takes (its options dataclass); an error names the flag.
    A flag and a ``-O`` pair setting the same option is an error naming both.
    """
    given = {flag: (name, value) for flag, (name, value) in flags.items() if value is not None}
    options = {name: value for name, value in given.values()}
    for key, value in parse_pairs(pairs, "-O").items():
        flag = next((flag for flag, (name, _) in given.items() if name == key), None)
        if flag is not None:
            raise ConfigurationError(f"{flag} and -O {key} both set the option {key}; give one of them")
        options[key] = value
        given[f"-O {key}"] = (key, value)
    if not options:
        return options
    known = ref.option_names()
    if not known:
        raise ConfigurationError(f"method {ref.label!r} takes no options (such as {next(iter(given))})")
    for flag, (name, _) in given.items():
        if name not in known:
            raise ConfigurationError(f"{flag} is not an option of {ref.label}; it takes: {', '.join(known)}")
    return options


TransferOption = Annotated[
    str | None,
    typer.Option(
        "--transfer",
        help="Transfer model for offloading: bw= (or out_bw=/in_bw=) bytes per cost unit, latency= (or "
        "out_latency=/in_latency=) cost units, host=64GiB, mode=serial|overlap; with flops= (the device's cost "
        "units per second, FLOP/s for a FLOP-cost graph) bandwidths are bytes/s (e.g. bw=25GB/s) and latencies s.",
    ),
]

_BANDWIDTHS = ("bw", "out_bw", "in_bw")
_LATENCIES = ("latency", "out_latency", "in_latency")


def _number(key: str, value: Any) -> float:
    """A bandwidth (``25GB/s``, ``25e9``), rate or latency as a finite number >= 0 (else ConfigurationError)."""
    try:
        number = float(parse_size(value[:-2]) if isinstance(value, str) and value.endswith("/s") else value)
    except (TypeError, ValueError, BudgetError):
        raise ConfigurationError(f"--transfer {key}={value!r} is not a number (bytes/s: 25GB/s or 25e9)") from None
    if not 0 <= number < float("inf"):
        raise ConfigurationError(f"--transfer {key}={value!r} must be a finite number >= 0")
    return number


def transfer_model(text: str | None) -> TransferModel | None:
    """``--transfer KEY=VALUE,...`` as a TransferModel (None without the flag); see :data:`TransferOption`."""
    if text is None:
        return None
    options = parse_pairs([item for item in text.split(",") if item.strip()], "--transfer")
    if "flops" not in options:
        per_second = [f"{k}={v}" for k, v in options.items() if k in _BANDWIDTHS and str(v).endswith("/s")]
        if per_second:  # bytes per second, but without flops= bandwidths are bytes per cost unit
            raise ConfigurationError(
                f"--transfer {per_second[0]} is bytes per second: give flops= (the device's cost units per second)"
                " to convert it, or a bandwidth in bytes per cost unit (a plain number)"
            )
        return TransferModel.from_options({k: _number(k, v) if k in _BANDWIDTHS else v for k, v in options.items()})
    rate = _number("flops", options.pop("flops"))
    if rate == 0:
        raise ConfigurationError("--transfer flops= must be positive")
    for key in _BANDWIDTHS:
        if key in options:
            options[key] = _number(key, options[key]) / rate
    for key in _LATENCIES:
        if key in options:
            options[key] = _number(key, options[key]) * rate
    return TransferModel.from_options(options)
