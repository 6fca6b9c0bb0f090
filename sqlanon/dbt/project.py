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
import os
import re
from pathlib import Path
from typing import Any

import sqlglot
import yaml
from sqlglot import exp

from sqlanon.dbt import files
from sqlanon.dbt.macros import package_dir
from sqlanon.engines import Backend
from sqlanon.errors import SqlanonError
from sqlanon.lattice import Levels, build_hierarchies, parse_levels
from sqlanon.measure.columns import check_columns
from sqlanon.measure.tcloseness_hier import hierarchy_of
from sqlanon.policy import ColumnSpec, Policy
from sqlanon.presence import estimated_k
from sqlanon.profitability import profitability_min_size
from sqlanon.publish import anonymise
from sqlanon.relation import Relation
from sqlanon.safepub import refuse_dbt
from sqlanon.sql.compile import to_sql
from sqlanon.transform.hierarchy import Hierarchy
from sqlanon.transform.release import release_context

MARK = "written by sqlanon dbt"
PLACEHOLDER = "__sqlanon_source__"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclasses.dataclass(frozen=True)
class Project:
    """A dbt project's folder and the paths its dbt_project.yml names, every link resolved: each
    lies under the (resolved) root, so nothing is written outside it."""

    root: Path
    models: Path
    macros: Path


