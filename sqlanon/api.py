"""The public Python API: what the CLI (and dbt, Airflow tasks, notebooks) call.

Every function takes a policy as a file path, a mapping (the YAML's shape) or a loaded
:class:`~sqlanon.policy.Policy`, and a database as a URL, a DuckDB file path, ``None`` (an
in-memory DuckDB) or an open :class:`Connection` (so several calls share one session and its
temporary tables). Each returns a typed result whose ``to_dict()`` is exactly the JSON the
matching ``sqlanon ... --json`` command prints. Errors raise :class:`~sqlanon.errors.SqlanonError`
with the one-line message the CLI prints.

The README's *Python API* section has the example that runs as a test.
"""

from __future__ import annotations

import contextlib
import copy
import csv
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlanon.dbt.project import write_project
from sqlanon.engines import Backend
from sqlanon.engines import connect as _connect
from sqlanon.engines.catalog import identify, leftovers
from sqlanon.engines.definer import cleanup as _definer_cleanup
from sqlanon.errors import SqlanonError
from sqlanon.hipaa import warnings as hipaa_warnings
from sqlanon.lattice import Levels, build_hierarchies, check_coverage, parse_levels
from sqlanon.lattice.local_measure import SourceMeasure
from sqlanon.measure.assessment import assess as _assess
from sqlanon.measure.columns import check_columns
from sqlanon.metrics import evaluate_node, parse_ks
from sqlanon.metrics import profile as _profile
from sqlanon.metrics.evaluate import evaluate_mondrian
from sqlanon.policy import Policy, parse_policy
from sqlanon.policy import load_policy as _load_policy
from sqlanon.publish import anonymise as _anonymise
from sqlanon.publish import compile_release
from sqlanon.relation import Relation
from sqlanon.scaffold import hierarchy_csv as _hierarchy_csv
from sqlanon.scaffold import init_policy as _init_policy
from sqlanon.transform.perturb import materialise

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
if not FIXTURES.is_dir():  # installed wheel
    FIXTURES = Path(__file__).resolve().parent / "fixtures"


#: An open database session (one connection; its temporary tables live as long as it does).
Connection = Backend
#: A policy as a path, a mapping in the YAML's shape, or an already loaded Policy.
PolicyLike = str | Path | Mapping[str, Any] | Policy
#: A database as a URL, a DuckDB file path, None (in-memory DuckDB) or an open Connection.
DatabaseLike = str | Path | Backend | None
#: The search's progress callback: (nodes checked, pruned, remaining).
ProgressFn = Callable[[int, int, int], None]


def load_policy(policy: PolicyLike, base_dir: str | Path | None = None) -> Policy:
    """Load and validate a policy (file, mapping or Policy); relative hierarchy files are read
    from ``base_dir`` (default: the policy file's folder, or the current folder for a mapping)."""
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, Mapping):
        return parse_policy(dict(policy), base_dir=Path(base_dir) if base_dir else Path("."))
    if isinstance(policy, str | Path):
        return _load_policy(policy)
    raise SqlanonError(f"policy: expected a path, a mapping or a Policy, got {type(policy).__name__}")


def connect(url: str | Path | None = None, *, create: bool = False) -> Connection:
    """Open a session on ``url`` (see docs/cli.md, ``--db``); use it as a context manager."""
    return _connect(str(url) if url is not None else None, create=create)


@contextlib.contextmanager
def _session(db: DatabaseLike, *, create: bool = False) -> Iterator[Backend]:
    if isinstance(db, Backend):
        yield db  # the caller's session: theirs to close
        return
    be = connect(db, create=create)
    try:
        yield be
    finally:
        be.close()


def k_scope(pol: Policy, measured: Sequence[str] | None = None) -> dict[str, Any]:
    """Over which QIs k holds (``k_over``) and what protects the QIs left out of it
    (``perturbed_qis``: name -> the perturbation): a perturbed QI is published perturbed, not
    generalised, so the classes and k are over the others only (issue 34: "k = 5" was printed
    while a GROUP BY over every declared QI found classes of one). ``measured``: the QIs a
    measurement grouped by (default: the release's, every QI that is not perturbed)."""
    kept = list(measured) if measured is not None else [c.name for c in pol.quasi if c.perturb is None]
    left = {c.name: c.perturb.describe() for c in pol.quasi if c.perturb is not None and c.name not in kept}
    return {"k_over": kept, "perturbed_qis": left}


