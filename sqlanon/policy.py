"""The policy file: which relation, which column plays which role, and what privacy is required.

Validation is strict and happens before any query runs; every error names the offending key, e.g.
``policy key 'privacy.l.Disease.kind': expected one of distinct, entropy, recursive, got 'x'``.
The roles follow seed 000 section 2.1 (identifier, quasi-identifier, sensitive, insensitive).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sqlanon.errors import PolicyError, SqlanonError
from sqlanon.likeness import LIKENESS_KEYS, LikenessRequirement, parse_likeness
from sqlanon.perturbation import Perturbation, parse_perturbation, parse_row_key, refuse_seed
from sqlanon.policy_yaml import MAX_POLICY_BYTES, MAX_YAML_DEPTH, check_text, compose_check_construct
from sqlanon.presence import PRESENCE_KEYS, Presence, parse_presence
from sqlanon.profitability import PROFITABILITY_KEY, Profitability, parse_profitability
from sqlanon.relation import Relation
from sqlanon.risk_extra import RECORDS_AT_RISK, parse_records_at_risk
from sqlanon.safepub import DP_KEY, DPRequirement, parse_dp
from sqlanon.search_where import parse_where
from sqlanon.uniqueness import UNIQUENESS_KINDS, parse_uniqueness

ROLES = ("identifier", "quasi", "sensitive", "insensitive")
ROLE_ALIASES = {"qi": "quasi", "quasi-identifier": "quasi", "quasi_identifier": "quasi", "id": "identifier"}
ACTIONS = ("drop", "mask", "hash")
L_KINDS = ("distinct", "entropy", "recursive")
T_MEASURES = ("emd-equal", "emd-ordered", "emd-hierarchical", "kl")
RISK_KINDS = ("prosecutor", "average", "marketer", "journalist", *UNIQUENESS_KINDS, RECORDS_AT_RISK)
ALGORITHMS = ("flash", "incognito", "datafly", "exhaustive", "mondrian")
PUBLISH_AS = ("view", "table")
SEARCH_SCOPES = ("optimum", "minimal")
SUPPRESSION_MODES = ("remove", "mask")


def _fail(key: str, msg: str) -> PolicyError:
    return PolicyError(f"policy key {key!r}: {msg}")


def _number(
    key: str,
    value: Any,
    *,
    lo: float | None = None,
    hi: float | None = None,
    integer: bool = False,
    lo_open: bool = False,
) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(key, f"expected a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise _fail(key, f"expected a finite number, got {value!r}")
    if integer and (not float(value).is_integer()):
        raise _fail(key, f"expected a whole number, got {value!r}")
    if lo is not None and (value <= lo if lo_open else value < lo):
        raise _fail(key, f"must be {'>' if lo_open else '>='} {lo:g}, got {value!r}")
    if hi is not None and value > hi:
        raise _fail(key, f"must be <= {hi:g}, got {value!r}")
    return int(value) if integer else float(value)


def _mapping(key: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise _fail(key, f"expected a mapping, got {type(value).__name__}")
    return value


def _known(key: str, d: dict, allowed: tuple[str, ...]) -> None:
    for k in d:
        if k not in allowed:
            raise _fail(f"{key}.{k}" if key else str(k), f"unknown key; allowed: {', '.join(allowed)}")


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    role: str
    action: str | None = None  # identifiers: drop | mask | hash
    hierarchy: dict | None = None  # quasi-identifiers: see sqlanon.transform.hierarchy
    order: tuple | None = None  # sensitive: explicit value order for the ordered EMD
    weight: float = 1.0  # quasi-identifiers: NCP weight
    perturb: Perturbation | None = None  # any non-identifier: see sqlanon.perturbation


@dataclass(frozen=True)
class LRequirement:
    attribute: str
    kind: str
    l: float  # noqa: E741 - the literature's name
    c: float | None = None
    estimator: str = "shannon"  # entropy l: Shannon's plug-in or Grassberger's estimator (ARX)

    @property
    def label(self) -> str:
        if self.kind == "recursive":
            return f"l[{self.attribute}]: recursive (c={self.c:g}, l={self.l:g})"
        if self.estimator != "shannon":
            return f"l[{self.attribute}]: entropy ({self.estimator}) l >= {self.l:g}"
        return f"l[{self.attribute}]: {self.kind} l >= {self.l:g}"


@dataclass(frozen=True)
class TRequirement:
    attribute: str
    measure: str
    t: float

    @property
    def label(self) -> str:
        return f"t[{self.attribute}]: {self.measure} <= {self.t:g}"


@dataclass(frozen=True)
class Privacy:
    k: int | None = None
    l: tuple[LRequirement, ...] = ()  # noqa: E741
    t: tuple[TRequirement, ...] = ()
    suppression: float = 0.0
    suppression_mode: str = "remove"  # remove the records of violating classes, or mask their QIs
    risk: dict[str, float] = field(default_factory=dict)
    likeness: tuple[LikenessRequirement, ...] = ()  # delta-disclosure, beta-likeness: sqlanon.likeness
    presence: Presence | None = None  # delta-presence, k-map: sqlanon.presence
    profitability: Profitability | None = None  # Wan et al. 2015: sqlanon.profitability
    dp: DPRequirement | None = None  # (epsilon, delta)-DP by SafePub: sqlanon.safepub


@dataclass(frozen=True)
class Search:
    algorithm: str = "flash"
    #: ``ncp`` (issue 34): never worse than ``precision`` in the defaults study (docs/defaults.md),
    #: and the closest to ARX's default quality model (Loss).
    metric: str = "ncp"
    #: ``optimum``: Flash skips nodes whose metric bound already loses to a satisfying node it has
    #: found (ARX's pruning); ``minimal``: every minimal node is listed (see the README).
    scope: str = "optimum"
    where: str = "auto"  # where the search walks: sqlanon.search_where


def keyed_columns(columns: tuple[ColumnSpec, ...]) -> list[str]:
    """The columns whose published values need a secret key: hashed identifiers, then perturbed
    columns. The one list behind a keyed release's default ``publish.as: table`` (the parser) and
    its refusal as a view (``sqlanon.transform.release.check_hash_release``)."""
    hashed = [c.name for c in columns if c.role == "identifier" and c.action == "hash"]
    return hashed + [c.name for c in columns if c.perturb is not None]


@dataclass(frozen=True)
class Policy:
    source: Relation
    columns: tuple[ColumnSpec, ...]
    privacy: Privacy
    target: Relation | None = None
    population: Relation | None = None
    search: Search = Search()
    publish_as: str = "view"
    publish_grant: tuple[Any, ...] = ()  # roles to grant the release (checked: sqlanon.publish)
    base_dir: Path = Path(".")
    label_column: str | None = None
    key: str | None = None  # the stable row key of perturbation (default: the whole row)

    @property
    def perturbed(self) -> list[ColumnSpec]:
        return [c for c in self.columns if c.perturb is not None]

    @property
    def secret_columns(self) -> list[str]:
        """:func:`keyed_columns` of this policy: a release of any of them is a table."""
        return keyed_columns(self.columns)

    @property
    def quasi(self) -> list[ColumnSpec]:
        return [c for c in self.columns if c.role == "quasi"]

    @property
    def sensitive(self) -> list[ColumnSpec]:
        return [c for c in self.columns if c.role == "sensitive"]

    @property
    def identifiers(self) -> list[ColumnSpec]:
        return [c for c in self.columns if c.role == "identifier"]

    def column(self, name: str) -> ColumnSpec:
        for c in self.columns:
            if c.name == name:
                return c
        raise SqlanonError(f"column {name!r} is not declared in the policy")

    def k_or_1(self) -> int:
        return self.privacy.k or 1


def _relation(key: str, value: Any) -> Relation:
    if isinstance(value, dict):
        _known(key, value, ("catalog", "schema", "name"))
        return Relation.from_parts(value, what=f"policy key {key!r}")
    if not isinstance(value, str):
        raise _fail(key, f"expected a relation name, got {value!r}")
    return Relation.parse(value, what=f"policy key {key!r}")


def _column(name: str, spec: Any) -> ColumnSpec:
    key = f"columns.{name}"
    if isinstance(spec, str):
        spec = {"role": spec}
    spec = _mapping(key, spec)
    _known(key, spec, ("role", "action", "hierarchy", "order", "weight", "perturb"))
    if "role" not in spec:
        raise _fail(f"{key}.role", f"missing; expected one of {', '.join(ROLES)}")
    role = spec["role"]
    if isinstance(role, list):
        raise _fail(f"{key}.role", f"a column has exactly one role, got {role!r}")
    role = ROLE_ALIASES.get(str(role), str(role))
    if role not in ROLES:
        raise _fail(f"{key}.role", f"expected one of {', '.join(ROLES)}, got {spec['role']!r}")
    action = spec.get("action")
    if action is not None and role != "identifier":
        raise _fail(f"{key}.action", f"only identifiers take an action, but the role is {role}")
    if role == "identifier":
        action = action or "drop"
        if action not in ACTIONS:
            raise _fail(f"{key}.action", f"expected one of {', '.join(ACTIONS)}, got {action!r}")
    hierarchy = spec.get("hierarchy")
    if hierarchy is not None:
        if role not in ("quasi", "sensitive"):  # a sensitive one's: emd-hierarchical's ground distance
            raise _fail(f"{key}.hierarchy", f"only quasi-identifiers take a hierarchy, role is {role}")
        hierarchy = _mapping(f"{key}.hierarchy", hierarchy)
    order = spec.get("order")
    if order is not None:
        if role != "sensitive":
            raise _fail(f"{key}.order", "only sensitive attributes take an order")
        if not isinstance(order, list) or len(set(map(str, order))) != len(order):
            raise _fail(f"{key}.order", "expected a list of distinct values")
        order = tuple(order)
    weight = 1.0
    if "weight" in spec:
        if role != "quasi":
            raise _fail(f"{key}.weight", "only quasi-identifiers take a weight")
        weight = _number(f"{key}.weight", spec["weight"], lo=0, lo_open=True)
    perturb = parse_perturbation(f"{key}.perturb", spec["perturb"], role) if "perturb" in spec else None
    if perturb is not None and hierarchy is not None:
        raise _fail(f"{key}.perturb", "a perturbed quasi-identifier is not generalised; drop its hierarchy")
    return ColumnSpec(
        name=name, role=role, action=action, hierarchy=hierarchy, order=order, weight=weight, perturb=perturb
    )


def _l_requirements(value: Any, sensitive: set[str]) -> tuple[LRequirement, ...]:
    value = _mapping("privacy.l", value)
    out = []
    for attr, spec in value.items():
        key = f"privacy.l.{attr}"
        if attr not in sensitive:
            raise _fail(key, f"{attr!r} is not a sensitive column")
        if isinstance(spec, int | float) and not isinstance(spec, bool):
            spec = {"kind": "distinct", "l": spec}
        spec = _mapping(key, spec)
        _known(key, spec, ("kind", "l", "c", "estimator"))
        kind = spec.get("kind", "distinct")
        if kind not in L_KINDS:
            raise _fail(f"{key}.kind", f"expected one of {', '.join(L_KINDS)}, got {kind!r}")
        if "l" not in spec:
            raise _fail(f"{key}.l", "missing")
        lval = _number(f"{key}.l", spec["l"], lo=1, integer=kind != "entropy")
        c = None
        if kind == "recursive":
            if "c" not in spec:
                raise _fail(f"{key}.c", "recursive (c,l)-diversity needs c")
            c = _number(f"{key}.c", spec["c"], lo=0, lo_open=True)
            if lval < 2:
                raise _fail(f"{key}.l", "recursive (c,l)-diversity needs l >= 2")
        elif "c" in spec:
            raise _fail(f"{key}.c", f"c only applies to kind recursive, not {kind}")
        est = str(spec.get("estimator", "shannon"))
        if est not in ("shannon", "grassberger") or ("estimator" in spec and kind != "entropy"):
            raise _fail(f"{key}.estimator", f"expected shannon or grassberger with kind entropy, got {est!r}")
        out.append(LRequirement(attribute=attr, kind=kind, l=lval, c=c, estimator=est))
    return tuple(out)


def _t_requirements(value: Any, sensitive: set[str], hier: set[str]) -> tuple[TRequirement, ...]:
    value = _mapping("privacy.t", value)
    out = []
    for attr, spec in value.items():
        key = f"privacy.t.{attr}"
        if attr not in sensitive:
            raise _fail(key, f"{attr!r} is not a sensitive column")
        if isinstance(spec, int | float) and not isinstance(spec, bool):
            spec = {"measure": "emd-equal", "t": spec}
        spec = _mapping(key, spec)
        _known(key, spec, ("measure", "t"))
        measure = spec.get("measure", "emd-equal")
        if measure not in T_MEASURES:
            raise _fail(f"{key}.measure", f"expected one of {', '.join(T_MEASURES)}, got {measure!r}")
        if "t" not in spec:
            raise _fail(f"{key}.t", "missing")
        hi = None if measure == "kl" else 1.0
        t = _number(f"{key}.t", spec["t"], lo=0, hi=hi)
        if measure == "emd-hierarchical" and attr not in hier:
            raise _fail(f"{key}.measure", f"emd-hierarchical needs a columns.{attr}.hierarchy")
        out.append(TRequirement(attribute=attr, measure=measure, t=t))
    return tuple(out)


def parse_policy(data: Any, base_dir: Path | str = ".") -> Policy:
    """Validate a policy mapping (as loaded from YAML)."""
    if not isinstance(data, dict):
        raise PolicyError("policy: expected a YAML mapping at the top level")
    check_text(data, "")
    _known(
        "",
        data,
        ("source", "target", "population", "columns", "privacy", "search", "publish", "label", "seed", "key"),
    )
    if "seed" in data:  # randomness from a secret key, never a seed anyone reading the policy has
        refuse_seed()
    if "source" not in data:
        raise _fail("source", "missing; name the relation to read")
    source = _relation("source", data["source"])
    target = _relation("target", data["target"]) if data.get("target") is not None else None
    population = _relation("population", data["population"]) if data.get("population") else None
    if "columns" not in data:
        raise _fail("columns", "missing; declare each column's role")
    cols_raw = _mapping("columns", data["columns"])
    columns = tuple(_column(str(name), spec) for name, spec in cols_raw.items())
    if not any(c.role == "quasi" for c in columns):
        raise _fail("columns", "no quasi-identifier declared (role: quasi); nothing to measure")
    sensitive = {c.name for c in columns if c.role == "sensitive"}

    priv_raw = _mapping("privacy", data.get("privacy") or {})
    _known(
        "privacy",
        priv_raw,
        ("k", "l", "t", "suppression", "suppression_mode", "risk", *LIKENESS_KEYS, PROFITABILITY_KEY)
        + PRESENCE_KEYS
        + (DP_KEY,),
    )
    mode = priv_raw.get("suppression_mode", "remove")
    if mode not in SUPPRESSION_MODES:
        raise _fail(
            "privacy.suppression_mode", f"expected one of {', '.join(SUPPRESSION_MODES)}, got {mode!r}"
        )
    k = None
    if priv_raw.get("k") is not None:
        k = _number("privacy.k", priv_raw["k"], lo=1, integer=True)
    l_req = _l_requirements(priv_raw["l"], sensitive) if priv_raw.get("l") else ()
    hier = {c.name for c in columns if c.role == "sensitive" and c.hierarchy is not None}
    t_req = _t_requirements(priv_raw["t"], sensitive, hier) if priv_raw.get("t") else ()
    suppression = 0.0
    if priv_raw.get("suppression") is not None:
        suppression = _number("privacy.suppression", priv_raw["suppression"], lo=0, hi=1)
    if (dp := parse_dp(priv_raw)) is not None:  # SafePub: k from (epsilon, delta), every smaller class
        k, suppression = dp.k, 1.0  # suppressed (sqlanon.safepub)
    risk: dict[str, float] = {}
    if priv_raw.get("risk") is not None:
        r = _mapping("privacy.risk", priv_raw["risk"])
        _known("privacy.risk", r, RISK_KINDS)
        risk = parse_uniqueness(r)  # sample and population uniqueness (sqlanon.uniqueness)
        if RECORDS_AT_RISK in r:  # ARX's AverageReidentificationRisk, second form (sqlanon.risk_extra)
            risk[RECORDS_AT_RISK] = parse_records_at_risk(r[RECORDS_AT_RISK])
        for name, val in [(n, v) for n, v in r.items() if n not in risk]:
            risk[name] = _number(f"privacy.risk.{name}", val, lo=0, hi=1, lo_open=True)
        if "journalist" in risk and population is None:
            raise _fail("privacy.risk.journalist", "journalist risk needs a population relation")

    search_raw = _mapping("search", data.get("search") or {})
    _known("search", search_raw, ("algorithm", "metric", "scope", "where"))
    algorithm = search_raw.get("algorithm", "flash")
    if algorithm not in ALGORITHMS:
        raise _fail("search.algorithm", f"expected one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    metric = str(search_raw.get("metric", Search.metric))
    scope = search_raw.get("scope", "optimum")
    if scope not in SEARCH_SCOPES:
        raise _fail("search.scope", f"expected one of {', '.join(SEARCH_SCOPES)}, got {scope!r}")

    publish_raw = _mapping("publish", data.get("publish") or {})
    _known("publish", publish_raw, ("as", "grant"))
    # A release needing a secret key is a table by default (transform.release.check_hash_release);
    # SafePub's sample (sqlanon.safepub) is keyed too.
    needs_key = bool(keyed_columns(columns)) or priv_raw.get(DP_KEY) is not None
    publish_as = publish_raw.get("as", "table" if needs_key else "view")
    if publish_as not in PUBLISH_AS:
        raise _fail("publish.as", f"expected one of {', '.join(PUBLISH_AS)}, got {publish_as!r}")

    label = data.get("label")
    if label is not None and str(label) not in {c.name for c in columns}:
        raise _fail("label", f"{label!r} is not a declared column")
    if label is not None and any(c.name == str(label) and c.role == "identifier" for c in columns):
        # CM scores how well the release predicts the label; an identifier is not released as is.
        raise _fail("label", f"{label!r} is an identifier (not released as is); use a released column")

    return Policy(
        source=source,
        target=target,
        population=population,
        columns=columns,
        privacy=Privacy(
            k,
            l_req,
            t_req,
            suppression,
            mode,
            risk,
            likeness=parse_likeness(priv_raw, sensitive),
            profitability=parse_profitability(priv_raw, population is not None),
            presence=parse_presence(priv_raw, population, algorithm),
            dp=dp,
        ),
        search=Search(algorithm=algorithm, metric=metric, scope=scope, where=parse_where(search_raw)),
        publish_as=publish_as,
        publish_grant=tuple(g) if isinstance(g := publish_raw.get("grant") or [], list) else (g,),
        base_dir=Path(base_dir),
        label_column=str(label) if label is not None else None,
        key=parse_row_key(
            data.get("key"), [c.name for c in columns], any(c.perturb for c in columns) or DP_KEY in priv_raw
        ),
    )


def load_policy(path: str | Path) -> Policy:
    """Read, bound and validate a policy file: one line naming the file or key on any problem.

    The read itself is bounded (not only the size ``stat`` reports): a device such as ``/dev/zero``
    or a file that grows reports a small size and would otherwise be read until memory runs out.
    The YAML is composed once, its expanded size checked on the node graph, and only then
    constructed, so an alias bomb is refused before any Python object is built."""
    path = Path(path)
    shown = f"policy file {str(path)!r}"
    too_big = f"more than the {MAX_POLICY_BYTES:,} bytes a policy may have"
    try:
        size = path.stat().st_size
        if size > MAX_POLICY_BYTES:
            raise PolicyError(f"{shown}: {size:,} bytes, {too_big}")
        with path.open("rb") as f:
            raw = f.read(MAX_POLICY_BYTES + 1)
    except OSError as e:
        raise SqlanonError(f"{shown}: {e.strerror or e}") from None
    if len(raw) > MAX_POLICY_BYTES:
        raise PolicyError(f"{shown}: {too_big}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PolicyError(f"{shown}: not UTF-8 text (byte {e.start})") from None
    try:
        data = compose_check_construct(text, shown)
    except yaml.YAMLError as e:
        mark, problem = getattr(e, "problem_mark", None), getattr(e, "problem", None)
        # The parser's own words say what to fix there (an unclosed brace); LibYAML's for a tab
        # indent (an editor's default) do not name the tab.
        tab = mark is not None and text[mark.index : mark.index + 1] == "\t"
        why = (f": {problem}" if problem else "") + ("; a tab: YAML indents with spaces" if tab else "")
        where = f" (line {mark.line + 1}, column {mark.column + 1}{why})" if mark else ""
        raise PolicyError(f"{shown}: not valid YAML{where}") from None
    except RecursionError:
        raise PolicyError(f"{shown}: nested more than {MAX_YAML_DEPTH} levels deep") from None
    return parse_policy(data, base_dir=path.resolve().parent)
