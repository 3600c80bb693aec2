"""The report's one filter per format (graphsweep/report/markup.py), held against a real Markdown parser
(markdown-it, CommonMark with GitHub's tables) and Jinja2's autoescape: hostile text reads as the text it is, never
as a link, an image, HTML or a table column, and its control characters are spelled out."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from graphsweep.report.markup import html_words, md, md_cell, md_text
from graphsweep.textsafe import spelled

HOSTILE = [
    "[click](javascript:alert(1))",
    "![img](http://x/y.png)",
    "<script>alert(1)</script> <img src=x onerror=alert(2)>",
    "<https://evil.example> <mailto:a@b.c>",
    "see https://evil.example/a?b=c and www.evil.example or me@evil.example",
    "[ref][x]\n\n[x]: javascript:alert(3)",
    "[x]: javascript:alert(4)",
    "*bold* _it_ __x__ `code` ``` ~~del~~",
    "a | b | c",
    "# heading",
    "> quote",
    "- item",
    "1. item",
    "\x1b]0;owned\x07\x1b[31mred\x1b[0m \x85 \x9b",
    "back\\slash \\[ \\` &lt;b&gt; &#106;avascript:x",
    "a_b moe_router _edge",
]
PARSER = MarkdownIt("commonmark").enable("table")
BARE_LINK = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://|\bwww\.|[\w.+-]+@[\w-]+\.\w")


def _inline(text: str) -> list:
    tokens = PARSER.parse(text)
    assert not [t for t in tokens if t.type in ("html_block", "heading_open", "blockquote_open", "bullet_list_open",
                                                "ordered_list_open")], text
    return [c for t in tokens if t.type == "inline" for c in t.children or []]


def _shown(children: list) -> str:
    return "".join(c.content for c in children if c.type in ("text", "code_inline")).replace("\n", " ")


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_text_is_inert_and_reads_as_written(text: str) -> None:
    for made in (md_text(text), md(text)):
        assert "\n" not in made and not re.search("[\x00-\x1f\x7f-\x9f]", made)
        children = _inline(made)
        assert not [c for c in children if c.type in ("link_open", "image", "html_inline", "em_open", "strong_open")]
        assert not [c.content for c in children if c.type == "text" and BARE_LINK.search(c.content)]
    # md_text shows every character as the reader wrote it (control characters spelled out)
    assert _shown(_inline(md_text(text))) == spelled(text)


@pytest.mark.parametrize("text", HOSTILE)
def test_a_table_cell_stays_one_cell(text: str) -> None:
    table = f"| a | b |\n|---|---|\n| {md_cell(text)} | x |\n"
    tokens = PARSER.parse(table)
    cells = [t for t in tokens if t.type == "td_open"]
    assert len(cells) == 2, (text, table)
    assert not [c for t in tokens if t.type == "inline" for c in t.children or [] if c.type in ("link_open", "image",
                                                                                                "html_inline")]


def test_code_spans_of_a_sentence_are_code_and_the_rest_text() -> None:
    sentence = "preflight `full_iteration_nan_check`; see [x](javascript:y) and `a|b`"
    children = _inline(md(sentence))
    assert [c.content for c in children if c.type == "code_inline"] == ["full_iteration_nan_check", "a|b"]
    assert not [c for c in children if c.type == "link_open"]
    assert str(html_words(sentence)) == ("preflight <code>full_iteration_nan_check</code>; see [x](javascript:y) and "
                                         "<code>a|b</code>")
    assert str(html_words("<b>`<i>`\x1b")) == "&lt;b&gt;<code>&lt;i&gt;</code>\\x1b"


def test_intervals_and_comparisons_stay_readable() -> None:
    """What the report's own sentences hold, left as they are (only what opens markup is escaped)."""
    for text in ("1.33× [1.13, 1.57]", "q <0.001", "0.16 -> 0.26 GB", "moe_router+moe_preprocess", "±0.5%"):
        assert md(text) == text