# -- results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Result:
    data: dict[str, Any] = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON object (a deep copy)."""
        return copy.deepcopy(self.data)


@dataclass(frozen=True)
class AssessResult(_Result):
    """``sqlanon assess --json``: see docs/cli.md, *assess --json*."""

    source: str = ""
    rows: int = 0
    classes: int = 0
    k: int = 0
    satisfied: dict[str, bool] = field(default_factory=dict)
    risk: dict[str, float | None] = field(default_factory=dict)

    @classmethod
    def of(cls, d: dict[str, Any]) -> AssessResult:
        return cls(d, d["source"], d["rows"], d["classes"], d["k"], d["satisfied"], d["risk"])

    @property
    def ok(self) -> bool:
        """Whether every requirement of the policy holds (the CLI's exit status 0)."""
        return bool(self.satisfied.get("all", True))


@dataclass(frozen=True)
class SearchResult(_Result):
    """The search and the choice of the optimum, without publishing."""

    node: dict[str, int] = field(default_factory=dict)
    minimal_nodes: list[dict[str, int]] = field(default_factory=list)
    nodes_total: int = 0
    nodes_checked: int = 0
    algorithm: str = ""
    optimum: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, d: dict[str, Any]) -> SearchResult:
        return cls(
            d,
            d["node"],
            d["minimal_nodes"],
            d["nodes_total"],
            d["nodes_checked"],
            d["algorithm"],
            d["optimum"],
        )


@dataclass(frozen=True)
class AnonymiseResult(SearchResult):
    """``sqlanon anonymise --json``: the search, and the published relation measured again."""

    target: str | None = None
    sql: str | None = None
    published: AssessResult | None = None

    @classmethod
    def of(cls, d: dict[str, Any]) -> AnonymiseResult:
        search = SearchResult.of(d)
        pub = AssessResult.of(d["published"]) if d.get("published") else None
        fields = {f: getattr(search, f) for f in ("node", "minimal_nodes", "nodes_total", "nodes_checked")}
        return cls(
            d,
            **fields,
            algorithm=search.algorithm,
            optimum=search.optimum,
            target=d.get("target"),
            sql=d.get("sql"),
            published=pub,
        )


@dataclass(frozen=True)
class EvaluateResult(_Result):
    """``sqlanon evaluate --json``: every metric of one node."""

    node: dict[str, int] | None = field(default_factory=dict)  # None: Mondrian's release
    satisfies: bool = False
    metrics: dict[str, float | None] = field(default_factory=dict)

    @classmethod
    def of(cls, d: dict[str, Any]) -> EvaluateResult:
        return cls(d, d["node"], d["satisfies"], d["metrics"])


@dataclass(frozen=True)
class ProfileResult(_Result):
    """``sqlanon profile --json``: the optimal node and its metrics for each k."""

    metric: str = ""
    profile: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, d: dict[str, Any]) -> ProfileResult:
        return cls(d, d["metric"], d["profile"])


# -- operations ----------------------------------------------------------------------------------


def assess(policy: PolicyLike, db: DatabaseLike = None) -> AssessResult:
    """Measure the policy's source as it is (k, l, t, information, risks); writes nothing.

    Every hierarchy the policy names is built and checked first (files readable, types right,
    every value present covered), so a mistake surfaces here rather than at ``anonymise``. The
    figures are the source's, every quasi-identifier as it is; with ``perturb:`` columns the
    result also says what the policy's perturbation does to them (``perturbation``).
    """
    pol = load_policy(policy)
    with _session(db) as be:
        hierarchies = build_hierarchies(pol, check_columns(be, pol))
        out = _assess(
            be,
            pol,
            validate=lambda ft: check_coverage(be, hierarchies, ft),
            # the checks in a local DuckDB where search.where allows
            local=SourceMeasure(be, pol) if SourceMeasure.applies(be, pol) else None,
        )
        out.setdefault("warnings", []).extend(hipaa_warnings(be, pol))
        if pol.perturbed:
            out["perturbation"] = materialise(be, pol).measured
        out.update(k_scope(pol, out["quasi_identifiers"]))
        return AssessResult.of(out)


def _node(pol: Policy, levels: str | Mapping[str, int] | None) -> tuple[int, ...] | None:
    if levels is None:
        return None
    text = levels if isinstance(levels, str) else dict(levels)
    # The search's lattice: a perturbed QI is published perturbed, not generalised, so it has no level.
    perturbed = {c.name for c in pol.perturbed}
    named = text if isinstance(text, dict) else {p.rpartition("=")[0].strip() for p in text.split(",")}
    if wrong := sorted(perturbed & set(named)):
        raise SqlanonError(
            f"--levels: {wrong[0]!r} is perturbed, not generalised: it has no level; leave it out"
        )
    hs = [h for h in build_hierarchies(pol) if h.column not in perturbed]
    return parse_levels(text, [h.column for h in hs], [h.height for h in hs])


