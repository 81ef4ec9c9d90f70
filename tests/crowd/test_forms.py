"""`parse_form`'s own tokenizer against the `HTMLParser` reading it stands in for (`_reference_parse`):
the same `Form` for every page, real pages of every built-in kind read by the fast path itself, and odd or
hostile pages either read the same way or left to `HTMLParser` (an exception, too, is the same one)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from campaign.crowd.forms import _fast_parse, _reference_parse, _Unsure, parse_form
from campaign.market.worker_site import frame_html
from campaign.tasks import get
from campaign.tasks.base import ShownItem, html_question

# Text as documents have it: markup characters, quotes, entity references typed as text, non-ASCII.
TEXTS = [
    "Bottled water costs 2000x more than tap water & is sold everywhere.",
    'Tap water in <most> cities is "safe" to drink; it\'s tested daily.',
    "Plastic bottles take 450 years to decompose &amp; release microplastics (&copy; &#169; &#x27;).",
    "Les Français boivent 130 litres d'eau en bouteille par an — c'est énorme; 東京の水道水は安全です.",
    "a < b > c, x &lt; y, AT&T, &notanentity; and a trailing &",
    "  Spaces\tand\nnewlines   inside  ",
    "Water</p><p class=statement>not a tag",
]
INSTRUCTIONS = ("Read **each** statement & rate it. See <https://example.org/?a=1&b=2> or `<script>` (a < b).\n\n"
                "- one\n- two")


def _pages() -> list[tuple[str, str]]:
    """(name, HTML) of each kind's page, with and without the stage's own instructions, as the kind renders
    it and as the built-in marketplace's worker site serves it to the crowd (`WorkerClient.task_html`)."""
    out = []
    for kind, n in (("likert", 5), ("ranking", 5), ("nuggets", 7)):
        k = get(kind)
        for instructions in (None, INSTRUCTIONS):
            stage = k.stage_type(kind=kind, name=kind, title=f"Judge & rate <{kind}>", instructions=instructions)
            items = [ShownItem(f"k{i}", TEXTS[i % len(TEXTS)]) for i in range(n)]
            page = k.page(stage, items, 'Bottled & "tap" water <vs> Évian')
            label = f"{kind}{'-instructions' if instructions else ''}"
            out.append((label, page))
            out.append((label + "-served", frame_html(html_question(page), "H1", "A1", "W1", "http://127.0.0.1:9/x")))
    return out


PAGES = _pages()


@pytest.mark.parametrize("html", [h for _, h in PAGES], ids=[name for name, _ in PAGES])
def test_real_pages_are_read_by_the_fast_path_as_html_parser_reads_them(html: str) -> None:
    reference = _reference_parse(html)
    assert _fast_parse(html) == reference  # no fallback: the kinds' pages are in the fast path's grammar
    assert parse_form(html) == reference
    assert len(reference.slots) in (5, 7) and all(s.text for s in reference.slots)
    assert [s.index for s in reference.slots] == list(range(len(reference.slots)))


def test_real_pages_keep_the_statements_text_and_the_fields() -> None:
    """What the crowd needs from each kind: the statements' text (unescaped, whitespace collapsed) and the
    fields it posts."""
    pages = dict(PAGES)
    want = [" ".join(TEXTS[i % len(TEXTS)].split()) for i in range(7)]
    likert = parse_form(pages["likert-served"])
    assert [s.text for s in likert.slots] == want[:5]
    assert [s.radio_name for s in likert.slots] == [f"rating-{i}" for i in range(5)]
    assert likert.slots[0].radio_values == ["5", "4", "3", "2", "1"] and "assignmentId" in likert.hidden
    assert likert.action.endswith("/mturk/externalSubmit")
    ranking = parse_form(pages["ranking-served"])
    assert [s.text for s in ranking.slots] == want[:5] and ranking.hidden["order"] == "0,1,2,3,4"
    assert ranking.data == {"task": "ranking"}
    nuggets = parse_form(pages["nuggets-instructions-served"])
    assert [s.text for s in nuggets.slots] == want and nuggets.data == {"task": "nuggets", "min-tokens": "3"}
    assert nuggets.slots[1].attrs == {"slot": "1"} and nuggets.text_inputs == ["keywords"]


def _outcome(parse: Any, html: str) -> Any:
    """A parse's `Form`, or the exception it raised (type and message): what the crowd gets either way."""
    try:
        return parse(html)
    except Exception as exc:  # an exception is an outcome to compare, as a Form is
        return type(exc), str(exc)


