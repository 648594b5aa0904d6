"""The fleet report as one self-contained HTML page (inline CSS and JS, no external assets).

Input is the plain data of ``fleet.to_json``. The page is complete without JavaScript (the
matrix, each cell's detail as its tooltip and in the host's section, the diffs, each
snapshot's age); the script adds the "only drifted hosts" filter, which ``#only-drifted`` or
``?only=drifted`` in the URL turns on at load, and the detail panel for a clicked cell. The
filter keeps the hosts that cannot be vouched for (missing, stale) beside the drifted ones, and
the summary stays in sight at the top of the window (a sticky header that also says how many
hosts the filter shows).
"""

from __future__ import annotations

from html import escape
from typing import Any

_CLASS = {"OK": "ok", "WARN": "warn", "FAIL": "fail"}
KEPT = ("drift", "stale", "missing")  # what the "only drifted" view shows

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; margin: 0 0 .3em; }
#top { position: sticky; top: 0; z-index: 1; background: #fff; padding: .3em 0;
       border-bottom: 1px solid #bbb; }
#top p { margin: .2em 0; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: .25em .6em; text-align: left; white-space: nowrap; }
thead th { background: #eee; }
td.cell { cursor: pointer; font-family: ui-monospace, monospace; }
td.ok { background: #c8ecc9; } td.warn { background: #ffe08a; } td.fail { background: #f28b82; }
td.missing { background: #ddd; color: #555; }
tr.host.drift { background: #f8b4b4; } tr.host.drift th { background: #e53935; color: #fff; }
tr.host.outlier th { background: #ffc107; } tr.host.ok th { background: #43a047; color: #fff; }
tr.host.missing th { background: #757575; color: #fff; }
tr.host.stale th { background: #8d6e63; color: #fff; }
.legend span { display: inline-block; padding: 0 .5em; margin-right: .4em; }
#detail { border: 1px solid #bbb; padding: .5em; min-height: 1.5em; background: #fafafa; }
pre { background: #f6f6f6; padding: .5em; overflow-x: auto; }
.del { color: #b71c1c; } .add { color: #1b5e20; }
.warnings li { color: #8a6d00; }
"""

_JS = """
(function () {
  var box = document.getElementById('only-drifted');
  var rows = Array.prototype.slice.call(document.querySelectorAll('tr.host'));
  var diffs = Array.prototype.slice.call(document.querySelectorAll('section.host-diff'));
  var kept = KEPT;
  var shown = document.getElementById('shown');
  function apply() {
    var only = box.checked;
    rows.concat(diffs).forEach(function (el) {
      el.hidden = only && kept.indexOf(el.getAttribute('data-status')) < 0;
    });
    var visible = rows.filter(function (row) { return !row.hidden; }).length;
    shown.textContent = only ? 'showing ' + visible + ' of ' + rows.length +
      ' host(s): the drifted, stale and missing ones' : '';
    document.body.setAttribute('data-filter', only ? 'drifted' : 'all');
  }
  var query = new URLSearchParams(window.location.search);
  box.checked = query.get('only') === 'drifted' || window.location.hash === '#only-drifted';
  box.addEventListener('change', function () {
    history.replaceState(null, '', box.checked ? '#only-drifted' : '#');
    apply();
  });
  apply();
  rows.forEach(function (row) {  // what the browser really painted, for tests and tools
    row.setAttribute('data-bg', getComputedStyle(row).backgroundColor);
  });
  var panel = document.getElementById('detail');
  document.querySelectorAll('td.cell').forEach(function (cell) {
    cell.addEventListener('click', function () {
      panel.textContent = cell.parentNode.getAttribute('data-host') + ' / ' +
        cell.getAttribute('data-check') + ': ' + cell.getAttribute('title');
    });
  });
})();
"""


def _label(check: str) -> str:
    return check.split(":", 1)[-1]


def _script() -> str:
    return _JS.replace("KEPT", "[" + ", ".join(f"'{k}'" for k in KEPT) + "]")


def _cell(cell: dict[str, Any]) -> str:
    cls = _CLASS[cell["level"]]
    return (f'<td class="cell {cls}" data-check="{escape(cell["check"])}" '
            f'data-level="{escape(cell["level"])}" title="{escape(cell["detail"])}">'
            f'{escape(cell["value"])}</td>')


def _row(host: dict[str, Any], width: int) -> str:
    name = escape(host["host"])
    head = (f'<tr class="host {host["status"]}" id="host-{name}" data-host="{name}" '
            f'data-status="{host["status"]}"><th>{name}</th>')
    if host["status"] == "missing":
        reason = escape(host["reason"])
        cells = f'<td class="missing" colspan="{width}" title="{reason}">missing: {reason}</td>'
        return head + cells + "<td>-</td></tr>"
    return head + "".join(_cell(c) for c in host["cells"]) + f"<td>{host['drift']}</td></tr>"


def _diff(host: dict[str, Any]) -> str:
    if host["status"] in ("ok", "missing"):
        return ""
    lines = []
    for text in host["diff"]:
        cls = "del" if text.startswith("-") else "add"
        lines.append(f'<span class="{cls}">{escape(text)}</span>')
    details = "".join(f"<li>{escape(c['detail'])}</li>"  # (each detail names its subject)
                      for c in host["cells"] if c["level"] != "OK")
    name = escape(host["host"])
    return (f'<section class="host-diff" id="diff-{name}" data-host="{name}" '
            f'data-status="{host["status"]}"><h3>{name} ({host["status"]}) against the '
            f'baseline</h3><ul>{details}</ul>'
            f'<pre>--- baseline\n+++ {name}\n' + "\n".join(lines) + "</pre></section>")


def _summary(doc: dict[str, Any]) -> str:
    return (f'{len(doc["hosts"])} host(s) against the {escape(doc["baseline"]["source"])}: '
            f'{len(doc["drifted"])} drifted, {len(doc["outliers"])} outlier(s), '
            f'{len(doc["stale"])} stale, {len(doc["missing"])} missing')


def render(doc: dict[str, Any]) -> str:
    head = "".join(f'<th title="{escape(c)}">{escape(_label(c))}</th>' for c in doc["columns"])
    rows = "".join(_row(h, len(doc["columns"])) for h in doc["hosts"])
    diffs = "".join(_diff(h) for h in doc["hosts"])
    warnings = "".join(f"<li>{escape(w)}</li>" for w in doc["warnings"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ascendpatch fleet report</title><style>{_CSS}</style></head>
<body data-filter="all">
<header id="top">
<h1>ascendpatch fleet report</h1>
<p id="summary">{_summary(doc)}</p>
<p class="legend"><span class="l-ok" style="background:#c8ecc9">as the baseline</span>
<span style="background:#ffe08a">outlier / unknown</span>
<span style="background:#f28b82">drift</span>
<span style="background:#8d6e63;color:#fff">stale</span>
<span style="background:#ddd">missing</span></p>
<p><label><input type="checkbox" id="only-drifted"> only drifted hosts (and the stale and
missing ones)</label> <span id="shown"></span></p>
</header>
<table id="matrix"><thead><tr><th>host</th>{head}<th>drift</th></tr></thead>
<tbody>{rows}</tbody></table>
<div id="detail">Click a cell for its detail.</div>
<ul class="warnings">{warnings}</ul>
<h2>Differences from the baseline</h2>
{diffs or "<p>No host differs from the baseline.</p>"}
<script>{_script()}</script>
</body></html>
"""