def search(
    policy: PolicyLike,
    db: DatabaseLike = None,
    *,
    algorithm: str | None = None,
    metric: str | None = None,
    progress: ProgressFn | None = None,
) -> SearchResult:
    """Search the lattice and choose the optimum; creates nothing (``anonymise --dry-run``)."""
    r = anonymise(policy, db, dry_run=True, algorithm=algorithm, metric=metric, progress=progress)
    return SearchResult.of(r.to_dict())


def anonymise(
    policy: PolicyLike,
    db: DatabaseLike = None,
    *,
    replace: bool = False,
    dry_run: bool = False,
    levels: str | Mapping[str, int] | None = None,
    metric: str | None = None,
    algorithm: str | None = None,
    publish_as: str | None = None,
    progress: ProgressFn | None = None,
) -> AnonymiseResult:
    """Search (unless ``levels``), then publish the release atomically (unless ``dry_run``)."""
    pol = load_policy(policy)
    node = _node(pol, levels)
    with _session(db) as be:
        out = _anonymise(
            be,
            pol,
            replace=replace,
            dry_run=dry_run,
            levels=node,
            metric=metric,
            algorithm=algorithm,
            publish_as=publish_as,
            progress=progress,
        )
    out.update(k_scope(pol))
    if out.get("published"):
        out["published"].update(k_scope(pol, out["published"]["quasi_identifiers"]))
    return AnonymiseResult.of(out)


def evaluate(
    policy: PolicyLike,
    levels: str | Mapping[str, int] | None = None,
    db: DatabaseLike = None,
    *,
    algorithm: str | None = None,
) -> EvaluateResult:
    """Every utility and information-loss metric of one release: a node's (``levels``), or
    Mondrian's (``algorithm="mondrian"``, or the policy's ``search.algorithm`` without levels);
    writes nothing."""
    pol = load_policy(policy)
    policy_mondrian = levels is None and pol.search.algorithm == "mondrian"
    alg = algorithm or ("mondrian" if policy_mondrian else None)
    if alg is not None and alg != "mondrian":
        raise SqlanonError(f"--algorithm: evaluate takes mondrian or --levels, not {alg!r}")
    if alg == "mondrian":
        if levels is not None:
            raise SqlanonError("--levels: a Mondrian release has no levels; drop --levels or the algorithm")
        with _session(db) as be:
            return EvaluateResult.of(_scoped(pol, evaluate_mondrian(be, pol)))
    if levels is None:
        raise SqlanonError(
            "--levels: give the node to evaluate, e.g. --levels 'Age=1' (or --algorithm mondrian)"
        )
    text = levels if isinstance(levels, str) else dict(levels)
    with _session(db) as be:
        return EvaluateResult.of(_scoped(pol, evaluate_node(be, pol, text)))


def _scoped(pol: Policy, out: dict[str, Any]) -> dict[str, Any]:
    """An evaluation with :func:`k_scope` at its top and in its assessment."""
    out.update(k_scope(pol))
    if out.get("assess"):
        out["assess"].update(k_scope(pol, out["assess"].get("quasi_identifiers")))
    return out


def profile(
    policy: PolicyLike,
    ks: Sequence[int] | str = (2, 3, 5, 10, 20),
    db: DatabaseLike = None,
    *,
    metric: str | None = None,
    algorithm: str | None = None,
    progress: ProgressFn | None = None,
) -> ProfileResult:
    """The privacy/utility trade-off: the optimal node and all its metrics for each k."""
    pol = load_policy(policy)
    k_values = parse_ks(ks if isinstance(ks, str) else ",".join(str(k) for k in ks))
    with _session(db) as be:
        return ProfileResult.of(
            _profile(be, pol, k_values, metric=metric, algorithm=algorithm, progress=progress)
        )


def compile(  # noqa: A001 - the command's name
    policy: PolicyLike,
    dialect: str,
    *,
    levels: str | Mapping[str, int] | None = None,
    db: DatabaseLike = None,
    publish_as: str | None = None,
) -> str:
    """The CREATE VIEW (or TABLE) statement of the release for ``dialect`` (no trailing ';'); a
    PostgreSQL view as ``anonymise`` publishes it: its definer function's statements, then the
    view (:func:`sqlanon.transform.release.release_sql` with ``definer``), joined by ``;``.

    With ``levels`` and no ``db`` no database is needed; otherwise ``db`` is searched first.
    """
    import sqlglot

    try:
        sqlglot.Dialect.get_or_raise(dialect)
    except ValueError:
        raise SqlanonError(f"--dialect: unknown dialect {dialect!r}") from None
    pol = load_policy(policy)
    text: Levels | None = None
    if levels is not None:
        text = levels if isinstance(levels, str) else dict(levels)
    if text is not None and db is None:
        return compile_release(pol, dialect, text, None, publish_as)
    with _session(db) as be:
        return compile_release(pol, dialect, text, be, publish_as)