# Odd pages inside the fast path's grammar: read by it, as HTMLParser reads them.
IN_GRAMMAR = [
    "",
    "just text & no tags",
    "<p class=statement>no form, no slot</p>",
    '<FORM ACTION="/go?a=1&amp;b=2" DATA-TASK="likert" Data-X=\'1\'><LI DATA-SLOT="3"><SPAN CLASS="statement">Up'
    "PER &AMP; case</SPAN><INPUT TYPE=RADIO NAME=r VALUE=5></LI></FORM>",
    '<form action=/x><fieldset data-slot=0 data-extra><p class="statement">a</p><input type=radio name=r required '
    "value=1 checked><input type=hidden name=h><input type=text name=t><input name=untyped><input type=search "
    "name=s><input type=checkbox name=c value=1><input type=radio value=9><input type=radio name=r value='2' />",
    '<div data-slot="0"><p class="statement">outer <span data-slot="1"><span class="tok">inner</span></span> '
    "after</p></div><li data-slot=2><p class=statement>third</li>",  # nested slots, unclosed statement
    '<ol><li data-slot="0"><p class="statement">unclosed statement <b>bold</b> text<li data-slot="1">next',
    '<p data-slot="0" class="statement">a slot is not a statement</p><p class="statement">nor is this one</p>',
    '<div data-slot=" 7 "><div class="x statement y">spaced &#x41;&#65;&amp;&lt;&gt;&quot;&#39;&nbsp;&bogus;'
    "</div></div>",
    '<span data-slot=0><span class="tok" class="other">dup class: last wins</span><span class="tok"/>x</span>',
    '<p data-slot=0><span class=tok>a</span><!-- <input type=hidden name=c> --><span class=tok>b</span></p>',
    '<!DOCTYPE html><html><head><title>T <input type=hidden name=in-title value=1></title>'
    "<style>p { content: '<input name=no>' }</style></head><body><script>if (a < b && c > d) {}</script>"
    '<textarea><input type=text name=in-textarea></textarea><crowd-form><input name=z type=text></crowd-form>',
    '<p data-slot=0 title="a > b <c>" alt=\'"\' data-q="&quot;&amp;"><span class="tok">quoted &gt;</span></p>',
    '<form action="first"></form><form action="second" data-task="ranking"></form>',
    '<p data-slot=0><span class="tok">a&amp</span><span class="tok">&#0;&#xD800;&#x110000;</span></p>',
    "<input type=hidden name=h value=a/><p data-slot=0><span class=tok/>not a statement: class tok/</span>",
    "<p data-slot=0><span class=tok>line\r\nbreaks\tand\u00a0nbsp\u2028</span></p>",
    # a slot number that is none: the same ValueError as before (the crowd's loop reports it and goes on)
    "<p data-slot=x><span class=tok>not a number</span></p>",
    "<p data-slot><span class=tok>empty</span></p>",
    '<p data-slot="1"><p data-slot="2.5">',
]
# Odd and hostile pages outside it: HTMLParser reads them (or raises what it raised before).
OUTSIDE_GRAMMAR = [
    "<p data-slot=0><span class=tok>1 < 2</span></p>",
    "<p data-slot=0><span class=tok>trailing <",
    '<p data-slot=0><span class="tok',
    '<p data-slot=0><span class="tok">a</span',
    "<p data-slot=0><span class=tok>a</ span></p>",
    "<p data-slot=0><span class=tok><script>raw & <b>text</b></script></span></p>",
    "<script>never closed <input type=hidden name=h>",
    "<script>var s = '</div>'; </script><input type=hidden name=h>",
    "<script><!-- <script> --></script><input type=hidden name=h>",
    "<p data-slot=0><span class=tok>a<!-->b-->c</span></p>",
    "<p data-slot=0><span class=tok>a<!-- x -- y -->b</span></p>",
    "<p data-slot=0><span class=tok>a<?pi x?><![CDATA[ <c> ]]>b</span></p>",
    '<p data-slot=0 a="1"b="2"><span class=tok a=b/>x</span></p>',
    "<p data-slot=0 a==b><span class=tok\x0b>x</span></p>",
    '<p data-slot=0><span class="tok">x</span\n></p>',
    "<span class=tok>\u00a0</span><p\u00a0data-slot=0>",
    "<" * 50 + ">" * 50,
    '<p data-slot=0 title="' + "x" * 5000,
]


@pytest.mark.parametrize("html", IN_GRAMMAR)
def test_odd_pages_in_the_grammar_are_read_by_the_fast_path_as_html_parser_reads_them(html: str) -> None:
    assert _outcome(_fast_parse, html) == _outcome(_reference_parse, html)
    assert _outcome(parse_form, html) == _outcome(_reference_parse, html)


