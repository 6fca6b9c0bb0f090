"""How the console shows a count a SafePub release leaves out (None): the size of the sample its
rows were drawn from and the records suppressed from it, which the guarantee does not cover
(:func:`sqlanon.publish.hide_sample_counts`). Any other release shows its counts as they are."""

from __future__ import annotations

HIDDEN = "not shown (a count of SafePub's sample, which its guarantee does not cover)"


def count(n: int | None) -> str:
    """``n``, or the sentence saying why it is not shown.

    >>> count(21), count(None)[:9]
    ('21', 'not shown')
    """
    return HIDDEN if n is None else str(n)


def of(part: int | None, whole: int | None) -> str:
    """``part of whole``, or the sentence where either is left out.

    >>> of(21, 1544)
    '21 of 1544'
    """
    return HIDDEN if part is None or whole is None else f"{part} of {whole}"


def records(n: int | None) -> str:
    """`` (n records)`` after a suppression limit, nothing where ``n`` is left out.

    >>> records(12), records(None)
    (' (12 records)', '')
    """
    return "" if n is None else f" ({n} records)"
