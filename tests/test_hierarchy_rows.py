"""A sensitive attribute's hierarchy (hierarchical t-closeness, sqlanon/measure/tcloseness_hier.py)
is read by the same parser as a quasi-identifier's (sqlanon/hierarchy_rows.py), so the same file
is refused the same way, with one line naming the key, whichever role its column has. The
sensitive reader's own copy had neither the row bound nor the empty-file check."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqlanon import hierarchy_rows
from tests.conftest import TestDB
from tests.helpers import cli, write_policy

#: A file hierarchy on each role: Postcode as a quasi-identifier, Disease as the sensitive
#: attribute whose emd-hierarchical t-closeness reads it.
ROLES = {
    "quasi": ("Postcode", {"t": {}}),
    "sensitive": ("Disease", {"t": {"Disease": {"measure": "emd-hierarchical", "t": 0.9}}}),
}
ROWS = {
    "quasi": [f"{pc};{pc[:4]}*;*" for pc in ("47605", "47607", "47673", "47678", "47905", "47906", "47909")],
    "sensitive": ["Cancer;C;*", "Disease;D;*", "Flu;D;*", "Heart Disease;D;*", "Other;O;*", "More;O;*"],
}


def _policy(tmp_path: Path, role: str) -> Path:
    column, privacy = ROLES[role]
    cols: dict = {"Postcode": {"role": "quasi"}, "Age": {"role": "quasi"}, "Disease": {"role": "sensitive"}}
    cols[column] = {**cols[column], "hierarchy": {"file": "h.csv"}}
    privacy = {"k": 2, **{k: v for k, v in privacy.items() if v}}
    return write_policy(tmp_path, {"source": "main.patients", "columns": cols, "privacy": privacy})


def _one_line_error(duck_patients: TestDB, path: Path) -> str:
    code, out, err = cli("assess", str(path), "--db", duck_patients.url)
    assert code == 2 and "Traceback" not in out + err, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("role", list(ROLES))
def test_a_file_of_too_many_rows_is_refused_in_either_role(
    role: str, duck_patients: TestDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hierarchy_rows, "MAX_HIERARCHY_ROWS", 5)
    (tmp_path / "h.csv").write_text("\n".join(ROWS[role]) + "\n", encoding="utf-8")
    line = _one_line_error(duck_patients, _policy(tmp_path, role))
    column = ROLES[role][0]
    assert f"columns.{column}.hierarchy.file" in line and "more than 5 rows" in line, line


@pytest.mark.parametrize("role", list(ROLES))
def test_an_empty_file_is_refused_in_either_role(role: str, duck_patients: TestDB, tmp_path: Path) -> None:
    (tmp_path / "h.csv").write_text("\n;\n", encoding="utf-8")
    line = _one_line_error(duck_patients, _policy(tmp_path, role))
    assert f"columns.{ROLES[role][0]}.hierarchy.file" in line and "is empty" in line, line


#: Two levels above the value, where one level-1 label (P1, D) generalises to two level-2 labels.
NOT_A_TREE = {
    "quasi": ["47605;P1;A;*", "47607;P1;B;*", "47673;P2;B;*", "47678;P2;B;*", "47905;P3;B;*", "47906;P3;B;*"]
    + ["47909;P3;B;*"],
    "sensitive": ["Cancer;C;A;*", "Disease;D;A;*", "Flu;D;B;*", "Heart Disease;D;B;*"],
}


@pytest.mark.parametrize("role", list(ROLES))
def test_a_label_generalising_to_two_is_refused_alike(
    role: str, duck_patients: TestDB, tmp_path: Path
) -> None:
    (tmp_path / "h.csv").write_text("\n".join(NOT_A_TREE[role]) + "\n", encoding="utf-8")
    line = _one_line_error(duck_patients, _policy(tmp_path, role))
    assert "generalises to both 'A' and 'B' at level 2" in line, line
