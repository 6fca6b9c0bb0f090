from pathlib import Path
import pytest
from tests.conftest import TestDB
from tests.helpers import cli, cli_json, write_policy

NAMES = ["a\nb", "c*/d", "e--f", "g$$h", "i`j", "k'l", "m\\n", "x\u202ey", "{{ p }}", "q\x00"[:1] + "q"]

@pytest.mark.parametrize("as_", ["view", "table"])
def test_explore(db: TestDB, tmp_path: Path, as_: str) -> None:
    cols = NAMES[:6]
    rows = [(f"v{i%3}'; DROP--", i % 2, "p*/x", "u", f"s{i%2}\n$$", i) for i in range(12)]
    db.load("t$$x", cols, rows, ["VARCHAR", "INTEGER", "VARCHAR", "VARCHAR", "VARCHAR", "INTEGER"])
    pol = {
        "source": f'{db.schema}."t$$x"',
        "target": {"schema": db.schema, "name": "o$$*/--\n"},
        "columns": {
            cols[0]: {"role": "quasi"},
            cols[1]: {"role": "quasi"},
            cols[2]: {"role": "insensitive"},
            cols[3]: {"role": "identifier", "action": "mask"},
            cols[4]: {"role": "sensitive"},
            cols[5]: {"role": "insensitive"},
        },
        "privacy": {"k": 2, "l": {cols[4]: 2}},
        "publish": {"as": as_},
    }
    path = write_policy(tmp_path, pol)
    for cmd in (["assess"], ["anonymise"], ["evaluate"]):
        code, out, err = cli(*cmd, str(path), "--db", db.url)
        print(cmd, code, err[-400:])
    code, out, err = cli("compile", str(path), "--db", db.url, "--dialect", "spark")
    print("spark", code, err[-300:], out[:3000])
    code, out, err = cli("report", str(path), "--db", db.url, "--out", str(tmp_path / "r.html"))
    print("report", code, err[-400:])
    print(db.relations())