@pytest.mark.parametrize("html", OUTSIDE_GRAMMAR)
def test_odd_pages_outside_the_grammar_are_read_as_html_parser_reads_them(html: str) -> None:
    assert _outcome(_fast_parse, html) == (_Unsure, "")  # left to HTMLParser
    assert _outcome(parse_form, html) == _outcome(_reference_parse, html)


def test_a_bare_less_than_sign_leaves_the_page_to_html_parser() -> None:
    html = '<p data-slot="0"><span class="tok">1 < 2</span></p>'
    with pytest.raises(_Unsure):
        _fast_parse(html)
    assert parse_form(html).slots[0].text == "1 < 2"


# Tag soup: pieces in the fast path's grammar, and pieces that are not (odd markup, a bare `<`, ...).
_TAGS = ["p", "P", "span", "SPAN", "div", "li", "form", "FORM", "input", "INPUT", "fieldset", "label", "b", "br",
         "crowd-form", "pre", "title", "textarea"]
_ATTRS = ['class="statement"', "class='tok'", "class=tok", 'CLASS="tok extra"', 'class="&#116;ok"', 'data-slot="0"',
          "data-slot=1", 'DATA-SLOT="2"', 'data-slot=""', "data-slot", 'data-task="likert"', 'type="radio"',
          "TYPE=HIDDEN", "type=text", 'name="rating-0"', "name='r&amp;1'", "name", 'value="a&lt;b&quot;c"', "value=5",
          "required", 'action="/x?a=1&amp;b=2"', 'title="a>b <input name=z>"', 'title="data-slot"', 'a = "sp"',
          "x=\u00e9"]
_TEXTS = ["hello", " world ", "a &amp; b", "AT&T", "&lt;x&gt;", "caf\u00e9", "&amp", "\r\n", "&#0;", " "]
_MISC = ["<!-- c -->", "<!---->", "<!DOCTYPE html>", "<br/>", "<p/>", '<span class="tok"/>',
         "<script>if (a < b) {}</script>", "<style>p{}</style>", "<script>x</SCRIPT>", "<title>T &amp; x</title>"]
_ODD = ["a=b/", "a==b", 'a="1"b="2"', 'x="\u00a0"', "1 < 2", "<", "<!-->", "<!-- a -- b -->", "<?xml x?>",
        "<![CDATA[<p>]]>", "</ p>", "<script>'</div>'</script>", "<script/>", "<script>", "<p", "</span", "<p\u00a0>"]


def _soup(rng: random.Random, odd: bool) -> str:
    out = []
    for _ in range(rng.randint(1, 40)):
        r = rng.random()
        if r < 0.35:
            attrs = " ".join(rng.sample(_ATTRS + (_ODD[:4] if odd else []), rng.randint(0, 3)))
            space = rng.choice([" ", "\n"]) if attrs else ""
            out.append(f"<{rng.choice(_TAGS)}{space}{attrs}{rng.choice(['', ' ', '/'])}>")
        elif r < 0.6:
            out.append(f"</{rng.choice(_TAGS)}>")
        elif r < 0.85:
            out.append(rng.choice(_TEXTS))
        else:
            out.append(rng.choice(_MISC + (_ODD[4:] if odd else [])))
    return "".join(out)


def test_random_pages_are_read_as_html_parser_reads_them() -> None:
    """Tag soup, and real pages with tags, text and odd markup put in or cut out at random: the same
    outcome as `HTMLParser`'s, whether the fast path reads the page or leaves it to HTMLParser."""
    rng = random.Random(20240611)
    pages = [h for _, h in PAGES]
    read_fast = 0
    for i in range(600):
        if i % 3:
            html = _soup(rng, odd=i % 3 == 2)
        else:
            html = rng.choice(pages)
            for _ in range(rng.randint(1, 3)):
                at = rng.randrange(len(html))
                piece = rng.choice(_MISC + _ODD + _TEXTS + ["<p data-slot=9>", "</p>", ""])
                html = html[:at] + piece + html[at + rng.randint(0, 9):]
        assert _outcome(parse_form, html) == _outcome(_reference_parse, html), html
        read_fast += _outcome(_fast_parse, html) != (_Unsure, "")
    assert read_fast > 200  # the comparison covers the fast path, not only its fallback


def test_forms_share_nothing_from_one_page_to_the_next() -> None:
    """The fast path caches what each start tag means; a form changed by its reader must not change the next."""
    html = dict(PAGES)["nuggets"]
    first = parse_form(html)
    first.data["task"] = "changed"
    first.slots[0].attrs["slot"] = "changed"
    first.hidden.clear()
    assert parse_form(html) == _reference_parse(html)
