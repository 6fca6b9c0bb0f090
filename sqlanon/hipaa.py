"""HIPAA Safe Harbor identifiers (45 CFR 164.514(b)(2)(i)): which columns of a table hold one of
the 18 kinds of identifier the rule says must be removed (issue 35 item 7).

A column matches by its name (whole words of it: ``patient_email``, ``homePhone``, ``zip_code``)
or by its values: a sample of at most :data:`SAMPLE` non-NULL values of each text column is read
in SQL (``LIMIT``\\ ed; the values are tested here and never printed or returned), and a kind
matches when at least :data:`VALUE_SHARE` of them fit its pattern. Names (kind A) and US cities
(kind B) match by list (:mod:`sqlanon.hipaa_lists`, the ``hipaa`` extra): at least
:data:`VALUE_SHARE` of the sample's distinct values (at least :data:`MIN_DISTINCT` of them) are
first or last names or full names made of them, or names of US places; distinct values, as ARX
counts, so a ``race`` column that is mostly ``White`` is not a surname column. ARX's
``RiskModelHIPAASafeHarbor`` does the same with a fuzzy name match (Levenshtein distance 1 or 2
from a label list, so ``wage`` is an "age" there) and value validators; here names match by whole
words, which misses misspellings but not the common forms, and ``age``/``state`` are not flagged
as such because the rule allows them (ages up to 89, states). ``tests/test_hipaa_arx.py`` runs
ARX's matcher on a table with a column of each kind and lists every deliberate difference.

What the rule allows in a coarser form is reported with its treatment, not as removal: a ZIP code
keeps its first 3 digits (where the 3-digit area holds more than 20,000 people), a date keeps its
year, an age over 89 is published as "90 or older" (paragraphs (B) and (C) of the rule).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from sqlanon import hipaa_lists
from sqlanon.engines import Backend, Column
from sqlanon.policy import Policy
from sqlanon.relation import Relation
from sqlanon.sql.builders import as_text
from sqlanon.sql.compile import ident

#: Values sampled per text column (enough to tell a pattern, few enough to stay cheap).
SAMPLE = 200
#: Share of the sampled non-NULL values that must fit a pattern for the column to match.
VALUE_SHARE = 0.8

#: Distinct sampled values a column needs before it is matched against the lists of names and cities
#: (two or three values that happen to be surnames, ``White`` and ``Black``, say little).
MIN_DISTINCT = 5

#: The 18 kinds, by the letter of 45 CFR 164.514(b)(2)(i).
KINDS = {
    "A": "names",
    "B": "geographic subdivisions smaller than a state",
    "C": "dates (except year) and ages over 89",
    "D": "telephone numbers",
    "E": "fax numbers",
    "F": "email addresses",
    "G": "social security numbers",
    "H": "medical record numbers",
    "I": "health plan beneficiary numbers",
    "J": "account numbers",
    "K": "certificate/license numbers",
    "L": "vehicle identifiers",
    "M": "device identifiers",
    "N": "URLs",
    "O": "IP addresses",
    "P": "biometric identifiers",
    "Q": "full-face photographs",
    "R": "other unique identifying numbers",
}

#: Treatments other than removal (``Match.treatment``).
ZIP3 = "zip3"
YEAR = "year"
AGE90 = "age90"
DROP = "drop"

#: Column-name phrases per kind, as words (a name's words come from separators and camelCase).
#: A phrase matches where its words appear in a row in the name, or where its words joined
#: (``zipcode``) are one word of the name. The longest phrase found wins.
NAMES: dict[str, tuple[str, ...]] = {
    "A": (
        "name", "first name", "last name", "full name", "given name", "family name", "middle name",
        "maiden name", "surname", "forename", "nickname", "patient name", "person name",
        "customer name", "client name", "employee name", "member name", "contact name",
    ),
    "B": (
        "address", "street", "city", "town", "county", "municipality", "precinct", "neighborhood",
        "neighbourhood", "latitude", "longitude", "lat", "lon", "lng", "geolocation", "gps",
        "geocode", "census tract", "house number", "postal address",
    ),
    "C": ("date", "dob", "birthday", "birthdate", "date of birth", "dod", "datetime", "timestamp"),
    "D": ("phone", "telephone", "tel", "mobile", "cellphone", "cell phone", "phone number"),
    "E": ("fax", "telefax", "fax number"),
    "F": ("email", "e mail", "mail", "email address", "mail address"),
    "G": ("ssn", "social security", "social security number", "tax id", "taxpayer id", "tin"),
    "H": ("mrn", "medical record", "medical record number", "record number", "chart number",
          "patient id", "patient number"),
    "I": ("health plan", "health plan number", "insurance number", "insurance id", "member id",
          "member number", "beneficiary", "subscriber id", "policy number", "medicaid", "medicare"),
    "J": ("account", "account number", "account id", "acct", "iban", "bank account", "credit card",
          "card number", "routing number"),
    "K": ("license", "licence", "certificate", "license number", "certificate number",
          "permit number"),
    "L": ("vin", "license plate", "licence plate", "plate number", "vehicle id", "vehicle identifier",
          "vehicle identification number", "registration number"),
    "M": ("device id", "device identifier", "serial number", "serial", "imei", "udid", "mac address"),
    "N": ("url", "uri", "website", "web site", "homepage", "home page", "webpage", "web page"),
    "O": ("ip", "ip address", "ipv4", "ipv6", "ipaddr"),
    "P": ("fingerprint", "finger print", "voiceprint", "voice print", "retina", "iris scan",
          "biometric", "biometrics"),
    "Q": ("photo", "photograph", "portrait", "headshot", "selfie", "mugshot", "face image",
          "facial image", "picture"),
    "R": ("id", "identifier", "uuid", "guid", "passport", "passport number", "national id",
          "person id", "user id", "username", "user name", "customer id", "employee id",
          "student id", "pid", "badge number"),
}  # fmt: skip
#: ZIP code names: kind B, kept to 3 digits rather than removed.
ZIP_NAMES = ("zip", "zipcode", "zip code", "postcode", "post code", "postal code", "zip5", "plz")
#: Names of an age column (kind C applies above 89 only).
AGE_NAMES = ("age", "age years", "age at admission", "age at visit")
#: Phrases that match only as the whole name (a word common in other names: ``id`` of ``region_id``
#: is a key to a region, ``name`` of ``drug_name`` is not a person's).
WHOLE_ONLY = frozenset({"id", "name", "identifier", "account", "serial", "picture", "mail"})

_DIGITS = re.compile(r"\d+")
VALUE_PATTERNS: dict[str, re.Pattern[str]] = {
    "F": re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}"),
    "G": re.compile(r"\d{3}-\d{2}-\d{4}"),
    "D": re.compile(
        r"(\+?1[\s.-]?)?(\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}"  # North American
        r"|\+\d{1,3}[\s.-]\d[\d\s.-]{6,14}\d"  # international, with its country code
    ),
    "N": re.compile(r"(https?|ftp)://[^\s/$.?#][^\s]*|www\.[^\s.]+\.[^\s]{2,}", re.IGNORECASE),
    "B": re.compile(r"\d{5}(-\d{4})?"),  # a US ZIP code (text: a number loses its leading zeros)
    "C": re.compile(
        r"(19|20)\d\d[-/.](0?[1-9]|1[0-2])[-/.](0?[1-9]|[12]\d|3[01])([ T]\d\d:\d\d(:\d\d(\.\d+)?)?)?"
        r"|(0?[1-9]|1[0-2])/(0?[1-9]|[12]\d|3[01])/(19|20)?\d\d|(0?[1-9]|[12]\d|3[01])\.(0?[1-9]|1[0-2])\.(19|20)\d\d"
    ),
    "L": re.compile(r"(?=[A-HJ-NPR-Z0-9]*\d)(?=[A-HJ-NPR-Z0-9]*[A-HJ-NPR-Z])[A-HJ-NPR-Z0-9]{17}"),
    "M": re.compile(r"([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}"),
}  # fmt: skip


@dataclass(frozen=True)
class Match:
    """One column matched to a kind: ``by`` says how (``name``, ``values``, ``type``, ``range``)."""

    column: str
    kind: str
    by: str
    detail: str
    treatment: str = DROP

    @property
    def label(self) -> str:
        """``HIPAA Safe Harbor (F) email addresses``: the kind as the rule names it."""
        return f"HIPAA Safe Harbor ({self.kind}) {KINDS[self.kind]}"

    @property
    def advice(self) -> str:
        """What Safe Harbor asks of the column."""
        return {
            ZIP3: "Safe Harbor keeps only the first 3 digits (in areas of more than 20,000 people)",
            YEAR: "Safe Harbor keeps only the year",
            AGE90: "Safe Harbor publishes ages over 89 as one category, 90 or older",
        }.get(self.treatment, "Safe Harbor removes it")


def words(name: str) -> list[str]:
    """The lower-case words of a column name (split at non-alphanumerics and camelCase).

    >>> words("homePhone_number"), words("E-Mail"), words("DOB")
    (['home', 'phone', 'number'], ['e', 'mail'], ['dob'])
    """
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^0-9a-z]+", spaced.lower()) if w]


def _covered(phrase: str, ws: list[str]) -> int:
    """How many of the name's words ``phrase`` covers (0: it does not match)."""
    p = phrase.split()
    if phrase in WHOLE_ONLY:
        return len(ws) if ws == p else 0
    n = len(p)
    if any(ws[i : i + n] == p for i in range(len(ws) - n + 1)):
        return n
    return 1 if "".join(p) in ws else 0


