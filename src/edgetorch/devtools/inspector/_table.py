"""Showing the Inspector's table: a styled table in IPython/Jupyter, plain text elsewhere."""

from __future__ import annotations

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
    import pandas as pd

    with pd.option_context("display.max_rows", None, "display.max_columns", None,
                           "display.width", 250, "display.max_colwidth", 60):
        print(df.to_string(), file=file)
