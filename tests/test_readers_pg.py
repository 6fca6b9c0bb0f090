"""A PostgreSQL release that a reader granted SELECT on it (and nothing else) can query safely
(issue 32, *Readers*). Each test runs a reviewer's attack as that reader, an ordinary login role
with a schema of its own, against a release of a 200-row table whose four unique outliers the
release suppresses; the outliers' diseases and postcodes (SENTINELS) occur in no released row, so
seeing one anywhere is a leak. The postcode hierarchy is a map written in the policy, so a
definition that compiled it inline would list the outliers' raw postcodes."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import TestDB, _make_db
from tests.helpers import cli, cli_json, write_policy

OUTLIERS = [(12, "55501", "HIV"), (88, "99901", "Ebola"), (93, "99902", "Plague"), (97, "99903", "Anthrax")]
SENTINELS = ["HIV", "Ebola", "Plague", "Anthrax", "55501", "99901", "99902", "99903"]
REGULAR_ZIPS = ["47601", "47602", "47603", "47604"]
DISEASES = ["Flu", "Cold", "Asthma", "Diabetes"]
VIEW = '"main"."patients_anon"'


def _rows() -> list[list[Any]]:
    rows = [[i, 20 + i % 40, REGULAR_ZIPS[i % 4], DISEASES[(i // 4) % 4]] for i in range(196)]
    rows += [[196 + j, a, z, d] for j, (a, z, d) in enumerate(OUTLIERS)]
    return rows


def _policy(grant: list[str] | None = None, source: str = "main.patients") -> dict:
    zips = {z: [z[:3] + "**", "*"] for z in REGULAR_ZIPS + [z for _, z, _ in OUTLIERS]}
    pol: dict = {
        "source": source,
        "target": "main.patients_anon",
        "columns": {
            "id": {"role": "identifier"},
            "age": {"role": "quasi", "hierarchy": {"interval": {"widths": [5, 40]}}},
            "zip": {"role": "quasi", "hierarchy": {"map": zips}},
            "disease": {"role": "sensitive"},
        },
        "privacy": {"k": 5, "l": {"disease": 2}, "suppression": 0.1},
    }
    if grant is not None:
        pol["publish"] = {"grant": grant}
    return pol


@pytest.fixture
def clinic(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[TestDB, str]]:
    """The table, and an analyst: LOGIN, a schema of its own, USAGE on the release's schema
    (the DBA's grant), no privilege on the source."""
    for db in _make_db("postgres", request, tmp_path):
        db.load(
            "patients", ["id", "age", "zip", "disease"], _rows(), ["INTEGER", "INTEGER", "VARCHAR", "VARCHAR"]
        )
        role = "analyst_" + uuid.uuid4().hex[:8]
        db.sql(f"CREATE ROLE {role} LOGIN")
        db.sql(f"CREATE SCHEMA {role} AUTHORIZATION {role}")
        db.sql(f"GRANT USAGE ON SCHEMA main TO {role}")
        try:
            yield db, role
        finally:
            db.sql(f"DROP OWNED BY {role} CASCADE")
            db.sql(f"DROP ROLE {role}")


def _as(db: TestDB, role: str) -> psycopg.Connection:
    assert db._pg is not None
    info = f"host={db._pg.sockdir} port={db._pg.port} user={role} dbname={db._dbname}"
    return psycopg.connect(info, autocommit=True)


def _publish(db: TestDB, tmp_path: Path, policy: dict, *args: str) -> dict:
    path = write_policy(tmp_path, policy)
    return cli_json("anonymise", str(path), "--db", db.url, "--levels", "age=1,zip=1", *args)


def _released(db: TestDB) -> list[tuple]:
    return db.sql(f"SELECT * FROM {VIEW}")


def _no_sentinel(text: str) -> None:
    hits = [s for s in SENTINELS if s in text]
    assert not hits, f"suppressed values {hits} seen in: {text[:400]}"


def test_the_release_suppresses_the_outliers(clinic: tuple[TestDB, str], tmp_path: Path) -> None:
    db, role = clinic
    out = _publish(db, tmp_path, _policy([role]))
    rows = _released(db)
    assert out["published"]["suppressed_records"] == 4 and len(rows) == 196
    _no_sentinel(repr(rows))
    with _as(db, role) as con:  # the reader reads the release, and only the release
        assert len(con.execute(f"SELECT * FROM {VIEW}").fetchall()) == 196
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            con.execute('SELECT * FROM "main"."patients"')
        for (name,) in db.sql("SELECT relname FROM pg_class WHERE relname LIKE 'sqlanon_rel_%'"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                con.execute(f'SELECT * FROM "main"."{name}"')
    public_exec = db.sql(
        "SELECT bool_or(has_function_privilege('public', p.oid, 'EXECUTE')) FROM pg_proc p "
        "WHERE p.proname LIKE 'sqlanon_fn_%'"
    )[0][0]
    assert public_exec is False


def _leaky_count(con: Any, role: str, rel: str) -> tuple[Any, list[str]]:
    """A reader's cheap leaky function in ``rel``'s WHERE (it RAISEs a NOTICE with every row it is
    given, before the view's own filters if the planner pushes it down): the count, and the notices."""
    seen: list[str] = []
    con.add_notice_handler(lambda d: seen.append(str(d.message_primary)))
    con.execute(
        f"CREATE FUNCTION {role}.leak(a anyelement, b text, c text) RETURNS boolean LANGUAGE plpgsql "
        "IMMUTABLE COST 0.0001 AS $$ BEGIN RAISE NOTICE 'row % % %', a, b, c; RETURN true; END $$"
    )
    return con.execute(f"SELECT count(*) FROM {rel} WHERE {role}.leak(age, zip, disease)").fetchone(), seen


def test_a_leaky_function_sees_only_released_rows(clinic: tuple[TestDB, str], tmp_path: Path) -> None:
    db, role = clinic
    _publish(db, tmp_path, _policy([role]))
    with _as(db, role) as con:
        n, seen = _leaky_count(con, role, VIEW)
    assert n == (196,)
    assert len(seen) == 196, len(seen)
    _no_sentinel("\n".join(seen))


def test_errors_show_no_hidden_row(clinic: tuple[TestDB, str], tmp_path: Path) -> None:
    """No CREATE needed: a cast that fails on a hidden row names its value in the error."""
    db, role = clinic
    _publish(db, tmp_path, _policy([role]))
    published = ", ".join(f"'{d}'" for d in DISEASES)
    with _as(db, role) as con:
        try:
            con.execute(
                f"SELECT count(*) FROM {VIEW} WHERE CASE WHEN disease NOT IN ({published}) "
                "THEN disease::int END = 1"
            ).fetchone()
        except psycopg.Error as e:
            _no_sentinel(str(e))
            raise AssertionError(f"a released row failed the cast: {e}") from None


def _plan(con: psycopg.Connection, where: str) -> str:
    rows = con.execute(f"EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF) SELECT * FROM {VIEW} {where}")
    return "\n".join(r[0] for r in rows.fetchall())


def test_explain_analyze_counts_no_hidden_row(clinic: tuple[TestDB, str], tmp_path: Path) -> None:
    """EXPLAIN ANALYZE as the reader: no scan of the source (it counted all 200 rows, even through
    security_barrier), and a prefix search (``^@`` is leakproof) on a hidden value gives the very
    plan and counts that a prefix matching nothing gives."""
    db, role = clinic
    _publish(db, tmp_path, _policy([role]))
    with _as(db, role) as con:
        plain = _plan(con, "")
        assert "patients" not in plain.replace("patients_anon", "") and "rows=200" not in plain, plain
        counts = lambda text: re.findall(r"rows=(\d+)", text)  # noqa: E731
        for prefix in ("HI", "Eb", "555", "999"):
            col = "zip" if prefix[0].isdigit() else "disease"
            probe = _plan(con, f"WHERE {col} ^@ '{prefix}'")
            blank = _plan(con, f"WHERE {col} ^@ 'zz'")
            assert counts(probe) == counts(blank), (probe, blank)
            assert "patients" not in probe.replace("patients_anon", ""), probe


def test_no_definition_a_reader_can_read_holds_a_value(clinic: tuple[TestDB, str], tmp_path: Path) -> None:
    """pg_get_viewdef, pg_proc.prosrc and pg_get_functiondef are readable by every role."""
    db, role = clinic
    _publish(db, tmp_path, _policy([role]))
    with _as(db, role) as con:
        viewdef = con.execute(f"SELECT pg_get_viewdef('{VIEW}'::regclass)").fetchone()[0]
        views = con.execute("SELECT string_agg(definition, ' ') FROM pg_views WHERE schemaname = 'main'")
        procs = con.execute(
            "SELECT string_agg(p.prosrc || ' ' || pg_get_functiondef(p.oid), ' ') FROM pg_proc p "
            "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'main'"
        )
        text = viewdef + str(views.fetchone()[0]) + str(procs.fetchone()[0])
    _no_sentinel(text)
    assert "SECURITY DEFINER" in text and "search_path" in text  # the function is there, nameless


def test_an_operator_on_the_dbas_path_is_not_used(clinic: tuple[TestDB, str], tmp_path: Path) -> None:
    """The reader's exact-type ``=`` for varchar, in a schema on the DBA's search path, would beat
    pg_catalog's (text, text) in the map hierarchy's comparisons: it would run as the DBA (here it
    grants the source to the reader and records its arguments) and stay bound into the release."""
    db, role = clinic
    with _as(db, role) as con:
        con.execute(f"CREATE TABLE {role}.log (who text, a text, b text)")
        con.execute(f"GRANT INSERT ON {role}.log TO PUBLIC")
        con.execute(
            f"CREATE FUNCTION {role}.eq(a varchar, b varchar) RETURNS boolean LANGUAGE plpgsql AS $$ "
            f"BEGIN INSERT INTO {role}.log VALUES (current_user, a, b); "
            f"BEGIN EXECUTE 'GRANT SELECT ON main.patients TO {role}'; EXCEPTION WHEN OTHERS THEN NULL; END; "
            "RETURN a::text = b::text; END $$"
        )
        con.execute(f"CREATE OPERATOR {role}.= (LEFTARG = varchar, RIGHTARG = varchar, FUNCTION = {role}.eq)")
    url = db.url + f"&options=-c%20search_path%3D{role}%2Cmain"
    path = write_policy(tmp_path, _policy([role]))
    out = cli_json("anonymise", str(path), "--db", url, "--levels", "age=1,zip=1")
    assert out["published"]["suppressed_records"] == 4
    with _as(db, role) as con:
        assert len(con.execute(f"SELECT * FROM {VIEW}").fetchall()) == 196
    log = db.sql(f"SELECT * FROM {role}.log")
    assert log == [], log[:3]
    granted = db.sql(f"SELECT has_table_privilege('{role}', 'main.patients', 'SELECT')")[0][0]
    assert granted is False


def test_an_unqualified_source_resolves_along_the_users_path(
    clinic: tuple[TestDB, str], tmp_path: Path
) -> None:
    db, role = clinic
    url = db.url + "&options=-c%20search_path%3Dmain"
    pol = _policy([role], source="patients")
    pol["target"] = "patients_anon"
    out = cli_json("anonymise", str(write_policy(tmp_path, pol)), "--db", url, "--levels", "age=1,zip=1")
    assert out["published"]["suppressed_records"] == 4 and len(_released(db)) == 196


def test_replace_keeps_options_and_grants_and_drops_the_old_function(
    clinic: tuple[TestDB, str], tmp_path: Path
) -> None:
    db, role = clinic
    _publish(db, tmp_path, _policy([role]))
    other = "other_" + uuid.uuid4().hex[:8]
    db.sql(f"CREATE ROLE {other}")
    try:
        db.sql(f"ALTER VIEW {VIEW} SET (security_barrier = true)")
        db.sql(f"GRANT SELECT ON {VIEW} TO {other}")
        _publish(db, tmp_path, _policy([role]), "--replace")
        opts = db.sql("SELECT reloptions::text FROM pg_class WHERE relname = 'patients_anon'")[0][0]
        assert "security_barrier=true" in str(opts)
        for who in (role, other):
            assert db.sql(f"SELECT has_table_privilege('{who}', '{VIEW}', 'SELECT')")[0][0] is True
            execute = db.sql(
                f"SELECT bool_and(has_function_privilege('{who}', p.oid, 'EXECUTE')) FROM pg_proc p "
                "WHERE p.proname LIKE 'sqlanon_fn_%'"
            )
            assert execute[0][0] is True
        fns = db.sql("SELECT count(*) FROM pg_proc WHERE proname LIKE 'sqlanon_fn_%'")[0][0]
        tabs = db.sql("SELECT count(*) FROM pg_class WHERE relname LIKE 'sqlanon_rel_%'")[0][0]
        assert (fns, tabs) == (1, 1)  # the old view's function and row type went with it
        with _as(db, role) as con:
            assert len(con.execute(f"SELECT * FROM {VIEW}").fetchall()) == 196
    finally:
        db.sql(f"DROP OWNED BY {other}")
        db.sql(f"DROP ROLE {other}")


def test_an_unknown_role_is_refused_before_the_search(clinic: tuple[TestDB, str], tmp_path: Path) -> None:
    db, _role = clinic
    before = db.snapshot()
    path = write_policy(tmp_path, _policy(["no_such_role_x"]))
    code, out, err = cli("anonymise", str(path), "--db", db.url)
    assert code == 2, (code, out, err)
    assert err.strip() == "error: publish.grant: no role 'no_such_role_x' on this database; create it first"
    assert db.snapshot() == before


def test_the_output_says_what_a_view_cannot_hide(clinic: tuple[TestDB, str], tmp_path: Path) -> None:
    db, role = clinic
    out = _publish(db, tmp_path, _policy([role]))
    notes = " ".join(out["notes"])
    assert "new release at every read" in notes and "--as table" in notes
    assert json.dumps(out).count("new release at every read") == 1


def test_a_duckdb_release_says_the_file_has_no_access_control(duck_patients: TestDB, tmp_path: Path) -> None:
    pol = {
        "source": "main.patients",
        "target": "main.patients_out",
        "columns": {"Age": {"role": "quasi", "hierarchy": {"interval": {"widths": [10, 20]}}}},
        "privacy": {"k": 2},
    }
    out = cli_json("anonymise", str(write_policy(tmp_path, pol)), "--db", duck_patients.url, "--as", "table")
    assert any("no access control" in n for n in out["notes"])
    assert not any("every read" in n for n in out["notes"])  # a table is a snapshot


# -- issue 32, Readers, second review: the session, the function's settings, access that outlives the view --


@pytest.mark.parametrize("where", ["public", "own"])
def test_a_readers_operator_never_runs_in_a_dbas_session(
    clinic: tuple[TestDB, str], tmp_path: Path, where: str
) -> None:
    """An exact-type ``=`` for (oid, regtype) beats pg_catalog's (oid, oid) in the driver's
    connect-time probes (SQLAlchemy's hstore lookup ``t.oid = to_regtype(...)``): in ``public``
    (on every default path) or in the reader's own schema put on the DBA's path by a database
    default, it ran as the DBA before sqlanon fixed its path and copied a hidden age into a
    sequence the reader owns."""
    db, role = clinic
    db.sql(f"GRANT CREATE ON SCHEMA public TO {role}")
    schema = "public" if where == "public" else role
    with _as(db, role) as con:
        con.execute(f"CREATE SEQUENCE {role}.exfil")
        con.execute(f"GRANT UPDATE ON SEQUENCE {role}.exfil TO PUBLIC")
        con.execute(
            f"CREATE FUNCTION {role}.f(a oid, b regtype) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN "
            f"BEGIN PERFORM pg_catalog.setval('{role}.exfil', "
            "(SELECT age FROM main.patients WHERE id = 197)); "
            "EXCEPTION WHEN OTHERS THEN NULL; END; RETURN a OPERATOR(pg_catalog.=) b::oid; END $$"
        )
        con.execute(f"CREATE OPERATOR {schema}.= (LEFTARG = oid, RIGHTARG = regtype, FUNCTION = {role}.f)")
    pol = _policy()
    if where == "own":  # the path the DBA's sessions get from the database: unqualified names resolve on it
        db.sql(f'ALTER DATABASE "{db._dbname}" SET search_path = {role}, public, main')
        pol["source"] = "patients"
    try:
        code, out, err = cli("assess", str(write_policy(tmp_path, pol)), "--db", db.url)
        assert code in (0, 1), err
        _publish(db, tmp_path, pol)
    finally:
        db.sql(f'ALTER DATABASE "{db._dbname}" RESET search_path')
    assert len(_released(db)) == 196
    assert db.sql(f"SELECT last_value, is_called FROM {role}.exfil") == [(1, False)]


def _log_messages(con: psycopg.Connection, sql: str) -> list[str]:
    seen: list[str] = []
    con.add_notice_handler(lambda d: seen.append(f"{d.message_primary} {d.message_detail} {d.context}"))
    con.execute(sql).fetchall()
    return seen


def _decoded(text: str) -> str:
    """The text, plus every Const of a printed parse tree decoded (``:constvalue 9 [ 36 0 0 0 53 ...]``)."""
    consts = re.findall(r":constvalue \d+ \[([-\d ]+)\]", text)
    return text + " ".join(bytes(int(b) % 256 for b in c.split()).decode("latin-1") for c in consts)


def test_debug_settings_print_no_constant_of_the_release(clinic: tuple[TestDB, str], tmp_path: Path) -> None:
    """``debug_print_*`` with ``client_min_messages = log`` sent the reader the parse tree of the
    function's query, with the map hierarchy's raw postcodes as constants."""
    db, role = clinic
    _publish(db, tmp_path, _policy([role]))
    with _as(db, role) as con:
        for setting in ("client_min_messages = log", "debug_print_parse = on", "debug_print_rewritten = on"):
            con.execute(f"SET {setting}")
        con.execute("SET debug_print_plan = on")
        text = _decoded("\n".join(_log_messages(con, f"SELECT count(*) FROM {VIEW}")))
    _no_sentinel(text)
    assert "sqlanon_r" not in text  # nothing of the stored query's tree at all


def _labelled(grant: list[str]) -> dict:
    """Postcode labels ending in a backslash: with standard_conforming_strings off the quote after
    it is escaped and the stored query no longer parses."""
    pol = _policy(grant)
    pol["columns"]["zip"]["hierarchy"]["map"] = {
        z: [z[:3] + "\\", "*"] for z in REGULAR_ZIPS + [z for _, z, _ in OUTLIERS]
    }
    return pol


def _error_text(e: psycopg.Error) -> str:
    d = e.diag
    return " ".join(
        str(x)
        for x in (e, d.message_detail, d.message_hint, d.context, d.internal_query, d.statement_position)
    )


def test_string_settings_change_nothing_and_errors_show_no_query(
    clinic: tuple[TestDB, str], tmp_path: Path
) -> None:
    db, role = clinic
    _publish(db, tmp_path, _labelled([role]))
    with _as(db, role) as con:
        plain = sorted(con.execute(f"SELECT * FROM {VIEW}").fetchall())
        assert any(str(r[1]).endswith("\\") for r in plain), plain[:2]
        con.execute("SET standard_conforming_strings = off")
        con.execute("SET backslash_quote = on")
        try:
            assert sorted(con.execute(f"SELECT * FROM {VIEW}").fetchall()) == plain
        except psycopg.Error as e:
            _no_sentinel(_error_text(e))
            raise AssertionError(f"the release failed under the reader's settings: {e}") from None
    # An error inside the function (here the owner renamed a source column) names no query text.
    db.sql('ALTER TABLE "main"."patients" RENAME COLUMN zip TO zip2')
    with _as(db, role) as con, pytest.raises(psycopg.Error) as info:
        con.execute(f"SELECT * FROM {VIEW}").fetchall()
    text = _error_text(info.value)
    _no_sentinel(text)
    assert "CASE" not in text.upper() and "sqlanon_r" not in text, text
    assert "sqlanon release" in str(info.value) and "42703" in str(info.value), text


def test_the_readers_session_settings_do_not_change_the_release(
    clinic: tuple[TestDB, str], tmp_path: Path
) -> None:
    """A timestamp generalised to its month: under another TimeZone (or DateStyle) the view read
    the reader's text form of it, so sweeping the offset moved rows across month ends and gave
    their times to the hour. Every reader now gets the rows the publisher verified."""
    db, role = clinic
    when = [f"2024-{m:02d}-01 0{h}:30:00+00" for m in range(2, 8) for h in range(1, 6)]
    when += [f"2024-{m:02d}-28 22:30:00+00" for m in range(2, 8) for _ in range(2)]
    rows = [[i, t, DISEASES[i % 4]] for i, t in enumerate(when)]
    db.load("visits", ["id", "ts", "disease"], rows, ["INTEGER", "TIMESTAMPTZ", "VARCHAR"])
    pol = {
        "source": "main.visits",
        "target": "main.patients_anon",
        "columns": {
            "id": {"role": "identifier"},
            "ts": {"role": "quasi", "hierarchy": {"date": ["month", "year"]}},
            "disease": {"role": "sensitive"},
        },
        "privacy": {"k": 2},
        "publish": {"grant": [role]},
    }
    cli_json("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url, "--levels", "ts=1")
    published = sorted(db.sql(f"SELECT * FROM {VIEW}"))
    assert {r[0] for r in published} == {f"2024-{m:02d}" for m in range(2, 8)}
    with _as(db, role) as con:
        for setting in (
            "TimeZone = 'Pacific/Honolulu'",
            "TimeZone = 'Asia/Kathmandu'",
            "DateStyle = 'SQL, DMY'",
            "IntervalStyle = 'sql_standard'",
            "extra_float_digits = -15",
        ):
            con.execute(f"SET {setting}")
            assert sorted(con.execute(f"SELECT * FROM {VIEW}").fetchall()) == published, setting


def _function(db: TestDB) -> str:
    (name,) = db.sql("SELECT proname FROM pg_proc WHERE proname LIKE 'sqlanon_fn_%'")[0]
    return f'"main"."{name}"()'


def test_revoking_the_view_ends_the_readers_access(clinic: tuple[TestDB, str], tmp_path: Path) -> None:
    """The function stays executable after the view's SELECT is revoked (pg_depend names it): it
    returns rows only to a session user who may read a view that reads it."""
    db, role = clinic
    _publish(db, tmp_path, _policy([role]))
    fn = _function(db)
    with _as(db, role) as con:
        assert len(con.execute(f"SELECT * FROM {fn}").fetchall()) == 196  # the same rows as the view
    db.sql(f"REVOKE SELECT ON {VIEW} FROM {role}")
    with _as(db, role) as con, pytest.raises(psycopg.errors.InsufficientPrivilege):
        con.execute(f"SELECT * FROM {fn}").fetchall()


def test_a_dropped_views_function_refuses_and_cleanup_removes_it(
    clinic: tuple[TestDB, str], tmp_path: Path
) -> None:
    db, role = clinic
    _publish(db, tmp_path, _policy([role]))
    fn = _function(db)
    # A user's own function spelt like sqlanon's (no row type of sqlanon's) is never listed.
    db.sql("CREATE FUNCTION main.sqlanon_fn_aaaaaaaaaaaa() RETURNS int LANGUAGE sql AS 'SELECT 1'")
    code, out, _err = cli("cleanup", "--db", db.url)
    assert code == 0 and "sqlanon_fn_" not in out, out  # the view still reads it
    db.sql(f"DROP VIEW {VIEW}")
    with _as(db, role) as con, pytest.raises(psycopg.errors.InsufficientPrivilege):
        con.execute(f"SELECT * FROM {fn}").fetchall()
    code, out, _err = cli("cleanup", "--db", db.url)
    assert code == 0 and fn.split('"')[3] in out and "sqlanon_rel_" in out, out
    assert "aaaaaaaaaaaa" not in out, out
    code, out, _err = cli("cleanup", "--db", db.url, "--drop")
    assert code == 0, out
    left = db.sql("SELECT proname FROM pg_proc WHERE proname LIKE 'sqlanon_fn_%' ORDER BY 1")
    assert left == [("sqlanon_fn_aaaaaaaaaaaa",)]
    assert db.sql("SELECT count(*) FROM pg_class WHERE relname LIKE 'sqlanon_rel_%'") == [(0,)]


def test_the_users_path_comes_from_the_role_and_database_settings(
    clinic: tuple[TestDB, str], tmp_path: Path
) -> None:
    """sqlanon's session starts on its own path, so the user's is read from what PostgreSQL applies
    at login, in its order: ALTER ROLE IN DATABASE beats ALTER DATABASE (here as a non-superuser)."""
    db, role = clinic
    db.sql(f"GRANT SELECT ON main.patients TO {role}")
    db.sql(f"CREATE TABLE {role}.patients (id int)")  # what the database-wide path would find first
    db.sql(f'ALTER DATABASE "{db._dbname}" SET search_path = {role}, main')
    db.sql(f'ALTER ROLE {role} IN DATABASE "{db._dbname}" SET search_path = main, {role}')
    try:
        pol = _policy()
        pol["source"] = "patients"
        url = db.url.replace(f"//{db._pg.user}@", f"//{role}@")  # type: ignore[union-attr]
        out = cli_json("assess", str(write_policy(tmp_path, pol)), "--db", url)
        assert out["source"].endswith("patients") and out["rows"] == 200, out
    finally:
        db.sql(f'ALTER ROLE {role} IN DATABASE "{db._dbname}" RESET search_path')
        db.sql(f'ALTER DATABASE "{db._dbname}" RESET search_path')


@pytest.mark.parametrize(
    ("options", "path"),
    [
        ("", None),
        ("-c search_path=a,b", "a,b"),
        ("-csearch_path=a -c work_mem=4MB", "a"),
        ("--search-path=x\\ y -c search_path=z", "z"),
        ('-c statement_timeout=5 --search_path="$user",\\ public', '"$user", public'),
    ],
)
def test_the_users_own_options_path_is_read_as_the_server_reads_it(options: str, path: str | None) -> None:
    from sqlanon.engines.pgstart import PG_START, option_setting, pg_start

    assert option_setting(options, "search_path") == path
    start = pg_start("postgresql+psycopg://u@/d?options=" + options.replace(" ", "%20").replace("$", "%24"))
    assert start is not None and start.path == path
    assert start.engine_args["connect_args"]["options"].endswith(PG_START)  # the last -c wins
