"""What text may be in a report: the one filter per format that every shown text goes through.

The report's sentences are plain text in which backticks mark `code` spans (judge/prose.py and report/words.py write
them so); names, reasons and log lines inside them come from specs, folder names and training logs, and none of it is
ever read as markup. Both reports first spell out every control character (`\\x1b`: an escape sequence in a reason
would recolour a terminal that shows report.md, and is no text in HTML). Then:

- report.html: Jinja2's autoescape (`html_words` renders the code spans as `<code>`);
- report.md: `md` escapes what CommonMark and GitHub read as markup (emphasis, code, raw HTML, a `]` that would close
  a link or define one, table pipes) and puts a URL, a `www.` address or an e-mail address in a code span, where no
  renderer makes a link of it: no link in a generated report.md is live.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

from graphsweep.textsafe import spelled


class Md(str):
    """Markdown this module made (escaped text and code spans): the Markdown template's filter passes it as it is."""


def code_spans(text: str) -> list[tuple[bool, str]]:
    """[(is code, part)] of a sentence whose backticks mark code spans; an unmatched backtick is text."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: the last one opens nothing
        parts[-2:] = [parts[-2] + "`" + parts[-1]]
    return [(k % 2 == 1, p) for k, p in enumerate(parts) if p or k % 2 == 1]


# --------------------------------------------------------------------------------------------------
# report.md
# What CommonMark / GitHub Markdown read as markup inside a line: a backslash, code, emphasis, table pipes, a `<` that
# opens raw HTML or an autolink (`<0.001` opens nothing and stays as it is), a `]` that closes a link or an image
# (`](`, `][`), an underscore at a word's edge (one inside a word, `moe_router`, is literal in GitHub Markdown and
# stays readable; so does an interval, `[0.97, 1.61]`), and a `&` that starts an entity (`&lt;` is text as written).
_MD_SPECIAL = re.compile(r"[\\`*|]|<(?=[A-Za-z/!?])|\](?=[(\[])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|&(?=#?\w+;)")
# ...and what starts a block where a sentence starts a line (the description, a list item): a quote, a heading, a
# list item, a link reference definition (`[x]: url`, which would make `[x]` anywhere a link)
_MD_BLOCK = re.compile(r"^(?:[>#\[]|[-+](?=\s))")
_MD_ORDERED = re.compile(r"^(\d+)(?=[.)]\s)")
# What GitHub turns into a link without any markup (its autolink extension): a URL of any scheme followed by `//`, a
# `www.` address, `mailto:`/`xmpp:` and an e-mail address. In a code span it is text.
_BARE_LINK = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S*|\bwww\.\S+|\b(?:mailto|xmpp):\S+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def md_code(s: str) -> str:
    """A Markdown code span that holds s literally, backticks included (control characters spelled out)."""
    s = spelled(str(s))
    longest = max((len(r) for r in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip() else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _escape(s: str) -> str:
    return _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), s)


def _md_plain(s: str, start: bool) -> str:
    """Spelled-out text as Markdown text: links in code spans, markup escaped (`start`: the text starts a line)."""
    out, at = [], 0
    for m in _BARE_LINK.finditer(s):
        out += [_escape(s[at:m.start()]), md_code(m.group(0))]
        at = m.end()
    out.append(_escape(s[at:]))
    text = "".join(out)
    return _MD_ORDERED.sub(r"\1\\", _MD_BLOCK.sub(r"\\\g<0>", text)) if start else text


def md_text(text: object) -> Md:
    """User text as literal Markdown: control characters spelled out, markup escaped, links made inert."""
    if isinstance(text, Md):
        return text
    return Md(_md_plain(spelled(str(text)), start=True))


def md(words: object) -> Md:
    """A sentence of the report (backticks mark code spans) as Markdown: the code spans as code, the rest as text."""
    if isinstance(words, Md):
        return words
    parts = code_spans(str(words))
    return Md("".join(md_code(p) if is_code else _md_plain(spelled(p), start=k == 0) for k, (is_code, p) in
                      enumerate(parts)))


def md_cell(words: object) -> Md:
    """A sentence in a Markdown table cell: as `md`, and no pipe ends the cell (GitHub reads `\\|` as a pipe even in a
    code span inside a table)."""
    text = md(words)
    return Md(re.sub(r"(?<!\\)\|", r"\\|", text))


def md_finalize(value: object) -> object:
    """The Markdown template's one filter for every `{{ }}`: a sentence (str) becomes Markdown through `md`; what this
    module made (Md) and numbers pass."""
    if value is None:
        return ""
    if isinstance(value, str) and not isinstance(value, Md):
        return md(value)
    return value


# --------------------------------------------------------------------------------------------------
# report.html
def html_finalize(value: object) -> object:
    """The HTML template's hook before autoescape: control characters spelled out in every text (Markup, made by this
    module or the plots from escaped parts, passes)."""
    if value is None:
        return ""
    if isinstance(value, str) and not isinstance(value, Markup):
        return spelled(value)
    return value


def html_words(words: object) -> Markup:
    """A sentence of the report as HTML: each part escaped, the code spans as <code>."""
    if isinstance(words, Markup):
        return words
    out = Markup("")
    for is_code, part in code_spans(spelled(str(words))):
        out += Markup("<code>{}</code>").format(part) if is_code else escape(part)
    return out
