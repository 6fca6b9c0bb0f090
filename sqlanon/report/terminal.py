"""Text from the data (a source value, a label, a name) as the console prints it: every character
that is not printable (a C0 or C1 control, DEL, a line break, a bidirectional override) as a
``\\uXXXX`` escape. rich passes ESC through, so a value an attacker inserted into the source (a QI at
level 0 is printed as the release's most disclosive class) moved the operator's cursor, erased the
lines above (``ESC [1A ESC [2K``) or set the terminal's title or clipboard (OSC 0, OSC 52); a line
break in it forged a line of sqlanon's output (task A, session 8). ``sqlanon dbt`` prints names so
already (sqlanon/cli/commands.py)."""

from __future__ import annotations


def visible(text: str) -> str:
    """``text`` with each character that is not printable as ``\\uXXXX``.

    >>> visible("a\\x1b[2Kb\\nc\\u202ed é")
    'a\\\\u001b[2Kb\\\\u000ac\\\\u202ed é'
    """
    return "".join(ch if ch.isprintable() else f"\\u{ord(ch):04x}" for ch in text)