def match_name(name: str) -> tuple[str, str] | None:
    """(kind, phrase) of the phrase covering most of ``name``'s words (ZIP names are kind ``B``).

    >>> match_name("patient_email"), match_name("zipCode"), match_name("region_id")
    (('F', 'email'), ('B', 'zip code'), None)
    """
    ws = words(name)
    found = [(_covered(p, ws), k, p) for k, ps in [*NAMES.items(), ("B", ZIP_NAMES)] for p in ps]
    best = max(found, key=lambda f: (f[0], -len(f[2])))
    return (best[1], best[2]) if best[0] else None


def is_age(name: str) -> bool:
    """Whether the name says it holds ages (kind C applies to those over 89)."""
    return " ".join(words(name)) in AGE_NAMES


def _value_fits(kind: str, v: str) -> bool:
    v = v.strip()
    if kind == "O":
        try:
            ipaddress.ip_address(v)
        except ValueError:
            return False
        return True
    if kind == "J":
        return _is_iban(v) or _is_card(v)
    return VALUE_PATTERNS[kind].fullmatch(v) is not None


def _is_iban(v: str) -> bool:
    """ISO 13616: two letters, two check digits, the rest; the number mod 97 is 1."""
    s = v.replace(" ", "").upper()
    if not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]{11,30}", s):
        return False
    moved = s[4:] + s[:4]
    return int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1


