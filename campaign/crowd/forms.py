"""Reading a HIT's HTML the way a browser would, so simulated workers fill in the real form.

The crowd never sees item keys or the campaign's store: it reads the statements shown, looks up their
hidden truth by text (as a person judges what they read), and posts the form's own field names. So a
template change that breaks the form breaks the simulation too, as it would break real work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

_SPACE = re.compile(r"\s+")


def norm_text(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


@dataclass
class Slot:
    """One shown item: its visible text and the input fields that belong to it."""

    index: int
    text: str = ""
    radio_name: str | None = None
    radio_values: list[str] = field(default_factory=list)
    attrs: dict[str, str] = field(default_factory=dict)


@dataclass
class Form:
    action: str = ""
    slots: list[Slot] = field(default_factory=list)
    hidden: dict[str, str] = field(default_factory=dict)
    text_inputs: list[str] = field(default_factory=list)
    radios: dict[str, list[str]] = field(default_factory=dict)
    data: dict[str, str] = field(default_factory=dict)  # data-* attributes of the form element


class _FormParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.form = Form()
        self._slot: Slot | None = None
        self._in_statement = False
        self._slot_tag = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v or "") for k, v in attrs}
        if tag == "form":
            self.form.action = a.get("action", "")
            self.form.data = {k[5:]: v for k, v in a.items() if k.startswith("data-")}
        elif "data-slot" in a:
            self._slot = Slot(index=int(a["data-slot"]), attrs={k[5:]: v for k, v in a.items() if k.startswith("data-")})
            self._slot_tag = tag
            self.form.slots.append(self._slot)
        elif tag in ("p", "span", "div", "li") and {"statement", "tok"} & set(a.get("class", "").split()):
            self._in_statement = True
        elif tag == "input":
            kind = a.get("type", "text").lower()
            name = a.get("name", "")
            if not name:
                return
            if kind == "hidden":
                self.form.hidden[name] = a.get("value", "")
            elif kind == "radio":
                self.form.radios.setdefault(name, []).append(a.get("value", ""))
                if self._slot is not None:
                    self._slot.radio_name = name
                    self._slot.radio_values.append(a.get("value", ""))
            elif kind in ("text", "search"):
                self.form.text_inputs.append(name)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("p", "span", "div", "li") and self._in_statement:
            self._in_statement = False
            if self._slot is not None:
                self._slot.text += " "
        if self._slot is not None and tag == self._slot_tag:
            self._slot = None

    def handle_data(self, data: str) -> None:
        if self._in_statement and self._slot is not None:
            self._slot.text += data


def parse_form(html: str) -> Form:
    p = _FormParser()
    p.feed(html)
    p.close()
    for s in p.form.slots:
        s.text = _SPACE.sub(" ", s.text).strip()
    return p.form
