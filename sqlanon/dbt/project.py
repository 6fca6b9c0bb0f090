"""``sqlanon dbt``: a release as a dbt model, its privacy tests, and the tests' macros.

Into a dbt project it writes ``<model-path>/<target name>.sql`` (the release's SELECT, reading
``{{ source(...) }}`` or ``{{ ref(...) }}`` in place of the policy's source), ``<target name>.yml``
beside it (the columns documented, the policy's requirements attached as sqlanon's generic tests)
and ``<macro-path>/sqlanon/*.sql`` (a copy of the dbt package's macros). Every file it writes starts
with a line saying so; such a file is rewritten on the next run, any other is left alone unless
``replace`` (the run stops before writing anything). The same inputs give the same bytes.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import re
from pathlib import Path
from typing import Any

import sqlglot
import yaml

from sqlanon.dbt.macros import package_dir
from sqlanon.engines import Backend
from sqlanon.errors import SqlanonError
from sqlanon.lattice import build_hierarchies, parse_levels
from sqlanon.measure.assessment import check_columns
from sqlanon.policy import ColumnSpec, Policy
from sqlanon.publish import anonymise
from sqlanon.relation import Relation
from sqlanon.sql.compile import to_sql
from sqlanon.transform.hierarchy import Hierarchy
from sqlanon.transform.perturb import context as perturb_context
from sqlanon.transform.perturb import search_policy
from sqlanon.transform.release import release_context

MARK = "written by sqlanon dbt"
PLACEHOLDER = "__sqlanon_source__"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclasses.dataclass(frozen=True)
class Project:
    """A dbt project's folder and the paths its dbt_project.yml names."""

    root: Path
    models: Path
    macros: Path