def _is_card(v: str) -> bool:
    """A payment card number: 13-19 digits (spaces or dashes between groups) passing Luhn's check."""
    s = re.sub(r"[ -]", "", v)
    if not re.fullmatch(r"\d{13,19}", s) or not re.fullmatch(r"[\d -]+", v):
        return False
    total = 0
    for i, ch in enumerate(reversed(s)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


VALUE_KINDS = ("F", "G", "D", "N", "O", "J", "L", "M", "B", "C")


def match_values(values: list[str]) -> tuple[str, int] | None:
    """(kind, values that fit) of the first kind that at least :data:`VALUE_SHARE` of ``values`` fit.

    >>> match_values(["a@b.org", "c@d.com", "n/a"])
    >>> match_values(["a@b.org", "c@d.com", "e@f.net", "g@h.io", "n/a"])
    ('F', 4)
    """
    if not values:
        return None
    for kind in VALUE_KINDS:
        hits = sum(_value_fits(kind, v) for v in values)
        if hits >= VALUE_SHARE * len(values):
            return kind, hits
    return None


def _is_name(v: str, first: frozenset[str], last: frozenset[str]) -> bool:
    """A first or last name, or a full name: two or three words, each a name or an initial."""
    ws = [w.strip(".") for w in re.split(r"[\s,]+", v) if w.strip(".")]
    if not 1 <= len(ws) <= 3:
        return False
    if len(ws) == 1:
        return ws[0] in first or ws[0] in last
    return all(w in first or w in last or len(w) == 1 for w in ws) and any(len(w) > 1 for w in ws)


def match_lists(values: list[str]) -> tuple[str, str, int, int] | None:
    """(kind, what, hits, distinct) where at least :data:`VALUE_SHARE` of the distinct ``values``
    are names (kind A) or US cities (kind B); None without the lists (see :mod:`sqlanon.hipaa_lists`)."""
    distinct = {v.strip().lower() for v in values if v.strip()}
    first, last, cities = hipaa_lists.first_names(), hipaa_lists.last_names(), hipaa_lists.us_cities()
    if len(distinct) < MIN_DISTINCT or first is None or last is None or cities is None:
        return None
    shares = [
        (sum(_is_name(v, first, last) for v in distinct), "A", "first, last or full names"),
        (sum(v in cities for v in distinct), "B", "names of US cities"),
    ]
    hits, kind, what = max(shares)  # many cities are surnames too (Boston, Denver): the better fit
    return (kind, what, hits, len(distinct)) if hits >= VALUE_SHARE * len(distinct) else None


def sample(be: Backend, rel: Relation, column: Column, n: int = SAMPLE) -> list[str]:
    """At most ``n`` non-NULL values of ``column`` as text: for the patterns here only."""
    col = ident(column.name)
    rows = be.query("scaffold/sample", source=rel, col=col, text=as_text(col), limit=n)
    return [str(r[0]) for r in rows if r[0] is not None]


def _textual(c: Column) -> bool:
    return not (c.numeric or c.temporal)


def detect(
    be: Backend, rel: Relation, columns: list[Column], maxima: dict[str, float | None] | None = None
) -> dict[str, Match]:
    """Column name -> its match, for the columns of ``rel`` that hold a Safe Harbor identifier.

    ``maxima``: the largest value of numeric columns where known (``sqlanon init`` has profiled
    them); otherwise an age column's maximum is read here, for ages over 89.
    """
    out: dict[str, Match] = {}
    for c in columns:
        m = _detect_one(be, rel, c, maxima)
        if m is not None:
            out[c.name] = m
    return out


def _detect_one(
    be: Backend, rel: Relation, c: Column, maxima: dict[str, float | None] | None
) -> Match | None:
    named = match_name(c.name)
    if named is not None:
        kind, phrase = named
        treatment = DROP
        if phrase in ZIP_NAMES:
            treatment = ZIP3
        elif kind == "C" and c.temporal:
            treatment = YEAR
        return Match(c.name, kind, "name", f"its name ({phrase!r})", treatment)
    if c.temporal:
        return Match(c.name, "C", "type", f"a {c.type} column", YEAR)
    if is_age(c.name) and c.numeric:
        hi = maxima.get(c.name) if maxima is not None else _max(be, rel, c)
        if hi is not None and hi > 89:
            return Match(c.name, "C", "range", "ages over 89", AGE90)  # never the maximum itself
        return None
    if not _textual(c):
        return None
    values = sample(be, rel, c)
    found = match_values(values)
    if found is None:
        listed = match_lists(values)
        if listed is None:
            return None
        kind, what, hits, n = listed
        return Match(c.name, kind, "values", f"{hits} of {n} distinct sampled values are {what}")
    kind, hits = found
    treatment = ZIP3 if kind == "B" else DROP
    return Match(c.name, kind, "values", f"{hits} of {len(values)} sampled values fit its pattern", treatment)


def _max(be: Backend, rel: Relation, c: Column) -> float | None:
    v = be.query("scaffold/max", source=rel, col=ident(c.name))[0][0]
    return None if v is None else float(v)


def warnings(be: Backend, policy: Policy) -> list[str]:
    """One line per column of the policy's source that holds a Safe Harbor identifier and is not
    declared an identifier (``assess``): an undeclared one is not published, but nothing says why;
    a declared QI, sensitive or insensitive one is published, as it is or generalised."""
    declared = {c.name: c.role for c in policy.columns}
    cols = [c for c in be.require_columns(policy.source, "source") if declared.get(c.name) != "identifier"]
    out = []
    found = detect(be, policy.source, cols)
    for name, m in found.items():
        role = declared.get(name)
        what = "undeclared, so not published" if role is None else f"declared {role}"
        out.append(f"column {name!r} ({what}) matches {m.label}, by {m.detail}: {m.advice}")
    if not hipaa_lists.available() and any(_textual(c) and c.name not in found for c in cols):
        out.append(f"HIPAA Safe Harbor: {hipaa_lists.MISSING}")
    return out
