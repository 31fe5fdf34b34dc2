"""Reports as GitHub/GitLab-flavoured markdown: a pull-request or merge-request comment.

A verdict line, then each table as a pipe table (cells escaped so a ``|`` in a sentence does
not split a column), then the notes.
"""

from __future__ import annotations

from typing import Final

from gpu_advisor.render.report import Report, Table

_MARK: Final = {"pass": "✅", "fail": "❌", "info": "ℹ️"}
_RESULT: Final = {"pass": "✅ pass", "FAIL": "❌ fail", "n/a": "➖ n/a"}


def escape_cell(text: str) -> str:
    """One table cell: pipes escaped, line breaks as spaces, leading indentation kept."""
    body = text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    indent = len(body) - len(body.lstrip(" "))
    return "&nbsp;" * indent + body.strip() if body.strip() else " "


def table_markdown(table: Table, *, results_column: int | None = None) -> str:
    """A pipe table with a bold title line above it."""
    lines = [f"**{table.title}**", ""]
    lines.append("| " + " | ".join(escape_cell(h) for h in table.headers) + " |")
    lines.append("|" + "|".join(" --- " for _ in table.headers) + "|")
    for row in table.rows:
        cells = [
            _RESULT.get(cell, cell) if i == results_column else cell for i, cell in enumerate(row)
        ]
        lines.append("| " + " | ".join(escape_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def render_markdown(report: Report) -> str:
    """The report as one markdown document (ends with a newline)."""
    parts = [f"### {_MARK[report.status]} {report.heading}", ""]
    parts.extend(f"{line}  " for line in report.lines)
    for table in report.tables:
        result_col = table.headers.index("result") if "result" in table.headers else None
        parts.extend(["", table_markdown(table, results_column=result_col)])
    if report.notes:
        parts.append("")
        parts.extend(f"- {note}" for note in report.notes)
    return "\n".join(parts) + "\n"
