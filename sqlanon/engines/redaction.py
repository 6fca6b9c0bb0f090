"""Secrets in database URLs never reach text: errors, the console, ``--json``, ``Backend.url``.

A URL carries secrets in two places: the userinfo password (``scheme://user:PASSWORD@host``) and
parameters (``?sslpassword=``, DuckDB's ``?motherduck_token=``, Spark Connect's ``/;token=``, a
Spark setting ``?spark.hadoop.fs.s3a.secret.key=``). :func:`redact` hides both, first through
SQLAlchemy's own rendering (``URL.render_as_string(hide_password=True)``: what SQLAlchemy takes for
the password is what it sends, so that is what must go), then by pattern, because a password may
hold a raw space or ``@`` that SQLAlchemy splits differently, and a driver's error message may quote
the URL inside other text. Where it cannot tell, it hides too much rather than too little.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

#: A parameter is secret when its name (decoded, any case) holds one of these. ``sslkey`` is a path,
#: not a key, but is hidden too: a false alarm costs a word of the message, a miss costs the secret.
SECRET_WORDS = ("password", "passwd", "pwd", "token", "secret", "key", "credential")
MASK = "***"

#: The userinfo password: from ``user:`` to the LAST ``@`` on the line (a raw ``@`` or space in the
#: password must not end it; what follows the real one is only the host, hidden along if need be).
_USERINFO = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]{0,31}://[^:/?#\s]{0,256}:")
#: A parameter after ``?``, ``&`` or ``;`` (raw or percent-encoded), ``=`` raw or encoded.
_PARAM = r"(?P<pre>(?:[?&;]|%26|%3[bBfF])(?P<name>[^=&;?#\s'\"]{0,256}?)(?:=|%3[dD]))(?P<val>VALUE)"
#: Inside a whole URL a value runs to the next separator; inside other text it stops at a quote or
#: a space too (the URL was quoted in a message).
_PARAM_URL = re.compile(_PARAM.replace("VALUE", r"[^&;]*"))
_PARAM_TEXT = re.compile(_PARAM.replace("VALUE", r"[^&;\s'\"]*"))
#: libpq's ``key=value`` connection strings (``password=x sslpassword='a b'``) inside messages;
#: only the names that hold a secret there (a policy error may well say ``key=...``).
CONNINFO_WORDS = ("password", "passwd", "pwd", "token", "secret")
_CONNINFO = re.compile(
    r"(?P<pre>(?:^|(?<=[\s,(]))(?P<name>[A-Za-z_][\w.]*)\s*=\s*)(?P<val>'(?:[^'\\]|\\.)*'?|[^\s,)]+)"
)
_WHOLE_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://|spark\?")


def _secret_name(name: str) -> bool:
    decoded = unquote_plus(name).lower()
    return any(w in decoded for w in SECRET_WORDS)


def _mask_param(m: re.Match[str]) -> str:
    return f"{m['pre']}{MASK}" if _secret_name(m["name"]) else m[0]


def _mask_conninfo(m: re.Match[str]) -> str:
    secret = any(w in m["name"].lower() for w in CONNINFO_WORDS)
    return f"{m['pre']}{MASK}" if secret else m[0]


def _mask_userinfo(text: str) -> str:
    """Each ``scheme://user:`` up to the last ``@`` of its line hidden; linear in the text (no
    backtracking regex), because a message may quote a long hostile name."""
    out: list[str] = []
    for line in text.split("\n"):
        last_at = line.rfind("@")
        i = 0
        while last_at >= 0 and (m := _USERINFO.search(line, i, last_at)) is not None:
            out.append(line[i : m.end()] + MASK)
            i = last_at
        out.append(line[i:])
        out.append("\n")
    return "".join(out[:-1])


def _sqlalchemy_rendering(url: str) -> str:
    """SQLAlchemy's own rendering with the password hidden; the text itself where it does not parse."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy parses (sc://, spark?...): patterns only
        return url


def redact(text: str) -> str:
    """Hide every secret of any database URL in ``text`` (errors, logs and JSON never show one).

    >>> redact("cannot connect to 'postgresql://ann:s3cr3t@db/x?password=p2'")
    "cannot connect to 'postgresql://ann:***@db/x?password=***'"
    >>> redact("postgresql://u:pa ss@h/db?sslmode=require&sslpassword=x")
    'postgresql://u:***@h/db?sslmode=require&sslpassword=***'
    >>> redact("postgresql://u:p@ss@h/db")
    'postgresql://u:***@h/db'
    >>> redact("duckdb:///x.db?motherduck_token=abc")
    'duckdb:///x.db?motherduck_token=***'
    >>> redact("sc://host:15002/;user_id=ann;token=abc")
    'sc://host:15002/;user_id=ann;token=***'
    >>> redact("spark?spark.hadoop.fs.s3a.secret.key=abc&spark.master=local")
    'spark?spark.hadoop.fs.s3a.secret.key=***&spark.master=local'
    >>> redact("bad dsn: host=h password='a b' port=5")
    'bad dsn: host=h password=*** port=5'
    >>> redact("postgresql://h:5432/db?sslmode=require")
    'postgresql://h:5432/db?sslmode=require'
    """
    text = str(text)
    whole = _WHOLE_URL.match(text) is not None
    if whole and "://" in text:
        text = _sqlalchemy_rendering(text)
    text = _mask_userinfo(text)
    text = (_PARAM_URL if whole else _PARAM_TEXT).sub(_mask_param, text)
    return _CONNINFO.sub(_mask_conninfo, text)
