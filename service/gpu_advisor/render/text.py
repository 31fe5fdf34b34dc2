"""Reports drawn with rich: coloured tables on a terminal, plain aligned text elsewhere.

The API's ``Accept: text/plain`` answers and the CLI's ``--format table`` both come from
:func:`render_text` / :func:`print_report`, so they show the same tables; plain text uses ASCII
borders and no colour so ``curl`` output stays readable anywhere.
"""

from __future__ import annotations

import io
from typing import Final

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table as RichTable
from rich.text import Text

from gpu_advisor.render.report import Report, Table

PLAIN_WIDTH: Final = 120
"""Columns of ``text/plain`` output (long sentences wrap inside their cell)."""

_STATUS_STYLE: Final = {"pass": "bold green", "fail": "bold red", "info": "bold"}
_RESULT_STYLE: Final = {"pass": "green", "FAIL": "red", "n/a": "yellow"}


def _table(table: Table, plain: bool) -> RichTable:
    drawn = RichTable(
        title=table.title,
        title_justify="left",
        box=box.ASCII if plain else box.HEAVY_HEAD,
        show_lines=False,
        header_style="" if plain else "bold",
        title_style="" if plain else "bold",
    )
    for header in table.headers:
        drawn.add_column(header, overflow="fold")
    for row in table.rows:
        cells = [Text(cell, style="" if plain else _RESULT_STYLE.get(cell, "")) for cell in row]
        drawn.add_row(*cells)
    return drawn


def renderables(report: Report, *, plain: bool) -> list[RenderableType]:
    """The report as rich renderables (heading, lines, tables, notes)."""
    heading = Text(report.heading, style="" if plain else _STATUS_STYLE[report.status])
    parts: list[RenderableType] = [heading]
    parts.extend(Text(line) for line in report.lines)
    for table in report.tables:
        parts.append(Text(""))
        parts.append(_table(table, plain))
    if report.notes:
        parts.append(Text(""))
        parts.extend(Text(note) for note in report.notes)
    return parts


def render_text(report: Report, *, width: int = PLAIN_WIDTH) -> str:
    """The report as plain aligned text: ASCII borders, no colour, ``width`` columns."""
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        color_system=None,
        force_terminal=False,
        no_color=True,
        markup=False,
        emoji=False,
        highlight=False,
    )
    console.print(Group(*renderables(report, plain=True)))
    # rich pads titles to the table's width: drop trailing blanks (cleaner diffs and logs)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"


def print_report(report: Report, console: Console) -> None:
    """Print the report on ``console`` (colours when it is a terminal)."""
    console.print(Group(*renderables(report, plain=not console.is_terminal)))