def load_demo_data(db: DatabaseLike, schema: str = "main", table: str = "patients") -> None:
    """Create and fill the patient table through the compile path (fixture data, 9 rows).

    The demo only ever creates: a relation of that name already in the database is the user's,
    so it is refused rather than replaced (sqlanon never drops what it did not create). ``db`` is
    any database the other functions take (a new DuckDB file is created, as ``sqlanon demo`` does).
    """
    with _session(db, create=True) as be:
        _load_demo(be, Relation(table, schema=schema))


def _load_demo(be: Backend, rel: Relation) -> None:
    rows = list(csv.DictReader((FIXTURES / "patients.csv").open(encoding="utf-8")))
    schema, table = rel.schema, rel.name
    for name in (table, f"{table}_anon"):
        if identify(be, rel.with_name(name), "demo") is not None:
            raise SqlanonError(
                f"demo: {schema}.{name} already exists in {be.url}; the demo only creates new "
                "relations (run it on a new database file, or without --db)"
            )
    be.execute("fixtures/patients_create", kind="create", target=rel)
    be.execute(
        "fixtures/patients_insert",
        kind="insert",
        target=rel,
        rows=[
            [int(r["PatientID"]), r["PatientName"], r["Postcode"], int(r["Age"]), r["Disease"]] for r in rows
        ],
    )
    be.commit()


def init_policy(table: str, db: DatabaseLike = None, *, k: int = 5) -> str:
    """A commented starting policy (YAML text) for ``table``, from one profiling scan of it."""
    rel = Relation.parse(table, what="--table")
    with _session(db) as be:
        return _init_policy(be, rel, k=k)


def hierarchy_file(
    table: str,
    column: str,
    db: DatabaseLike = None,
    *,
    intervals: Sequence[float] | None = None,
    start: float = 0,
    mask_levels: int | None = None,
    dates: Sequence[str] | None = None,
) -> tuple[str, int]:
    """An ARX-format hierarchy file (text) covering every value of ``column``, built by intervals,
    masking or dates (NULL as ARX's ``NULL`` row); and the number of NULL rows."""
    forms = [f for f in (intervals, mask_levels, dates) if f]
    if len(forms) != 1:
        raise SqlanonError("hierarchy: give exactly one of --intervals, --mask, --dates")
    spec: dict[str, Any]
    if intervals:
        spec = {"interval": {"widths": list(intervals), "start": start}}
    elif mask_levels:
        spec = {"mask": "right", "levels": mask_levels}
    else:
        spec = {"date": list(dates or [])}
    rel = Relation.parse(table, what="--table")
    with _session(db) as be:
        return _hierarchy_csv(be, rel, column, spec)


def cleanup(db: DatabaseLike, *, drop: bool = False) -> list[str]:
    """Staging relations left by killed publishing runs of older versions (``sqlanon cleanup``),
    and on PostgreSQL the function and row type of a published view dropped by hand; with
    ``drop`` they are removed. Returns their names."""
    with _session(db) as be:
        found = leftovers(be)
        for rid in found:
            if drop:
                be.execute(f"ddl/drop_{rid.kind}", kind="drop", target=rid.relation())
                be.commit()
        return [f"{rid.kind} {rid}" for rid in found] + _definer_cleanup(be, remove=drop)


def dbt_project(
    policy: PolicyLike,
    db: DatabaseLike = None,
    *,
    project: str | Path,
    levels: str | Mapping[str, int] | None = None,
    source: str | None = None,
    ref: str | None = None,
    replace: bool = False,
    algorithm: str | None = None,
    metric: str | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """``sqlanon dbt``: search (unless ``levels``), then write the release into the dbt project as
    ``<model-path>/<target name>.sql`` reading ``source('S', 'T')`` (``source="S.T"``, default the
    policy source's schema and name) or ``ref(ref)``, its ``.yml`` (columns, the policy's tests),
    and the package's macros. Returns what was written (``files``: path and status)."""
    pol = load_policy(policy)
    text: Levels | None = None
    if levels is not None:
        text = levels if isinstance(levels, str) else dict(levels)
    name = Path(policy).name if isinstance(policy, str | Path) else "a policy mapping"
    with _session(db) as be:
        return write_project(
            be,
            pol,
            project,
            levels=text,
            source=source,
            ref=ref,
            replace=replace,
            algorithm=algorithm,
            metric=metric,
            policy_name=name,
            progress=progress,
        )


# -- issue 14: the HTML report's data and the machine-learning utility ---------------------------