def read_project(path: str | Path) -> Project:
    if "\0" in str(path):
        raise SqlanonError("--project: the path holds a NUL byte")
    given = Path(path)
    if not given.is_dir():
        raise SqlanonError(f"--project: {str(path)!r} is not a directory")
    conf = given / "dbt_project.yml"
    if not conf.is_file():
        raise SqlanonError(f"--project: {str(path)!r} is not a dbt project (it has no dbt_project.yml)")
    try:
        data = yaml.safe_load(conf.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise SqlanonError(f"--project: {conf} does not parse as YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict) or not data.get("name"):
        raise SqlanonError(f"--project: {conf} names no project (a 'name' key)")
    root = given.resolve()
    paths = {}
    for key, default in (("model-paths", "models"), ("macro-paths", "macros")):
        value = data.get(key) or [default]
        if not isinstance(value, list) or not value or not isinstance(value[0], str) or not value[0]:
            raise SqlanonError(f"--project: {conf}: {key} should be a list of folders")
        folder = value[0]
        if "\0" in folder or os.path.isabs(folder):
            raise SqlanonError(
                f"--project: {conf}: {key}: {folder!r} is not a folder relative to the project"
            )
        paths[key] = files.inside(root, root / folder, f"{key} {folder!r}")
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
    for path in files.walk_files(project.models):
        if path == skip or path.suffix not in (".yml", ".yaml") or path.is_symlink():
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


def release_select(
    be: Backend,
    policy: Policy,
    *,
    levels: Levels | None,
    algorithm: str | None,
    metric: str | None,
    progress: Any = None,
) -> tuple[dict[str, Any], list[Hierarchy], str]:
    """Search (or take ``levels``) as ``anonymise --dry-run`` does, and return its result, the
    hierarchies and the release's SELECT for the connection's dialect, reading ``PLACEHOLDER``."""
    # A hashed or perturbed column needs a secret key at every build; dbt has no place for it that
    # the model's readers cannot see (compiled SQL, logs), so such a release is published by sqlanon.
    hashed = [c.name for c in policy.identifiers if c.action == "hash"]
    if hashed:
        raise SqlanonError(
            f"columns.{hashed[0]}.action: hash needs the secret key, which a dbt model cannot hold "
            "unseen; use mask or drop for a dbt model (or publish with sqlanon anonymise)"
        )
    if policy.perturbed:
        raise SqlanonError(
            f"columns.{policy.perturbed[0].name}.perturb: perturbation needs the secret key, which a dbt "
            "model cannot hold unseen; publish it with sqlanon anonymise (a table)"
        )
    refuse_dbt(policy.privacy.dp)  # SafePub: a sample drawn once (sqlanon.safepub)
    hierarchies = build_hierarchies(policy, check_columns(be, policy))
    node = None
    if levels is not None:
        node = parse_levels(levels, [h.column for h in hierarchies], [h.height for h in hierarchies])
    out = anonymise(
        be, policy, dry_run=True, levels=node, algorithm=algorithm, metric=metric, progress=progress
    )
    node = tuple(out["node"].get(h.column, 0) for h in hierarchies)
    src = be.require_columns(policy.source, "source")
    stand_in = Relation(PLACEHOLDER)
    ctx = release_context(
        dataclasses.replace(policy, source=stand_in), hierarchies, node, [c.name for c in src]
    )
    sql = to_sql("publish/_release", be.dialect, kind="select", **ctx)
    # Laid out for people to read (the same statement: parsed and generated again in its dialect).
    sql = sqlglot.parse_one(sql, read=be.dialect).sql(dialect=be.dialect, pretty=True)
    return out, hierarchies, sql


def _describe(spec: ColumnSpec, by_name: dict[str, tuple[Hierarchy, int]]) -> str:
    if spec.role == "identifier":
        return "Identifier, masked: every value is '*'."
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
        if r.estimator != "shannon":  # ARX's Grassberger estimate, as the policy's check reads it
            args["estimator"] = r.estimator
        tests.append({"sqlanon_l_diversity": {"arguments": args}})
    for r in policy.privacy.t:
        args = {"quasi_identifiers": list(qis), "sensitive": r.attribute, "t": r.t, "measure": r.measure}
        order = policy.column(r.attribute).order
        if order:
            args["order"] = list(order)
        args["reference"] = reference  # t against the source's distribution, as sqlanon verifies
        if (h := hierarchy_of(policy, r.attribute)) is not None:  # emd-hierarchical's ground distance
            args["hierarchy"] = {v: [*labels[:-1], "*"] for v, labels in h.table.items()}  # root as *
        tests.append({"sqlanon_t_closeness": {"arguments": args}})
    for lk in policy.privacy.likeness:  # p(w) the source's, as for t
        args = {"quasi_identifiers": list(qis), "sensitive": lk.attribute}
        if lk.model == "delta-disclosure":
            args["delta"] = lk.bound
        else:
            args.update(beta=lk.bound, kind=lk.model.removeprefix("beta-"))
        args["reference"] = reference
        name = "sqlanon_delta_disclosure" if lk.model == "delta-disclosure" else "sqlanon_beta_likeness"
        tests.append({name: {"arguments": args}})
    if (k_game := profitability_min_size(policy.privacy)) > 1:  # Wan et al.'s no-attack rule: a size
        tests.append({"sqlanon_k_anonymity": {"arguments": {"quasi_identifiers": list(qis), "k": k_game}}})
    if (k_est := estimated_k(policy)) is not None:  # ARX's estimated k-map: k'-anonymity (sqlanon.presence)
        tests.append({"sqlanon_k_anonymity": {"arguments": {"quasi_identifiers": list(qis), "k": k_est}}})
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
    materialized: str | None = None,
) -> dict[Path, str]:
    """Every file ``sqlanon dbt`` writes, by path, with its text. Every name in it (the policy's
    file, the source, columns, labels, values) is text to dbt: comments through ``files.one_line``,
    YAML strings through ``files.jinja_doc``; ``sql`` is already Jinja-safe."""
    assert policy.target is not None
    name = policy.target.name
    paths = plan_paths(project, name)
    model_path, yml_path = list(paths)[:2]
    node = ", ".join(f"{k}={v}" for k, v in out["node"].items())
    materialized = materialized or policy.publish_as
    files_: dict[Path, str] = {}
    files_[model_path] = (
        f"-- {MARK} from {files.one_line(policy_name)}: the release of {files.one_line(str(policy.source))} "
        f"at the node {files.one_line(node)}.\n"
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
    # A test's reference is Jinja that dbt is meant to run (source('s', 't') of validated names).
    doc = files.jinja_doc(doc, keep=frozenset({"reference"}))
    files_[yml_path] = (
        f"# {MARK} from {files.one_line(policy_name)}; re-running it rewrites this file.\n"
        + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
    )
    header = (
        f"{{# {MARK} (sqlanon {_version()}): a copy of its dbt package's macros; re-run it to update. #}}\n"
    )
    for path, kind in paths.items():
        if kind == "macro":
            files_[path] = header + (package_dir() / "macros" / path.name).read_text(encoding="utf-8")
    return files_


#: The first line of each kind of file sqlanon writes, exactly (fields cannot hold a newline): a
#: file is sqlanon's, and rewritten without ``--replace``, only when its first line matches.
HEADERS = {
    "model": re.compile(r"-- written by sqlanon dbt from .+: the release of .+ at the node .*\."),
    "yml": re.compile(r"# written by sqlanon dbt from .+; re-running it rewrites this file\."),
    "macro": re.compile(
        r"\{# written by sqlanon dbt \(sqlanon [^\s()]+\): a copy of its dbt package's macros; "
        r"re-run it to update\. #\}"
    ),
}


def plan_paths(project: Project, name: str) -> dict[Path, str]:
    """The files sqlanon dbt writes for the model ``name`` and their kinds (model and yml first),
    each under the project's root; refuses a name or path the file system would refuse."""
    macros = files.inside(project.root, project.macros / "sqlanon", "macro-paths' folder sqlanon")
    plan = {project.models / f"{name}.sql": "model", project.models / f"{name}.yml": "yml"}
    for src in sorted((package_dir() / "macros").glob("*.sql")):
        plan[macros / src.name] = "macro"
    for path in plan:
        shown = str(path.relative_to(project.root))
        limit = files.name_max(path.parent)
        if len(os.fsencode(path.name)) > limit:
            raise SqlanonError(
                f"target: {name[:40]}...: too long for a file name here ({len(name)} characters, "
                f"at most {limit - 4}); rename the target"
            )
        if len(os.fsencode(path)) >= 4096:
            raise SqlanonError(f"--project: {shown[:60]}...: the path is too long for the file system")
        folder = path.parent
        while folder != project.root:
            if folder.exists() and not folder.is_dir():
                raise SqlanonError(f"--project: {folder.relative_to(project.root)} is not a folder")
            folder = folder.parent
    return plan


def check_existing(project: Project, plan: dict[Path, str], replace: bool) -> dict[Path, str | None]:
    """Before the search: the text of each planned file that exists (None where it does not).
    Refuses a link, a file sqlanon did not write (without ``replace``) and a model of the same
    name elsewhere in the project."""
    model = next(iter(plan))
    for other in files.walk_files(project.models):
        if other.name == model.name and other != model:
            raise SqlanonError(
                f"--project: a model named {model.stem!r} already exists at "
                f"{other.relative_to(project.root)}; choose another target name"
            )
    olds: dict[Path, str | None] = {}
    for path, kind in plan.items():
        shown = str(path.relative_to(project.root))
        old = files.existing(path, shown)
        if old is not None and not replace and not HEADERS[kind].fullmatch(old.split("\n", 1)[0]):
            raise SqlanonError(
                f"--project: {shown} exists and was not written by sqlanon dbt; "
                "pass --replace to overwrite it"
            )
        olds[path] = old
    return olds


def _status(old: str | None, text: str, kind: str) -> str:
    if old is None:
        return "wrote"
    if old == text:
        return "unchanged"
    return "updated" if HEADERS[kind].fullmatch(old.split("\n", 1)[0]) else "replaced"


def materialization(policy: Policy, dialect: str) -> str:
    """How dbt builds the model: the policy's form, but a table on PostgreSQL. There a dbt view is a
    plain view of the release's SELECT, none of the hardening of a view sqlanon publishes
    (docs/security.md): every role reads its definition in ``pg_views`` (a map hierarchy's raw
    values), and a reader's leaky function in WHERE ran on every row before the suppression, the
    suppressed records' sensitive values included (task A, session 8). DuckDB and Spark have no
    access control: whoever reads a view there can read its source."""
    return "table" if dialect == "postgres" else policy.publish_as


def _source_refs(sql: str, dialect: str) -> int:
    """How many times the release reads the placeholder (as a table or a column's qualifier)."""
    tree = sqlglot.parse_one(sql, read=dialect)
    tables = sum(1 for t in tree.find_all(exp.Table) if t.name == PLACEHOLDER and not t.db)
    return tables + sum(1 for c in tree.find_all(exp.Column) if c.table == PLACEHOLDER)


def write_project(
    be: Backend,
    policy: Policy,
    project_dir: str | Path,
    *,
    levels: Levels | None = None,
    source: str | None = None,
    ref: str | None = None,
    replace: bool = False,
    algorithm: str | None = None,
    metric: str | None = None,
    policy_name: str = "a policy mapping",
    progress: Any = None,
) -> dict[str, Any]:
    """Search, then write the model, its YAML and the macros into the project (see the module).
    Everything that can be refused without the search (the project's paths, the target's name, the
    files in the way) is refused before it; files and folders are created only when written."""
    project = read_project(project_dir)
    if policy.target is None:
        raise SqlanonError("target: the policy names no target; its name is the dbt model's name")
    if not _NAME.match(policy.target.name):
        raise SqlanonError(
            f"target: {policy.target.name!r} is not a dbt model name (letters, digits, _); rename the target"
        )
    model_jinja, reference, pair = source_jinja(policy, source, ref)
    plan = plan_paths(project, policy.target.name)
    olds = check_existing(project, plan, replace)
    yml_path = list(plan)[1]
    declare = pair if pair is not None and pair not in _declared_sources(project, yml_path) else None
    out, hierarchies, sql = release_select(
        be, policy, levels=levels, algorithm=algorithm, metric=metric, progress=progress
    )
    quoted = Relation(PLACEHOLDER).table().sql(dialect=be.dialect)
    if sql.count(quoted) != _source_refs(sql, be.dialect) or quoted not in sql:
        raise SqlanonError(
            f"dbt: a name or label of the policy holds {PLACEHOLDER!r}, "
            "the stand-in for the source; rename it"
        )
    sql = files.jinja_text(sql).replace(quoted, model_jinja)
    src_cols = [c.name for c in be.require_columns(policy.source, "source")]
    info = dict(
        out, node_tuple=tuple(out["node"].get(h.column, 0) for h in hierarchies), source_columns=src_cols
    )
    texts = project_files(
        project,
        policy,
        info,
        hierarchies,
        sql,
        reference=reference,
        declare=declare,
        policy_name=policy_name,
        materialized=materialization(policy, be.dialect),
    )
    status = {path: _status(olds[path], text, plan[path]) for path, text in texts.items()}
    files.write_all(
        project.root,
        {p: t for p, t in texts.items() if status[p] != "unchanged"},
        {p for p in texts if olds[p] is not None},
    )
    return {
        "project": str(project.root),
        "model": policy.target.name,
        "node": out["node"],
        "source": model_jinja,
        "materialized": materialization(policy, be.dialect),
        "suppressed_records": out["suppressed_records"],
        "tests": [next(iter(t)) for t in _tests(policy, reference)],
        "files": [{"path": str(p.relative_to(project.root)), "status": status[p]} for p in texts],
    }
