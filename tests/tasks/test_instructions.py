"""A stage's own instructions (Markdown) and its own page template: shown on the HIT page, and hostile
Markdown or HTML in them stays text."""

from pathlib import Path
from typing import Any

import pytest

from campaign.spec import SpecError, load_spec
from campaign.tasks import get as get_kind
from campaign.tasks.base import ShownItem
from campaign.tasks.instructions import instructions_html
from tests.support.specs import campaign, write_spec

HOSTILE = """# Read carefully

Rate **each** statement. See [the guide](https://example.org/guide).

<script>window.__pwned = 1</script>
<img src="x" onerror="window.__pwned = 2">
[click](javascript:window.__pwned=3) [data](data:text/html,<script>x</script>) [vb](vbscript:msgbox)
<a href="javascript:alert(1)">raw link</a> [tab](java\tscript:alert(1)) [ftp](ftp://example.org/x)
"""

ITEMS = [ShownItem(key=f"k{i}", text=f"Statement {i} about bottled water costs.") for i in range(7)]


def spec(tmp_path: Path, kind: str, extra: dict[str, Any], input_kind: str = "propositions") -> Path:
    """A one-stage campaign of `kind` over in.tsv (10 propositions or 2 sentences), its task's further keys `extra`."""
    if input_kind == "documents":
        (tmp_path / "in.tsv").write_text("doc\tid\ttext\nd\td.0\tOne sentence here.\nd\td.1\tAnother one.\n", encoding="utf-8")
    else:
        (tmp_path / "in.tsv").write_text("id\ttext\n" + "".join(f"p{i}\tStatement {i}.\n" for i in range(10)), encoding="utf-8")
    source: dict[str, Any] = {input_kind: "in.tsv"}
    return write_spec(tmp_path / "c.yaml", campaign("c", topic="Water", task={"kind": kind, **extra}, budget="10.00", crowd=None,
                                                    poll_interval=None, **source))


def test_hostile_markdown_stays_text():
    out = str(instructions_html(HOSTILE))
    assert "<h1>Read carefully</h1>" in out and "<strong>each</strong>" in out
    assert '<a href="https://example.org/guide">the guide</a>' in out
    assert "<script" not in out and "<img" not in out and "<a href=\"javascript" not in out.lower()
    assert "&lt;script&gt;" in out and "&lt;img" in out
    for scheme in ("javascript:", "vbscript:", "data:", "ftp:"):
        assert f'href="{scheme}' not in out.lower()
    assert out.count("<a ") == 1


@pytest.mark.parametrize("kind,input_kind", [("likert", "propositions"), ("ranking", "propositions"), ("nuggets", "documents")])
def test_the_stage_instructions_replace_the_built_in_text_on_the_page(tmp_path, kind, input_kind):
    stage = load_spec(spec(tmp_path, kind, {"instructions": HOSTILE}, input_kind)).campaigns[0].stages[0]
    page = get_kind(kind).page(stage, ITEMS, "Water <b>bottles</b>")
    assert '<div class="instructions"><h1>Read carefully</h1>' in page
    assert "Imagine you" not in page  # the built-in text gives way
    assert "window.__pwned = 1</script>" not in page and "onerror=\"window" not in page
    assert "Water &lt;b&gt;bottles&lt;/b&gt;" in page
    plain = load_spec(spec(tmp_path, kind, {}, input_kind)).campaigns[0].stages[0]
    assert "Imagine you" in get_kind(kind).page(plain, ITEMS, "Water")


def test_a_stage_template_is_rendered_with_autoescape(tmp_path):
    (tmp_path / "mine.html").write_text(
        "<h1>{{ title }}</h1>{{ instructions }}<form id=\"mturk_form\">{% for item in items %}"
        "<p>{{ item.text }}</p><input name=\"rating-{{ loop.index0 }}\">{% endfor %}</form>", encoding="utf-8")
    stage = load_spec(spec(tmp_path, "likert", {"template": "mine.html", "instructions": "*Be quick* <b>x</b>",
                                                "title": "My <i>own</i> title"})).campaigns[0].stages[0]
    hostile = [ShownItem(key="a", text="<script>alert(1)</script> tap water")]
    page = get_kind("likert").page(stage, hostile, "Water")
    assert page.startswith("<h1>My &lt;i&gt;own&lt;/i&gt; title</h1><p><em>Be quick</em> &lt;b&gt;x&lt;/b&gt;</p>")
    assert "<p>&lt;script&gt;alert(1)&lt;/script&gt; tap water</p>" in page


@pytest.mark.parametrize("body,message", [
    (None, r"template: file not found: mine.html"),
    ("<p>\n{% for x in items %}\n</p>", r"mine.html:\d: Unexpected end of template"),
    ("<p>{{ no_such_value }}</p>", r"mine.html:1: 'no_such_value' is undefined"),
    ("<p>\n{{ items }}\x00</p>", r"mine.html:2: holds the control character U\+0000, which no HIT page can carry"),
])
def test_a_bad_stage_template_is_a_spec_error(tmp_path, body, message):
    if body is not None:
        (tmp_path / "mine.html").write_text(body, encoding="utf-8")
    with pytest.raises(SpecError, match=message):
        load_spec(spec(tmp_path, "likert", {"template": "mine.html"}))


def test_instructions_and_the_template_content_are_part_of_the_fingerprint(tmp_path):
    (tmp_path / "mine.html").write_text("<p>{{ title }}</p>", encoding="utf-8")
    plain = load_spec(spec(tmp_path, "likert", {})).campaigns[0].fingerprint()
    told = load_spec(spec(tmp_path, "likert", {"instructions": "Rate them."})).campaigns[0].fingerprint()
    path = spec(tmp_path, "likert", {"template": "mine.html"})
    own = load_spec(path).campaigns[0].fingerprint()
    (tmp_path / "mine.html").write_text("<p>{{ title }}!</p>", encoding="utf-8")
    edited = load_spec(path).campaigns[0].fingerprint()
    assert len({plain, told, own, edited}) == 4
