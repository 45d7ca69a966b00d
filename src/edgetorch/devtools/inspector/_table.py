"""Showing the Inspector's table: a styled table in IPython/Jupyter, elsewhere plain text no
wider than the terminal (the full values stay in ``to_dataframe()`` and ``save_data_to_tsv``)."""

from __future__ import annotations

import math
import shutil
from typing import IO, Any


def _ipython() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def display_or_print_df(df: Any, file: IO[str]) -> None:
    if _ipython() is not None:
        from IPython.display import display

        display(df.style.map(lambda _: "font-size: 12px"))
        return
    print(fit_table(df), file=file)


# ---- plain text no wider than the terminal -------------------------------------------------
# A cell holding a list (start times, op types, one value per run) can be thousands of
# characters long; such cells are cut to half the width, and columns that still do not fit
# continue in blocks below (pandas' line_width), each block repeating the row numbers.

MIN_CELL = 12  # a cut cell keeps at least this many characters


def terminal_width() -> int:
    """``$COLUMNS``, else the terminal's width, else 80 (``shutil.get_terminal_size``)."""
    return shutil.get_terminal_size().columns


def cell_text(value: Any, limit: int) -> str:
    if isinstance(value, float):
        text = "" if math.isnan(value) else f"{value:.6g}"
    else:
        text = str(value)
    text = " ".join(text.split())  # one line per row: newlines of stack traces go
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fit_table(df: Any, width: int | None = None) -> str:
    """``df`` as text whose lines are at most ``width`` characters (default: the terminal's)."""
    width = max(40, width or terminal_width())
    limit = max(MIN_CELL, width // 2)
    cells = df.map(lambda v: cell_text(v, limit))
    # (line_width leaves a block's trailing " \\" out of its count)
    return cells.to_string(line_width=width - 2)