def read_project(path: str | Path) -> Project:
    root = Path(path)
    if not root.is_dir():
        raise SqlanonError(f"--project: {str(path)!r} is not a directory")
    conf = root / "dbt_project.yml"
    if not conf.is_file():
        raise SqlanonError(f"--project: {str(path)!r} is not a dbt project (it has no dbt_project.yml)")
    try:
        data = yaml.safe_load(conf.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise SqlanonError(f"--project: {conf} does not parse as YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict) or not data.get("name"):
        raise SqlanonError(f"--project: {conf} names no project (a 'name' key)")
    paths = {}
    for key, default in (("model-paths", "models"), ("macro-paths", "macros")):
        value = data.get(key) or [default]
        if not isinstance(value, list) or not value or not isinstance(value[0], str):
            raise SqlanonError(f"--project: {conf}: {key} should be a list of folders")
        paths[key] = root / value[0]
    return Project(root, paths["model-paths"], paths["macro-paths"])


def source_jinja(
    policy: Policy, source: str | None, ref: str | None
) -> tuple[str, str, tuple[str, str] | None]:
    """The Jinja that stands for the policy's source, as a model reads it and as a test argument
    (``reference``), and the (source, table) pair when it is a dbt source."""
    if source is not None and ref is not None:
        raise SqlanonError("--source, --ref: give one of them")
    if ref is not None:
        if not _NAME.match(ref):
            raise SqlanonError(f"--ref: {ref!r} is not a model name (letters, digits, _)")
        call = f"ref('{ref}')"
        return "{{ " + call + " }}", call, None
    if source is not None:
        name, dot, table = source.partition(".")
        if not dot or not _NAME.match(name) or not _NAME.match(table):
            raise SqlanonError(f"--source: expected SOURCE.TABLE (letters, digits, _), got {source!r}")
    else:
        name, table = policy.source.schema or "main", policy.source.name
        if not _NAME.match(name) or not _NAME.match(table):
            raise SqlanonError(
                f"source: {str(policy.source)!r} is not a dbt source name; "
                "pass --source SOURCE.TABLE or --ref MODEL"
            )
    call = f"source('{name}', '{table}')"
    return "{{ " + call + " }}", call, (name, table)


def _declared_sources(project: Project, skip: Path) -> set[tuple[str, str]]:
    """(source, table) pairs declared in the project's YAML files (other than ours)."""
    found: set[tuple[str, str]] = set()
    for path in sorted(project.models.rglob("*.y*ml")) if project.models.is_dir() else []:
        if path == skip:
            continue
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError, OSError):
            continue  # dbt will say what is wrong with it
        for src in (data or {}).get("sources") or [] if isinstance(data, dict) else []:
            if isinstance(src, dict):
                for t in src.get("tables") or []:
                    if isinstance(t, dict):
                        found.add((str(src.get("name")), str(t.get("name"))))
    return found


def _jinja_safe(sql: str) -> str:
    """SQL text as dbt should read it: a ``{`` that would open Jinja (a label such as '{{x}}') is
    written as ``{{ '{' }}``."""
    return re.sub(r"\{(?=[{%#])", "{{ '{' }}", sql)


def release_select(
    be: Backend,
    policy: Policy,
    *,
    levels: str | None,
    algorithm: str | None,
    metric: str | None,
    progress: Any = None,
) -> tuple[dict[str, Any], list[Hierarchy], str]:
    """Search (or take ``levels``) as ``anonymise --dry-run`` does, and return its result, the
    hierarchies and the release's SELECT for the connection's dialect, reading ``PLACEHOLDER``."""
    hashed = [c.name for c in policy.identifiers if c.action == "hash"]
    if hashed:
        raise SqlanonError(
            f"columns.{hashed[0]}.action: hash would write the key into the model's SQL file; "
            "use mask or drop for a dbt model"
        )
    spol = search_policy(policy, policy.source) if policy.perturbed else policy
    hierarchies = build_hierarchies(spol, check_columns(be, spol))
    node = None
    if levels is not None:
        node = parse_levels(levels, [h.column for h in hierarchies], [h.height for h in hierarchies])
    out = anonymise(
        be, policy, dry_run=True, levels=node, algorithm=algorithm, metric=metric, progress=progress
    )
    node = tuple(out["node"].get(h.column, 0) for h in hierarchies)
    src = be.require_columns(policy.source, "source")
    stand_in = Relation(PLACEHOLDER)
    pctx = None
    if policy.perturbed:
        pctx = dict(perturb_context(policy, src), source=stand_in)
    ctx = release_context(
        dataclasses.replace(policy, source=stand_in), hierarchies, node, [c.name for c in src], pctx
    )
    sql = to_sql("publish/_release", be.dialect, kind="select", **ctx)
    # Laid out for people to read (the same statement: parsed and generated again in its dialect).
    sql = sqlglot.parse_one(sql, read=be.dialect).sql(dialect=be.dialect, pretty=True)
    return out, hierarchies, sql


def _describe(spec: ColumnSpec, by_name: dict[str, tuple[Hierarchy, int]]) -> str:
    if spec.role == "identifier":
        return "Identifier, masked: every value is '*'."
    if spec.perturb is not None:
        return f"{spec.role.capitalize()}, perturbed ({spec.perturb.method}); see README, *Perturbation*."
    if spec.role == "quasi":
        h, lvl = by_name[spec.name]
        return f"Quasi-identifier, generalised to level {lvl} of {h.height} of its hierarchy."
    if spec.role == "sensitive":
        return "Sensitive attribute, as in the source (its records are removed with their class)."
    return "Insensitive, as in the source."


def _tests(policy: Policy, reference: str) -> list[dict[str, Any]]:
    """The policy's requirements as sqlanon's generic tests on the release's classes (the QIs the
    release generalises: a perturbed QI splits no class)."""
    qis = [c.name for c in policy.quasi if c.perturb is None]
    tests: list[dict[str, Any]] = []
    if policy.privacy.k:
        tests.append(
            {"sqlanon_k_anonymity": {"arguments": {"quasi_identifiers": list(qis), "k": policy.privacy.k}}}
        )
    for r in policy.privacy.l:
        args: dict[str, Any] = {
            "quasi_identifiers": list(qis),
            "sensitive": r.attribute,
            "l": r.l,
            "kind": r.kind,
        }
        if r.kind == "recursive":
            args["c"] = r.c
        tests.append({"sqlanon_l_diversity": {"arguments": args}})
    for r in policy.privacy.t:
        args = {"quasi_identifiers": list(qis), "sensitive": r.attribute, "t": r.t, "measure": r.measure}
        order = policy.column(r.attribute).order
        if order:
            args["order"] = list(order)
        args["reference"] = reference  # t against the source's distribution, as sqlanon verifies
        tests.append({"sqlanon_t_closeness": {"arguments": args}})
    for kind, bound in policy.privacy.risk.items():
        if kind in ("prosecutor", "average"):
            tests.append(
                {
                    "sqlanon_max_risk": {
                        "arguments": {"quasi_identifiers": list(qis), "max": bound, "kind": kind}
                    }
                }
            )
    return tests


def _version() -> str:
    try:
        return importlib.metadata.version("sqlanon")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout
        return "unknown"


def project_files(
    project: Project,
    policy: Policy,
    out: dict[str, Any],
    hierarchies: list[Hierarchy],
    sql: str,
    *,
    reference: str,
    declare: tuple[str, str] | None,
    policy_name: str,
) -> dict[Path, str]:
    """Every file ``sqlanon dbt`` writes, by path, with its text."""
    assert policy.target is not None
    name = policy.target.name
    model_path = project.models / f"{name}.sql"
    yml_path = project.models / f"{name}.yml"
    node = ", ".join(f"{k}={v}" for k, v in out["node"].items())
    materialized = policy.publish_as
    files: dict[Path, str] = {}
    files[model_path] = (
        f"-- {MARK} from {policy_name}: the release of {policy.source} at the node {node}.\n"
        "-- Classes that break the policy are removed when the model is read or built (README, *dbt*).\n"
        "-- Re-running `sqlanon dbt` rewrites this file: change the policy, not this file.\n"
        f"{{{{ config(materialized='{materialized}') }}}}\n\n" + sql + "\n"
    )
    by_name = {h.column: (h, int(lvl)) for h, lvl in zip(hierarchies, out["node_tuple"], strict=True)}
    specs = {c.name: c for c in policy.columns}
    columns = []
    for col in out["source_columns"]:
        spec = specs.get(col)
        if spec is None or (spec.role == "identifier" and spec.action == "drop"):
            continue
        columns.append({"name": col, "description": _describe(spec, by_name)})
    model: dict[str, Any] = {
        "name": name,
        "description": (
            f"{policy.source} anonymised by sqlanon (policy {policy_name}, node {node}): quasi-identifiers "
            "generalised, identifiers dropped or masked, and the records of every class that breaks the "
            "policy removed. The tests below are the policy's requirements."
        ),
        "columns": columns,
        "data_tests": _tests(policy, reference),
    }
    doc: dict[str, Any] = {"version": 2, "models": [model]}
    if declare is not None:
        doc["sources"] = [{"name": declare[0], "schema": declare[0], "tables": [{"name": declare[1]}]}]
    files[yml_path] = f"# {MARK} from {policy_name}; re-running it rewrites this file.\n" + yaml.safe_dump(
        doc, sort_keys=False, allow_unicode=True, width=100
    )
    header = (
        f"{{# {MARK} (sqlanon {_version()}): a copy of its dbt package's macros; re-run it to update. #}}\n"
    )
    for src in sorted((package_dir() / "macros").glob("*.sql")):
        files[project.macros / "sqlanon" / src.name] = header + src.read_text(encoding="utf-8")
    return files


def check_writes(project: Project, files: dict[Path, str], replace: bool) -> dict[Path, str]:
    """What each write will do (``wrote``, ``updated``, ``unchanged``, ``replaced``); refuses,
    before anything is written, a file sqlanon did not write (without ``replace``) and a model of
    the same name elsewhere in the project."""
    status: dict[Path, str] = {}
    for path in files:
        if path.suffix == ".sql" and path.parent == project.models and project.models.is_dir():
            for other in project.models.rglob(path.name):
                if other != path:
                    raise SqlanonError(
                        f"--project: a model named {path.stem!r} already exists at "
                        f"{other.relative_to(project.root)}; choose another target name"
                    )
    for path, text in files.items():
        shown = path.relative_to(project.root)
        if not path.exists():
            status[path] = "wrote"
            continue
        if not path.is_file():
            raise SqlanonError(f"--project: {shown} exists and is not a file")
        old = path.read_text(encoding="utf-8", errors="replace")
        if old == text:
            status[path] = "unchanged"
        elif MARK in old.split("\n", 1)[0]:
            status[path] = "updated"
        elif replace:
            status[path] = "replaced"
        else:
            raise SqlanonError(
                f"--project: {shown} exists and was not written by sqlanon dbt; "
                "pass --replace to overwrite it"
            )
    return status


def write_project(
    be: Backend,
    policy: Policy,
    project_dir: str | Path,
    *,
    levels: str | None = None,
    source: str | None = None,
    ref: str | None = None,
    replace: bool = False,
    algorithm: str | None = None,
    metric: str | None = None,
    policy_name: str = "a policy mapping",
    progress: Any = None,
) -> dict[str, Any]:
    """Search, then write the model, its YAML and the macros into the project (see the module)."""
    project = read_project(project_dir)
    if policy.target is None:
        raise SqlanonError("target: the policy names no target; its name is the dbt model's name")
    if not _NAME.match(policy.target.name):
        raise SqlanonError(
            f"target: {policy.target.name!r} is not a dbt model name (letters, digits, _); rename the target"
        )
    model_jinja, reference, pair = source_jinja(policy, source, ref)
    yml_path = project.models / f"{policy.target.name}.yml"
    declare = pair if pair is not None and pair not in _declared_sources(project, yml_path) else None
    out, hierarchies, sql = release_select(
        be, policy, levels=levels, algorithm=algorithm, metric=metric, progress=progress
    )
    quoted = Relation(PLACEHOLDER).table().sql(dialect=be.dialect)
    if quoted not in sql:
        raise SqlanonError("dbt: the release does not read its source")  # pragma: no cover
    sql = _jinja_safe(sql).replace(quoted, model_jinja)
    src_cols = [c.name for c in be.require_columns(policy.source, "source")]
    info = dict(
        out, node_tuple=tuple(out["node"].get(h.column, 0) for h in hierarchies), source_columns=src_cols
    )
    files = project_files(
        project,
        policy,
        info,
        hierarchies,
        sql,
        reference=reference,
        declare=declare,
        policy_name=policy_name,
    )
    status = check_writes(project, files, replace)
    for path, text in files.items():
        if status[path] != "unchanged":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    return {
        "project": str(project.root),
        "model": policy.target.name,
        "node": out["node"],
        "source": model_jinja,
        "materialized": policy.publish_as,
        "suppressed_records": out["suppressed_records"],
        "tests": [next(iter(t)) for t in _tests(policy, reference)],
        "files": [{"path": str(p.relative_to(project.root)), "status": status[p]} for p in files],
    }
